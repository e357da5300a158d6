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
- ``key``: no lineage in the records (most Kafka Streams apps): outputs are paired with committed inputs
  by key, in order (see _key_lineage), and the same reconciliation reports what stays unpaired.
- ``value``: a stage that copies values unchanged (Kafka's TransactionalMessageCopier, a mirror): outputs
  paired with inputs by their value, in order, the same way; exact where input values are unique (Kafka's
  VerifiableProducer writes a counter), so its findings keep the reconciliation's names.
A record whose lineage is missing or unreadable becomes a row with NULL lineage: an invalid_row finding.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from eosctl.base.errors import BrokerError, SinkError
from eosctl.base.safetext import decode
from eosctl.cluster.clientcauses import LibrdkafkaErrors, librdkafka_cause
from eosctl.cluster.clients import quiet_logger
from eosctl.cluster.consumed import placed
from eosctl.cluster.model import TP
from eosctl.config.model import Cluster, Sink
from eosctl.sink.base import ReadPoint

# librdkafka requires a group id even for a consumer that only assign()s and never commits; it still asks
# for the group's coordinator (FindCoordinator: Describe on the group), and a principal without rights on
# this group is answered GROUP_AUTHORIZATION_FAILED, which the reader ignores: it needs no ACL.
READER_GROUP = "eosctl-hop-reader"

TABLE = "hop_rows"
POLL_TIMEOUT_S = 30.0  # no progress for this long while below the end offsets: one line, exit 2


def freeze(sink: Sink, cluster: Cluster, directory: str) -> Sink:
    """Read the output topic as it is now into a DuckDB file under ``directory``; the pinned sink."""
    assert sink.kafka_topic is not None
    # What the stage has committed to have processed, BEFORE its output is read: every input record below
    # it has its outputs committed by now (offsets and outputs commit together), so none is a false gap;
    # outputs committed later are past it, pending, never judged.
    promised = _committed(sink)
    ends = end_offsets(cluster, sink.kafka_topic)
    read_at = now()
    if sink.lineage in PAIRED:
        by = PAIRED[sink.lineage]
        if sink.lineage == "key":
            by = _logical_keys(cluster) or by
        rows = _key_lineage(cluster, sink, ends, promised, by=by)
    else:
        rows = _read(cluster, sink, ends)
    # Read again after the output: an output whose input is past these offsets was written before the
    # stage committed that input (ahead_of_commit); one the stage committed meanwhile is only lag.
    after = _committed(sink)
    path = write_rows(rows, directory)
    at = json.dumps({"end_offsets": [{"partition": p, "offset": o} for (_, p), o in sorted(ends.items())],
                     "read_at": read_at,
                     "committed": [[t, p, o] for (t, p), o in sorted(promised.items())],
                     "committed_after": [[t, p, o] for (t, p), o in sorted(after.items())],
                     "grouped": sink.stage_group is not None})
    return replace(sink, duckdb=path, kafka_topic=None, table=TABLE, topic_column="src_topic",
                   partition_column="src_partition", offset_column="src_offset",
                   key_column="key" if sink.key_column else None, offsets_table=None, frozen_from=sink, at=at)


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def write_rows(rows: dict[str, list], directory: str) -> str:
    """The hop rows (COLUMNS) as the table of a DuckDB file under ``directory``; its path."""
    # lazy: see docs/imports.md
    import duckdb
    import pyarrow as pa

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
    return path


def read_point(sink: Sink) -> ReadPoint:
    """What a frozen hop read: the output topic up to these end offsets (exclusive), at this time."""
    given = sink.frozen_from or sink
    at: dict[str, Any] = json.loads(sink.at) if sink.at else {}
    for name in ("committed", "committed_after", "grouped", "out_of_order"):
        at.pop(name, None)
    return ReadPoint("kafka_topic", given.kafka_topic or "", {"lineage": given.lineage, **at})


def committed_before(sink: Sink) -> dict[TP, int] | None:
    """The stage group's committed offsets the freeze read before the output (None: not a frozen hop)."""
    given = sink.frozen_from
    if given is None or given.kafka_topic is None or not sink.at:
        return None
    return {(t, p): o for t, p, o in json.loads(sink.at).get("committed", [])}


def _committed(sink: Sink) -> dict[TP, int]:
    from eosctl.cluster.offsets import committed_offsets  # lazy: see docs/imports.md

    if sink.stage_group is None or sink.stage_cluster is None:
        return {}
    return committed_offsets(sink.stage_cluster, sink.stage_group)


def end_offsets(cluster: Cluster, topic: str) -> dict[TP, int]:
    """Where a read_committed consumer of ``topic`` stops now: each partition's last stable offset."""
    from eosctl.cluster.wire import WireClient  # lazy: see docs/imports.md

    with WireClient(cluster) as client:
        parts = client.metadata([topic]).get(topic)
        if parts is None:
            raise SinkError(f"the hop's output topic {topic!r} does not exist on "
                            f"{cluster.bootstrap_servers}; check [pipelines.NAME.sink].kafka_topic")
        offsets = client.offsets([(topic, p) for p in sorted(parts)])
    return {tp: o.last_stable for tp, o in offsets.items()}


COLUMNS = ("src_topic", "src_partition", "src_offset", "key", "out_partition", "out_offset")


def _read(cluster: Cluster, sink: Sink, ends: dict[TP, int]) -> dict[str, list]:
    """Every committed record below the end offsets, as columns (lineage, key, where it sits)."""
    cols: dict[str, list] = {n: [] for n in COLUMNS}
    lineage = lineage_reader(sink)
    for m in records(cluster, ends, read_committed=True, what="the hop's output"):
        src = lineage(m)
        for name, value in zip(COLUMNS, (*src, _key(m), m.partition(), m.offset()), strict=True):
            cols[name].append(value)
    return cols


def records(cluster: Cluster, ends: dict[TP, int], *, read_committed: bool, what: str,
            starts: dict[TP, int] | None = None) -> Iterator[Any]:
    """The records below ``ends`` (per partition, exclusive) as a consumer with that isolation sees them;
    ``starts``: per partition, the first offset to read (else the log start)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition  # lazy: see docs/imports.md

    starts = starts or {}
    pending = {tp: end for tp, end in ends.items() if end > max(0, starts.get(tp, 0))}
    if not pending:
        return
    # assign() and no commits: the group id is required by librdkafka but never joined or written.
    errors = LibrdkafkaErrors(cluster, ignore=(KafkaError.GROUP_AUTHORIZATION_FAILED,))
    consumer = Consumer({**cluster.confluent(), "logger": quiet_logger(), "group.id": READER_GROUP,
                         "error_cb": errors, "enable.auto.commit": False,
                         "isolation.level": "read_committed" if read_committed else "read_uncommitted",
                         "auto.offset.reset": "earliest", "enable.partition.eof": True})
    try:
        # From the log start: the sandbox mis-hands aborted data to read_committed consumers that start
        # past an ABORT marker (/work/shared/notes/brokers.md); on Kafka this only re-reads the start.
        consumer.assign([TopicPartition(t, p, starts.get((t, p), -2)) for (t, p) in pending])
        last_progress = time.monotonic()
        while pending:
            msgs = consumer.consume(10_000, 0.5)
            errors.raise_if_any()
            if msgs:
                last_progress = time.monotonic()
            for m in msgs:
                err = m.error()
                if err is not None:
                    topic, partition = m.topic(), m.partition()
                    if err.code() == KafkaError._PARTITION_EOF:
                        if topic is not None and partition is not None:
                            pending.pop((topic, partition), None)  # nothing more there now: the end is passed
                        continue
                    if err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                        continue  # the reader's own group id (see READER_GROUP), never joined: not needed
                    where = f" {topic}[{partition}]" if topic is not None else ""
                    raise BrokerError(f"reading {what}{where}: "
                                      f"{librdkafka_cause(cluster, err, 'Fetch', topic) or err.str()}")
                topic, partition, offset = placed(m)
                tp = (topic, partition)
                if tp not in pending or offset >= pending[tp]:
                    pending.pop(tp, None)
                    continue
                yield m
                if offset + 1 >= pending[tp]:
                    del pending[tp]
            if pending and time.monotonic() - last_progress > POLL_TIMEOUT_S:
                shown = ", ".join(f"{t}[{p}] (end {e})" for (t, p), e in sorted(pending.items())[:3])
                raise BrokerError(f"reading {what} made no progress for {POLL_TIMEOUT_S:.0f}s below its end "
                                  f"offsets: {shown}; retry later")
    finally:
        consumer.close()


def _key(m: Any) -> str | None:
    key = m.key()
    return decode(key) if key is not None else None


def _value(m: Any) -> str | None:
    value = m.value()
    return decode(value) if value is not None else None


# The lineages that pair outputs with inputs by what a record carries (no lineage in the records).
PAIRED = {"key": _key, "value": _value}


def _logical_keys(cluster: Cluster) -> Any:
    """Where the cluster names a Schema Registry: a record's key as what it means (its decoded value), so a
    stage that re-serializes keys under a newer schema id or version keeps pairing them with its inputs
    (eosctl.cluster.schemas.logical_key); None without a registry."""
    # lazy: the registry client, fastavro, protobuf; see docs/imports.md
    from eosctl.cluster.schemas import SchemaDecoder, logical_key, registry_of

    settings = registry_of(cluster)
    if settings is None:
        return None
    decoder = SchemaDecoder(settings)

    def key(m: Any) -> str | None:
        return logical_key(decoder, m.topic(), m.key(), m.headers() or ())

    return key


def _key_lineage(cluster: Cluster, sink: Sink, ends: dict[TP, int],
                 promised: dict[TP, int], by: Any = _key) -> dict[str, list]:
    """`lineage = "key"`: no output names its input, so outputs are paired with inputs by key, in order
    (as Kafka's own transactions test checks a copier): the i-th committed output of a key with the i-th
    committed input of that key below the stage's committed offsets. What stays unpaired is the finding:
    an input without its output a gap (a lost key), an output beyond its key's inputs a duplicate at the
    key's last input, an output whose key only aborted or open input had a phantom at that input's offset,
    an output whose key no input had an invalid_row (NULL lineage).

    A stage reading its input read_uncommitted turns an aborted input into an output too, with the key of
    the input's retried, committed copy. When most keys that had aborted or open input have exactly as
    many outputs as inputs of any outcome, and most keys with more outputs than committed inputs are such
    keys (a replay's extra outputs are on keys of every kind), the stage reads uncommitted: those keys'
    outputs and inputs are paired in order on both sides (partition, offset), so the output of the aborted
    copy is its phantom and the retried copy's output is not a duplicate. Otherwise, and for keys whose
    counts differ (a replay or a loss of the same key too), the committed-only pairing above holds: an
    aborted copy then shows as a duplicate of its retry, which key lineage alone can't tell apart.

    Input past the committed offsets (read up to its high watermark now) is paired last, after the key's
    inputs below them: its outputs were written before the stage committed that input (at-least-once,
    or a commit between the two reads), so they are the stage's lag, never an invalid_row.

    ``by``: what pairs an output with its input (the key, or for `lineage = "value"` the value)."""
    outputs: dict[str | None, list[tuple[int, int]]] = {}
    record_key: dict[tuple[int, int], str | None] = {}  # each output's own key (the rows' key column)
    for m in records(cluster, ends, read_committed=True, what="the hop's output"):
        outputs.setdefault(by(m), []).append((m.partition(), m.offset()))
        # The rows' key column: the key as paired (a decoded key where keys are framed), else its text.
        record_key[(m.partition(), m.offset())] = by(m) if by is not _value else _key(m)
    upto = {tp: o for tp, o in promised.items() if tp[0] in sink.stage_topics}
    committed: dict[str | None, list[tuple[str, int, int]]] = {}
    for m in records(cluster, upto, read_committed=True, what="the hop's input"):
        committed.setdefault(by(m), []).append((m.topic(), m.partition(), m.offset()))
    seen = {(t, p, o) for places in committed.values() for t, p, o in places}
    other: dict[str | None, list[tuple[str, int, int]]] = {}  # aborted or still-open input
    beyond: dict[str | None, list[tuple[str, int, int]]] = {}  # input of any outcome past the commits
    for m in records(cluster, _input_ends(cluster, sink), read_committed=False, what="the hop's input"):
        place = (m.topic(), m.partition(), m.offset())
        if m.offset() >= upto.get(place[:2], 0):
            beyond.setdefault(by(m), []).append(place)
        elif place not in seen:
            other.setdefault(by(m), []).append(place)
    # Does the stage turn aborted input into output (it reads read_uncommitted)? Then most keys that had
    # aborted or open input have one output per input of any outcome; a stage reading committed input has
    # fewer (none for a key only aborted input had).
    # (At least two such keys: one replayed key can match by chance.)
    # And the keys with more outputs than committed inputs are mostly those keys: a replay of committed
    # input also gives a key with an aborted copy one output per input, but its extra outputs fall on keys
    # of every kind.
    touched = [k for k in other if k is not None]
    matching = sum(len(outputs.get(k, ())) == len(committed.get(k, ())) + len(other[k]) for k in touched)
    extra = [k for k, outs in outputs.items() if k is not None and len(outs) > len(committed.get(k, ()))]
    reads_aborted = (matching >= 2 and matching * 2 > len(touched)
                     and sum(k in other for k in extra) * 2 > len(extra))
    cols: dict[str, list] = {n: [] for n in COLUMNS}
    for key, outs in outputs.items():
        ins = sorted(committed.get(key, [])) if key is not None else []
        every = sorted(ins + other.get(key, [])) if key is not None else []
        if reads_aborted and other.get(key) and len(every) == len(outs):
            ins = every  # one output per input, aborted ones included: pair them in order
        later = sorted(beyond.get(key, [])) if key is not None else []
        for i, (p, o) in enumerate(sorted(outs)):
            if i < len(ins) or (ins and not later):
                src: Lineage = ins[min(i, len(ins) - 1)]
            elif later:
                src = later[min(i - len(ins), len(later) - 1)]
            elif key is not None and other.get(key):
                src = min(other[key])
            else:
                src = (None, None, None)
            for name, value in zip(COLUMNS, (*src, record_key[(p, o)], p, o), strict=True):
                cols[name].append(value)
    return cols


def _input_ends(cluster: Cluster, sink: Sink) -> dict[TP, int]:
    """The stage's input topics' high watermarks now (read_uncommitted: open transactions included)."""
    return high_watermarks(cluster, sink.stage_topics)


def high_watermarks(cluster: Cluster, topics: tuple[str, ...]) -> dict[TP, int]:
    """The topics' high watermarks now (read_uncommitted: open transactions included)."""
    from eosctl.cluster.wire import WireClient  # lazy: see docs/imports.md

    with WireClient(cluster) as client:
        meta = client.metadata(list(topics))
        tps = [(t, p) for t in topics for p in sorted(meta.get(t) or ())]
        return {tp: o.high_watermark for tp, o in client.offsets(tps).items()} if tps else {}


Lineage = tuple[str | None, int | None, int | None]

def outputs_topic(frozen: Sink) -> str | None:
    """The hop's output topic as the user named it (the frozen copy keeps the original sink)."""
    return (frozen.frozen_from or frozen).kafka_topic


def committed_after(frozen: Sink) -> dict[TP, int] | None:
    """The stage group's committed offsets the freeze read again after the output (None: not a frozen hop
    of a stage with a group, so nothing to compare its outputs with)."""
    at: dict[str, Any] = json.loads(frozen.at) if frozen.at else {}
    given = frozen.frozen_from
    if given is None or given.kafka_topic is None or not at.get("grouped") or frozen.duckdb is None:
        return None
    return {(t, p): o for t, p, o in at.get("committed_after", [])}


# A frozen hop row as the rules read it: (key, output partition, output offset, input offset), and with its
# input named: (input topic, input partition, input offset, output partition, output offset).
Paired = tuple[str | None, int, int, int]
Placed = tuple[str, int, int, int, int]


class HopRows:
    """The frozen hop's rows (read only, while the frozen copy exists), one connection for many questions."""

    def __init__(self, frozen: Sink) -> None:
        import duckdb  # lazy: see docs/imports.md

        self._con = duckdb.connect(str(frozen.duckdb), read_only=True)

    def __enter__(self) -> HopRows:
        return self

    def __exit__(self, *exc: object) -> None:
        self._con.close()

    def outputs_of(self, topic: str | None, partition: int | None, first: int,
                   last: int | None) -> list[Paired]:
        """The distinct outputs paired with input offsets first..last of one partition, by output place."""
        return self._con.execute(
            f"SELECT DISTINCT key, out_partition, out_offset, src_offset FROM {TABLE} "
            "WHERE src_topic = ? AND src_partition = ? AND src_offset BETWEEN ? AND ? ORDER BY 2, 3",
            [topic, partition, first, last]).fetchall()

    def with_lineage(self) -> list[Placed]:
        """Every row whose input is named, ordered by input then output."""
        return self._con.execute(
            f"SELECT src_topic, src_partition, src_offset, out_partition, out_offset FROM {TABLE} WHERE "
            "src_topic IS NOT NULL AND src_partition IS NOT NULL AND src_offset IS NOT NULL "
            "ORDER BY 1, 2, 3, 4, 5"
        ).fetchall()


def lineage_reader(sink: Sink) -> Any:
    """A function giving a record's input (topic, partition, offset) by the sink's lineage (Nones where it
    is unreadable)."""
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
        return decode(v)
    return v if isinstance(v, str) else None


def _int(v: Any) -> int | None:
    """An integer lineage value, else None (an invalid row). Kafka's limits are checked by the reader."""
    if isinstance(v, bytes):
        v = v.decode("ascii", "replace")
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v if -(1 << 63) <= v < (1 << 63) else None
    if isinstance(v, str) and v.strip().lstrip("-").isascii() and v.strip().lstrip("-").isdigit():
        n = int(v)
        return n if -(1 << 63) <= n < (1 << 63) else None
    return None
