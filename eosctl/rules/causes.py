"""Why each finding happened, from what the audit already read: the partition's log model and the sink.

Runs inside the audit's per-partition task, right after the reconciliation (no second scan of Kafka or the
sink): the log model says which producer id and epoch wrote each offset, in which transaction, closed by
which marker, and whether an abort was the coordinator fencing a zombie; the sweep noted what the sink holds
around each gap and how many rows each duplicated offset has (eosctl.rules.reconcile.SinkFacts). Key
duplicates span partitions: their tasks send each committed key row's writer along, and ``key_cause``
judges them where the rows are grouped by key. Every cause ends in one plain sentence (``Cause.summary``).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from eosctl.cluster.model import NO_PRODUCER, V1, Kind, OffsetRange, PartitionLog, ProducerState, Transaction
from eosctl.report.findings import (
    ABORTED,
    COMMITTED,
    COMMITTED_OFFSETS,
    MAX_LISTED,
    NON_TRANSACTIONAL,
    OPEN,
    STORED_OFFSETS,
    Cause,
    Finding,
    MarkerCause,
    TxnCause,
)
from eosctl.report.rootcauses import PARTITION_NOT_IN_KAFKA, READ_COMMITTED_FIX
from eosctl.rules.reconcile import SinkFacts
from eosctl.txn.fencing import bump_verdict
from eosctl.txn.rotation import continued

_OUTCOME = {"COMMIT": COMMITTED, "ABORT": ABORTED, "OPEN": OPEN}
_PLAIN_OUTCOME = {Kind.ABORTED: ABORTED, Kind.OPEN: OPEN}  # pieces outside a transaction the scan saw
_MARKER_WORD = {ABORTED: "ABORT", COMMITTED: "COMMIT"}


def explain_partition(log: PartitionLog | None, findings: Iterable[Finding], facts: SinkFacts | None = None,
                      stored: int | None = None, committed: int | None = None,
                      group: str | None = None) -> list[Finding]:
    """The findings of one partition's task, each with its cause. ``stored``/``committed``: the sink's
    stored next offset and the group's committed offset, when the audit read them."""
    index = _Index(log) if log is not None else None
    return [_with_cause(f, _cause(f, index, facts, stored, committed, group)) for f in findings]


def _with_cause(f: Finding, cause: Cause | None) -> Finding:
    """``replace(f, cause=cause)`` without re-running the constructor: ``f`` was checked when it was made,
    and dataclasses.replace was a tenth of explaining 100k findings (issue 20)."""
    out = object.__new__(Finding)
    values = dict(f.__dict__)
    values["cause"] = cause
    object.__setattr__(out, "__dict__", values)
    return out


# The fields of a Cause with their defaults, in order: _cause_of and _txn_of make the frozen dataclasses
# without their generated __init__ (an object.__setattr__ a field: a fifth of explaining a gap).
_CAUSE_DEFAULTS = {f.name: f.default for f in fields(Cause)}


def _cause_of(kind: str, summary: str, transactions: tuple[TxnCause, ...] = (), **rest: Any) -> Cause:
    """``Cause(kind, summary, transactions, **rest)``."""
    out = object.__new__(Cause)
    object.__setattr__(out, "__dict__", {**_CAUSE_DEFAULTS, "kind": kind, "summary": summary,
                                         "transactions": transactions, **rest})
    return out


def _txn_of(producer_id: int, producer_epoch: int, first_offset: int, last_offset: int, outcome: str,
            marker_offset: int | None, fenced: bool) -> TxnCause:
    """``TxnCause(...)`` of one partition's transaction (no topic or partition of its own)."""
    out = object.__new__(TxnCause)
    object.__setattr__(out, "__dict__", {
        "producer_id": producer_id, "producer_epoch": producer_epoch, "first_offset": first_offset,
        "last_offset": last_offset, "outcome": outcome, "marker_offset": marker_offset, "fenced": fenced,
        "topic": None, "partition": None})
    return out


def with_write_order(f: Finding, column: str, order: tuple[Any, Any, Any, Any]) -> Finding:
    """A duplicate whose cause also says when the sink wrote its rows first and again, from the sink's
    ``order_column`` ((min, max) of each offset's first write, then of its last repeated write)."""
    if f.cause is None:
        return f
    first, again = (order[0], order[1]), (order[2], order[3])
    summary = (f"{f.cause.summary} By {column}, the first writes were at {_between(first)} and they were "
               f"written again at {_between(again)}.")
    return replace(f, cause=replace(f.cause, summary=summary, order_column=column, first_write=first,
                                    repeated_write=again))


def _between(span: tuple[Any, Any]) -> str:
    return str(span[0]) if span[0] == span[1] else f"{span[0]}..{span[1]}"


def explain_finding(f: Finding) -> Finding:
    """A finding whose cause needs no log (an invalid_row, found where the driver reads the sink)."""
    return replace(f, cause=_cause(f, None, None, None, None, None))


def committed_writers(log: PartitionLog) -> list[tuple[int, int, int, int, int | None]]:
    """(first, last, producer id, epoch, COMMIT marker offset or None) for the committed data in
    [log start, LSO): what the key query joins each committed row with."""
    index = _Index(log)
    start, lso = log.log_start_offset, log.last_stable_offset
    out = []
    for w in index.data(start, lso - 1) if lso > start else ():
        t = index.transaction(w.producer_id, w.first) if w.producer_id != NO_PRODUCER else None
        out.append((w.first, w.last, w.producer_id, w.producer_epoch, None if t is None else t.marker_offset))
    return out


def fenced(t: Transaction, producer: ProducerState | None) -> bool:
    """Was this transaction aborted by its coordinator because a newer epoch of the producer took over?

    The fencing ABORT carries a newer epoch than the data it closes: two or more epochs up is fencing in
    every protocol (the coordinator's bump, then the transactions-v2 bump); one up is fencing under
    transactions v1, where an ordinary ABORT keeps the data's epoch, and an ordinary abort under v2 (KIP-890),
    so it counts only where the producer's markers show v1
    (eosctl.txn.fencing.bump_verdict)."""
    if t.outcome != "ABORT" or t.marker_epoch is None or t.marker_epoch <= t.producer_epoch:
        return False
    if producer is not None:
        # Its bump, where listed, carries the whole story (a timeout is no take-over; a transactions-v2
        # pair settled from the id's other partitions is)
        for b in producer.epoch_bumps:
            if b.on_marker and b.offset == t.marker_offset:
                return bump_verdict(producer, b)[0]
    return t.marker_epoch - t.producer_epoch >= 2 or (producer is not None and producer.protocol == V1)


@dataclass(frozen=True)
class Writer:
    """Who wrote one committed offset (what a key row carries to the grouping by key)."""

    topic: str
    partition: int
    offset: int
    producer_id: int
    producer_epoch: int
    marker_offset: int | None  # the COMMIT marker of its transaction; None: non-transactional
    txn_first: int | None = None  # its transaction's first offset (None: non-transactional)


def key_cause(f: Finding, writers: Sequence[Writer]) -> Cause:
    """A key_duplicate's cause from the writers of its offsets."""
    writers = sorted(writers, key=lambda w: (w.topic, w.partition, w.offset))
    txns: dict[tuple, TxnCause] = {}
    for w in writers:
        outcome = NON_TRANSACTIONAL if w.marker_offset is None else COMMITTED
        key = (w.topic, w.partition, w.producer_id, w.producer_epoch, w.marker_offset, w.offset
               if w.marker_offset is None else None)
        t = txns.get(key)
        txns[key] = TxnCause(w.producer_id, w.producer_epoch, w.offset if t is None else t.first_offset,
                             w.offset, outcome, w.marker_offset, False, w.topic, w.partition)
    sessions = _sessions(writers)
    if any(w.producer_id == NO_PRODUCER for w in writers):
        rule = "non_idempotent"
    elif len(sessions) > 1:
        rule = "producer_sessions"
    elif len({(w.topic, w.partition, w.marker_offset) for w in writers}) == 1 and writers[0].marker_offset \
            is not None:
        rule = "same_transaction"
    else:
        rule = "same_session"
    listed = list(txns.values())
    return Cause("key_duplicate", _key_summary(f, writers, rule), tuple(listed[:MAX_LISTED]),
                 omitted=max(0, len(listed) - MAX_LISTED), rule=rule)


def _sessions(writers: Sequence[Writer]) -> set[tuple[int, int]]:
    """The writers' producer sessions (producer id, epoch), a producer id rotated under transactions v2
    (eosctl.txn.rotation) read as the session it continues: the new id at epoch 0 is the old id's
    exhausted epoch going on, where it wrote after that epoch in every partition they share."""
    sessions = {(w.producer_id, w.producer_epoch) for w in writers}
    for new in [s for s in sessions if s[1] == 0]:
        for old in sessions:
            if continued(old, new) and all(a.offset < b.offset for a in writers for b in writers
                                           if (a.producer_id, a.producer_epoch) == old
                                           and (b.producer_id, b.producer_epoch) == new
                                           and (a.topic, a.partition) == (b.topic, b.partition)):
                sessions.discard(new)
                break
    return sessions


# ---- per kind -------------------------------------------------------------------------------------------


class _Index:
    """Bisect indexes over one partition's log, built once for all its findings."""

    def __init__(self, log: PartitionLog) -> None:
        self.log = log
        self.range_firsts = [r.first for r in log.ranges]
        self.by_producer: dict[int, list[Transaction]] = {}
        for t in sorted(log.transactions, key=lambda t: t.first_offset):
            self.by_producer.setdefault(t.producer_id, []).append(t)
        self.firsts = {pid: [t.first_offset for t in ts] for pid, ts in self.by_producer.items()}
        self.markers = {t.marker_offset: t for t in log.transactions if t.marker_offset is not None}
        self._judged: dict[int, tuple[int, str, int | None, bool]] = {}

    def judged(self, t: Transaction) -> tuple[int, str, int | None, bool]:
        """(epoch, outcome, marker offset, fenced) of a transaction of this log, worked out once: many
        findings of a partition fall in the same few transactions."""
        got = self._judged.get(id(t))
        if got is None:
            got = self._judged[id(t)] = (t.producer_epoch, _OUTCOME[t.outcome], t.marker_offset,
                                         fenced(t, self.log.producers.get(t.producer_id)))
        return got

    def ranges(self, first: int, last: int, kinds: tuple[Kind, ...]) -> list[OffsetRange]:
        ranges = self.log.ranges
        out = []
        for i in range(max(bisect_right(self.range_firsts, first) - 1, 0), len(ranges)):  # no list copy
            r = ranges[i]
            if r.first > last:
                break
            if r.last >= first and r.kind in kinds:
                out.append(OffsetRange(max(r.first, first), min(r.last, last), r.kind, r.producer_id,
                                       r.producer_epoch))
        return out

    def data(self, first: int, last: int) -> list[OffsetRange]:
        """DATA offsets of first..last by writer; a log without ``writes`` (built by hand) has only the
        ranges' producer, where one producer wrote a whole range."""
        if self.log.writes:
            return self.log.writes_between(first, last)
        return self.ranges(first, last, (Kind.DATA,))

    def transaction(self, pid: int, offset: int) -> Transaction | None:
        """The transaction of ``pid`` whose offsets span ``offset``, if any."""
        firsts = self.firsts.get(pid)
        if not firsts:
            return None
        i = bisect_right(firsts, offset) - 1
        t = self.by_producer[pid][i] if i >= 0 else None
        return t if t is not None and t.first_offset <= offset <= t.last_offset and t.data_records else None


def _transactions(index: _Index, pieces: list[OffsetRange]) -> tuple[tuple[TxnCause, ...], int]:
    """One TxnCause per transaction (or run of one producer session's non-transactional batches) writing
    the pieces, in order of their first offset there."""
    if len(pieces) == 1:  # most findings: no merging or sorting to do
        p = pieces[0]
        t = index.transaction(p.producer_id, p.first) if p.producer_id != NO_PRODUCER else None
        if t is not None:
            epoch, outcome, marker, is_fenced = index.judged(t)
        else:
            epoch, marker, is_fenced = p.producer_epoch, None, False
            outcome = _PLAIN_OUTCOME.get(p.kind, NON_TRANSACTIONAL)
        return (_txn_of(p.producer_id, epoch, p.first, p.last, outcome, marker, is_fenced),), 0
    out: dict[tuple, TxnCause] = {}
    previous: tuple | None = None
    for p in pieces:
        t = index.transaction(p.producer_id, p.first) if p.producer_id != NO_PRODUCER else None
        if t is not None:
            key: tuple = ("txn", p.producer_id, t.first_offset)
            epoch, outcome, marker, is_fenced = index.judged(t)
        else:
            # Non-transactional: consecutive pieces of one producer session are one run.
            key = ("plain", p.producer_id, p.producer_epoch, p.first)
            if previous is not None and previous[:3] == ("plain", p.producer_id, p.producer_epoch):
                key = previous
            outcome = _PLAIN_OUTCOME.get(p.kind, NON_TRANSACTIONAL)
            marker, is_fenced, epoch = None, False, p.producer_epoch
        previous = key
        have = out.get(key)
        first = p.first if have is None else min(have.first_offset, p.first)
        last = p.last if have is None else max(have.last_offset, p.last)
        out[key] = _txn_of(p.producer_id, epoch, first, last, outcome, marker, is_fenced)
    listed = sorted(out.values(), key=lambda t: t.first_offset)
    return tuple(listed[:MAX_LISTED]), max(0, len(listed) - MAX_LISTED)


def _markers(index: _Index, first: int, last: int) -> tuple[tuple[MarkerCause, ...], int]:
    out = []
    for r in index.ranges(first, last, (Kind.MARKER,)):
        for offset in range(r.first, r.last + 1):
            t = index.markers.get(offset)
            out.append(MarkerCause(offset, t.outcome if t is not None else "UNKNOWN", r.producer_id,
                                   r.producer_epoch))
            if len(out) > MAX_LISTED:
                break
    return tuple(out[:MAX_LISTED]), max(0, len(out) - MAX_LISTED)


def _cause(f: Finding, index: _Index | None, facts: SinkFacts | None, stored: int | None,
           committed: int | None, group: str | None) -> Cause | None:
    k = f.kind
    if k == "gap" and index is not None:  # most findings, by far: straight to its sentence
        assert f.first_offset is not None and f.last_offset is not None
        txns, omitted = _transactions(index, index.data(f.first_offset, f.last_offset))
        return _gap(f, txns, omitted, facts, stored, committed, group)
    where = _where(f)
    if k in ("phantom_aborted", "phantom_uncommitted") and index is not None:
        assert f.first_offset is not None and f.last_offset is not None
        kind = Kind.ABORTED if k == "phantom_aborted" else Kind.OPEN
        txns, omitted = _transactions(index, index.ranges(f.first_offset, f.last_offset, (kind,)))
        return _cause_of(k, _phantom_summary(f, where, txns, omitted), txns, omitted=omitted)
    if k == "phantom_marker" and index is not None:
        assert f.first_offset is not None and f.last_offset is not None
        markers, omitted = _markers(index, f.first_offset, f.last_offset)
        return Cause(k, _marker_summary(f, where, markers), markers=markers, omitted=omitted)
    if k == "duplicate":
        lo, hi = (facts.duplicates.get(f.first_offset, (None, None)) if facts is not None
                  and f.first_offset is not None else (None, None))
        times = f"{hi} times" if hi is not None and lo == hi else (
            f"{lo} to {hi} times" if hi is not None else "more than once")
        extra = _n(f.count, "extra row")
        return _cause_of(k, f"The sink holds {_tp(f)} {where} {times} ({extra}): it wrote these "
                            "records again, a replay after a crash or a rebalance, its results committed "
                            "before their offsets were stored.", rows_min=lo, rows_max=hi)
    if k == "misrouted":
        return Cause(k, f"The sink holds {f.count} rows at {_tp(f)} {where}, records its route does not "
                        "select: the stage routed them to the wrong sink, or the config's route is not the "
                        "stage's.")
    if k == "phantom_beyond_hw":
        if index is None:  # no log: the partition is not in Kafka (eosctl.rules.reconcile.reconcile_unknown)
            return Cause(k, f"The sink holds {_n(f.count, 'row')} for {_tp(f)}, which Kafka does not have: "
                            "the topic was deleted or recreated, or the rows came from another cluster.",
                         rule=PARTITION_NOT_IN_KAFKA)
        return Cause(k, f"The sink holds {_n(f.count, 'row')} at {_tp(f)} {where}, at or beyond the high "
                        f"watermark {index.log.high_watermark}: the log never had these offsets (a recreated "
                        "topic, or records lost to an unclean leader election).")
    if k == "offset_mismatch":
        return Cause(k, f"On {_tp(f)} the sink stored next offset {_opt(stored)} while group "
                        f"{group or '-'} committed {_opt(committed)}, with {_n(f.count, 'committed record')} "
                        "between them: the offsets are kept in two places and drifted apart (a restart "
                        "resumes from one of them and skips or replays the difference).")
    if k == "invalid_row":
        what = f" ({f.detail})" if f.detail else ""
        have = "has" if f.count == 1 else "have"
        return Cause(k, f"{_n(f.count, 'sink row')}{what} {have} no valid source "
                        "coordinates: no Kafka record can match them; the sink wrote rows without checking "
                        "the record's topic, partition and offset.")
    return None  # key_duplicate: key_cause, where its places are grouped


def _gap(f: Finding, txns: tuple[TxnCause, ...], omitted: int, facts: SinkFacts | None,
         stored: int | None, committed: int | None, group: str | None) -> Cause:
    assert f.first_offset is not None and f.last_offset is not None
    before, after = (facts.gaps.get(f.first_offset, (None, None)) if facts is not None else (None, None))
    passed_by = (STORED_OFFSETS if stored is not None and stored > f.last_offset else
                 COMMITTED_OFFSETS if committed is not None and committed > f.last_offset else None)
    written = _written_by(txns, omitted)
    missing = f"{f.count} committed record{'s' * (f.count != 1)} at {_tp(f)} {_where(f)}{written}"
    if passed_by == STORED_OFFSETS:
        why = (f" are missing although the sink's stored offsets are already past them (next offset "
               f"{stored}): the sink skipped them, its offsets stored apart from its rows (a crash after "
               "storing the offsets, before writing the rows).")
    elif passed_by == COMMITTED_OFFSETS:
        why = (f" are missing although group {group or '-'} committed offset {committed}, past them: the "
               "sink skipped them, its offsets committed apart from its rows.")
    elif after is not None:
        why = (f" are missing although the sink holds offset {after} after them: the sink passed over "
               "them.")
    else:
        why = " are not in the sink yet: its consumer had not reached them when the sink was read (lag)."
    return _cause_of("gap", missing + why, txns, omitted=omitted, sink_before=before, sink_after=after,
                     passed_by=passed_by)


# ---- sentences ------------------------------------------------------------------------------------------


def _phantom_summary(f: Finding, where: str, txns: tuple[TxnCause, ...], omitted: int) -> str:
    rows = f"{f.count} row{'s' * (f.count != 1)}"
    text = f"The sink holds {rows} for {_tp(f)} {where}, records of {_txn_list(txns, omitted)}"
    if f.kind == "phantom_aborted":
        if any(t.fenced for t in txns):
            text += (", aborted when a new instance took the id over and the coordinator aborted the old "
                     "one's transaction (a zombie's transaction)")
        text += ": the sink consumes read_uncommitted, or writes before the commit"
    else:
        text += ": the sink writes records before their transaction commits (read_uncommitted)"
    return text + f"; {READ_COMMITTED_FIX}."


def _txn_list(txns: tuple[TxnCause, ...], omitted: int) -> str:
    if not txns:
        return "transactions the scan did not see"
    parts = []
    for t in txns[:3]:
        marker = f", {_MARKER_WORD.get(t.outcome, t.outcome)} marker at {t.marker_offset}" \
            if t.marker_offset is not None else ""
        state = "open transaction" if t.outcome == OPEN else (
            "non-transactional writes" if t.outcome == NON_TRANSACTIONAL else "transaction")
        parts.append(f"producer {t.producer_id} epoch {t.producer_epoch}'s {state} "
                     f"({_span(t.first_offset, t.last_offset)}{marker})")
    more = len(txns) - 3 + omitted
    return "; ".join(parts) + (f" and {more} more" if more > 0 else "")


def _written_by(txns: tuple[TxnCause, ...], omitted: int) -> str:
    if not txns:
        return ""
    return f" (written by {_txn_list(txns, omitted)})"


def _n(count: int, what: str) -> str:
    """"1 row", "3 rows": a count in a summary's sentence."""
    return f"{count} {what}{'s' * (count != 1)}"


def _marker_summary(f: Finding, where: str, markers: tuple[MarkerCause, ...]) -> str:
    names = "; ".join(f"{m.type} marker of producer {m.producer_id} epoch {m.producer_epoch} at {m.offset}"
                      for m in markers[:3])
    more = f" and {len(markers) - 3} more" if len(markers) > 3 else ""
    return (f"The sink holds {f.count} row{'s' * (f.count != 1)} at {_tp(f)} {where}, offsets of "
            f"transaction markers ({names or 'markers the scan did not see'}{more}): the sink turns control "
            "records into rows (it reads raw batches, or numbers rows itself instead of using the record's "
            "offset).")


def _key_summary(f: Finding, writers: Sequence[Writer], rule: str) -> str:
    places = ", ".join(f"{w.topic}[{w.partition}]@{w.offset} by producer {w.producer_id} epoch "
                       f"{w.producer_epoch}" + (" (no idempotence)" if w.producer_id == NO_PRODUCER else
                                                " (non-transactional)" if w.marker_offset is None else
                                                f" (COMMIT at {w.marker_offset})")
                       for w in writers[:4])
    more = f" and {len(writers) - 4} more" if len(writers) > 4 else ""
    why = {
        "non_idempotent": "written without a producer id, so nothing could deduplicate a retry: an "
                          "upstream retry",
        "producer_sessions": "written by different producer sessions, whose idempotence cannot catch a "
                             "retry across them: an upstream retry across a restart",
        "same_session": "written twice within one producer session: the application (or a stage copying "
                        "its input faithfully) sent it twice",
        "same_transaction": "written twice in one transaction: the application (or a stage copying its "
                            "input faithfully) sent it twice",
    }[rule]
    return f"Key {f.key} is at {places}{more}: {why}."


def _tp(f: Finding) -> str:
    if f.topic is None:
        return "(no topic)"
    return f"{f.topic}[{'-' if f.partition is None else f.partition}]"


def _where(f: Finding) -> str:
    if f.first_offset is None or f.last_offset is None:
        return ""
    return f"offset {f.first_offset}" if f.first_offset == f.last_offset else \
        f"offsets {f.first_offset}..{f.last_offset}"


def _span(first: int, last: int) -> str:
    return f"offset {first}" if first == last else f"offsets {first}..{last}"


def _opt(v: int | None) -> str:
    return "none" if v is None else str(v)
