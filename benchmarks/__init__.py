"""Measurements of sweeper itself, run by hand (see benchmarks/README.md); not part of the package."""
