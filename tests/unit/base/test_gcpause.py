"""eosctl.base.gcpause: a long-lived model's state is left out of the collector's walks; cycles are still
freed."""

from __future__ import annotations

import gc
import weakref

import pytest

from eosctl.base.gcpause import LongLived, settled


class Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the collector frees it


def test_a_refresh_runs_without_the_collector_and_its_state_is_frozen_after():
    heap = LongLived(sweep_s=3600)
    try:
        with heap.refreshing():
            assert not gc.isenabled()
            kept = [Node() for _ in range(100)]
        assert gc.isenabled()
        assert gc.get_freeze_count() >= len(kept)
    finally:
        heap.release()
    assert gc.get_freeze_count() == 0


def test_cycles_dropped_while_frozen_are_freed_at_the_next_sweep():
    heap = LongLived(sweep_s=3600)
    try:
        with heap.refreshing():
            gone = weakref.ref(Node())
        gc.collect()
        assert gone() is not None  # frozen: a normal collection leaves it
        heap.sweep_s = 0.0
        heap.settle()
        assert gone() is None and heap.sweeps == 1
    finally:
        heap.release()


def test_settled_runs_without_the_collector_and_freezes_what_it_made():
    try:
        with settled():
            assert not gc.isenabled()
            kept = [Node() for _ in range(100)]
        assert gc.isenabled()
        assert gc.get_freeze_count() >= len(kept)
        with pytest.raises(RuntimeError), settled():  # a block that raised freezes nothing
            gc.unfreeze()
            raise RuntimeError
        assert gc.isenabled() and gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()
