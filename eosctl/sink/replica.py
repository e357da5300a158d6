"""A MirrorMaker 2 replica as the audited side of a hop (`kafka_topic` on another cluster, `lineage =
"replica"`): the replica partition must be the source partition's committed records, in order, each once.

MM2 (connect-mirror's MirrorSourceTask) copies partition p of the source topic to partition p of the
replica, each record's key, value, headers and timestamp unchanged, in the order it reads them; it writes no
lineage. So the replica is aligned with the source by order: each replica record is paired with the source
record carrying its key, value (by MD5 digest) and timestamp, the next one after the record the previous
replica record was paired with; where no such record follows, the copy went back (a replay: the task
resumed from an older source offset) and it is paired with the last such record at or before it. The
pairing becomes hop rows (source topic, partition, offset of each replica record), so the reconciliation
both engines run judges them like any hop: a committed source record without a copy is a gap, one copied
twice a duplicate, an aborted or open one copied a phantom, at exact source offsets. A record the pairing
had to take from before its predecessor's although nothing paired it yet is out of order (the replica's
producer reordered it). Exact where a record's (key, value, timestamp) is unique among its partition's
records, as a producer's own timestamps make it.

Where either cluster names a Schema Registry, keys and values are compared as what they mean: a framed one
by its decoded value (eosctl.cluster.schemas.logical), so a replicator that re-serialized them under a newer
schema id or version (or under the replica cluster's own registry, whose ids differ) still pairs; each side
is decoded through its own cluster's registry, else the other's (MM2 copies the ids with the bytes).

What the replica promises to hold: the source records up to the last one paired (beyond is MM2's lag, never a
gap).
"""

from __future__ import annotations

import bisect
import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any

from eosctl.base.errors import SinkError
from eosctl.base.safetext import decode
from eosctl.cluster.model import TP
from eosctl.config.model import Cluster, Sink
from eosctl.sink import kafka_topic

REPLICA = "replica"
Fingerprint = tuple[bytes | None, bytes | None, int]


@dataclass(frozen=True)
class Alignment:
    """One replica partition paired with its source partition."""

    sources: list[int | None]  # per replica record, in replica order: the source offset paired (None: none)
    out_of_order: list[int]  # source offsets copied once, but after a later record
    covered: int  # one past the last source offset paired: what the replica promises to hold (0: nothing)
    # out_of_order as runs (first, last, records): consecutive source records, markers between them
    late_runs: list[tuple[int, int, int]] = field(default_factory=list)


def fingerprint(key: bytes | None, value: bytes | None, timestamp: int) -> Fingerprint:
    return (key, hashlib.md5(value).digest() if value is not None else None, timestamp)


def align(source: list[tuple[int, Fingerprint]], replica: list[Fingerprint]) -> Alignment:
    """Pair each replica record (in replica order) with a source record (offset, fingerprint; every data
    record of the partition, aborted and open ones too): the first with its fingerprint after the last
    source record paired, else (a replay, or a record out of order) the last one at or before it."""
    where: dict[Fingerprint, list[int]] = {}
    for offset, fp in source:
        where.setdefault(fp, []).append(offset)
    cursor = -1
    high = -1  # the highest source offset paired so far: a record first paired below it came late
    seen: set[int] = set()
    sources: list[int | None] = []
    late: list[int] = []
    for fp in replica:
        offsets = where.get(fp)
        if not offsets:
            sources.append(None)
            continue
        i = bisect.bisect_right(offsets, cursor)
        chosen = offsets[i] if i < len(offsets) else offsets[i - 1]
        if chosen < high and chosen not in seen:
            # Copied for the first time, after a record that follows it. Every record of a late batch is:
            # the cursor goes back to its first record, but not the highest offset already copied.
            late.append(chosen)
        sources.append(chosen)
        seen.add(chosen)
        cursor, high = chosen, max(high, chosen)
    covered = max(seen) + 1 if seen else 0
    # A record first paired late and paired again later is a replay's, not a reordering's.
    held_late = sorted(o for o in late if sources.count(o) == 1)
    return Alignment(sources, held_late, covered, late_runs(held_late, sorted(o for o, _ in source)))


def late_runs(late: list[int], source: list[int]) -> list[tuple[int, int, int]]:
    """``late`` (sorted source offsets) as runs (first, last, records): two late records are one run where
    no other data record of the source (``source``: every data record's offset, sorted) lies between them,
    so markers don't split a run and a record held in order does."""
    runs: list[list[int]] = []
    for o in late:
        if runs and bisect.bisect_left(source, o) - bisect.bisect_right(source, runs[-1][1]) == 0:
            runs[-1][1], runs[-1][2] = o, runs[-1][2] + 1
        else:
            runs.append([o, o, 1])
    return [(a, b, n) for a, b, n in runs]


def _read(cluster: Cluster, ends: dict[TP, int], *, read_committed: bool, what: str,
          decoder: Any = None) -> dict[int, list[tuple[int, Fingerprint, Any]]]:
    """Per partition: (offset, fingerprint, key) of each record below ``ends``, in offset order; with a
    ``decoder`` (eosctl.cluster.schemas.SchemaDecoder) the key and value by their logical form."""
    out: dict[int, list[tuple[int, Fingerprint, Any]]] = {p: [] for _, p in ends}
    if decoder is not None:
        # lazy: the registry client, fastavro, protobuf: only with a registry; see docs/imports.md
        from eosctl.cluster.schemas import logical
    for m in kafka_topic.records(cluster, ends, read_committed=read_committed, what=what):
        if decoder is not None:
            fp, key = _logical(logical, decoder, m)
        else:
            key = m.key()
            fp, key = fingerprint(key, m.value(), m.timestamp()[1]), decode(key) if key is not None else None
        out[m.partition()].append((m.offset(), fp, key))
    return out


def _logical(logical: Any, decoder: Any, m: Any) -> tuple[Fingerprint, str | None]:
    """A record's fingerprint and key text by what its key and value mean (framed ones decoded by
    eosctl.cluster.schemas.logical)."""
    headers = m.headers() or ()
    key = logical(decoder, m.topic(), "key", m.key(), headers)
    value = logical(decoder, m.topic(), "value", m.value(), headers)
    # The same shape as a byte fingerprint, so align() needs no second kind: the logical key's text as
    # bytes, the logical value's digest.
    fp = fingerprint(key.encode() if key is not None else None,
                     value.encode() if value is not None else None, m.timestamp()[1])
    return fp, key


def _decoders(source: Cluster, replica: Cluster) -> tuple[Any, Any]:
    """The (source, replica) decoders where either cluster names a Schema Registry, each side its own
    cluster's registry, else the other's; (None, None) without one (records compared by their bytes)."""
    if source.schema_registry_url is None and replica.schema_registry_url is None:
        return None, None
    # lazy: only with a registry; see docs/imports.md
    from eosctl.cluster.schemas import SchemaDecoder, registry_of

    mine, theirs = registry_of(source), registry_of(replica)
    return SchemaDecoder(mine or theirs), SchemaDecoder(theirs or mine)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Pairing:
    """One replica partition as read, paired with its source partition."""

    offsets: list[int]  # the replica's records, in order
    keys: list[str | None]  # their keys
    sources: list[int | None]  # the source offset each is paired with (None: none)
    out_of_order: list[int]
    covered: int  # what the replica promises to hold: the source offsets below this
    committed: list[int]  # the committed source records' offsets (read only when asked)
    end: int  # the replica's last stable offset the read stopped at
    late_runs: list[tuple[int, int, int]] = field(default_factory=list)  # out_of_order as runs (Alignment)


def pair(sink: Sink, *, committed: bool = True) -> dict[int, Pairing]:
    """Read the replica (read_committed, up to its last stable offsets, taken first) and then every record
    of its source partitions (read_uncommitted, up to their high watermarks): what MM2 copied is below
    those by then. Each replica partition paired with its source partition; with ``committed``, the
    source's committed records listed too (a read_committed read up to its last stable offsets)."""
    if sink.kafka_topic is None or sink.kafka_cluster is None:
        raise SinkError("a replica hop needs its topic and cluster (kafka_topic, cluster)")
    if sink.stage_cluster is None or len(sink.stage_topics) != 1:
        raise SinkError(f"the replica {sink.kafka_topic!r} needs exactly one source topic (source_topics)")
    topic = sink.stage_topics[0]
    ends = kafka_topic.end_offsets(sink.kafka_cluster, sink.kafka_topic)
    at_source, at_replica = _decoders(sink.stage_cluster, sink.kafka_cluster)
    replica = _read(sink.kafka_cluster, ends, read_committed=True, what="the replica", decoder=at_replica)
    source_ends = kafka_topic.high_watermarks(sink.stage_cluster, (topic,))
    source = _read(sink.stage_cluster, source_ends, read_committed=False, what="the replica's source",
                   decoder=at_source)
    done: dict[int, list[int]] = {}
    if committed:
        stable = kafka_topic.end_offsets(sink.stage_cluster, topic)
        for m in kafka_topic.records(sink.stage_cluster, stable, read_committed=True,
                                     what="the replica's source"):
            done.setdefault(m.partition(), []).append(m.offset())
    out = {}
    for (_, p) in sorted(ends):
        copies = replica.get(p, [])
        found = align([(o, fp) for o, fp, _ in source.get(p, [])], [fp for _, fp, _ in copies])
        out[p] = Pairing([o for o, _, _ in copies], [k for _, _, k in copies], found.sources,
                         found.out_of_order, found.covered, done.get(p, []), ends[(sink.kafka_topic, p)],
                         found.late_runs)
    return out


def freeze(sink: Sink, cluster: Cluster, directory: str) -> Sink:
    """The replica paired with its source (pair), written as hop rows (eosctl.sink.kafka_topic's table)."""
    assert sink.kafka_topic is not None
    read_at = kafka_topic.now()
    pairings = pair(replace(sink, kafka_cluster=cluster), committed=False)
    topic = sink.stage_topics[0]
    rows: dict[str, list] = {n: [] for n in kafka_topic.COLUMNS}
    late: list[list[Any]] = []  # [partition, [offsets]]
    for p, found in pairings.items():
        held = found.out_of_order
        late += [[p, [o for o in held if first <= o <= last]] for first, last, _ in found.late_runs]
        for offset, key, src in zip(found.offsets, found.keys, found.sources, strict=True):
            lineage = (topic, p, src) if src is not None else (None, None, None)
            for name, value in zip(kafka_topic.COLUMNS, (*lineage, key, p, offset), strict=True):
                rows[name].append(value)
    path = kafka_topic.write_rows(rows, directory)
    covered = {p: f.covered for p, f in pairings.items()}
    at = json.dumps({"end_offsets": [{"partition": p, "offset": f.end} for p, f in sorted(pairings.items())],
                     "read_at": read_at, "replica_of": topic,
                     "committed": [[topic, p, o] for p, o in sorted(covered.items())],
                     "committed_after": [[topic, p, o] for p, o in sorted(covered.items())],
                     "out_of_order": late, "grouped": False})
    return replace(sink, duckdb=path, kafka_topic=None, table=kafka_topic.TABLE, topic_column="src_topic",
                   partition_column="src_partition", offset_column="src_offset",
                   key_column="key" if sink.key_column else None, offsets_table=None, frozen_from=sink, at=at)


def reordered(frozen: Sink) -> tuple[str, list[tuple[int, list[int]]]]:
    """A frozen replica hop's source topic and the runs of source records it holds out of order
    (partition, the run's source offsets: Alignment.late_runs)."""
    at: dict[str, Any] = json.loads(frozen.at) if frozen.at else {}
    return at.get("replica_of", ""), [(p, list(offsets)) for p, offsets in at.get("out_of_order", [])]
