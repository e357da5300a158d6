"""Python's cyclic garbage collector paused while a phase makes objects by the hundred thousand.

Every 700 new container objects (a Finding, its Cause, a tuple) start a collection, and the older
generations' collections walk every object alive: making 100k findings spent two thirds of its time in
the collector (issue 20), yet those objects form no cycles and live until the phase ends. Reference
counting still frees everything as usual; only cycles wait for the collector, which runs again after.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


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
