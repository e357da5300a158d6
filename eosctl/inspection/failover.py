"""Failover readiness of a MirrorMaker 2 replica, per consumer group: where a consumer of the group would
resume on the replica, and how many records it would process again or never see.

MM2's MirrorCheckpointTask translates a group's committed source offset into a replica offset only at its
offset syncs (OffsetSyncStore.translateDownstream: the sync's downstream offset where the group's offset is
the sync's upstream one, else one past it), and writes it as a checkpoint (`SRC.checkpoints.internal` on the
target; key: group, topic, partition; value: version, upstream offset, downstream offset, metadata, in
Kafka's protocol types: Checkpoint.java) and, with `sync.group.offsets.enabled`, as the group's committed
offset on the target. A consumer of the group started on the replica resumes at its committed offset
there, else (a consumer seeded from the checkpoints, as RemoteClusterUtils.translateOffsets does) at the
latest checkpoint.

Against the group's committed offset at the source now (C) and the replica paired with its source
(eosctl.sink.replica): records it would process again are replica records at or past the resume point
whose source offset is below C; records it would never see are committed source records at or past C, up
to what the replica holds, with no copy at or past the resume point.
"""

from __future__ import annotations

import struct
from dataclasses import asdict, dataclass
from typing import Any

from eosctl.cluster.model import TP
from eosctl.cluster.offsets import committed_offsets
from eosctl.config.model import Cluster, Sink
from eosctl.sink import kafka_topic
from eosctl.sink.replica import REPLICA, Pairing, pair

CHECKPOINTS = "{alias}.checkpoints.internal"  # DefaultReplicationPolicy.checkpointsTopic (Identity's too)


@dataclass(frozen=True)
class Failover:
    """One group's failover to the replica, for one partition."""

    group: str
    topic: str  # the source topic
    partition: int
    replica: str  # the replica topic
    source_committed: int | None  # the group's committed offset at the source now
    checkpoint_upstream: int | None  # MM2's latest checkpoint: the source offset it translated
    checkpoint: int | None  # ... and the replica offset it translated it to
    target_committed: int | None  # the group's committed offset on the replica's cluster
    resume: int | None  # where a consumer of the group resumes on the replica (None: nowhere known)
    rereads: int | None  # records it would process again
    misses: int | None  # committed records it would never see

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def replica_sink(sink: Sink | None) -> Sink | None:
    """The sink if it is a replica hop with its clusters resolved (eosctl.config.target), else None."""
    if sink is None or sink.lineage != REPLICA or sink.kafka_topic is None or sink.kafka_cluster is None:
        return None
    if sink.stage_cluster is None or len(sink.stage_topics) != 1:
        return None
    return sink


def _string(data: bytes, at: int) -> tuple[str, int]:
    (n,) = struct.unpack_from(">h", data, at)
    return data[at + 2:at + 2 + n].decode("utf-8", "replace"), at + 2 + n


def decode_checkpoint(key: bytes, value: bytes) -> tuple[str, str, int, int, int]:
    """(group, topic, partition, upstream offset, downstream offset) of one checkpoint record."""
    group, at = _string(key, 0)
    topic, at = _string(key, at)
    (partition,) = struct.unpack_from(">i", key, at)
    _version, upstream, downstream = struct.unpack_from(">hqq", value, 0)
    return group, topic, partition, upstream, downstream


def checkpoints(cluster: Cluster, alias: str, replica: str) -> dict[tuple[str, int], tuple[int, int]]:
    """The latest checkpoint per (group, partition) of the replica topic: (upstream, downstream) offsets.
    Read committed: a worker with exactly-once support writes them in transactions."""
    topic = CHECKPOINTS.format(alias=alias)
    try:
        ends = kafka_topic.end_offsets(cluster, topic)
    except Exception:  # no checkpoints topic (yet): MM2's checkpoint connector never ran
        return {}
    out: dict[tuple[str, int], tuple[int, int]] = {}
    for m in kafka_topic.records(cluster, ends, read_committed=True, what="MM2's checkpoints"):
        if m.key() is None or m.value() is None:
            continue
        try:
            group, t, p, upstream, downstream = decode_checkpoint(m.key(), m.value())
        except (struct.error, UnicodeDecodeError):
            continue  # not a checkpoint (another writer of the topic)
        if t == replica:
            out[(group, p)] = (upstream, downstream)
    return out


def counts(pairing: Pairing, committed: int, resume: int) -> tuple[int, int]:
    """(records processed again, committed records never seen) by a consumer resuming at replica offset
    ``resume`` whose group's committed source offset is ``committed``."""
    read = [src for off, src in zip(pairing.offsets, pairing.sources, strict=True)
            if off >= resume and src is not None]
    again = sum(1 for src in read if src < committed)
    seen = set(read)
    never = sum(1 for o in pairing.committed if committed <= o < pairing.covered and o not in seen)
    return again, never


def readiness(sink: Sink, groups: list[str] | None = None,
              pairings: dict[int, Pairing] | None = None) -> list[Failover]:
    """Each group's failover per partition: the groups given, else every group MM2 checkpointed for the
    replica topic. ``sink``: a replica hop (replica_sink); ``pairings``: its pairing, if read already."""
    assert sink.kafka_topic is not None and sink.kafka_cluster is not None and sink.stage_cluster is not None
    source, replica = sink.stage_cluster, sink.kafka_cluster
    topic = sink.stage_topics[0]
    marks = checkpoints(replica, source.name, sink.kafka_topic)
    wanted = groups if groups else sorted({g for g, _ in marks})
    if not wanted:
        return []
    pairings = pairings if pairings is not None else pair(sink)
    out = []
    for group in wanted:
        at_source: dict[TP, int] = committed_offsets(source, group)
        at_target: dict[TP, int] = committed_offsets(replica, group)
        for p in sorted(pairings):
            mark = marks.get((group, p))
            c = at_source.get((topic, p))
            t = at_target.get((sink.kafka_topic, p))
            if c is None and mark is None and t is None:
                continue
            resume = t if t is not None else (mark[1] if mark else None)
            again = never = None
            if resume is not None and c is not None:
                again, never = counts(pairings[p], c, resume)
            out.append(Failover(group, topic, p, sink.kafka_topic, c, mark[0] if mark else None,
                                mark[1] if mark else None, t, resume, again, never))
    return out


def with_failover(doc: dict[str, Any], sink: Sink) -> None:
    """`eosctl lag`'s document with each group partition of the replica's source topic given its failover
    readiness (`replica`: Failover.to_dict(), null where MM2 checkpointed nothing for it)."""
    groups = [g["group"] for g in doc["groups"]]
    if not groups:
        return
    found = {(f.group, f.topic, f.partition): f for f in readiness(sink, groups)}
    for g in doc["groups"]:
        for p in g["partitions"]:
            if p["topic"] in sink.stage_topics:
                f = found.get((g["group"], p["topic"], p["partition"]))
                p["replica"] = f.to_dict() if f is not None else None


def at_offset(sink: Sink, partition: int, offset: int, groups: list[str] | None = None) -> dict[str, Any]:
    """`eosctl explain --offset` on a replica pipeline: the source offset's copies on the replica, and for
    each group (the one given, else every group MM2 checkpointed) what a consumer of it resuming on the
    replica does with the record: `processed again`, `never seen`, `read` (first time), `not read again`
    (processed at the source, no copy past the resume point), `not copied yet` (past what the replica holds),
    or `unknown` (no resume point or no committed offset)."""
    pairings = pair(sink)
    found = pairings.get(partition)
    copies = ([o for o, src in zip(found.offsets, found.sources, strict=True) if src == offset]
              if found else [])
    out = []
    for f in readiness(sink, groups, pairings):
        if f.partition != partition:
            continue
        if f.resume is None or f.source_committed is None or found is None:
            outcome = "unknown"
        else:
            later = any(o >= f.resume for o in copies)
            if offset < f.source_committed:
                outcome = "processed again" if later else "not read again"
            elif offset >= found.covered:
                outcome = "not copied yet"
            elif offset in set(found.committed):
                outcome = "read" if later else "never seen"
            else:
                outcome = "read" if later else "not read (not committed at the source)"
        out.append({"group": f.group, "source_committed": f.source_committed, "resume": f.resume,
                    "outcome": outcome})
    return {"topic": sink.kafka_topic, "copies": copies, "groups": out}
