"""Memory accounting: count tensor memory on CPU/meta, simulate GPU capacities, probe real CUDA.

It only counts: it imports nothing that runs the engine (the drivers are :mod:`harness.simulation`).
"""
