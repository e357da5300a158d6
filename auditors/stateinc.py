"""The incremental audit of a state sink (``mode = "upsert"`` or ``"aggregate"``): `eosctl audit
--incremental STATE` and the exporter's continuous audit (`--audit-state`), with the findings a full audit
(auditors.state) gives.

The state file is the offsets sinks' (auditors.incstate: one DuckDB file, its meta and the pickled log
scans), with what a state sink needs: ``state_records``, each source record's place, timestamp, writer,
outcome, whether it deletes its key, and its key and value identity as the sink's columns hold them
(auditors.statecols; not the record's bytes), and in the meta the sink's mode and every config key that
says what a row and a record are (a state of another mode or config is refused in one line). Each run reads:

- of Kafka, each partition's log from where its scan stopped (transactions that were open are decided by
  the markers that came since) and the records past the offset the last run read to: a partition whose log
  moved under the kept scan (retention, truncation, compaction) is read again from its log start;
- of the sink, every row again: a state sink's rows change in place (an upsert overwrites, a fold adds),
  and none of DuckDB, Parquet, PostgreSQL or a compacted topic tells which changed without a change feed;
  the rows are read as columns (auditors.statecols), a small part of an audit's time;

and judges the kept records with the new ones by the full audit's own judge (auditors.statecols): the
latest settled record or the fold per key from all of them, so the verdict is the full audit's. What it
cannot see: a record compacted away from a source topic below the kept scan while its log start stayed
(the state still holds it); a full audit reads everything again every ``full_every`` seconds.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from auditors import incstate, statebytes
from auditors.incremental import DEFAULT_FULL_EVERY, OPTION, Run, engine_info
from auditors.sources import _check_leaders
from auditors.state import (
    PHASE_LOG,
    PHASE_SINK,
    check_state_sink,
    only_topic,
    read_point,
    state_report,
    state_rows,
)
from auditors.statecols import (
    OPEN_CODE,
    Shape,
    judge_tables,
    latest_records,
    record_table,
    scanned_table,
)
from eosctl.base.errors import BrokerError, EosctlError
from eosctl.base.files import shown as shown_path
from eosctl.base.progress import Progress, Step, silent
from eosctl.cluster.model import TP, Kind
from eosctl.report.findings import KINDS, AuditReport

if TYPE_CHECKING:
    from eosctl.config.model import Sink
    from eosctl.config.target import Target

STATE_FORMAT = "eosctl-state-sink"
STATE_VERSION = 1  # of what a state sink keeps beside the offsets sinks' state (state_records, config)
_RECORDS = "state_records"
_CODES = {Kind.DATA: 1, Kind.ABORTED: 2, Kind.OPEN: 3}


def sink_config(sink: Sink) -> dict[str, Any]:
    """Every config key that says what a state sink's row and a record are: a state kept under another
    value of one of them would judge rows otherwise than a full audit."""
    agg = sink.aggregate
    return {"mode": sink.mode, "table": sink.table, "key_column": sink.key_column,
            "key_fields": [list(x) for x in sink.key_fields or ()],
            "value_fields": [list(x) for x in sink.value_fields or ()], "value_column": sink.value_column,
            "value_hash_column": sink.value_hash_column, "delete_values": list(sink.delete_values or ()),
            "aggregate": None if agg is None else {"fn": agg.fn, "column": agg.column, "field": agg.field,
                                                   "window_column": getattr(agg, "window_column", None),
                                                   "window_ms": getattr(agg, "window_ms", None)},
            "version_column": sink.version_column}


def refuse_other_mode(meta: dict[str, Any], sink: Sink, path: str, option: str) -> None:
    """One line when the state was kept in another state format or for another config of the sink (its
    mode was checked as it was read: auditors.incstate.previous)."""
    where = f"{option} {shown_path(path)}"
    if meta.get("state_format") != STATE_FORMAT or meta.get("state_version") != STATE_VERSION:
        raise EosctlError(f"{where} was written by another eosctl (state sink format "
                          f"{meta.get('state_version')}, this one reads {STATE_VERSION}); name a new file: a "
                          "full audit writes it")
    now = sink_config(sink)
    old = meta.get("sink_config") or {}
    for key, value in now.items():
        if old.get(key) != value:
            raise EosctlError(f"{where} was written for another config of this sink ({key} was "
                              f"{_said(old.get(key))}, now {_said(value)}); name a new state file (a full "
                              "audit writes it)")


def _said(v: Any) -> str:
    return "not set" if v in (None, [], {}) else repr(v)


def audit_state_incremental(target: Target, sink: Sink, state_path: str, *,
                            full_every: float = DEFAULT_FULL_EVERY, fail_on: tuple[str, ...] = KINDS,
                            progress: Progress = silent, started: float | None = None,
                            reads: tuple[str, ...] = (), option: str = OPTION, **_: Any) -> AuditReport:
    """Audit a state sink with what is new in the log since ``state_path``'s run (a full audit where there
    is no state yet, or ``full_every`` seconds passed since the last full one), and write the new state
    there (beside, then renamed: never one of ``reads``). The report's ``engine.incremental`` says which."""
    t_start = started if started is not None else time.monotonic()
    check_state_sink(sink)
    if sink.aggregate is not None and getattr(sink.aggregate, "window_column", None):
        raise EosctlError(f"{option} does not keep a windowed aggregate's folds yet "
                          f"(aggregate.window_column): audit it without {option}")
    prev = incstate.previous(state_path, reads, option, sink.mode)
    if prev is not None:
        refuse_other_mode(prev.meta, sink, state_path, option)

    # lazy: see docs/imports.md
    from eosctl.cluster.logscan import open_scans, run_scans
    from eosctl.cluster.wire import WireClient
    from eosctl.sink.kafka_topic import records

    progress(Step("reading Kafka metadata"))
    with WireClient(target.cluster) as client:
        leaders = client.metadata(list(target.topics))
        _check_leaders(leaders)
        ident = incstate.belonging(prev, target, sink, client.cluster_id,
                                   {t: client.topic_ids.get(t) for t in leaders}, state_path, option)
        reason = incstate.full_reason(prev, full_every)
        with incstate.writing(state_path, reads, option, go_on=prev is not None and not reason) as con:
            con.execute(Shape.of(sink).record_ddl(_RECORDS))
            # The sink first, then Kafka: a row written meanwhile is from an offset the log read has.
            progress(Step(PHASE_SINK))
            t = time.monotonic()
            rows, point = state_rows(sink)
            progress(Step(PHASE_LOG))
            tps = [(tp, p) for tp in target.topics for p in sorted(leaders.get(tp, {}))]
            offsets = client.offsets(tps)
            kept = {} if reason or prev is None else prev.scans
            read_to = {} if reason or prev is None else _read_to(prev.meta)
            scans, whole = {}, []
            for tp in tps:
                scan = kept.get(tp)
                if scan is not None and tp in read_to and incstate.still_the_log(scan, offsets[tp]):
                    scan.extend(offsets[tp])
                    scans[tp] = scan
                else:
                    whole.append(tp)
            scans.update(open_scans(client, whole, offsets=offsets))
            native = statebytes.available()  # the new records from the scans' own answers
            for s in scans.values():
                s.keys = statebytes.RecordBytes(s.next, s.end) if native else None
            run_scans(client, scans, progress)
            changed = [tp for tp, s in scans.items() if s.changed]
            if changed:  # the log under a resumed scan is not the one it read (compacted, truncated)
                again = open_scans(client, changed, offsets=offsets)
                for s in again.values():
                    s.keys = statebytes.RecordBytes(s.next, s.end) if native else None
                run_scans(client, again)
                scans.update(again)
                whole += changed
            logs = {tp: s.finish() for tp, s in scans.items()}
            scanned = {tp: log.record_keys for tp, log in logs.items()} if native else None
            for tp, s in scans.items():
                s.keys = None  # never kept in the state
                logs[tp].record_keys = None
            for tp, log in logs.items():
                if log.offsets_disagreement:  # never a verdict on offsets the broker contradicts
                    raise BrokerError(f"cannot audit {tp[0]}-{tp[1]}: {log.offsets_disagreement}")
            if reason:
                con.execute(f"DELETE FROM {_RECORDS}")
            for tp in whole:
                con.execute(f"DELETE FROM {_RECORDS} WHERE t = ? AND p = ?", list(tp))
                read_to.pop(tp, None)
            ends = {tp: log.high_watermark for tp, log in logs.items()}
            starts = {tp: read_to[tp] for tp in ends if tp in read_to}
            # The records past where the last run read; a partition read whole, from its log start.
            if scanned is not None:  # each scan read from where the last run's stopped
                fresh = scanned_table(sink, logs, {tp: _past(got, read_to.get(tp))
                                                   for tp, got in scanned.items()})
            else:
                fresh = record_table(sink, logs, records(target.cluster, ends, read_committed=False,
                                                         what="the source topics", starts=starts))
            new_offsets = sum(max(0, e - starts.get(tp, logs[tp].log_start_offset))
                              for tp, e in ends.items())
            con.register("fresh_records", fresh)
            con.execute(f"INSERT INTO {_RECORDS} SELECT * FROM fresh_records")
            con.unregister("fresh_records")
            _decide_open(con, logs)
            bounds = read_point(target.cluster, target.group, logs)
            prepare_s = time.monotonic() - t
            con.register("state_rows_now", rows)
            # The per-key pass over each key's latest records (auditors.statecols.latest_records).
            latest = None if sink.mode == "aggregate" else latest_records(
                sink, con.sql(f"SELECT * FROM {_RECORDS}").to_arrow_table(), bounds, con)
            if latest is not None:
                con.register("recs_latest", latest)
            verdict = judge_tables(con, sink, logs, bounds, recs=_RECORDS, rows="state_rows_now",
                                   topic=only_topic(target),
                                   latest="recs_latest" if latest is not None else None)
            if latest is not None:
                con.unregister("recs_latest")
            con.unregister("state_rows_now")
            now = time.time()
            meta = {**ident, "full_at": now if reason else prev.meta["full_at"] if prev else now,
                    "audited_at": now, "sink_mode": sink.mode, "state_format": STATE_FORMAT,
                    "state_version": STATE_VERSION, "sink_config": sink_config(sink),
                    "read_to": [[t, p, o] for (t, p), o in sorted(ends.items())]}
            incstate.save(con, incstate.State(meta, scans))
    run = Run(bool(reason), reason, new_offsets, rows.num_rows, verdict.checked, meta["full_at"])
    progress(Step("done", 1, 1))
    engine = engine_info(run, prepare_s, {})
    return state_report(target, sink, logs, verdict, point, engine, fail_on, t_start)


def _past(got: tuple[Any, Any, Any, Any], start: int | None) -> tuple[Any, Any, Any, Any]:
    """A scan's records at or past ``start`` (a resumed scan may re-read the batch it stopped in)."""
    if start is None:
        return got
    import numpy as np  # lazy: see docs/imports.md
    import pyarrow as pa  # lazy: see docs/imports.md

    idx = np.flatnonzero(got[0] >= start)
    if len(idx) == len(got[0]):
        return got
    take = pa.array(idx)
    return got[0][idx], got[1][idx], got[2].take(take), got[3].take(take)


def _read_to(meta: dict[str, Any]) -> dict[TP, int]:
    return {(t, p): o for t, p, o in meta.get("read_to") or []}


def _decide_open(con: Any, logs: dict[TP, Any]) -> None:
    """The kept records of transactions that were open at the last run, told by the log as it is now
    (committed or aborted since, or still open)."""
    import pyarrow as pa  # lazy: see docs/imports.md

    got = con.execute(f"SELECT t, p, o FROM {_RECORDS} WHERE st = {OPEN_CODE}").fetchall()
    if not got:
        return
    st: list[int | None] = []
    for t, p, o in got:
        log = logs.get((t, p))
        rng = log.range_at(o) if log is not None else None
        st.append(_CODES.get(rng.kind) if rng is not None else None)
    con.register("decided", pa.table({"t": [r[0] for r in got],
                                      "p": pa.array([r[1] for r in got], pa.int32()),
                                      "o": pa.array([r[2] for r in got], pa.int64()),
                                      "st": pa.array(st, pa.int8())}))
    con.execute(f"UPDATE {_RECORDS} AS r SET st = d.st FROM decided d WHERE r.t = d.t AND r.p = d.p "
                "AND r.o = d.o")
    con.execute(f"DELETE FROM {_RECORDS} WHERE st IS NULL")
    con.unregister("decided")


__all__ = ["STATE_FORMAT", "STATE_VERSION", "audit_state_incremental", "refuse_other_mode", "sink_config"]
