"""Python's cyclic garbage collector where eosctl makes or keeps objects by the hundred thousand.

Every 700 new container objects start a collection, and the older generations' collections walk every
object alive. Two cases here, neither with cycles worth collecting meanwhile (reference counting still frees
everything as usual; only cycles wait for the collector):

- ``paused()``: a phase that makes objects by the hundred thousand (100k findings, a ledger's islands) that
  live until it ends: making 100k findings spent two thirds of its time in the collector (issue 20).
- ``settled()``: a command's first import of its libraries, objects that live as long as the process.
- ``LongLived``: a process that keeps a large live model (the TUI, `lag --watch`, the exporter). A model of
  10k partitions holds millions of objects for many refreshes, and the 25% growth a refresh brings starts a
  full collection: 0.3-0.45 s of a refresh at 10k partitions (measured with gc.callbacks in
  benchmarks/scale_bench.py's setting). So during a refresh the collector waits, and after it the state the
  refresh built is frozen (gc.freeze: left out of later walks). Cycles among frozen objects would wait for
  ever: every SWEEP_S the heap is unfrozen and collected once, and release() (the model's close) unfreezes it.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager

SWEEP_S = 300.0


@contextmanager
def paused() -> Iterator[None]:
    """The collector off for the block, back on after (unless someone else had turned it off)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@contextmanager
def settled() -> Iterator[None]:
    """paused() for a block whose objects live as long as the process (a first import of a command's
    libraries), then frozen (gc.freeze): a pause alone only defers the work, as the first collection after
    it walks every object the block made (10 ms after the audit's imports); frozen, no collection walks
    them. The freeze takes every object alive then, so only where little else is: a command's start."""
    with paused():
        yield
        gc.freeze()


class LongLived:
    """The collector's schedule for one long-lived model; see the module's text."""

    def __init__(self, sweep_s: float = SWEEP_S) -> None:
        self.sweep_s = sweep_s
        self._swept_at = time.monotonic()
        self.sweeps = 0

    @contextmanager
    def refreshing(self) -> Iterator[None]:
        """The collector off for the block (paused()), the new state settled after."""
        try:
            with paused():
                yield
        finally:
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
