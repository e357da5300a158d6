"""The incremental audit: only what is new since the last verdict, with the findings a full audit gives.

`eosctl audit --incremental STATE` (cron) and the exporter's continuous audit run this. The state file
(auditors.incstate) keeps where the last verdict left off; each run then reads:

- of Kafka, each partition's log from where its scan stopped (eosctl.cluster.logclassify.LogScan, resumed
  as the live model resumes it): transactions that were still open at the last run are decided by the
  markers that came since, offsets that were above the LSO are judged now;
- of the sink, only the rows added since (eosctl.sink.tail.DuckDBTail, by DuckDB rowid; a sink whose rows
  were deleted is noticed and read again whole), added to the islands kept per partition;
- of the key index, the places of the keys the new rows carry, the keys of the last key_duplicate findings
  and the keys of rows whose offsets were not yet committed at the last run;
- with the content check (a key column, and not --no-content-check), per partition the rows from a cut
  below the new rows and the new records (the last rows the new records are neighbours of) with the records
  around them, from the state's record index: eosctl.rules.content judges them as the full audit judges the
  whole partition (the cut: the last row below that holds its own record's key and no neighbour's, so no
  run of rows crosses it; the rows below keep their findings), and a partition whose writer stored shifted
  offsets is reconciled at the offsets its rows hold, as auditors.contentcheck does.

The per-partition rule (eosctl.rules.rule) then runs on the whole log model and the whole islands, which
cost O(ranges + islands), not O(offsets): the findings, their runs across the old and new offsets and
their causes are the ones a full audit makes. What it cannot see: a row deleted or rewritten in place in
the sink (an UPDATE keeps the row's rowid) without the row count changing. A full audit reads everything
again every ``full_every`` seconds (`--full-every`, default a day) and starts a new state.

A state of another pipeline, another cluster (its cluster id) or of a topic that was deleted and created
again (its topic id) is refused in one line.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from auditors import incstate
from auditors.contentcheck import _value_name, reconciled
from auditors.engine import engine_facts
from auditors.keydups import duplicate_keys, writers_table
from auditors.plan import AuditInput, prepare
from auditors.sources import Placement, _check_leaders
from auditors.task import _with_write_order
from eosctl.base.errors import EosctlError
from eosctl.base.gcpause import paused
from eosctl.base.progress import Progress, Step, silent
from eosctl.cluster.model import TP, PartitionLog
from eosctl.config.model import value_mode
from eosctl.report import onerow
from eosctl.report.findings import KINDS, AuditReport, Finding
from eosctl.rules.causes import committed_writers, explain_finding
from eosctl.rules.precedence import content_first
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


@dataclass
class Content:
    """One partition's content check as the last run left it (kept in the state): its findings and shifts,
    whether its rows showed the key (value) column comparable (eosctl.rules.content: a partition where none
    did is not judged), and per leader epoch the lowest offset of a row holding its record's key."""

    findings: list[Finding]
    shifts: list[Any]
    judged: bool
    values_judged: bool
    matched: dict[int, int]


def audit_incremental(target: Target, sink: Sink, state_path: str, *, full_every: float = DEFAULT_FULL_EVERY,
                      fail_on: tuple[str, ...] = KINDS, progress: Progress = silent,
                      started: float | None = None, reads: tuple[str, ...] = (), option: str = OPTION,
                      content: bool = True, **_: Any) -> AuditReport:
    """Audit what is new since ``state_path``'s verdict (a full audit where there is none yet, or where
    ``full_every`` seconds passed since the last full one) and write the new state there (beside, then
    renamed: never one of ``reads``). The report's ``engine.incremental`` says which it was. ``content``:
    the content check, where the sink names a key column (as the full audit's)."""
    t_start = started if started is not None else time.monotonic()
    _check_supported(sink)
    prev = incstate.previous(state_path, reads, option, sink.mode)
    # lazy: see docs/imports.md
    from eosctl.cluster.logscan import open_scans, run_scans
    from eosctl.cluster.wire import WireClient
    from eosctl.txn.producerids import identify, settle

    progress(Step("reading Kafka metadata"))
    with WireClient(target.cluster) as client:
        leaders = client.metadata(list(target.topics))
        _check_leaders(leaders)
        ident = incstate.belonging(prev, target, sink, client.cluster_id,
                                   {t: client.topic_ids.get(t) for t in leaders}, state_path, option)
        # What the scans decode of each record: its key (and value hash) for the content check, or nothing.
        keys: bool | str = (value_mode(sink) or True) if content and sink.key_column is not None else False
        reason = incstate.full_reason(prev, full_every, _mode(keys))
        with incstate.writing(state_path, reads, option, go_on=prev is not None and not reason) as con:
            # The sink first, then Kafka: a row written meanwhile is at an offset the scan reads.
            progress(Step("reading the sink's new rows"))
            tail, sink_read, restarted = _read_sink(sink, None if reason else prev, con,
                                                    values=bool(keys) and keys is not True)
            if restarted and not reason:
                reason = "the sink's rows were deleted or rewritten since the last audit"
            if reason:  # everything read again: the index is this run's rows alone
                con.execute("DELETE FROM key_index")
                con.execute("DELETE FROM pending_keys")
                con.execute("DELETE FROM records")
            t_scan = time.monotonic()
            progress(Step("reading the log past the last audit"))
            tps = [(t, p) for t in target.topics for p in sorted(leaders.get(t, {}))]
            offsets = client.offsets(tps)
            kept = {} if reason or prev is None else prev.scans
            scans, whole = {}, []
            for tp in tps:
                scan = kept.get(tp)
                if scan is not None and incstate.still_the_log(scan, offsets[tp]):
                    scan.extend(offsets[tp])
                    if keys:  # the keys of the records past where it stopped
                        from eosctl.cluster.recordkeys import KeyCollector  # lazy: see docs/imports.md

                        mode = keys if isinstance(keys, str) else None
                        scan.keys = KeyCollector(scan.next, scan.end, mode)
                    scans[tp] = scan
                else:
                    whole.append(tp)
            scans.update(open_scans(client, whole, offsets=offsets, keys=keys))
            before = {tp: s.next for tp, s in scans.items()}
            run_scans(client, scans, progress)
            changed = [tp for tp, s in scans.items() if s.changed]
            if changed:  # the log under a resumed scan is not the one it read (compacted, truncated)
                again = open_scans(client, changed, offsets=offsets, keys=keys)
                run_scans(client, again)
                scans.update(again)
                whole += changed
                before.update({tp: s.start for tp, s in again.items()})
            new_offsets = sum(s.next - before[tp] for tp, s in scans.items())
            logs = {tp: s.finish() for tp, s in scans.items()}
            for s in scans.values():
                s.keys = None  # the records' keys go to the record index, not into the kept scan
            if keys:
                _add_records(con, logs, whole)
            settle(logs.values())
            identify(client, logs.values())
            progress(Step("reconciling"))
            t_keys = time.monotonic()
            with paused():
                # The key index first: the content check reads the new rows from it.
                dups, keys_checked = _key_duplicates(con, sink, logs, prev, bool(reason), whole)
                t_reconcile = time.monotonic()
                checker = None
                if keys:
                    checker = _Checker(con, sink, logs, {} if reason or prev is None else prev.content,
                                       set(whole), before)
                summaries, findings = _reconcile(target, sink, tail, logs, client, leaders, offsets,
                                                 checker)
                invalid = [explain_finding(f) for f in tail.invalid_rows()]
                t_done = time.monotonic()
            now = time.time()
            meta = {**ident, "full_at": now if reason else prev.meta["full_at"] if prev else now,
                    "audited_at": now, "content": _mode(keys),
                    "lso": {f"{t}\t{p}": log.last_stable_offset for (t, p), log in logs.items()}}
            incstate.save(con, incstate.State(meta, scans, tail.state, dups,
                                              checker.kept if checker is not None else {}))
    run = Run(bool(reason), reason, new_offsets, sink_read, keys_checked, meta["full_at"])
    progress(Step("done", 1, 1))
    point = ReadPoint("duckdb", shown(sink), {"rows_read": tail.state.rows_read,
                                             "read_at": datetime.now(UTC).isoformat(timespec="seconds")})
    # The engines' timings, read as this run spent them: the sink's new rows and the state file are its
    # preparation, the log past the last run its scan.
    timings = {"partitions_seconds": round(t_done - t_scan - (t_reconcile - t_keys), 3),
               "scan_seconds": round(t_keys - t_scan, 3),
               "reconcile_seconds": round(t_done - t_reconcile, 3),
               "keys_seconds": round(t_reconcile - t_keys, 3)}
    engine = engine_info(run, t_scan - t_start, timings)
    findings = content_first(findings + dups)  # a row the content check names is no place of its key
    onerow.record(summaries, findings + invalid)  # the test suite's check: one finding per row
    with paused():
        return AuditReport.build(summaries, findings + invalid, fail_on,
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
    judged = [k for k in ("retention", "dlq_topic", "route") if getattr(sink, k) is not None]
    if judged:
        # Each changes what is expected of rows already judged (auditors.window, deadletters, routes):
        # never a state that would judge them otherwise than a full audit.
        raise EosctlError(f"{OPTION} does not judge a sink's {judged[0]} yet; audit it without {OPTION}")


def _mode(keys: bool | str) -> str:
    """The content check a state was written with: "off", "keys", or the value mode."""
    return "off" if not keys else "keys" if keys is True else str(keys)


class _Tail:
    """The sink's rows read on from the state's point, with each slice's keys put in the key index."""

    def __init__(self, sink: Sink, con: Any, values: bool = False) -> None:
        from eosctl.sink.tail import DuckDBTail  # lazy: see docs/imports.md

        self.con, self.restarted, self.values = con, False, values
        self.keyed = sink.key_column is not None
        # Few large slices: a batch audit, not the live model's short holds of the file.
        self.tail = DuckDBTail(sink, slice_s=SLICE_S, on_rows=self._rows, first_chunk=1 << 20,
                               max_chunk=1 << 23)
        con.execute("CREATE TEMP TABLE fresh (h UBIGINT, k VARCHAR, t VARCHAR, p INTEGER, o BIGINT, "
                    "vh UBIGINT)")

    def _rows(self, reader: Any) -> None:
        if reader is None:  # the sink is read again from its first row: the index starts over too
            self.restarted = True
            self.con.execute("DELETE FROM fresh")
            return
        if self.keyed:
            arrow = reader.conn.sql(reader.key_rows_sql(self.values)).to_arrow_table()
            vh = "NULL"
            if self.values:  # the value's hash as the content check compares it (eosctl.cluster.recordkeys)
                import pyarrow as pa  # lazy: see docs/imports.md

                from eosctl.cluster.recordkeys import hash_arrow  # lazy: see docs/imports.md

                arrow = arrow.append_column("vh", pa.array(hash_arrow(arrow.column("v")), pa.uint64()))
                vh = "vh"
            self.con.register("slice_keys", arrow)
            self.con.execute(f"INSERT INTO fresh SELECT hash(k), k, t, p, o, {vh} FROM slice_keys")
            self.con.unregister("slice_keys")


def _read_sink(sink: Sink, prev: incstate.State | None, con: Any, values: bool = False
               ) -> tuple[Any, int, bool]:
    """(the tail, caught up; the sink rows it read; whether it read the sink again from its first row).
    ``values``: the key index keeps each row's value hash too (the content check compares values)."""
    reading = _Tail(sink, con, values)
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

    # The rest of auditors.sources.Source: the plan only surveys, and this run scans the logs itself.
    def offsets_for_time(self, tps: Sequence[TP], timestamp_ms: int) -> dict[TP, int | None]:
        raise NotImplementedError("the incremental audit's plan reads no offsets by time")

    def scan(self, parts: Sequence[tuple[TP, Placement]], keys: bool | str = False) -> dict[TP, PartitionLog]:
        raise NotImplementedError("the incremental audit scans the logs itself")


def _reconcile(target: Target, sink: Sink, tail: Any, logs: dict[TP, Any], client: Any,
               leaders: dict[str, dict[int, int]], offsets: dict[TP, Any],
               checker: _Checker | None = None) -> tuple[list, list[Finding]]:
    """Every partition's summary and findings: the rule of eosctl.rules.rule on the whole log model and
    the whole islands (what the full audit's tasks run), the plan as auditors.plan makes it; with
    ``checker``, the content findings added and a partition with shifted rows reconciled at the offsets
    they hold (as auditors.contentcheck.with_content)."""
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
        if checker is not None and log is not None and islands:
            triples = [(i.first, i.last, i.multiplicity) for i in islands]
            content = checker.check(item.tp, triples)
            if content is not None:
                again = reconciled(item, log, triples, content.shifts, content.findings, target.group)
                if again is not None:
                    summary, found = again
                found = [*found, *content.findings]
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
    import pyarrow as pa  # lazy: see docs/imports.md

    lso = pa.table({"t": [t for t, _ in logs], "p": pa.array([p for _, p in logs], pa.int32()),
                    "lso": pa.array([log.last_stable_offset for log in logs.values()], pa.int64())})
    con.register("lsos", lso)
    incremental = not full and prev is not None
    con.execute("CREATE TEMP TABLE affected (h UBIGINT)")
    if incremental and prev is not None:
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


def _add_records(con: Any, logs: dict[TP, Any], whole: list[TP]) -> None:
    """The records this run's scans read into the state's record index (a partition read whole replaces
    its records there): what a later run's content check reads of the records around the rows it checks."""
    import pyarrow as pa  # lazy: see docs/imports.md

    for tp, log in logs.items():
        rk = log.record_keys
        if rk is None:
            continue
        if tp in whole:
            con.execute("DELETE FROM records WHERE t = ? AND p = ?", list(tp))
        if not len(rk):
            continue
        n = len(rk)
        con.register("new_records", pa.table({
            "o": rk.offsets, "e": rk.epochs, "c": rk.control, "kh": pa.array(rk.keys, pa.uint64()),
            "vh": pa.array(rk.values, pa.uint64()) if rk.values is not None else pa.nulls(n, pa.uint64())}))
        con.execute("INSERT INTO records SELECT ?, ?, o, e, c, kh, vh FROM new_records", list(tp))
        con.unregister("new_records")


class _Checker:
    """The content check of each partition, from the state's key index and record index: only the rows
    from a cut below what is new (eosctl.rules.content.cut_at), the findings below the cut kept."""

    WINDOW = 64  # rows below the first new one looked at for a cut; 8x more each time none is there

    def __init__(self, con: Any, sink: Sink, logs: dict[TP, Any], prev: dict[TP, Content], whole: set[TP],
                 before: dict[TP, int]) -> None:
        self.con, self.sink, self.logs, self.prev, self.whole = con, sink, logs, prev, whole
        self.values = value_mode(sink) is not None
        self.value_name = _value_name(sink) if self.values else "value column"
        # Where each partition's records start being new: the scans' positions before this run.
        self.new_records = {tp: o for tp, o in before.items() if tp not in whole}
        self.kept: dict[TP, Content] = {}
        self.lowest_new = {(t, p): o for t, p, o in con.execute(
            "SELECT t, p, min(o) FROM fresh GROUP BY t, p").fetchall()}

    def check(self, tp: TP, islands: list[tuple[int, int, int]]) -> Content | None:
        """The partition's content findings and shifts (None: it has no row with a key)."""
        from eosctl.rules.content import MAX_SHIFT  # lazy: see docs/imports.md

        prev = self.prev.get(tp)
        log = self.logs[tp]
        if prev is not None and tp not in self.whole:
            lo = self.lowest_new.get(tp)
            if log.scanned_to > self.new_records[tp]:  # new records: the rows near them are judged again
                edge = self.new_records[tp] - MAX_SHIFT
                lo = edge if lo is None else min(lo, edge)
            if lo is None:  # nothing new here: the last verdict stands
                self.kept[tp] = prev
                return prev
            cut = self._cut(tp, lo)
            if cut is not None:
                got = self._suffix(tp, islands, prev, cut)
                if got is not None:
                    self.kept[tp] = got
                    return got
        got = self._whole(tp, islands)
        if got is not None:
            self.kept[tp] = got
        return got

    def _rows(self, tp: TP, lo: int | None, hi: int | None) -> tuple[Any, Any, Any]:
        """(offsets, keys as Arrow strings, value hashes or None) of the partition's rows in [lo, hi)."""
        import numpy as np  # lazy: see docs/imports.md

        where, args = self._where(tp, lo, hi)
        table = self.con.sql(f"SELECT o, k, vh FROM key_index WHERE {where}", params=args).to_arrow_table()
        vh = table.column(2).to_numpy(zero_copy_only=False).astype(np.uint64) if self.values else None
        return table.column(0).to_numpy().astype(np.int64), table.column(1).combine_chunks(), vh

    def _records(self, tp: TP, lo: int | None, hi: int | None) -> Any:
        """The records in [lo, hi) from the record index, in offset order (eosctl.cluster.recordkeys)."""
        import numpy as np  # lazy: see docs/imports.md

        from eosctl.cluster.recordkeys import RecordKeys  # lazy: see docs/imports.md

        where, args = self._where(tp, lo, hi)
        t = self.con.sql(f"SELECT o, e, c, kh, vh FROM records WHERE {where} ORDER BY o",
                         params=args).to_arrow_table()
        values = t.column(4).to_numpy(zero_copy_only=False).astype(np.uint64) if self.values else None
        return RecordKeys(t.column(0).to_numpy().astype(np.int64), t.column(1).to_numpy().astype(np.int32),
                          t.column(2).to_numpy(zero_copy_only=False).astype(bool),
                          t.column(3).to_numpy().astype(np.uint64), values)

    @staticmethod
    def _where(tp: TP, lo: int | None, hi: int | None) -> tuple[str, list[Any]]:
        where, args = "t = ? AND p = ?", [tp[0], tp[1]]
        if lo is not None:
            where, args = where + " AND o >= ?", [*args, lo]
        if hi is not None:
            where, args = where + " AND o < ?", [*args, hi]
        return where, args

    def _cut(self, tp: TP, lo: int) -> int | None:
        """The highest cut at or below ``lo`` (eosctl.rules.content.cut_at), widening the window of rows
        looked at below it; None where none is (then the whole partition is checked)."""
        from eosctl.cluster.recordkeys import hash_arrow  # lazy: see docs/imports.md
        from eosctl.rules.content import MAX_SHIFT, cut_at  # lazy: see docs/imports.md

        [(lowest,)] = self.con.execute("SELECT min(o) FROM key_index WHERE t = ? AND p = ?",
                                       list(tp)).fetchall()
        if lowest is None or lowest >= lo:
            return None
        window = self.WINDOW
        while True:
            start = max(lowest, lo - window)
            offsets, keys, vh = self._rows(tp, start, lo)
            if len(offsets):
                records = self._records(tp, start - MAX_SHIFT, lo + MAX_SHIFT + 1)
                log = replace(self.logs[tp], record_keys=records)
                cut = cut_at(log, offsets, hash_arrow(keys), vh)
                if cut is not None:
                    return cut
            if start <= lowest:
                return None
            window *= 8

    def _check(self, tp: TP, islands: list[tuple[int, int, int]], lo: int | None, **kw: Any) -> Any:
        from eosctl.cluster.recordkeys import hash_arrow  # lazy: see docs/imports.md
        from eosctl.rules.content import MAX_SHIFT, check_partition  # lazy: see docs/imports.md

        offsets, keys, vh = self._rows(tp, lo, None)
        if not len(offsets):
            return None
        log = self.logs[tp]
        if lo is not None or tp not in self.whole:  # a partition read whole has every record in its log
            log = replace(log, record_keys=self._records(tp, None if lo is None else lo - MAX_SHIFT, None))
        return check_partition(log, offsets, hash_arrow(keys), keys, islands, vh, self.value_name, **kw)

    def _whole(self, tp: TP, islands: list[tuple[int, int, int]]) -> Content | None:
        r = self._check(tp, islands, None)
        if r is None:
            return None
        return Content(r.findings, r.shifts, _judged(r), r.values_matched, r.matched)

    def _suffix(self, tp: TP, islands: list[tuple[int, int, int]], prev: Content, cut: int) -> Content | None:
        """The rows at ``cut`` and above checked, the findings below kept; None where the rows above show
        the partition comparable where the rows below did not (then every row is judged)."""
        seen = max((e for e, o in prev.matched.items() if o < cut), default=-1)
        r = self._check(tp, islands, cut, seen=seen, judged=prev.judged, values_judged=prev.values_judged)
        if r is None:  # no row at or above the cut: the rows below are all
            return Content(prev.findings, prev.shifts, prev.judged, prev.values_judged, prev.matched)
        if (not prev.judged and _judged(r)) or (self.values and not prev.values_judged and r.values_matched):
            return None
        # (a content finding always names its offsets)
        findings = sorted([*(f for f in prev.findings if f.first_offset is not None and f.first_offset < cut),
                           *r.findings],
                          key=lambda f: f.sort_key)
        shifts = [*(x for x in prev.shifts if x.first < cut), *r.shifts]
        matched = dict(prev.matched)
        for e, o in r.matched.items():
            matched[e] = min(o, matched.get(e, o))
        return Content(findings, shifts, prev.judged or _judged(r), prev.values_judged or r.values_matched,
                       matched)


def _judged(r: Any) -> bool:
    """Whether a check's rows showed the key column holds the records' keys (a row holding its record's
    key, or findings only a comparable partition has)."""
    from eosctl.rules.content import DIFFERENT_VALUE  # lazy: see docs/imports.md

    return bool(r.matched) or any(f.cause is None or f.cause.rule != DIFFERENT_VALUE for f in r.findings)


__all__ = ["DEFAULT_FULL_EVERY", "Content", "Run", "audit_incremental"]
