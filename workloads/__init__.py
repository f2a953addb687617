"""Code that runs inside a trial. Imports neither Ray, Hydra nor W&B."""
