"""CI support code: the pytest plugin behind make test-gpu, and pipeline helpers."""
