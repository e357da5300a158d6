"""What the state rules (eosctl.rules.upsert, eosctl.rules.aggregate) share: a source record and a table
row as they judge them, both grouped by key, and a key's committed records split at the sink's read point.

Pure (no I/O). A key here is whatever the rule groups by: the record's key, or the key and its window
(a windowed aggregate, eosctl.rules.aggregate).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from eosctl.cluster.model import TP
from eosctl.report.findings import COMMITTED

Key = tuple[str | None, ...]
Value = tuple[str | None, ...]


@dataclass(frozen=True, slots=True)  # one per source record: slots keep 10M of them in memory
class StateRecord:
    """One data record of a source topic, as a state sink keys and values it."""

    topic: str
    partition: int
    offset: int
    key: Key
    value: Value | None  # as the sink's value columns hold it; None: not compared (keys only)
    delete: bool  # a tombstone, or a value the config names as a delete
    shown: str  # the value for people
    status: str  # COMMITTED, ABORTED or OPEN
    timestamp: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    marker_offset: int | None = None

    @property
    def tp(self) -> TP:
        return (self.topic, self.partition)

    @property
    def where(self) -> str:
        return f"{self.topic}[{self.partition}]@{self.offset}"


@dataclass(frozen=True, slots=True)
class StateRow:
    """One row of the table: its key and its value columns (None: the sink names none)."""

    key: Key
    value: Value | None
    shown: str
    # The source offset of the record the row was last written from (the sink's version_column); None:
    # the sink names none, or the row holds none.
    version: int | None = None


def rows_by_key(rows: Iterable[StateRow]) -> dict[Key, list[StateRow]]:
    """The table's rows by key, in the order read (a key held twice is judged row by row)."""
    by_key: dict[Key, list[StateRow]] = {}
    for row in rows:
        by_key.setdefault(row.key, []).append(row)
    return by_key


def histories(records: Iterable[StateRecord]) -> dict[Key, list[StateRecord]]:
    """Each key's records in the order the sink applies them: partition order; a key in several
    partitions by timestamp, then topic, partition and offset."""
    out: dict[Key, list[StateRecord]] = {}
    for r in records:
        out.setdefault(r.key, []).append(r)
    for rs in out.values():
        if len({r.tp for r in rs}) > 1:
            rs.sort(key=lambda r: (r.timestamp, r.topic, r.partition, r.offset))
        else:
            rs.sort(key=lambda r: r.offset)
    return out


def settled_and_in_flight(h: Sequence[StateRecord], bounds: Mapping[TP, int]
                          ) -> tuple[list[StateRecord], list[StateRecord]]:
    """A key's committed records below the sink's read point (``bounds``, per partition: settled) and at
    or past it (in flight: lag, never a finding); aborted and open records are in neither."""
    settled = [r for r in h if r.status == COMMITTED and r.offset < bounds.get(r.tp, 0)]
    flight = [r for r in h if r.status == COMMITTED and r.offset >= bounds.get(r.tp, 0)]
    return settled, flight
