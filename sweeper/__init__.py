"""sweeper: declarative benchmark sweeps for ML training pipelines.

Kept import-light on purpose: `python -m sweeper --help` and config checks must
not pull in Ray, torch or W&B.
"""
__version__ = "0.1.0"
