"""The content check inside an audit task (both engines): each sink row's key against its record's.

The task's scan read the records' keys with the batch headers (eosctl.cluster.logscan, ``keys=True``, or the
value mode where the sink names a value column); here one query reads the (offset, key[, value]) of the
sink rows of every partition the task reconciled, eosctl.rules.content judges each partition, and a partition
whose writer stored shifted offsets is reconciled again at the offsets its rows really hold: the gaps and
phantoms the shift made up go, the real ones stay.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from eosctl.base.arrowbuffers import to_numpy
from eosctl.cluster.model import TP, PartitionLog
from eosctl.report.findings import Finding, PartitionSummary
from eosctl.rules.rule import audit_partition

if TYPE_CHECKING:
    from auditors.plan import WorkItem
    from eosctl.sink import SinkReader

ALL_OFFSETS = (0, (1 << 63) - 1)


def sink_keys(reader: SinkReader, tps: Sequence[TP],
              together: Collection[TP] = ()) -> dict[TP, tuple[Any, Any, Any]]:
    """Per partition, the sink's rows with a key: (offsets as int64 numpy, keys as an Arrow array, values
    as an Arrow array or None where the sink names no value column). A reader with ``row_keys`` (DuckDB:
    files and tables) reads each partition's rows once as they are; the others answer the key rule's
    query over all offsets (distinct (key, offset) pairs). ``together``: partitions small enough for one
    query between them (``row_keys_in``: a query each cost more than their rows), as their islands were."""
    import pyarrow as pa  # lazy: see docs/imports.md

    got: dict[TP, list[Any]] = {}
    if hasattr(reader, "row_keys"):
        small = [tp for tp in tps if tp in together]
        if len(small) > 1 and hasattr(reader, "row_keys_in"):
            got.update(_together(reader.row_keys_in(small), small))
        for tp in tps:
            if tp not in got:
                got[tp] = [_key_first(b) for b in reader.row_keys(*tp)]
    else:
        for b in reader.committed_keys_in({tp: [ALL_OFFSETS] for tp in tps}):
            for tp, part in _by_partition(b):
                got.setdefault(tp, []).append(part.select([0, 3]))
    out = {}
    for tp, parts in got.items():
        if not parts:
            continue
        table = pa.Table.from_batches(parts)
        values = table.column(2).combine_chunks() if table.num_columns > 2 else None
        out[tp] = (to_numpy(table.column(1), "int64"),
                   _as_text(table.column(0).combine_chunks()), values)
    return out


def _key_first(batch: Any) -> Any:
    """A row_keys batch (offset, key[, value]) as (key, offset[, value])."""
    import pyarrow as pa  # lazy: see docs/imports.md

    return pa.RecordBatch.from_arrays([batch.column(1), batch.column(0), *batch.columns[2:3]],
                                      names=["key", "offset", "value"][:min(batch.num_columns, 3)])


def _together(table: Any, tps: Sequence[TP]) -> Iterator[tuple[TP, list[Any]]]:
    """Each partition's batches (key, offset[, value]) of a row_keys_in table (i, o, k[, v], sorted by i),
    cut where i changes; none for a partition without rows, as row_keys yields none."""
    import numpy as np  # lazy: see docs/imports.md

    place = to_numpy(table.column(0), "int64")
    cuts = np.searchsorted(place, np.arange(len(tps) + 1)).tolist()
    body = table.drop_columns(["i"])
    for n, tp in enumerate(tps):
        a, b = cuts[n], cuts[n + 1]
        yield tp, [_key_first(batch) for batch in body.slice(a, b - a).to_batches()] if b > a else []


def _as_text(keys: Any) -> Any:
    """The keys as an Arrow string array: text keys as they are (a cast imports pyarrow.compute, a cost
    docs/imports.md measures), others cast (an integer key's decimal text)."""
    import pyarrow as pa  # lazy: see docs/imports.md

    return keys if keys.type == pa.string() else keys.cast(pa.string())


def _by_partition(batch: Any) -> Any:
    """The rows of a (key, topic, partition, offset) batch per partition: sorted by partition once (numpy),
    then one slice per partition, no per-row Python."""
    # lazy: see docs/imports.md
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if not batch.num_rows:
        return
    topics = pc.dictionary_encode(batch.column(1).cast(pa.string()))
    names = topics.dictionary.to_pylist()
    code = (topics.indices.to_numpy(zero_copy_only=False).astype(np.int64) << 32) | \
        batch.column(2).to_numpy(zero_copy_only=False).astype(np.int64)
    order = np.argsort(code, kind="stable")
    code = code[order]
    edges = np.flatnonzero(np.diff(code)) + 1
    for a, b in zip([0, *edges.tolist()], [*edges.tolist(), len(code)], strict=True):
        c = int(code[a])
        yield (names[c >> 32], c & 0xFFFFFFFF), batch.take(pa.array(order[a:b]))


def with_content(reader: SinkReader, done: list[tuple[WorkItem, PartitionSummary, list[Finding]]],
                 logs: dict[TP, PartitionLog], islands: dict[TP, list[tuple[int, int, int]]],
                 group: str | None, together: Collection[TP] = ()
                 ) -> list[tuple[WorkItem, PartitionSummary, list[Finding]]]:
    """``done`` (each partition's summary and findings) with the content findings added, and the
    partitions with shifted rows reconciled again at the offsets they hold. ``together``: see sink_keys."""
    # lazy: see docs/imports.md
    from eosctl.cluster.recordkeys import hash_arrow
    from eosctl.rules.content import check_partition

    checked = [item.tp for item, _, _ in done if item.tp in islands and logs[item.tp].record_keys is not None]
    if not checked:
        return done
    rows = sink_keys(reader, checked, together)
    out = []
    for item, summary, findings in done:
        log = logs.get(item.tp)
        if item.tp not in rows or log is None:
            out.append((item, summary, findings))
            continue
        offsets, keys, values = rows[item.tp]
        value_hashes = None
        if values is not None and log.record_keys.values is not None:
            value_hashes = hash_arrow(values)
        result = check_partition(log, offsets, hash_arrow(keys), keys, islands[item.tp], value_hashes,
                                 _value_name(reader.sink))
        again = reconciled(item, log, islands[item.tp], result.shifts, result.findings, group,
                           reader.sink.dlq_topic)
        if again is not None:
            summary, findings = again
        out.append((item, summary, [*findings, *result.findings]))
    return out


def _value_name(sink: Any) -> str:
    """How a finding names the sink's value column."""
    if sink.value_column:
        return f"value column {sink.value_column!r}"
    return f"value hash column {sink.value_hash_column!r} (md5 hex of the value)"


def reconciled(item: WorkItem, log: PartitionLog, islands: list[tuple[int, int, int]], shifts: Sequence[Any],
               content: Sequence[Finding], group: str | None,
               dlq_topic: str | None = None) -> tuple[PartitionSummary, list[Finding]] | None:
    """The partition reconciled again (eosctl.rules.rule, as audit_group does) with the shifted rows at the
    offsets they hold, and each offset whose rows include another record's (``content``: the partition's
    content findings) held once, so no duplicate names it beside its content finding; None: no need."""
    # lazy: see docs/imports.md
    from eosctl.rules.content import once_at, other_record_spans, shifted_islands

    moved = shifted_islands(islands, shifts) if shifts else islands
    once = once_at(moved, other_record_spans(content))
    if not shifts and once is None:
        return None
    return audit_partition(item.topic, item.partition, log, moved if once is None else once,
                           expected_upto=item.expected_upto, check_offsets=item.check_offsets,
                           stored_offset=item.stored_offset, committed_offset=item.committed_offset,
                           group=group, window=item.window, dead_lettered=item.dead_lettered,
                           dlq_topic=dlq_topic, routed_out=item.routed_out)
