"""The cyclic garbage collector in a process that keeps a large live model (the TUI, `lag --watch`, the
exporter).

A live model of 10k partitions holds millions of objects that live for many refreshes, and each refresh
makes a few hundred thousand more. Python's collector walks every object it tracks in each full
collection, and the 25% growth a refresh brings starts one: 0.5 s of a 3.5 s refresh at 10k partitions
(measured with gc.callbacks in benchmarks/scale_bench.py's setting). So during a refresh the collector
waits, and after it the state the refresh built is frozen (gc.freeze: left out of later walks; reference
counting still frees whatever is dropped). Cycles among frozen objects would wait for ever: every
SWEEP_S the heap is unfrozen and collected once, and release() (the model's close) unfreezes it for good.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager

SWEEP_S = 300.0


class LongLived:
    """The collector's schedule for one long-lived model; see the module's text."""

    def __init__(self, sweep_s: float = SWEEP_S) -> None:
        self.sweep_s = sweep_s
        self._swept_at = time.monotonic()
        self.sweeps = 0

    @contextmanager
    def refreshing(self) -> Iterator[None]:
        """The collector off for the block (unless someone had turned it off), the new state settled after."""
        was = gc.isenabled()
        gc.disable()
        try:
            yield
        finally:
            if was:
                gc.enable()
            self.settle()

    def settle(self) -> None:
        now = time.monotonic()
        if now - self._swept_at >= self.sweep_s:
            gc.unfreeze()
            gc.collect()
            self._swept_at, self.sweeps = now, self.sweeps + 1
        gc.freeze()

    def release(self) -> None:
        gc.unfreeze()
