"""`eosctl explain`: everything eosctl knows about one offset, or a report's findings by root cause.

JSON shapes (`--format json`, stable): docs/json.md. Reads only: the sink first (a frozen copy), then
the partition's log, then the group's committed offset.

Exit status: 0 ok; 2 usage, config, connection or sink error.
"""

from __future__ import annotations

from typing import Any

import click

from eosctl.base.errors import ConfigError
from eosctl.commands.options import check_one_sink, duckdb_file, sink_of, sink_options, target_options
from eosctl.commands.report_cmd import load_audit
from eosctl.output.emit import emit
from eosctl.output.terminal import console

_ALL = (0, (1 << 63) - 1)  # every offset, for the rows with the same key


@click.command("explain")
@click.argument("source", required=False, metavar="[REPORT.json|SNAPSHOT.duckdb]", type=duckdb_file())
@target_options
@sink_options
@click.option("--partition", "-P", type=click.IntRange(min=0), help="Partition of the offset.")
@click.option("--offset", type=click.IntRange(min=0), help="The offset to explain.")
@click.option("--raw", is_flag=True, help="Show the record's key and value as bytes, not decoded through the "
                                          "cluster's schema_registry_url.")
def explain(source: str | None, config: str | None, pipeline: str | None, bootstrap: str | None,
            topics: tuple[str, ...], group: str | None, sink_duckdb: str | None, sink_parquet: str | None,
            sink_table: str | None, partition: int | None, offset: int | None, raw: bool, fmt: str) -> None:
    """Explain one offset, or the findings of an audit by their root causes.

    \b
    eosctl explain -c eosctl.toml --topic T --partition P --offset N
        its batch, producer id and epoch, transaction, outcome and marker, the producer's epoch
        history around it (fencing), the LSO and HW, the group's committed offset relative to it, and
        what the sink holds for it: rows, key, other offsets with the same key, and when the sink
        wrote them beside the record's timestamp (the sink's write_time_column); the record's key,
        value and headers, decoded through the cluster's schema_registry_url where framed (its
        subject, version and schema id; --raw: bytes)
    eosctl explain REPORT.json | SNAPSHOT.duckdb
        the audit's root causes, each with its findings and their causes
    """
    if source is not None and (partition is not None or offset is not None):
        if partition is None or offset is None or not _is_snapshot(source):
            raise click.UsageError("--partition and --offset go together, with a snapshot (SNAPSHOT.duckdb "
                                   "-P P --offset N) or the cluster; a report holds no log")
        doc = _offset_in_snapshot(source, topics, partition, offset)
        shown = None
        if fmt != "json":
            from eosctl.output.explain import offset_table  # lazy: see docs/imports.md

            shown = offset_table(doc)
    elif source is not None:
        doc, shown = _from_report(source, fmt)
    else:
        if partition is None or offset is None:
            raise click.UsageError("pass a report or snapshot to explain, or --partition P --offset N "
                                   "(with --topic T)")
        check_one_sink(sink_duckdb, sink_parquet)
        doc = _offset(config, pipeline, bootstrap, topics, group, sink_duckdb, sink_parquet, sink_table,
                      partition, offset, raw)
        if fmt != "json":
            from eosctl.output.explain import offset_table  # lazy: see docs/imports.md

            shown = offset_table(doc)
    emit(fmt, lambda: doc, lambda: console().print(shown))


def _is_snapshot(source: str) -> bool:
    with open(source, "rb") as f:
        return f.read(12)[8:12] == b"DUCK"  # DuckDB's magic bytes; a report is JSON


def _offset_in_snapshot(source: str, topics: tuple[str, ...], partition: int, offset: int) -> dict[str, Any]:
    """One offset explained from what a snapshot stored (its log scan, lag and committed offsets): the
    incident as it was, after retention has moved on."""
    # lazy: see docs/imports.md
    from eosctl.inspection.explain import Facts, offset_document
    from eosctl.inspection.snapshot import load_snapshot

    cap = load_snapshot(source)
    stored = sorted({t for t, p in cap.logs if p == partition and (not topics or t in topics)})
    if len(stored) != 1:
        known = ", ".join(f"{t}[{p}]" for t, p in sorted(cap.logs)) or "none"
        why = (f"several topics have partition {partition}; choose one with --topic" if stored
               else f"holds no log of partition {partition} (it holds: {known})")
        raise ConfigError(f"{source}: {why}")
    topic = stored[0]
    log = cap.logs[(topic, partition)]
    group = cap.group
    committed = next((r.committed for r in (cap.lag.partitions if cap.lag else [])
                      if (r.topic, r.partition) == (topic, partition) and r.group == group), None)
    when = cap.captured_at.isoformat(timespec="seconds")
    facts = Facts(log, offset, None, group, committed, None,
                  notes=[f"from the snapshot {source}, captured {when}"])
    return offset_document(facts)


def _from_report(source: str, fmt: str) -> tuple[dict[str, Any], Any]:
    # lazy: see docs/imports.md
    from eosctl.output.explain import report_document, report_table

    audit, context = load_audit(source)
    origin = context.origin or source
    # One of the two: a million findings as dicts is gigabytes, as table rows minutes.
    if fmt == "json":
        return report_document(audit, origin), None
    return {}, report_table(audit, origin)


def _offset(config: str | None, pipeline: str | None, bootstrap: str | None, topics: tuple[str, ...],
            group: str | None, sink_duckdb: str | None, sink_parquet: str | None, sink_table: str | None,
            partition: int, offset: int, raw: bool = False) -> dict[str, Any]:
    # lazy: see docs/imports.md
    from eosctl.cluster.logscan import scan_partition
    from eosctl.cluster.wire import WireClient
    from eosctl.config.target import one_topic, resolve
    from eosctl.inspection.explain import Facts, offset_document

    target = resolve(config, pipeline, bootstrap, topics, group, need_topics=True)
    topic = one_topic(target)
    hop = _hop_reading(target, topic)
    if hop is not None:  # a pipeline hop by hop: the hop that reads the topic has its sink and group
        target = resolve(config, hop, bootstrap, (topic,), group, need_topics=True)
    sink_at = state = None
    if (target.pipeline and target.pipeline.sink) or sink_duckdb or sink_parquet:
        sink, where = sink_of(target, sink_duckdb, sink_parquet, sink_table)
        if sink.mode != "offsets":  # a state sink has no rows at offsets: its audit's findings here
            state = _state_at(target, sink, topic, partition, offset)
        else:
            sink_at = _sink_at(sink, where, topic, partition, offset)  # the sink first, then Kafka
    with WireClient(target.cluster) as client:
        client.leader(topic, partition)  # a missing topic or partition is one clear line
        log = scan_partition(client, topic, partition)
        from eosctl.txn.producerids import read_one  # lazy: see docs/imports.md

        read_one(client, log)
        batch = None
        if log.log_start_offset <= offset < log.high_watermark:
            window = scan_partition(client, topic, partition, offset, offset + 1, keep_batches=True)
            batch = next((b for b in window.batches or [] if b.base_offset <= offset <= b.last_offset), None)
        record = None
        if batch is not None and not batch.is_control:
            record = _record(client, target.cluster, topic, partition, offset, raw, log)
    committed = None
    if target.group:
        from eosctl.cluster.offsets import committed_offsets  # lazy: see docs/imports.md

        committed = committed_offsets(target.cluster, target.group).get((topic, partition))
    replica = None
    # lazy: only for a replica pipeline; see docs/imports.md
    from eosctl.inspection.failover import at_offset, replica_sink

    mirror = replica_sink(target.pipeline.sink if target.pipeline else None)
    if mirror is not None:
        replica = at_offset(mirror, partition, offset, [target.group] if target.group else None)
    return offset_document(Facts(log, offset, batch, target.group, committed, sink_at, replica=replica,
                                 state=state, record=record))


def _record(client: Any, cluster: Any, topic: str, partition: int, offset: int, raw: bool,
            log: Any) -> dict[str, Any] | None:
    """The record at ``offset``, its key and value decoded where the cluster names a registry."""
    # lazy: the registry client, fastavro, protobuf, jsonschema; see docs/imports.md
    from eosctl.cluster.records import read_records
    from eosctl.cluster.schemas import SchemaDecoder, registry_of
    from eosctl.inspection.records import record_document

    found = read_records(client, topic, partition, offset, offset + 1)
    if not found:
        return None  # removed by compaction
    settings = None if raw else registry_of(cluster)
    kind = log.kind_at(offset)
    return record_document(topic, partition, found[0], None if settings is None else SchemaDecoder(settings),
                           None if kind is None else kind.value)


def _hop_reading(target: Any, topic: str) -> str | None:
    """The hop of a pipeline audited hop by hop that reads ``topic`` (None: not such a pipeline, or no one
    hop reads it)."""
    pipe, cfg = target.pipeline, target.config
    if pipe is None or cfg is None or not pipe.hops:
        return None
    readers = [h for h in pipe.hops if topic in cfg.pipelines[h].source_topics]
    return readers[0] if len(readers) == 1 else None


def _state_at(target: Any, sink: Any, topic: str, partition: int, offset: int) -> dict[str, Any]:
    """A state sink's audit findings whose offsets include this one (the record the row holds, the one it
    should hold, or those a fold's difference is explained by)."""
    from auditors.state import audit_state  # lazy: see docs/imports.md
    from eosctl.sink import shown  # lazy: see docs/imports.md

    report = audit_state(target, sink)
    here = []
    for f in report.findings:
        if f.topic != topic or f.partition != partition or f.first_offset is None or f.last_offset is None:
            continue
        offsets = f.offsets if f.offsets is not None else range(f.first_offset, f.last_offset + 1)
        if offset in offsets:
            here.append({"kind": f.kind, "key": f.key, "detail": f.detail,
                         "cause": f.cause.summary if f.cause is not None else None})
    return {"sink": shown(sink), "mode": sink.mode, "findings": here}


def _sink_at(sink: Any, where: str, topic: str, partition: int, offset: int) -> Any:
    # lazy: see docs/imports.md
    from eosctl.inspection.explain import SinkAt
    from eosctl.sink import frozen, open_reader, shown

    with frozen(sink, where) as fixed, open_reader(fixed, where) as reader:
        rows = next((isl.multiplicity for isl in reader.islands(topic, partition)
                     if isl.first <= offset <= isl.last), 0)
        keys: tuple[str, ...] = ()
        same: list[tuple[str, int, int]] = []
        if fixed.key_column and rows:
            keys = tuple(dict.fromkeys(k for b in reader.committed_keys(topic, partition, [(offset, offset)])
                                       for k in b.column(0).to_pylist() if k is not None))
            # lazy: see docs/imports.md
            import pyarrow as pa
            import pyarrow.compute as pc

            wanted = pa.array(keys, pa.string())
            for t, p in sorted(tp for tp in reader.partitions() if tp[0] == topic):
                for b in reader.committed_keys(t, p, [_ALL]):
                    # Filtered in Arrow: only the matching rows become Python objects.
                    hit = b.filter(pc.is_in(b.column(0).cast(pa.string()), value_set=wanted))
                    same += [(t, p, o) for o in hit.column(1).to_pylist() if (t, p, o) != (topic, partition,
                                                                                             offset)]
        stored = next((s.next_offset for s in reader.stored_offsets() or []
                       if (s.topic, s.partition) == (topic, partition)), None)
        written = tuple(reader.write_times(topic, partition, offset)) if rows else ()
    return SinkAt(rows, keys, tuple(sorted(same)), stored, shown(sink), sink.key_column,
                  sink.write_time_column, written)


COMMANDS = [explain]
