"""A consumer over every partition of one topic, started at explicit offsets and tracking its own position.

Both reading stages resume from offsets they own (the processor's come from its transactions, the sink's
from DuckDB), so they assign() partitions at those offsets instead of subscribing: a single instance has
nothing to rebalance. They track the next offset themselves (last record + 1).

noida-db quirk: it answers every read_committed Fetch with *all* aborted transactions of the partition,
not only those overlapping the fetched range as Kafka does. A consumer that starts past an ABORT marker
then sees an aborted-transaction entry whose marker it will never read, and librdkafka drops every later
batch of that producer as aborted: nothing is delivered and the position jumps to the end. So a
read_committed reader fetches from the log start and drops records below its start offsets; on Kafka that
only costs a re-read of what the stage already processed.
"""

from __future__ import annotations

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, TopicPartition

from eosctl.base.errors import BrokerError
from eosctl.cluster.consumed import placed
from eosctl.config.model import Cluster
from eosctl.sandbox.pipeline.broker import TIMEOUT, Broker, client_conf
from eosctl.sandbox.pipeline.txn import GroupMetadata


class Reader:
    def __init__(self, cluster: Cluster, topic: str, group: str, read_committed: bool,
                 starts: dict[int, int] | None = None):
        """``starts``: partition -> first offset to read; missing partitions start at the beginning.
        None: resume from the group's committed offsets in Kafka."""
        self.topic, self.read_committed = topic, read_committed
        self.consumer = Consumer(client_conf(cluster, **{
            "group.id": group,
            "isolation.level": "read_committed" if read_committed else "read_uncommitted",
            "enable.auto.commit": False,  # offsets are committed only with the work they stand for
            "auto.offset.reset": "earliest",
        }))
        md = self.consumer.list_topics(topic, timeout=TIMEOUT).topics.get(topic)
        if md is None or md.error is not None:
            raise BrokerError(f"topic {topic} does not exist")
        self.partitions = sorted(md.partitions)
        self.next: dict[int, int] = {}
        self.skip_below: dict[int, int] = {}
        self.lows: dict[int, int] = {}
        self.assign(self.committed() if starts is None else starts)

    def assign(self, starts: dict[int, int]) -> None:
        """(Re)start every partition at ``starts`` (or its beginning): rewinds discard what was read since."""
        self.next = {p: starts[p] if p in starts else self._low(p) for p in self.partitions}
        self.skip_below = dict(self.next)
        # read_committed fetches from the log start, which librdkafka finds itself: asked here, on the
        # connection a rewind's earlier fetch still waits on, each answer queued behind that long poll
        # (~0.27 s a partition: most of a demo pipeline's run).
        fetch_from = dict.fromkeys(self.partitions, OFFSET_BEGINNING) if self.read_committed else self.next
        self.consumer.assign([TopicPartition(self.topic, p, o) for p, o in fetch_from.items()])

    def committed(self) -> dict[int, int]:
        """The group's committed offsets in Kafka (for the processor: committed by its transactions)."""
        tps = self.consumer.committed([TopicPartition(self.topic, p) for p in self.partitions], TIMEOUT)
        return {tp.partition: tp.offset for tp in tps if tp.offset >= 0}

    def poll(self, n: int) -> list[Message]:
        out = []
        for m in self.consumer.consume(n, 0.2):
            error = m.error()
            if error is None:
                _, partition, offset = placed(m)
                if offset < self.skip_below[partition]:
                    continue  # re-read only to get past noida-db's aborted list (see the module docstring)
                out.append(m)
                self.next[partition] = offset + 1
            elif error.code() != KafkaError._PARTITION_EOF:
                raise BrokerError(f"{self.topic}: consumer error: {error.str()}")
        return out

    def positions(self) -> dict[int, int]:
        """Next offsets, moved past control records and skipped aborted records where librdkafka has
        read them (it advances its position over those; our own count can't see them)."""
        out = dict(self.next)
        for tp in self.consumer.position([TopicPartition(self.topic, p) for p in self.partitions]):
            if tp.offset > out[tp.partition]:
                out[tp.partition] = tp.offset
        return out

    def caught_up(self, broker: Broker) -> bool:
        """Read up to the end of every partition: the LSO for read_committed, else the high watermark."""
        for p, position in self.positions().items():
            if self.read_committed:
                end = broker.stable_offset(self.topic, p)
            else:
                end = broker.high_watermark(self.topic, p)
            if position < end:
                return False
        return True

    def group_metadata(self) -> GroupMetadata:
        return self.consumer.consumer_group_metadata()

    def commit(self, offsets: dict[int, int]) -> None:
        """Plain (non-transactional) commit to Kafka, for monitoring only."""
        if offsets:
            self.consumer.commit(offsets=as_tps(self.topic, offsets), asynchronous=False)

    def close(self) -> None:
        self.consumer.close()

    def _low(self, partition: int) -> int:
        """The partition's log start, asked once: the pipeline's topics are new and never trimmed."""
        if partition not in self.lows:
            self.lows[partition] = self.consumer.get_watermark_offsets(
                TopicPartition(self.topic, partition), TIMEOUT, False)[0]
        return self.lows[partition]


def as_tps(topic: str, offsets: dict[int, int]) -> list[TopicPartition]:
    return [TopicPartition(topic, p, o) for p, o in sorted(offsets.items())]
