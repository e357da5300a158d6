"""The decoded content check inside an audit task (both engines): each sink row's typed columns against
the fields of its record, decoded through the cluster's Schema Registry (eosctl.rules.fields).

On by default wherever it can be: the pipeline's cluster names a ``schema_registry_url``, the sink is read
with SQL (eosctl.sink.relation: DuckDB files, Parquet, PostgreSQL), the partition's records are framed,
and a mapping resolves (the sink's ``fields``, or its columns named like the value's top-level fields and
its key column to a framed key). Each partition is checked column by column where auditors.fieldfast
can (Avro values, columns it has a converter for: the same findings at a fraction of the cost), else
record by record here: the records read whole (eosctl.cluster.records) around the rows' offsets, a
record decode and a value-by-value comparison a row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from auditors import fieldfast
from auditors.contentcheck import reconciled
from auditors.fieldfast import PROBE_RECORDS
from eosctl.cluster.model import TP, Kind, PartitionLog
from eosctl.report.findings import Finding, PartitionSummary
from eosctl.rules.fields import (
    MAX_SHIFT,
    SHIFTED,
    Fields,
    Tolerances,
    check_fields,
    default_mapping,
    unframed_findings,
)

if TYPE_CHECKING:
    from auditors.plan import WorkItem
    from eosctl.cluster.schemas import SchemaDecoder
    from eosctl.sink import SinkReader


def applies(reader: SinkReader, source: Any) -> bool:
    """Whether the task can run the decoded check: a registry, and a sink whose columns it can read."""
    cluster = getattr(source, "cluster", None)
    return getattr(cluster, "schema_registry_url", None) is not None and hasattr(reader, "row_fields")


def with_fields(reader: Any, done: list[tuple[WorkItem, PartitionSummary, list[Finding]]],
                logs: dict[TP, PartitionLog], source: Any, islands: dict[TP, list[tuple[int, int, int]]],
                group: str | None) -> list[tuple[WorkItem, PartitionSummary, list[Finding]]]:
    """``done`` with the decoded content findings of each partition added; a partition whose writer
    stored shifted offsets is reconciled again at the offsets its rows hold (as auditors.contentcheck)."""
    # lazy: only a task whose cluster names a registry needs them; see docs/imports.md
    from eosctl.cluster.schemas import SchemaDecoder, registry_of
    from eosctl.cluster.wire import WireClient
    from eosctl.rules.content import Shift

    sink = reader.sink
    settings = registry_of(source.cluster)
    assert settings is not None
    decoder = SchemaDecoder(settings)
    plain: dict[int, Any] = {}  # schema id -> its plain reading (auditors.fieldfast), for every partition
    tol = Tolerances(sink.float_tolerance, sink.timestamp_precision)
    coordinates = {sink.topic_column.lower(), sink.partition_column.lower(), sink.offset_column.lower()}
    columns = [c for c in reader.columns() if c.lower() not in coordinates]
    out = []
    with WireClient(source.cluster) as client:
        for item, summary, findings in done:
            log = logs.get(item.tp)
            if log is None:
                out.append((item, summary, findings))
                continue
            found = fieldfast.partition(reader, client, decoder, log, item.tp, columns, tol, plain)
            if found is None:
                found = _partition(reader, client, decoder, log, item.tp, columns, tol)
            shifts = [Shift(f.first_offset, f.last_offset, f.cause.shift) for f in found
                      if f.cause is not None and f.cause.rule == SHIFTED and f.first_offset is not None
                      and f.last_offset is not None and f.cause.shift is not None]
            if shifts and item.tp in islands:
                again = reconciled(item, log, islands[item.tp], shifts, found, group, sink.dlq_topic)
                if again is not None:
                    summary, findings = again
            out.append((item, summary, [*findings, *found]))
    return out


def _partition(reader: Any, client: Any, decoder: SchemaDecoder, log: PartitionLog, tp: TP,
               columns: Sequence[str], tol: Tolerances) -> list[Finding]:
    # lazy: only a registry's tasks; see docs/imports.md
    from eosctl.cluster.records import read_records
    from eosctl.cluster.schemas import KEY, VALUE, Decoded, Undecodable, Unframed

    topic, partition = tp
    sink = reader.sink
    configured = dict(sink.fields) if sink.fields is not None else None
    wanted = list(configured) if configured is not None else list(columns)
    if not wanted:
        return []
    rows = reader.row_fields(topic, partition, wanted)
    if not rows:
        return []
    lo = max(log.log_start_offset, rows[0][0] - MAX_SHIFT)
    hi = min(log.high_watermark, rows[-1][0] + MAX_SHIFT + 1)
    records: dict[int, Fields] = {}
    unframed: list[tuple[int, str]] = []
    framed = 0
    # A topic that is not in the wire format (plain JSON, strings) on a cluster with a registry is told by
    # its first records: the rest is not read.
    probe_end = min(hi, lo + PROBE_RECORDS)
    probe = read_records(client, topic, partition, lo, probe_end) if lo < hi else []
    if not any(isinstance(decoder.decode(topic, VALUE, r.value, r.headers), Decoded) for r in probe):
        return []
    rest = read_records(client, topic, partition, probe_end, hi) if probe_end < hi else []
    for r in [*probe, *rest]:
        if log.kind_at(r.offset) is not Kind.DATA:
            continue  # aborted or open: the offset rules judge a row there
        where = f"{topic}-{partition} offset {r.offset}"
        value = decoder.decode(topic, VALUE, r.value, r.headers, where)
        if isinstance(value, Unframed | Undecodable):
            unframed.append((r.offset, value.why if isinstance(value, Unframed) else
                             f"framed as {value.format}, does not decode: {value.why}"))
            continue
        framed += value is not None
        key = decoder.decode(topic, KEY, r.key, r.headers, where)
        records[r.offset] = Fields(key.data if isinstance(key, Decoded) else r.key,
                                   value.data if isinstance(value, Decoded) else None)
    if not framed:
        return []  # not a Schema Registry topic (or only tombstones): nothing to compare with
    mapping = configured
    if mapping is None:
        sample = next(f for f in records.values() if f.value is not None)
        framed_key = next((f for f in records.values() if not isinstance(f.key, bytes | type(None))), None)
        if framed_key is None:
            mapping = default_mapping(columns, sample)
        else:
            mapping = default_mapping(columns, Fields(framed_key.key, sample.value), sink.key_column)
        if not mapping:
            return []
    rows = [(o, cols) for o, cols in rows if o in records or all(u[0] != o for u in unframed)]
    return [*unframed_findings(topic, partition, unframed),
            *check_fields(topic, partition, rows, records, mapping, tol)]
