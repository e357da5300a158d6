"""A state sink's audit on Spark (``--engine spark``): one job whose first stage reads each source
partition's records in an executor (a read_uncommitted consumer, each record told by the driver's log scan,
keyed and valued as the sink holds them: auditors.state.state_records), and whose shuffle by key brings
each key's records and the sink's rows of that key to one task, which judges its keys with the local
engine's own rule (eosctl.rules.upsert or .aggregate): the same findings, computed where the data is.

The judge is per key (a key's records and rows decide its findings alone), so a task judges its share of
the keys with one call. What a task found leaves it pickled: findings are dataclasses of this code, which
the driver and the executors run the same version of (local mode, or the shipped code zip).
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from typing import Any

from auditors.spark_job import _collect
from auditors.spark_sink import spark_slots
from eosctl.cluster.model import TP, PartitionLog
from eosctl.report.findings import Finding
from eosctl.rules.upsert import Judged, StateRecord, StateRow

# One schema for both sides of the shuffle: a record of the log (side "r") or a row of the sink ("s").
_FIELDS = (("side", "string"), ("gkey", "string"), ("topic", "string"), ("partition", "int"),
           ("offset", "long"), ("value", "string"), ("delete", "boolean"), ("shown", "string"),
           ("status", "string"), ("timestamp", "long"), ("producer_id", "long"), ("producer_epoch", "int"),
           ("marker_offset", "long"), ("version", "long"))
SCHEMA = ", ".join(f"{n} {t}" for n, t in _FIELDS)
OUT = "judged binary"


# A state rule over some keys' records and rows (auditors.state: upsert or aggregate).
Rule = Callable[[list[StateRecord], list[StateRow]], Judged]


def _text(t: tuple[str | None, ...] | None) -> str | None:
    return None if t is None else json.dumps(list(t), ensure_ascii=False)


def _tuple(s: str | None) -> tuple[str | None, ...] | None:
    return None if s is None else tuple(json.loads(s))


def record_columns(records: Iterable[StateRecord]) -> dict[str, list]:
    cols: dict[str, list] = {n: [] for n, _ in _FIELDS}
    for r in records:
        for n, v in zip(cols, ("r", _text(r.key), r.topic, r.partition, r.offset, _text(r.value), r.delete,
                               r.shown, r.status, r.timestamp, r.producer_id, r.producer_epoch,
                               r.marker_offset, None), strict=True):
            cols[n].append(v)
    return cols


def row_columns(rows: list[StateRow]) -> dict[str, list]:
    cols: dict[str, list] = {n: [None] * len(rows) for n, _ in _FIELDS}
    cols["side"] = ["s"] * len(rows)
    cols["gkey"] = [_text(r.key) for r in rows]
    cols["value"] = [_text(r.value) for r in rows]
    cols["shown"] = [r.shown for r in rows]
    cols["version"] = [r.version for r in rows]
    return cols


def _back(d: Mapping[str, Any]) -> StateRecord | StateRow:
    key = _tuple(d["gkey"]) or ()
    if d["side"] == "s":
        return StateRow(key, _tuple(d["value"]), d["shown"], d["version"])
    return StateRecord(d["topic"], d["partition"], d["offset"], key, _tuple(d["value"]), d["delete"],
                       d["shown"], d["status"], d["timestamp"], d["producer_id"], d["producer_epoch"],
                       d["marker_offset"])


# A partition's records as the sink keys and values them (auditors.state.partition_records, passed in:
# this module is auditors.state's; pickled by reference, the executor imports it).
Reader = Callable[[TP, PartitionLog], Iterable[StateRecord]]


def read_task(read: Reader, logs: list[tuple[TP, PartitionLog]]) -> Callable:
    """The first stage's function: task i reads partition logs[i]'s records."""
    import pyarrow as pa  # lazy: see docs/imports.md

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        schema = _arrow_schema()
        for batch in batches:
            for i in batch.column(0).to_pylist():
                yield pa.RecordBatch.from_pydict(record_columns(read(*logs[i])), schema=schema)

    return run


def judge_task(judge: Rule) -> Callable:
    """The shuffle's function: a task's keys (their records and rows) judged at once, pickled out with
    each sink row's partition (the partition of its key's records)."""
    import pyarrow as pa  # lazy: see docs/imports.md

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        records: list[StateRecord] = []
        rows: list[StateRow] = []
        for batch in batches:
            for d in batch.to_pylist():
                x = _back(d)
                (rows if isinstance(x, StateRow) else records).append(x)  # type: ignore[arg-type]
        if not records and not rows:
            return
        judged = judge(records, rows)
        out = pickle.dumps((judged, sink_rows(records, rows)), protocol=pickle.HIGHEST_PROTOCOL)
        yield pa.RecordBatch.from_pydict({"judged": [out]}, schema=pa.schema([("judged", pa.binary())]))

    return run


def sink_rows(records: list[StateRecord], rows: list[StateRow]) -> dict[TP, int]:
    """The sink's rows per partition: a row counts where its key's records are (a key in several
    partitions: the last of them, by topic and partition)."""
    where: dict[Any, TP] = {}
    for r in records:
        where[r.key] = max(where.get(r.key, r.tp), r.tp)
    out: dict[TP, int] = {}
    for row in rows:
        if row.key in where:
            out[where[row.key]] = out.get(where[row.key], 0) + 1
    return out


def _arrow_schema() -> Any:
    import pyarrow as pa  # lazy: see docs/imports.md

    kinds = {"string": pa.string(), "int": pa.int32(), "long": pa.int64(), "boolean": pa.bool_()}
    return pa.schema([(n, kinds[t]) for n, t in _FIELDS])


def run_state_spark(spark: Any, read: Reader, logs: Mapping[TP, PartitionLog], rows: list[StateRow],
                    judge: Rule) -> tuple[Judged, dict[TP, int], int]:
    """The findings of the sink's ``rows`` against the partitions' records, judged by key on Spark; with
    the sink's rows per partition and the job's number of reading tasks."""
    import pyarrow as pa  # lazy: see docs/imports.md

    # Only what state_records reads of a log travels to the executors (not its batches or producers).
    shipped = [(tp, replace(log, batches=None, producers={}, writes=[], leader_epochs=[]))
               for tp, log in logs.items()]
    reads = spark.range(0, len(shipped), 1, max(len(shipped), 1)).mapInArrow(
        read_task(read, shipped), SCHEMA)
    # The rows were read by the driver from its frozen copy of the sink; they join the records in the
    # shuffle, not here.
    table = spark.createDataFrame(pa.Table.from_pydict(row_columns(rows), schema=_arrow_schema()))
    both = reads.unionByName(table).repartition(max(1, spark_slots(spark)), "gkey")
    out = _collect(both.mapInArrow(judge_task(judge), OUT))
    findings: list[Finding] = []
    expected: dict[TP, int] = {}
    settled: dict[TP, int] = {}
    per_tp: dict[TP, int] = {}
    for blob in out.column("judged").to_pylist():
        judged, here = pickle.loads(blob)
        findings.extend(judged.findings)
        for into, got in ((expected, judged.expected_keys), (settled, judged.settled), (per_tp, here)):
            for tp, n in got.items():
                into[tp] = into.get(tp, 0) + n
    return Judged(findings, expected, settled), per_tp, len(shipped)
