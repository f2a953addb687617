"""Hydra launcher that runs each sweep job as a trial on Ray (see ray_launcher.py)."""
