"""Fault-injection helpers for the reliability tests (tests/integration/test_reliability_*.py).

- ``logfiles``: read a data directory's segment files directly (CRC, dense offsets).
- ``crashloop``: the kill -9 crash harness, shared by the CI test and
  ``python -m benchmarks.crash_loop`` (long runs).
"""
