"""The one progress type of every long job (log scans, audits): a callable that takes a Step.

A job reports what it is doing and, when it can count, how far it got; whoever shows it (a rich bar on
a terminal, a line per phase in a CI log, the TUI's audit view) decides how. Jobs never check whether
anyone listens: they call `silent` when nobody does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    what: str  # the phase, for people: "starting Spark (local[*])", "auditing partitions"
    done: int = 0
    total: int | None = None  # None: the phase can't count its work

    @property
    def fraction(self) -> float | None:
        return min(self.done / self.total, 1.0) if self.total else None


Progress = Callable[[Step], None]


def silent(step: Step) -> None:
    """The progress of a job nobody watches."""


def counting(what: str, progress: Progress) -> Callable[[int, int], None]:
    """A (done, total) callback for the inner loop of one phase (a scan counting offsets)."""
    return lambda done, total: progress(Step(what, done, total))
