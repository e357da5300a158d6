"""Everything eosctl knows about one offset, for the moment of an incident (`eosctl explain`).

From the partition's log model (its kind, the batch holding it, the transaction, its outcome and marker,
the producer's epoch history around it, the LSO and HW), the group's committed offset, and what the sink
holds for it (rows, key, other offsets with the same key). Pure: the command reads Kafka and the sink and
hands the pieces in; the result is the stable JSON document (docs/json.md) the table is drawn from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from eosctl.cluster.model import NO_PRODUCER, Batch, Kind, PartitionLog
from eosctl.rules.causes import fenced
from eosctl.txn import fencing
from eosctl.txn.rotation import rotations

EPOCH_CONTEXT = 3  # epoch bumps listed on each side of the offset


@dataclass(frozen=True)
class SinkAt:
    """What the sink holds for one offset."""

    rows: int
    keys: tuple[str, ...] = ()
    # (topic, partition, offset) of other rows with one of those keys
    same_key: tuple[tuple[str, int, int], ...] = ()
    stored_offset: int | None = None  # the sink's stored next offset for the partition
    where: str = ""  # the sink, for people
    key_column: str | None = None
    # When the sink wrote each of those rows (its write_time_column, earliest first): None when the sink
    # names no such column.
    write_time_column: str | None = None
    written_at: tuple[Any, ...] = ()


@dataclass
class Facts:
    log: PartitionLog
    offset: int
    batch: Batch | None = None
    group: str | None = None
    committed: int | None = None
    sink: SinkAt | None = None
    notes: list[str] = field(default_factory=list)
    # A MirrorMaker 2 replica pipeline: the offset's copies on the replica and each group's failover
    # (eosctl.inspection.failover.at_offset).
    replica: dict[str, Any] | None = None
    # A state sink (mode = "upsert" or "aggregate"): the sink, its mode and its audit's findings at the
    # offset (eosctl.commands.explain_cmd, through auditors.state).
    state: dict[str, Any] | None = None
    # The record at the offset, read whole: its key and value decoded through the cluster's Schema Registry
    # where framed (eosctl.inspection.records); None: not read (a marker, outside the log, a snapshot).
    record: dict[str, Any] | None = None


def offset_document(f: Facts) -> dict[str, Any]:
    """The `eosctl explain --offset` document."""
    log, o = f.log, f.offset
    kind = _kind(log, o)
    txn = _transaction(log, o, kind)
    producer_id = _producer(log, o, f.batch, txn)
    doc: dict[str, Any] = {
        "topic": log.topic, "partition": log.partition, "offset": o, "kind": kind,
        "log": {"log_start_offset": log.log_start_offset, "last_stable_offset": log.last_stable_offset,
                "high_watermark": log.high_watermark,
                "read_committed_delivers": kind == Kind.DATA.value and o < log.last_stable_offset,
                "leader_epochs": [{"leader_epoch": e, "start_offset": s} for e, s in log.leader_epochs]},
        "batch": None if f.batch is None else f.batch.to_dict(),
        "transaction": txn,
        "producer": None if producer_id is None else _producer_doc(log, producer_id, o),
        "group": None if f.group is None else {
            "group": f.group, "committed_offset": f.committed,
            "consumed": None if f.committed is None else f.committed > o},
        "sink": None if f.sink is None else _sink_doc(f.sink, log, o, f.batch),
        "record": f.record,
        "warnings": list(log.warnings) + f.notes,
    }
    if f.replica is not None:
        doc["replica"] = f.replica
    if f.state is not None:
        doc["state"] = f.state
    doc["summary"] = _summary(doc)
    return doc


def _kind(log: PartitionLog, o: int) -> str:
    if o < log.log_start_offset:
        return "BELOW_LOG_START"
    if o >= log.high_watermark:
        return "BEYOND_HW"
    k = log.kind_at(o)
    return "UNSCANNED" if k is None else k.value


def _transaction(log: PartitionLog, o: int, kind: str) -> dict[str, Any] | None:
    """The transaction the offset's record belongs to, or (a marker) the one it closes."""
    for t in log.transactions:
        inside = t.first_offset <= o <= t.last_offset and t.data_records
        if t.marker_offset == o or (inside and kind != Kind.MARKER.value and _writer(log, o) in
                                    (None, t.producer_id)):
            return {"producer_id": t.producer_id, "producer_epoch": t.producer_epoch,
                    "first_offset": t.first_offset, "last_offset": t.last_offset,
                    "outcome": t.outcome, "marker_offset": t.marker_offset, "marker_epoch": t.marker_epoch,
                    "data_records": t.data_records, "fenced": fenced(t, log.producers.get(t.producer_id)),
                    "aborted_by": _aborted_by(log, t)}
    return None


def _aborted_by(log: PartitionLog, t: Any) -> str | None:
    """eosctl.txn.fencing.abort_cause of an aborted transaction: "takeover", "timeout", "takeover?" or
    None."""
    p = log.producers.get(t.producer_id)
    return None if p is None or t.outcome != "ABORT" else fencing.abort_cause(p, t.marker_offset)


def _writer(log: PartitionLog, o: int) -> int | None:
    """The producer id that wrote the offset, where the model knows it."""
    for w in log.writes_between(o, o):
        return w.producer_id
    r = log.range_at(o)
    return None if r is None or r.producer_id == NO_PRODUCER and r.kind == Kind.DATA else r.producer_id


def _producer(log: PartitionLog, o: int, batch: Batch | None, txn: dict[str, Any] | None) -> int | None:
    if batch is not None:
        return batch.producer_id if batch.producer_id != NO_PRODUCER else None
    if txn is not None:
        return txn["producer_id"]
    pid = _writer(log, o)
    return None if pid in (None, NO_PRODUCER) else pid


def _producer_doc(log: PartitionLog, pid: int, o: int) -> dict[str, Any] | None:
    p = log.producers.get(pid)
    if p is None:
        return {"producer_id": pid, "protocol": None, "epochs": [], "current_epoch": None,
                "fencing_events": 0, "epoch_history": [], "zombie_writes": [], "routine": None,
                "transactional_id": None, "continues_producer_id": None}
    bumps = sorted((b for b in p.epoch_bumps if not fencing.routine(p, b)), key=lambda b: b.offset)
    before = [b for b in bumps if b.offset <= o][-EPOCH_CONTEXT:]
    after = [b for b in bumps if b.offset > o][:EPOCH_CONTEXT]
    history = []
    for b in before + after:
        is_fencing, why = fencing.bump_verdict(p, b)
        history.append({"offset": b.offset, "old_epoch": b.old_epoch, "new_epoch": b.new_epoch,
                        "next_epoch": b.next_epoch, "marker": b.marker, "fencing": is_fencing, "why": why})
    return {"producer_id": pid, "protocol": p.protocol, "epochs": list(p.epochs),
            "current_epoch": p.current_epoch, "fencing_events": fencing.fencing_events(p),
            "epoch_history": history,
            "routine": fencing.routine_summary(p), "transactional_id": p.transactional_id,
            "zombie_writes": [{"offset": z.offset, "epoch": z.epoch, "current_epoch": z.current_epoch}
                              for z in p.zombie_writes[:EPOCH_CONTEXT * 2]],
            "continues_producer_id": rotations(log).get(pid)}


def _sink_doc(s: SinkAt, log: PartitionLog, o: int, batch: Batch | None) -> dict[str, Any]:
    return {"sink": s.where, "rows": s.rows, "key_column": s.key_column, "keys": list(s.keys),
            "write_time_column": s.write_time_column,
            "written_at": [_write_time(w, batch) for w in s.written_at],
            "same_key": [{"topic": t, "partition": p, "offset": o,
                          "kind": (_kind(log, o) if (t, p) == (log.topic, log.partition) else None)}
                         for t, p, o in s.same_key],
            "stored_offset": s.stored_offset,
            "stored_past": None if s.stored_offset is None else s.stored_offset > o}


def _write_time(value: Any, batch: Batch | None) -> dict[str, Any]:
    """One row's write time, and how long after the record's own timestamp the sink wrote it (the batch's
    first and last record timestamps bound it; None where the column holds no time)."""
    ms = _epoch_ms(value)
    shown = value.isoformat() if hasattr(value, "isoformat") else None if value is None else str(value)
    lag = None
    if ms is not None and batch is not None and batch.max_timestamp >= 0:
        lag = {"min_ms": ms - batch.max_timestamp, "max_ms": ms - max(batch.first_timestamp, 0)}
    return {"value": shown, "timestamp_ms": ms, "after_record_ms": lag}


def _epoch_ms(value: Any) -> int | None:
    """A time column's value as epoch milliseconds; a time without a zone is UTC (what sinks store)."""
    if isinstance(value, datetime):
        return int((value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp() * 1000)
    return None


# ---- the sentence -------------------------------------------------------------------------------------


def _summary(doc: dict[str, Any]) -> str:
    o, kind, t = doc["offset"], doc["kind"], doc["transaction"]
    where = f"{doc['topic']}[{doc['partition']}] offset {o}"
    log = doc["log"]
    if kind == "BELOW_LOG_START":
        return f"{where} is below the log start {log['log_start_offset']}: retention removed it."
    if kind == "BEYOND_HW":
        return f"{where} is at or beyond the high watermark {log['high_watermark']}: the log never had it."
    if kind == "HOLE":
        text = f"{where} was removed by compaction."
    elif kind == "MARKER":
        text = (f"{where} is the {t['outcome']} marker of producer {t['producer_id']} epoch "
                f"{t['marker_epoch']}, closing its transaction at offsets "
                f"{t['first_offset']}..{t['last_offset']}" if t else f"{where} is a transaction marker"
                ) + ": a control record, never delivered."
    elif kind == "ABORTED":
        text = f"{where} is a record of {_txn(t)}, aborted by the ABORT marker at {t and t['marker_offset']}"
        if t and t["aborted_by"] == "timeout":
            text += ", written by the coordinator when the transaction timed out (transaction.timeout.ms)"
        elif t and t["fenced"]:
            text += (", when a new instance took the id over and the coordinator aborted the old one's "
                     "transaction (a zombie's transaction)")
        elif t and t["aborted_by"] == "takeover?":
            text += (", by a new instance's take-over or by the id itself (transactions v2: this partition "
                     "can't tell)")
        text += ": read_committed consumers never see it."
    elif kind == "OPEN":
        text = (f"{where} is a record of {_txn(t)}, still open: it holds the LSO at "
                f"{log['last_stable_offset']} and read_committed consumers wait behind it.")
    else:
        committed = f"{_txn(t)}, COMMIT marker at {t['marker_offset']}" if t else "a non-transactional write"
        text = f"{where} is a committed record ({committed})"
        if not log["read_committed_delivers"]:
            text += f", after the LSO {log['last_stable_offset']}: not readable yet"
        text += "."
    text += _epoch_text(doc)
    p = doc["producer"]
    if p is not None and p.get("continues_producer_id") is not None:
        text += (f" Producer {p['producer_id']} continues producer id {p['continues_producer_id']}: the "
                 "coordinator moved the transactional id to it when that id's epochs ran out (transactions "
                 "v2, KAFKA-18660), one session going on, not a new instance.")
    g = doc["group"]
    if g is not None and g["committed_offset"] is not None and g["committed_offset"] > log["high_watermark"]:
        text += (f" Group {g['group']} committed {g['committed_offset']}, beyond the high watermark "
                 f"{log['high_watermark']}: the log was truncated below what it consumed (an unclean leader "
                 "election); its consumer will reset by auto.offset.reset, skipping or re-reading records.")
    elif g is not None and g["committed_offset"] is not None:
        text += (f" Group {g['group']} has consumed it (committed {g['committed_offset']})." if g["consumed"]
                 else f" Group {g['group']} has not reached it (committed {g['committed_offset']}).")
    s = doc["sink"]
    if s is not None:
        rows = s["rows"]
        expected = 1 if kind == "DATA" and log["read_committed_delivers"] else 0
        text += f" The sink holds {rows} row{'s' * (rows != 1)} for it"
        if rows > expected:
            text += (" (a phantom: it should hold none)" if expected == 0 else
                     " (a duplicate: it should hold one)")
        elif rows < expected:
            text += (" (missing: the sink's stored offsets are past it)" if s["stored_past"] else
                     " (missing)")
        if s["keys"]:
            text += f", key {', '.join(s['keys'])}"
        others = s["same_key"]
        if others:
            text += ", also at " + ", ".join(f"{x['topic']}[{x['partition']}]@{x['offset']}"
                                             for x in others[:4])
        text += "."
    state = doc.get("state")
    if state is not None:
        found = state["findings"]
        text += (f" The state sink ({state['mode']}) has no finding at this offset." if not found else
                 " The state sink: " + "; ".join(f"{x['kind']} for key {x['key']} ({x['detail']})"
                                                 for x in found[:3]) + ".")
    return text


def _epoch_text(doc: dict[str, Any]) -> str:
    """The partition leader epoch the offset's batch was written under, and where that epoch's leader
    began writing: a leader change after the log's first epoch is where a new leader truncated whatever an
    earlier one wrote from there on and had not replicated."""
    b, epochs = doc["batch"], doc["log"]["leader_epochs"]
    if b is None or b.get("leader_epoch", -1) < 0:
        return ""
    epoch = b["leader_epoch"]
    start = next((e["start_offset"] for e in epochs if e["leader_epoch"] == epoch), None)
    text = f" Written under partition leader epoch {epoch}"
    if start is not None and epochs and epochs[0]["leader_epoch"] != epoch:
        text += (f", whose leader's writes begin at offset {start}: whatever an earlier leader wrote from "
                 f"{start} on without replicating it to this one was truncated there (after an unclean "
                 "election, records consumers had already read)")
    return text + "."


def _txn(t: dict[str, Any] | None) -> str:
    if t is None:
        return "a transaction the scan did not see"
    return (f"producer {t['producer_id']} epoch {t['producer_epoch']}'s transaction "
            f"(offsets {t['first_offset']}..{t['last_offset']})")
