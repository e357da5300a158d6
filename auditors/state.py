"""The audit of a state sink: a table keyed by the record's key, judged against the latest committed record
per key (``mode = "upsert"``, eosctl.rules.upsert) or the fold of its committed records (``mode =
"aggregate"``, eosctl.rules.aggregate).

The sink is read first, from one frozen copy (eosctl.sink.freeze), then Kafka: each source partition's log
classified (committed, aborted, open: eosctl.cluster.logscan), and its records' keys and values read by a
read_uncommitted consumer from the log start to the high watermark, each record told by the classification.
The read point below which committed records are settled is the sink group's committed offset where the
pipeline names a group, else the last stable offset. The local engine judges in this process (one pass over
the log and one over the table); Spark reads the records in executors and judges each key where its records
and rows meet (auditors.state_spark), by the same rule: the same findings.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import replace
from functools import partial
from typing import Any

from auditors import guard
from auditors.engine import (
    AUTO,
    EngineOptions,
    _start_spark,
    _stop_spark,
    engine_facts,
    pick_by_offsets,
    spark_info,
)
from auditors.state_spark import run_state_spark, sink_rows
from auditors.statecols import (
    History,
    Verdict,
    arrow_row_table,
    judge_tables,
    latest_records,
    lazy_values,
    raw_row_table,
    record_table,
    row_table,
    scanned_table,
    with_values,
)
from eosctl.base.errors import BrokerError, ConfigError
from eosctl.base.progress import Progress, Step, silent
from eosctl.cluster.logscan import open_scans, run_scans, scan_partitions
from eosctl.cluster.model import TP, Kind, PartitionLog
from eosctl.cluster.offsets import committed_offsets
from eosctl.cluster.wire import WireClient
from eosctl.config.model import Cluster, Sink
from eosctl.report.findings import ABORTED, COMMITTED, KINDS, OPEN, AuditReport, PartitionSummary
from eosctl.report.readpoint import ReadPoint
from eosctl.rules import aggregate
from eosctl.rules import stateids as ids
from eosctl.rules import timewindows as tw
from eosctl.rules.upsert import Judged, StateRecord, StateRow, judge
from eosctl.sink import frozen, shown
from eosctl.sink.kafka_topic import records
from eosctl.sink.state import read_rows, topic_rows, unsupported

PHASE_SINK = "reading the state sink"
PHASE_LOG = "reading the source topics' records"
PHASE_JUDGE = "judging each key's records and rows on Spark"
_STATUS = {Kind.DATA: COMMITTED, Kind.ABORTED: ABORTED, Kind.OPEN: OPEN}


def audit_state(target: Any, sink: Sink, *, progress: Progress = silent, fail_on: tuple[str, ...] = KINDS,
                started: float | None = None, options: EngineOptions | None = None) -> AuditReport:
    """The report of a state sink against the target's cluster, topics and (its read point) group, on the
    engine ``options`` name (none: this process)."""
    t_start = started if started is not None else time.monotonic()
    problem = unsupported(sink)
    if problem is not None:
        raise ConfigError(problem)
    offsets_only = [k for k in ("retention", "dlq_topic", "route") if getattr(sink, k, None) is not None]
    if offsets_only:
        raise ConfigError(f"{offsets_only[0]} judges a sink of offsets; a state sink (mode = {sink.mode!r}) "
                          f"has none: remove it")
    keys, values = ids.key_columns(sink), ids.value_columns(sink)
    fold = sink.aggregate if sink.mode == "aggregate" else None
    win = fold if fold is not None and fold.window_column and fold.window_ms else None
    if win is not None and sink.kafka_topic is not None:
        raise ConfigError("a windowed aggregate (aggregate.window_column) is read from a table; a "
                          "kafka_topic sink's windowed keys are not read yet: remove window_column and "
                          "window")
    if options is not None and options.engine == AUTO:
        # Nobody chose: by the source's offsets, as an offsets sink's audit picks (auditors.engine.pick).
        from auditors.sources import KafkaSource  # lazy: see docs/imports.md

        survey = KafkaSource(target.cluster).survey(target.topics)
        chosen, why = pick_by_offsets(sum(p.high_watermark - p.log_start
                                          for parts in survey.values() for p in parts.values()))
        if options.on_pick is not None:
            options.on_pick(chosen, why)
        options = replace(options, engine=chosen)
    if win is None and (options is None or options.engine != "spark"):
        # In this process, column by column (auditors.statecols): the same findings, no object a record.
        return audit_columns(target, sink, progress=progress, fail_on=fail_on, started=t_start)
    key_key = "key_fields" if sink.key_fields else "key_column"
    value_key = ("aggregate.column" if sink.mode == "aggregate" else "value_fields" if sink.value_fields
                 else "value_column" if sink.value_column else "value_hash_column")
    progress(Step(PHASE_SINK))
    t = time.monotonic()
    if sink.kafka_topic is not None:  # a compacted topic: its records, keyed and valued as the source's
        pairs, point = topic_rows(sink)
        rows = [_topic_row(sink, k, v, values) for k, v in pairs]
    else:
        version = [(sink.version_column, "version_column")] if sink.version_column else []
        window = [(win.window_column, "aggregate.window_column")] if win and win.window_column else []
        with frozen(sink) as fixed:
            raw, point = read_rows(fixed, [(c, key_key) for c in keys] + window
                                   + [(c, value_key) for c in values] + version)
        hashed = bool(sink.value_hash_column) and not sink.value_fields and sink.mode == "upsert"
        rows = [_row(r[:len(r) - len(version)], len(keys), values, hashed, _int(r[-1]) if version else None,
                     bool(window)) for r in raw]
    progress(Step(PHASE_LOG))
    logs = scan_logs(target.cluster, target.topics)
    bounds = read_point(target.cluster, target.group, logs)
    prepare_s = time.monotonic() - t
    topic = target.topics[0] if len(target.topics) == 1 else None

    def shown_key(k: Any) -> str:
        if win is None:
            return ids.key_text(keys, k)
        # A windowed fold's key: the record's key and the window (its start, the last element).
        start = None if k[-1] is None else int(k[-1])
        window = "none" if start is None else tw.shown_window(start, win.window_ms or 0)
        return f"{ids.key_text(keys, k[:-1])} in window {window}"

    def judged_by_rule(records: list[StateRecord], rows: list[StateRow]) -> Judged:
        if fold is not None:
            return aggregate.judge(records, rows, bounds, fold.fn, field=fold.field, shown_key=shown_key,
                                   topic=topic)
        return judge(records, rows, bounds, shown_key=shown_key, topic=topic)

    if options is not None and options.engine == "spark":
        judged, per_tp, info, tasks, startup = _on_spark(options, target.cluster, sink, logs, rows,
                                                         judged_by_rule, progress)
    else:
        records = list(state_records(sink, logs, read_records(target.cluster, logs)))
        judged, per_tp = judged_by_rule(records, rows), sink_rows(records, rows)
        info, tasks, startup = {"name": "local", "workers": 1}, len(logs), 0.0
    summaries = [PartitionSummary(t, p, log.log_start_offset, log.last_stable_offset, log.high_watermark,
                                  judged.expected_keys.get((t, p), 0), per_tp.get((t, p), 0))
                 for (t, p), log in logs.items()]
    progress(Step("done", 1, 1))
    engine = engine_facts(info, tasks, prepare_s, startup, {})
    return AuditReport.build(summaries, judged.findings, fail_on, sink=f"{shown(sink)} ({sink.table})",
                             sink_read_point=point, group=target.group, engine=engine,
                             elapsed_seconds=time.monotonic() - t_start)


def audit_columns(target: Any, sink: Sink, *, progress: Progress = silent, fail_on: tuple[str, ...] = KINDS,
                  started: float | None = None) -> AuditReport:
    """The report of a state sink (no window column) judged in this process column by column
    (auditors.statebytes, auditors.statecols)."""
    t_start = started if started is not None else time.monotonic()
    check_state_sink(sink)
    progress(Step(PHASE_SINK))
    t = time.monotonic()
    rows, point = state_rows(sink)
    progress(Step(PHASE_LOG))
    logs, scanned = scan_with_records(target.cluster, target.topics)
    # An upsert sink's values are read for each key's latest records and the histories judged only.
    lazy = scanned is not None and lazy_values(sink)
    if scanned is not None:  # the records from the scan's own answers (auditors.statebytes)
        recs = scanned_table(sink, logs, scanned, raw=lazy)
    else:
        recs = record_table(sink, logs, read_records(target.cluster, logs))
    bounds = read_point(target.cluster, target.group, logs)
    latest = latest_records(sink, recs, bounds)
    if lazy and latest is not None:
        latest = with_values(sink, latest)
    prepare_s = time.monotonic() - t
    import duckdb  # lazy: see docs/imports.md

    from eosctl.sink.relation import NO_EXTENSION_DOWNLOADS  # lazy: see docs/imports.md

    with duckdb.connect(config=NO_EXTENSION_DOWNLOADS) as con:
        con.register("recs", recs)
        con.register("state_rows_now", rows)
        if latest is not None:
            con.register("recs_latest", latest)
        verdict = judge_tables(con, sink, logs, bounds, recs="recs", rows="state_rows_now",
                               topic=only_topic(target), latest="recs_latest" if latest is not None else None,
                               history=History(sink, "recs") if lazy else None)
    progress(Step("done", 1, 1))
    engine = engine_facts({"name": "local", "workers": 1}, len(logs), prepare_s, 0.0, {})
    return state_report(target, sink, logs, verdict, point, engine, fail_on, t_start)


def check_state_sink(sink: Sink) -> None:
    """One line (exit 2) where a state sink's config asks what a state audit cannot judge."""
    problem = unsupported(sink)
    if problem is not None:
        raise ConfigError(problem)
    offsets_only = [k for k in ("retention", "dlq_topic", "route") if getattr(sink, k, None) is not None]
    if offsets_only:
        raise ConfigError(f"{offsets_only[0]} judges a sink of offsets; a state sink (mode = {sink.mode!r}) "
                          f"has none: remove it")


def only_topic(target: Any) -> str | None:
    """The topic an unknown key is told under: the pipeline's only one, else none."""
    return target.topics[0] if len(target.topics) == 1 else None


def state_rows(sink: Sink) -> tuple[Any, ReadPoint]:
    """The state sink's rows as columns (auditors.statecols: k0.., v0.., ver) and its read point: a table
    read from one frozen copy, or a compacted topic's latest record per key."""
    keys, values = ids.key_columns(sink), ids.value_columns(sink)
    key_key = "key_fields" if sink.key_fields else "key_column"
    value_key = ("aggregate.column" if sink.mode == "aggregate" else "value_fields" if sink.value_fields
                 else "value_column" if sink.value_column else "value_hash_column")
    if sink.kafka_topic is not None:  # a compacted topic: its records, keyed and valued as the source's
        pairs, point = topic_rows(sink)
        return row_table(sink, [_topic_row(sink, k, v, values) for k, v in pairs]), point
    version = [(sink.version_column, "version_column")] if sink.version_column else []
    with frozen(sink) as fixed:
        columns = [(c, key_key) for c in keys] + [(c, value_key) for c in values] + version
        raw, point = read_rows(fixed, columns, arrow=True)
    if not isinstance(raw, list):  # an Arrow table: its columns canonical column by column
        table = arrow_row_table(sink, raw, bool(version))
        if table is not None:
            return table, point
        with frozen(sink) as fixed:  # a column of a type only Python's canon spells: read as tuples
            raw, point = read_rows(fixed, columns)
    return raw_row_table(sink, raw, bool(version)), point


def state_report(target: Any, sink: Sink, logs: Mapping[TP, PartitionLog], verdict: Verdict, point: ReadPoint,
                 engine: dict[str, Any], fail_on: tuple[str, ...], t_start: float) -> AuditReport:
    """The audit's report: each source partition's summary (its expected keys and the rows of keys last
    written there) and the findings."""
    summaries = [PartitionSummary(t, p, log.log_start_offset, log.last_stable_offset, log.high_watermark,
                                  verdict.expected_keys.get((t, p), 0), verdict.sink_rows.get((t, p), 0))
                 for (t, p), log in logs.items()]
    return AuditReport.build(summaries, verdict.findings, fail_on, sink=f"{shown(sink)} ({sink.table})",
                             sink_read_point=point, group=target.group, engine=engine,
                             elapsed_seconds=time.monotonic() - t_start)


def _on_spark(options: EngineOptions, cluster: Cluster, sink: Sink, logs: Mapping[TP, PartitionLog],
              rows: list[StateRow], rule: Any, progress: Progress
              ) -> tuple[Judged, dict[TP, int], dict[str, Any], int, float]:
    """The judged rows on Spark (auditors.state_spark), in a session started for it or the one this
    process runs; whatever it started is gone after (auditors.engine's start and stop)."""
    with guard.Owned() as owned:
        progress(Step(f"starting {options.where()}"))
        t = time.monotonic()
        spark, mine = _start_spark(options, owned.dir)
        startup = time.monotonic() - t
        ok = False
        try:
            progress(Step(PHASE_JUDGE))
            read = partial(partition_records, cluster, sink)
            judged, per_tp, tasks = run_state_spark(spark, read, logs, rows, rule)
            info = spark_info(spark)
            ok = True
        finally:
            _stop_spark(spark, mine, ok)
    return judged, per_tp, info, tasks, startup


def _row(r: tuple, nkeys: int, values: tuple[str, ...], hashed: bool, version: int | None,
         windowed: bool = False) -> StateRow:
    key = ids.row_tuple(r[:nkeys])
    if windowed:  # the key and its window's start in ms (eosctl.rules.timewindows), as records are keyed
        start = tw.window_ms(r[nkeys])
        key, nkeys = (*key, None if start is None else str(start)), nkeys + 1
    value = ids.row_tuple(r[nkeys:], hashed) if values else None
    return StateRow(key, value, ids.value_text(values, value) if values else "a row (values not compared)",
                    version)


def _int(v: Any) -> int | None:
    """A version column's value as an offset; None where it holds none (NULL, text that is no integer)."""
    try:
        return None if v is None or isinstance(v, bool) else int(v)
    except (TypeError, ValueError):
        return None


def _topic_row(sink: Sink, key: bytes | None, value: bytes | None, values: tuple[str, ...]) -> StateRow:
    cache: dict[str, Any] = {}
    if sink.mode == "aggregate":
        fold = ids.topic_fold(sink, key, value)
        return StateRow(ids.record_key(sink, key, value, cache), fold, ids.value_text(values, fold))
    v = ids.record_value(sink, key, value, cache)
    return StateRow(ids.record_key(sink, key, value, cache), v,
                    ids.value_text(values, v) if v is not None else "a record (values not compared)")


def scan_logs(cluster: Cluster, topics: Iterable[str]) -> dict[TP, PartitionLog]:
    """Each source partition's log, classified from its start to its high watermark."""
    with WireClient(cluster) as client:
        meta = client.metadata(topics)
        tps = [(t, p) for t in topics for p in sorted(meta.get(t, {}))]
        logs = scan_partitions(client, tps)
    for tp, log in logs.items():
        if log.offsets_disagreement:  # never a verdict on offsets the broker itself contradicts
            raise BrokerError(f"cannot audit {tp[0]}-{tp[1]}: {log.offsets_disagreement}")
    return logs


def scan_with_records(cluster: Cluster, topics: Iterable[str], records: bool = True
                      ) -> tuple[dict[TP, PartitionLog], dict[TP, Any] | None]:
    """Each source partition's log, classified from its start to its high watermark; with ``records``
    and the native walker built, each partition's records too (auditors.statebytes: offsets, timestamps,
    keys, values), else None (a consumer reads them: read_records)."""
    from auditors import statebytes  # lazy: see docs/imports.md

    with WireClient(cluster) as client:
        meta = client.metadata(topics)
        tps = [(t, p) for t in topics for p in sorted(meta.get(t, {}))]
        scans = open_scans(client, tps)
        if records and statebytes.available():
            for s in scans.values():
                s.keys = statebytes.RecordBytes(s.start, s.end)
        run_scans(client, scans)
        logs = {tp: s.finish() for tp, s in scans.items()}
    scanned = None
    if records and statebytes.available():
        scanned = {tp: log.record_keys for tp, log in logs.items()}
        for log in logs.values():
            log.record_keys = None
    for tp, log in logs.items():
        if log.offsets_disagreement:  # never a verdict on offsets the broker itself contradicts
            raise BrokerError(f"cannot audit {tp[0]}-{tp[1]}: {log.offsets_disagreement}")
    return logs, scanned


def read_records(cluster: Cluster, logs: Mapping[TP, PartitionLog]) -> Iterable[Any]:
    """The data records below each log's high watermark, as a read_uncommitted consumer gets them."""
    return records(cluster, {tp: log.high_watermark for tp, log in logs.items()}, read_committed=False,
                   what="the source topics")


def state_records(sink: Sink, logs: Mapping[TP, PartitionLog],
                  messages: Iterable[Any]) -> Iterable[StateRecord]:
    """Each message as the sink keys and values it, with its transaction's outcome from the log."""
    markers: dict[tuple[TP, int], list[tuple[int, int, int | None]]] = {}
    for tp, part_log in logs.items():
        for x in part_log.transactions:
            span = (x.first_offset, x.last_offset, x.marker_offset)
            markers.setdefault((tp, x.producer_id), []).append(span)
    values = ids.value_columns(sink)
    fold = sink.aggregate if sink.mode == "aggregate" else None
    win = fold if fold is not None and fold.window_column and fold.window_ms else None
    for m in messages:
        tp, offset = (m.topic(), m.partition()), m.offset()
        log = logs.get(tp)
        rng = log.range_at(offset) if log is not None else None
        status = _STATUS.get(rng.kind) if rng is not None else None
        if rng is None or status is None:
            continue
        key, value = m.key(), m.value()
        cache: dict[str, Any] = {}
        k = ids.record_key(sink, key, value, cache)
        if all(part is None for part in k):
            continue  # no key to keep state by
        v = ids.record_value(sink, key, value, cache)
        delete = ids.is_delete(sink, value, cache)
        marker = next((mk for first, last, mk in markers.get((tp, rng.producer_id), ())
                       if first <= offset <= last), None) if status != COMMITTED else None
        shown = "null" if value is None else ids.value_text(values, v) if v is not None else ids.shown(value)
        record = StateRecord(tp[0], tp[1], offset, k, v, delete, shown, status, m.timestamp()[1],
                             rng.producer_id, rng.producer_epoch, marker)
        if win is None:
            yield record
            continue
        # A windowed fold: the record once in each window its timestamp falls in, keyed by key and window.
        for start in tw.window_starts(record.timestamp, win.window_ms or 1, win.advance_ms or 1):
            yield replace(record, key=(*k, str(start)))


def partition_records(cluster: Cluster, sink: Sink, tp: TP, log: PartitionLog) -> Iterable[StateRecord]:
    """One partition's records as the sink keys and values them (a Spark task's: auditors.state_spark)."""
    return state_records(sink, {tp: log}, read_records(cluster, {tp: log}))


def read_point(cluster: Cluster, group: str | None, logs: Mapping[TP, PartitionLog]) -> dict[TP, int]:
    """Per partition, the offset below which committed records are settled: the sink group's committed
    offset (none committed: nothing is settled), else the last stable offset."""
    if group is None:
        return {tp: log.last_stable_offset for tp, log in logs.items()}
    committed = committed_offsets(cluster, group)
    return {tp: min(committed.get(tp, 0), log.last_stable_offset) for tp, log in logs.items()}
