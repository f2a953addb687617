"""The probe's parts, one job per module; `sweeper.probe.Probe` puts them together.

    rules.py     pure rules over numbers: settle point, memory growth, phase-sum check
    timers.py    host clock timer and the CUDA-event timer (torch imported lazily)
    sampler.py   background utilisation sampler, its sources, and alignment to steps
    memory.py    host memory of the trial process and its DataLoader workers; CUDA memory
    profiles.py  torch.profiler, py-spy and nsys, each optional
    build.py     the real parts for a trial, from a ProbeConfig and the device

Nothing here imports torch, NVML or psutil at module top: the driver imports
sweeper.probe (through sweeper.trial) and must stay light.
"""
