"""The `kernel` fixture for procedure tests: one real kernel per test module."""

from _tests.support.sweeplib import kernel  # noqa: F401  (re-exported as a fixture for this directory)
