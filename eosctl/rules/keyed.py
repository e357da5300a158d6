"""What the state rules (eosctl.rules.upsert, eosctl.rules.aggregate) share: the log's records and the
table's rows grouped by key, and a key's committed records split at the sink's read point.

Pure (no I/O). A key here is whatever the rule groups by: the record's key, or the key and its window
(a windowed aggregate, eosctl.rules.aggregate).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from eosctl.cluster.model import TP
from eosctl.report.findings import COMMITTED

if TYPE_CHECKING:  # eosctl.rules.upsert imports this module
    from eosctl.rules.upsert import Key, StateRecord, StateRow


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
