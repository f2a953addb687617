"""The profiling playbook's microbenchmarks, each a workload of its own (docs/playbook.md):

    h2d_copy          host-to-device copy, pinned against pageable, and its overlap with a matmul
    dataset_access    random access to a pyarrow column against a Python list and a numpy array
    loader_startup    DataLoader time to the first batch, with and without persistent workers
    forward_timing    a model's forward pass across batch shapes (a preset or `pkg.mod:factory`)
    allocator_warmup  peak memory of loading a model with and without a caching-allocator warm-up

Their specs and typed `workload.params` live in specs.py, which imports no torch, so planning
and a dry run stay light. `python -m sweeper +sweep=playbook` runs all five.
"""
