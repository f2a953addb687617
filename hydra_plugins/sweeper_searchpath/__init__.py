"""Hydra search-path plugin: a `conf/` folder in the working directory adds to sweeper's configs."""
