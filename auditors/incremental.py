"""The incremental audit: only what is new since the last verdict, with the findings a full audit gives.

`eosctl audit --incremental STATE` (cron) and the exporter's continuous audit run this. The state file
(auditors.incstate) keeps where the last verdict left off; each run then reads

- of Kafka, each partition's log from where its scan stopped (eosctl.cluster.logclassify.LogScan, resumed
  as the live model resumes it): transactions that were still open at the last run are decided by the
  markers that came since, offsets that were above the LSO are judged now;
- of the sink, only the rows added since (eosctl.sink.tail.DuckDBTail, by DuckDB rowid; a sink whose rows
  were deleted is noticed and read again whole), added to the islands kept per partition;
- of the key index, the places of the keys the new rows carry, the keys of the last key_duplicate findings
  and the keys of rows whose offsets were not yet committed at the last run.

The per-partition rule (eosctl.rules.rule) then runs on the whole log model and the whole islands, which
cost O(ranges + islands), not O(offsets): the findings, their runs across the old and new offsets and
their causes are the ones a full audit makes. What it cannot see: a row deleted or rewritten in place in
the sink (an UPDATE keeps the row's rowid) without the row count changing. A full audit reads everything
again every ``full_every`` seconds (`--full-every`, default a day) and starts a new state.

A state of another pipeline, another cluster (its cluster id) or of a topic that was deleted and created
again (its topic id) is refused in one line.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from auditors import incstate
from auditors.engine import engine_facts
from auditors.keydups import duplicate_keys, writers_table
from auditors.plan import AuditInput, prepare
from auditors.sources import Placement, _check_leaders
from auditors.task import _with_write_order
from eosctl.base.errors import EosctlError
from eosctl.base.files import check_output, writing_output
from eosctl.base.files import shown as shown_path
from eosctl.base.gcpause import paused
from eosctl.base.progress import Progress, Step, silent
from eosctl.cluster.model import TP
from eosctl.report.findings import KINDS, AuditReport, Finding
from eosctl.rules.causes import committed_writers, explain_finding
from eosctl.rules.rule import audit_partition
from eosctl.sink import kind_of, open_reader, shown
from eosctl.sink.base import ReadPoint

if TYPE_CHECKING:
    from eosctl.config.model import Sink
    from eosctl.config.target import Target

DEFAULT_FULL_EVERY = 86_400.0  # a full audit a day: what an incremental one can't see, seen daily
OPTION = "--incremental"
SLICE_S = 4.0  # the longest a slice of new sink rows holds the sink's file (a writer waits that long)


@dataclass(frozen=True)
class Run:
    """What one incremental audit did (the report's ``engine.incremental``, the exporter's metrics)."""

    full: bool  # read everything (no state yet, --full-every due, or the sink's rows were deleted)
    reason: str  # why a full audit, or "" for an incremental one
    new_offsets: int  # offsets of Kafka read by this run (past where the last run stopped)
    new_sink_rows: int  # sink rows read by this run
    keys_checked: int  # keys whose places were looked up
    full_at: float  # when the last full audit ran (Unix time): this one, or the one the state began with


def audit_incremental(target: Target, sink: Sink, state_path: str, *, full_every: float = DEFAULT_FULL_EVERY,
                      fail_on: tuple[str, ...] = KINDS, progress: Progress = silent,
                      started: float | None = None, reads: tuple[str, ...] = (), option: str = OPTION,
                      **_: Any) -> AuditReport:
    """Audit what is new since ``state_path``'s verdict (a full audit where there is none yet, or where
    ``full_every`` seconds passed since the last full one) and write the new state there (beside, then
    renamed: never one of ``reads``). The report's ``engine.incremental`` says which it was."""
    t_start = started if started is not None else time.monotonic()
    _check_supported(sink)
    # An input is never the state (by inode, whatever it holds); then a file there must be a state.
    check_output(state_path, reads, True, option)
    prev = incstate.load(state_path, option) if os.path.exists(state_path) else None
    # lazy: eosctl.cluster.wire 71 ms, eosctl.cluster.logscan 80 ms to import
    from eosctl.cluster.logscan import open_scans, run_scans
    from eosctl.cluster.wire import WireClient
    from eosctl.txn.producerids import identify, settle

    progress(Step("reading Kafka metadata"))
    with WireClient(target.cluster) as client:
        leaders = client.metadata(list(target.topics))
        _check_leaders(leaders)
        ident = _identity(target, sink, client.cluster_id, {t: client.topic_ids.get(t) for t in leaders})
        if prev is not None:
            _refuse_other(prev.meta, ident, state_path, option)
        reason = _full_reason(prev, full_every)
        with writing_output(state_path, reads, False, option, also=(".wal",), ours=incstate.is_state) as tmp:
            if prev is not None and not reason:
                shutil.copyfile(state_path, tmp)  # the key index goes on from the last one's
            import duckdb  # lazy: duckdb 44 ms to import

            con = duckdb.connect(tmp)
            try:
                incstate.create(con)
                con.execute("SET preserve_insertion_order = false")
                # The sink first, then Kafka: a row written meanwhile is at an offset the scan reads.
                progress(Step("reading the sink's new rows"))
                tail, sink_read, restarted = _read_sink(sink, None if reason else prev, con)
                if restarted and not reason:
                    reason = "the sink's rows were deleted or rewritten since the last audit"
                if reason:  # everything read again: the index is this run's rows alone
                    con.execute("DELETE FROM key_index")
                    con.execute("DELETE FROM pending_keys")
                t_scan = time.monotonic()
                progress(Step("reading the log past the last audit"))
                tps = [(t, p) for t in target.topics for p in sorted(leaders.get(t, {}))]
                offsets = client.offsets(tps)
                kept = {} if reason or prev is None else prev.scans
                scans, whole = {}, []
                for tp in tps:
                    scan = kept.get(tp)
                    if scan is not None and _still_the_log(scan, offsets[tp]):
                        scan.extend(offsets[tp])
                        scans[tp] = scan
                    else:
                        whole.append(tp)
                scans.update(open_scans(client, whole, offsets=offsets))
                before = {tp: s.next for tp, s in scans.items()}
                run_scans(client, scans, progress)
                changed = [tp for tp, s in scans.items() if s.changed]
                if changed:  # the log under a resumed scan is not the one it read (compacted, truncated)
                    again = open_scans(client, changed, offsets=offsets)
                    run_scans(client, again)
                    scans.update(again)
                    whole += changed
                    before.update({tp: s.start for tp, s in again.items()})
                new_offsets = sum(s.next - before[tp] for tp, s in scans.items())
                logs = {tp: s.finish() for tp, s in scans.items()}
                settle(logs.values())
                identify(client, logs.values())
                progress(Step("reconciling"))
                t_reconcile = time.monotonic()
                with paused():
                    summaries, findings = _reconcile(target, sink, tail, logs, client, leaders, offsets)
                    invalid = [explain_finding(f) for f in tail.invalid_rows()]
                    t_keys = time.monotonic()
                    keys, keys_checked = _key_duplicates(con, sink, logs, prev, bool(reason), whole)
                    t_done = time.monotonic()
                now = time.time()
                meta = {**ident, "full_at": now if reason else prev.meta["full_at"] if prev else now,
                        "audited_at": now,
                        "lso": {f"{t}\t{p}": log.last_stable_offset for (t, p), log in logs.items()}}
                incstate.save(con, incstate.State(meta, scans, tail.state, keys))
            finally:
                con.close()
    run = Run(bool(reason), reason, new_offsets, sink_read, keys_checked, meta["full_at"])
    progress(Step("done", 1, 1))
    point = ReadPoint("duckdb", shown(sink), {"rows_read": tail.state.rows_read,
                                             "read_at": datetime.now(UTC).isoformat(timespec="seconds")})
    # The engines' timings, read as this run spent them: the sink's new rows and the state file are its
    # preparation, the log past the last run its scan.
    timings = {"partitions_seconds": round(t_keys - t_scan, 3),
               "scan_seconds": round(t_reconcile - t_scan, 3),
               "reconcile_seconds": round(t_keys - t_reconcile, 3), "keys_seconds": round(t_done - t_keys, 3)}
    engine = engine_info(run, t_scan - t_start, timings)
    with paused():
        return AuditReport.build(summaries, findings + keys + invalid, fail_on,
                                 sink=f"{shown(sink)} ({sink.table})", sink_read_point=point,
                                 group=target.group, engine=engine,
                                 elapsed_seconds=time.monotonic() - t_start)


def engine_info(run: Run, prepare_s: float, timings: dict[str, float]) -> dict[str, Any]:
    """The report's ``engine`` object for an incremental audit (docs/json.md): the engines' keys, and what
    it read."""
    return {**engine_facts({"name": "incremental"}, 1, prepare_s, 0.0, timings), "incremental": run.__dict__}


def _check_supported(sink: Sink) -> None:
    kind = kind_of(sink)
    if kind != "duckdb":
        raise EosctlError(f"{OPTION} reads only the rows a DuckDB sink added since the last audit; this sink "
                          f"is {kind or 'not set'}: audit it without {OPTION}")


def _identity(target: Target, sink: Sink, cluster_id: str | None,
              topic_ids: dict[str, str | None]) -> dict[str, Any]:
    """What a state belongs to: a state of anything else is refused (_refuse_other)."""
    return {"pipeline": target.pipeline.name if target.pipeline else None, "cluster_id": cluster_id,
            "topics": sorted(target.topics), "topic_ids": topic_ids, "group": target.group,
            "sink": f"{shown(sink)} ({sink.table})",
            "columns": [sink.topic_column, sink.partition_column, sink.offset_column, sink.key_column,
                        sink.order_column, sink.offsets_table]}


def _refuse_other(was: dict[str, Any], now: dict[str, Any], path: str, option: str) -> None:
    """One line when the state is another pipeline's, another cluster's or a recreated topic's."""
    where = f"{option} {shown_path(path)}"
    if was.get("cluster_id") != now["cluster_id"]:
        raise EosctlError(f"{where} was written for cluster {was.get('cluster_id')}, this is cluster "
                          f"{now['cluster_id']}: name another state file for this cluster")
    if was.get("pipeline") != now["pipeline"] or was.get("topics") != now["topics"] \
            or was.get("sink") != now["sink"] or was.get("columns") != now["columns"] \
            or was.get("group") != now["group"]:
        was_name = was.get("pipeline") or ",".join(was.get("topics") or [])
        raise EosctlError(f"{where} belongs to another pipeline ({was_name} into {was.get('sink')}); name "
                          "one state file per pipeline")
    for topic, tid in now["topic_ids"].items():
        old = (was.get("topic_ids") or {}).get(topic)
        if old != tid:
            raise EosctlError(f"{where}: topic {topic} was deleted and created again since (topic id "
                              f"{old}, now {tid}); the state describes the old topic: name a new state file "
                              "(a full audit writes it)")


def _full_reason(prev: incstate.State | None, full_every: float) -> str:
    if prev is None:
        return "no state yet"
    if full_every > 0 and time.time() - float(prev.meta.get("full_at", 0)) >= full_every:
        return f"the last full audit is {full_every:g}s old or more (--full-every)"
    return ""


def _still_the_log(scan: Any, o: Any) -> bool:
    """Whether a kept scan may go on (as the live model decides, eosctl.inspection.live): not truncated
    below what it read, and its log start unmoved (a full scan starts at the log start, and so must this)."""
    return o.high_watermark >= scan.end and o.log_start == scan.offsets.log_start


class _Tail:
    """The sink's rows read on from the state's point, with each slice's keys put in the key index."""

    def __init__(self, sink: Sink, con: Any) -> None:
        from eosctl.sink.tail import DuckDBTail  # lazy: eosctl.sink.tail 30 ms to import

        self.con, self.restarted = con, False
        self.keyed = sink.key_column is not None
        # Few large slices: a batch audit, not the live model's short holds of the file.
        self.tail = DuckDBTail(sink, slice_s=SLICE_S, on_rows=self._rows, first_chunk=1 << 20,
                               max_chunk=1 << 23)
        con.execute("CREATE TEMP TABLE fresh (h UBIGINT, k VARCHAR, t VARCHAR, p INTEGER, o BIGINT)")

    def _rows(self, reader: Any) -> None:
        if reader is None:  # the sink is read again from its first row: the index starts over too
            self.restarted = True
            self.con.execute("DELETE FROM fresh")
            return
        if self.keyed:
            arrow = reader.conn.sql(reader.key_rows_sql()).to_arrow_table()
            self.con.register("slice_keys", arrow)
            self.con.execute("INSERT INTO fresh SELECT hash(k), k, t, p, o FROM slice_keys")
            self.con.unregister("slice_keys")


def _read_sink(sink: Sink, prev: incstate.State | None, con: Any) -> tuple[Any, int, bool]:
    """(the tail, caught up; the sink rows it read; whether it read the sink again from its first row)."""
    reading = _Tail(sink, con)
    if prev is not None and prev.tail is not None:
        reading.tail.state = prev.tail
    before = reading.tail.state.rows_read
    while not reading.tail.read(budget_s=60.0):
        pass
    read = reading.tail.state.rows_read - (0 if reading.restarted else before)
    return reading.tail, read, reading.restarted


class _TailReader:
    """What auditors.plan.prepare reads of a sink, from the tail's state."""

    def __init__(self, tail: Any) -> None:
        self.tail = tail

    def partitions(self) -> dict[TP, int]:
        return {tp: s.rows for tp, s in self.tail.summaries().items()}

    def stored_offsets(self) -> Any:
        return self.tail.state.stored


class _Known:
    """The plan's source: the leaders and offsets this run read (asked once), no second survey."""

    def __init__(self, client: Any, leaders: dict[str, dict[int, int]], offsets: dict[TP, Any]) -> None:
        self.client, self.leaders, self.offsets = client, leaders, offsets

    def survey(self, topics: Any) -> dict[str, dict[int, Placement]]:
        return {t: {p: Placement(leader, self.offsets[(t, p)].log_start, self.offsets[(t, p)].high_watermark,
                                 self.offsets[(t, p)].last_stable, self.offsets[(t, p)].disagreement,
                                 self.offsets[(t, p)].listed)
                    for p, leader in sorted(self.leaders[t].items())} for t in topics if t in self.leaders}

    def existing_topics(self) -> dict[str, list[int]]:
        return {t: sorted(ps) for t, ps in self.client.metadata().items()}


def _reconcile(target: Target, sink: Sink, tail: Any, logs: dict[TP, Any], client: Any,
               leaders: dict[str, dict[int, int]], offsets: dict[TP, Any]) -> tuple[list, list[Finding]]:
    """Every partition's summary and findings: the rule of eosctl.rules.rule on the whole log model and
    the whole islands (what the full audit's tasks run), the plan as auditors.plan makes it."""
    inp = AuditInput(source=_Known(client, leaders, offsets), sink=sink, topics=target.topics,
                     cluster=target.cluster, group=target.group)
    items = prepare(inp, _TailReader(tail))
    summaries, findings = [], []
    ordered: list[tuple[Any, list[Finding]]] = []
    for item in items:
        log = logs.get(item.tp) if item.in_kafka else None
        islands = tail.state.islands.get(item.tp, [])
        summary, found = audit_partition(item.topic, item.partition, log, islands,
                                         expected_upto=item.expected_upto, check_offsets=item.check_offsets,
                                         stored_offset=item.stored_offset,
                                         committed_offset=item.committed_offset, group=target.group)
        summaries.append(summary)
        ordered.append((item, found))
    if sink.order_column and any(f.kind == "duplicate" for _, fs in ordered for f in fs):
        with open_reader(sink) as reader:  # when the sink wrote each duplicate (a few small queries)
            ordered = [(i, _with_write_order(reader, i, fs)) for i, fs in ordered]
    for _, found in ordered:
        findings.extend(found)
    return summaries, findings


def _key_duplicates(con: Any, sink: Sink, logs: dict[TP, Any], prev: incstate.State | None, full: bool,
                    whole: list[TP]) -> tuple[list[Finding], int]:
    """The key_duplicate findings, from the key index: the keys this run may change (the new rows', the
    last findings' (retention may have taken a place), those of rows whose offsets were not committed yet
    at the last run, every key of a partition read whole again) looked up; no other key can have become a
    duplicate. (key_duplicate findings, keys looked up)."""
    if sink.key_column is None:
        return [], 0
    import pyarrow as pa  # lazy: pyarrow 50 ms to import

    lso = pa.table({"t": [t for t, _ in logs], "p": pa.array([p for _, p in logs], pa.int32()),
                    "lso": pa.array([log.last_stable_offset for log in logs.values()], pa.int64())})
    con.register("lsos", lso)
    incremental = not full and prev is not None
    con.execute("CREATE TEMP TABLE affected (h UBIGINT)")
    if incremental:
        con.execute("INSERT INTO affected SELECT DISTINCT h FROM fresh")
        old = [f.key for f in prev.key_findings if f.key is not None]
        if old:
            con.register("old_keys", pa.table({"k": pa.array(old, pa.string())}))
            con.execute("INSERT INTO affected SELECT hash(k) FROM old_keys")
        # Places that were not committed at the last run and may be now (committed or aborted since).
        con.execute("INSERT INTO affected SELECT q.h FROM pending_keys q JOIN lsos l USING (t, p) "
                    "WHERE q.o < l.lso")
        for t, p in whole:  # read again from its log start: every key it holds
            con.execute("INSERT INTO affected SELECT h FROM key_index WHERE t = ? AND p = ?", [t, p])
    con.execute("INSERT INTO key_index SELECT * FROM fresh")
    # The places still past their partition's LSO: looked up again next time.
    new_pending = "fresh" if incremental else "key_index"
    con.execute("CREATE TEMP TABLE still AS SELECT * FROM (SELECT * FROM pending_keys UNION ALL "
                f"SELECT * FROM {new_pending}) q WHERE NOT EXISTS (SELECT 1 FROM lsos l WHERE l.t = q.t AND "
                "l.p = q.p AND q.o < l.lso)")
    con.execute("DELETE FROM pending_keys")
    con.execute("INSERT INTO pending_keys SELECT * FROM still")
    # The places of the keys looked up; the rule (auditors.keydups) keeps the keys at more than one place,
    # matches them with the committed ranges by writer and makes the findings, in DuckDB.
    looked_up = "key_index i SEMI JOIN affected a ON i.h = a.h" if incremental else "key_index i"
    kind = "TABLE" if incremental else "VIEW"  # a full audit's places are the whole index: not copied
    con.execute(f"CREATE TEMP {kind} places AS SELECT i.h, i.k AS key, i.t AS topic, i.p AS \"partition\", "
                f"i.o AS \"offset\" FROM {looked_up}")
    [(checked,)] = con.execute("SELECT count(DISTINCT h) FROM places").fetchall()
    con.register("writers", writers_table(
        {"topic": t, "partition": p, "first_offset": w[0], "last_offset": w[1], "producer_id": w[2],
         "producer_epoch": w[3], "marker_offset": w[4]} for (t, p), log in logs.items()
        for w in committed_writers(log)))
    found = duplicate_keys(con, "places", "writers")
    return found, int(checked)


__all__ = ["DEFAULT_FULL_EVERY", "Run", "audit_incremental"]
