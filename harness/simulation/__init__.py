"""Engine drivers: the reference engine over a workload, its memory counted by harness.memory."""
