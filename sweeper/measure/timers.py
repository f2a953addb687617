"""Timers the probe marks phase boundaries with: the host clock, or CUDA events on the GPU.

A timer hands out opaque marks and later turns pairs of them into nanoseconds:

    mark()            a boundary, now (the host clock) or in stream order (a CUDA event)
    wait(mark)        block until the mark can be read (no-op on the host)
    elapsed_ns(a, b)  time between two marks that can be read
    at_ns(mark)       the mark's time on the host clock, for aligning with the sampler
    release(marks)    give marks back for reuse

`lazy` says whether marks must age before they are read. The probe reads a CUDA
event only once it is a few steps old, or at the end, so timing never adds a
synchronize to the step.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Iterable, List

Clock = Callable[[], int]   # nanoseconds


class HostTimer:
    """time.perf_counter_ns (or an injected clock): marks are the readings themselves."""
    lazy = False

    def __init__(self, clock: Clock = time.perf_counter_ns):
        self.clock = clock

    def mark(self) -> int:
        return self.clock()

    def wait(self, mark: int) -> None:
        pass

    def elapsed_ns(self, a: int, b: int) -> int:
        return b - a

    def at_ns(self, mark: int) -> int:
        return mark

    def release(self, marks: Iterable[Any]) -> None:
        pass


class CudaTimer:
    """CUDA events recorded on the current stream; events are pooled and reused.

    Durations come from adjacent events (cudaEventElapsedTime, about 0.5 us
    resolution). Host-clock positions come from one anchor event synchronised at
    start; its float32 milliseconds lose precision over hours, which is fine for
    aligning sampler readings but is why durations never use the anchor.
    """
    lazy = True

    def __init__(self, clock: Clock = time.perf_counter_ns):
        import torch

        self._event = lambda: torch.cuda.Event(enable_timing=True)
        self._pool: List[Any] = []
        self._anchor = self._event()
        self._anchor.record()
        self._anchor.synchronize()
        self._anchor_ns = clock()

    def mark(self) -> Any:
        event = self._pool.pop() if self._pool else self._event()
        event.record()
        return event

    def wait(self, mark: Any) -> None:
        mark.synchronize()

    def elapsed_ns(self, a: Any, b: Any) -> int:
        return round(a.elapsed_time(b) * 1e6)

    def at_ns(self, mark: Any) -> int:
        return self._anchor_ns + round(self._anchor.elapsed_time(mark) * 1e6)

    def release(self, marks: Iterable[Any]) -> None:
        self._pool.extend(marks)
