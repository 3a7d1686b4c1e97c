"""Readers of the program rung: one module per format.

:mod:`~fleetlib.program.readers.kineto` reads PyTorch profiler (Kineto) Chrome-trace JSON, one file
per rank, into kernel, step, host-sync and CPU-operator tables.
"""
