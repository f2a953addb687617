"""Keeps this machine's NVIDIA driver set up while a sweep runs here, as nvidia-persistenced would.

Without persistence mode the driver tears a GPU's state down when its last client closes it,
and the next process that opens it (each trial's CUDA start, Ray's GPU detection) sets it up
again: seconds on a large GPU, paid by every trial, between every two trials. One NVML handle
that the driver opens for the sweep's life keeps the GPUs set up from the first trial to the
last; opened in a thread of its own as the sweep begins, that set-up overlaps composing,
planning and Ray's start instead of following them. NVML is not CUDA: nothing is allocated on
the GPUs, no context is made, and trials see them as before. Where persistence mode is on it
changes nothing. SWEEPER_GPU_HOLD=0 turns it off (benchmarks/startup.py measures both).
"""
from __future__ import annotations

import os
import threading
from typing import Optional

SWITCH = "SWEEPER_GPU_HOLD"


class GpuHold:
    """NVML opened in a background thread (its C calls release the GIL); `close` shuts it."""

    def __init__(self) -> None:
        self.opened = False
        self._thread = threading.Thread(target=self._open, name="sweeper-gpu-hold", daemon=True)
        self._thread.start()

    @classmethod
    def start_if(cls, gpus: int) -> Optional["GpuHold"]:
        """A hold when this machine has GPUs and the switch is not off; else None."""
        if gpus <= 0 or os.environ.get(SWITCH, "1") == "0":
            return None
        return cls()

    def _open(self) -> None:
        try:
            import pynvml

            pynvml.nvmlInit()
            self.opened = True
        except Exception:        # no NVML here: nothing to hold, trials start the driver themselves
            pass

    def close(self) -> None:
        self._thread.join()      # NVML's start ends in seconds at most; shut only what was opened
        if self.opened:
            import pynvml

            self.opened = False
            try:
                pynvml.nvmlShutdown()
            except Exception:    # the process is ending anyway
                pass
