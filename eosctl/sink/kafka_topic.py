"""A Kafka topic as the audited side of a hop: the output of a consume-transform-produce stage.

A stage that reads input topics and writes an output topic (Kafka Streams, Flink's Kafka sink, a
read-process-write loop) is a sink whose "rows" are its committed output records and whose lineage
names the input record each was derived from. Freezing it reads the output topic read_committed up to
end offsets taken first (the live-pipeline rule: the output's read point, then the input's scan) and
writes one row per committed output record into a DuckDB file, so the same per-partition
reconciliation, both engines, the ledger, snapshots and reports apply unchanged.

Lineage (``[pipelines.X.sink] lineage``):
- ``headers``: the record's headers name its input (default `eos.source.topic`, `eos.source.partition`,
  `eos.source.offset`; `lineage_headers` renames them);
- ``value:PATH``: a JSON object at PATH in the record's value has `topic`, `partition` and `offset`
  (e.g. `value:source`).
A record whose lineage is missing or unreadable becomes a row with NULL lineage: an invalid_row finding.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from eosctl.config import Cluster, Sink
from eosctl.errors import BrokerError, SinkError
from eosctl.model import TP
from eosctl.sink.base import ReadPoint

TABLE = "hop_rows"
POLL_TIMEOUT_S = 30.0  # no progress for this long while below the end offsets: one line, exit 2


def freeze(sink: Sink, cluster: Cluster, directory: str) -> Sink:
    """Read the output topic as it is now into a DuckDB file under ``directory``; the pinned sink."""
    import duckdb
    import pyarrow as pa

    assert sink.kafka_topic is not None
    ends = end_offsets(cluster, sink.kafka_topic)
    read_at = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    rows = _read(cluster, sink, ends)
    path = os.path.join(directory, "hop.duckdb")
    table = pa.table(rows, schema=pa.schema([
        ("src_topic", pa.string()), ("src_partition", pa.int64()), ("src_offset", pa.int64()),
        ("key", pa.string()), ("out_partition", pa.int32()), ("out_offset", pa.int64())]))
    con = duckdb.connect(path)
    try:
        con.register("hop_arrow", table)
        con.execute(f"CREATE TABLE {TABLE} AS SELECT * FROM hop_arrow")
    finally:
        con.close()
    at = json.dumps({"end_offsets": [{"partition": p, "offset": o} for (_, p), o in sorted(ends.items())],
                     "read_at": read_at})
    return replace(sink, duckdb=path, kafka_topic=None, table=TABLE, topic_column="src_topic",
                   partition_column="src_partition", offset_column="src_offset",
                   key_column="key" if sink.key_column else None, offsets_table=None, frozen_from=sink, at=at)


def read_point(sink: Sink) -> ReadPoint:
    """What a frozen hop read: the output topic up to these end offsets (exclusive), at this time."""
    given = sink.frozen_from or sink
    at: dict[str, Any] = json.loads(sink.at) if sink.at else {}
    return ReadPoint("kafka_topic", given.kafka_topic or "", {"lineage": given.lineage, **at})


def end_offsets(cluster: Cluster, topic: str) -> dict[TP, int]:
    """Where a read_committed consumer of ``topic`` stops now: each partition's last stable offset."""
    from eosctl.wire import WireClient

    with WireClient(cluster) as client:
        parts = client.metadata([topic]).get(topic)
        if parts is None:
            raise SinkError(f"the hop's output topic {topic!r} does not exist on "
                            f"{cluster.bootstrap_servers}; check [pipelines.NAME.sink].kafka_topic")
        offsets = client.offsets([(topic, p) for p in sorted(parts)])
    return {tp: o.last_stable for tp, o in offsets.items()}


def _read(cluster: Cluster, sink: Sink, ends: dict[TP, int]) -> dict[str, list]:
    """Every committed record below the end offsets, as columns (lineage, key, where it sits)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    from eosctl.clients import quiet_logger

    cols: dict[str, list] = {n: [] for n in ("src_topic", "src_partition", "src_offset", "key",
                                            "out_partition", "out_offset")}
    pending = {tp: end for tp, end in ends.items() if end > 0}
    if not pending:
        return cols
    # assign() and no commits: the group id is required by librdkafka but never joined or written.
    consumer = Consumer({**cluster.confluent(), "logger": quiet_logger(), "group.id": "eosctl-hop-reader",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest", "enable.partition.eof": True})
    lineage = _lineage(sink)
    try:
        # From the log start: the sandbox mis-hands aborted data to read_committed consumers that start
        # past an ABORT marker (/work/shared/notes/brokers.md); on Kafka this only re-reads the start.
        consumer.assign([TopicPartition(t, p, -2) for (t, p) in pending])
        last_progress = time.monotonic()
        while pending:
            msgs = consumer.consume(10_000, 0.5)
            if msgs:
                last_progress = time.monotonic()
            for m in msgs:
                tp = (m.topic(), m.partition())
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if tp in pending and m.offset() >= pending[tp]:
                            del pending[tp]
                        continue
                    raise BrokerError(f"reading the hop's output {tp[0]}[{tp[1]}]: {err.str()}")
                if tp not in pending or m.offset() >= pending[tp]:
                    pending.pop(tp, None)
                    continue
                src = lineage(m)
                cols["src_topic"].append(src[0])
                cols["src_partition"].append(src[1])
                cols["src_offset"].append(src[2])
                key = m.key()
                cols["key"].append(key.decode("utf-8", "backslashreplace") if key is not None else None)
                cols["out_partition"].append(m.partition())
                cols["out_offset"].append(m.offset())
                if m.offset() + 1 >= pending[tp]:
                    del pending[tp]
            if pending and time.monotonic() - last_progress > POLL_TIMEOUT_S:
                shown = ", ".join(f"{t}[{p}] (end {e})" for (t, p), e in sorted(pending.items())[:3])
                raise BrokerError(f"reading the hop's output topic made no progress for "
                                  f"{POLL_TIMEOUT_S:.0f}s below its end offsets: {shown}; retry later")
    finally:
        consumer.close()
    return cols


Lineage = tuple[str | None, int | None, int | None]


def _lineage(sink: Sink) -> Any:
    if sink.lineage == "headers":
        names = sink.lineage_headers

        def from_headers(m: Any) -> Lineage:
            h = {k: v for k, v in (m.headers() or [])}
            topic, part, off = (h.get(n) for n in names)
            return (_text(topic), _int(part), _int(off))

        return from_headers
    path = sink.lineage.removeprefix("value:").split(".")

    def from_value(m: Any) -> Lineage:
        try:
            node: Any = json.loads(m.value())
            for step in path:
                node = node[step]
            return (_text(node.get("topic")), _int(node.get("partition")), _int(node.get("offset")))
        except (ValueError, TypeError, KeyError, AttributeError):
            return (None, None, None)

    return from_value


def _text(v: Any) -> str | None:
    if isinstance(v, bytes):
        return v.decode("utf-8", "backslashreplace")
    return v if isinstance(v, str) else None


def _int(v: Any) -> int | None:
    """An integer lineage value, else None (an invalid row). Kafka's limits are checked by the reader."""
    if isinstance(v, bytes):
        v = v.decode("ascii", "replace")
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v if -(1 << 63) <= v < (1 << 63) else None
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        n = int(v)
        return n if -(1 << 63) <= n < (1 << 63) else None
    return None
