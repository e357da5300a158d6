"""What an audit's tasks read of Kafka: each partition's leader and offsets (asked once by the driver) and
its log, scanned in rounds of bounded size (raw multi-partition Fetch, batch headers only).

``KafkaSource`` reads a live cluster; ``ModelSource`` serves logs already scanned (tests, snapshots)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from eosctl.base.errors import BrokerError
from eosctl.cluster import sharedwire
from eosctl.cluster.model import TP, PartitionLog
from eosctl.config.model import Cluster

if TYPE_CHECKING:
    pass

# A task scans its partitions in rounds of at most this many records (as the driver's offsets count them)
# and partitions: brokers that ignore fetch size limits (noida-db) answer a multi-partition Fetch with
# everything up to the high watermark, so a round's answer stays bounded by what it asks for.
SCAN_RECORDS = 50_000
SCAN_PARTITIONS = 2_000

@dataclass(frozen=True)
class Placement:
    """What the driver learnt of one partition, asked once for all of them and shipped with the plan: its
    leader and its offsets (log start, high watermark, last stable offset)."""

    leader: int
    log_start: int
    high_watermark: int
    last_stable: int
    # eosctl.cluster.wire.Offsets' cross-check of ListOffsets with Fetch: what the broker contradicted, if
    # anything
    disagreement: str | None = None
    listed: tuple[int, int, int] | None = None


class Source(Protocol):
    """Where the driver learns the partitions and a task gets their log models. Must pickle: it is shipped
    to executors."""

    def survey(self, topics: Iterable[str]) -> dict[str, dict[int, Placement]]:
        """Every partition of ``topics`` with its leader and offsets (the driver, once)."""
        ...

    def existing_topics(self) -> dict[str, list[int]]: ...

    def offsets_for_time(self, tps: Sequence[TP], timestamp_ms: int) -> dict[TP, int | None]:
        """Each partition's first offset of a record at or after the time (None: none that new)."""
        ...

    def scan(self, parts: Sequence[tuple[TP, Placement]], keys: bool | str = False) -> dict[TP, PartitionLog]:
        """The log models of one task's partitions, from the offsets the driver read (one connection).
        A source that can also read the records' keys (the content check) takes ``keys=True``."""
        ...


@dataclass(frozen=True)
class KafkaSource:
    """Scan the log on the executor with eosctl.cluster.logscan (raw Fetch; contiguous batches not
    decompressed)."""

    cluster: Cluster

    def survey(self, topics: Iterable[str]) -> dict[str, dict[int, Placement]]:
        with sharedwire.client(self.cluster) as client:
            leaders = client.metadata(list(topics))
            _check_leaders(leaders)
            offsets = client.offsets([(t, p) for t, ps in leaders.items() for p in sorted(ps)])
        return {t: {p: _placement(leaders[t][p], offsets[(t, p)]) for p in sorted(leaders[t])}
                for t in leaders}

    def existing_topics(self) -> dict[str, list[int]]:
        with sharedwire.client(self.cluster) as client:
            return {t: sorted(leaders) for t, leaders in client.metadata().items()}

    def offsets_for_time(self, tps: Sequence[TP], timestamp_ms: int) -> dict[TP, int | None]:
        """Each partition's first offset of a record at or after the time (None: none that new)."""
        with sharedwire.client(self.cluster) as client:
            return client.offsets_for_time(tps, timestamp_ms)

    def scan(self, parts: Sequence[tuple[TP, Placement]], keys: bool | str = False) -> dict[TP, PartitionLog]:
        # lazy: see docs/imports.md
        from eosctl.cluster.logscan import scan_partitions
        from eosctl.cluster.wire import Offsets

        out: dict[TP, PartitionLog] = {}
        # One task's scan, on the driver's client when the task runs in the driver (auditors.engine.run).
        with sharedwire.client(self.cluster) as client:
            client.know_leaders({tp: pl.leader for tp, pl in parts})
            for chunk in _scan_rounds(parts):
                snapshot = {tp: Offsets(pl.log_start, pl.high_watermark, pl.last_stable, pl.disagreement,
                                        pl.listed) for tp, pl in chunk}
                out.update(scan_partitions(client, [tp for tp, _ in chunk], offsets=snapshot, keys=keys))
            # The causes tell a timeout from a take-over by the id's transaction.timeout.ms, and settle
            # transactions-v2 pairs from the task's other partitions of the id.
            from eosctl.txn.producerids import (  # lazy: see docs/imports.md
                identify,
                settle,
            )

            settle(out.values())
            identify(client, out.values())
        return out


def _check_leaders(leaders: dict[str, dict[int, int]]) -> None:
    """Every audited partition has a leader, or the audit refuses with one line naming all that have none
    (their replicas' brokers are down): a verdict needs every partition read."""
    dark = [f"{t}-{p}" for t, ps in leaders.items() for p, leader in sorted(ps.items()) if leader < 0]
    if dark:
        shown = ", ".join(dark[:20]) + (f" and {len(dark) - 20} more" if len(dark) > 20 else "")
        total = sum(len(ps) for ps in leaders.values())
        raise BrokerError(f"cannot audit: {len(dark)} of {total} partitions have no leader (the brokers "
                          f"holding their replicas are down): {shown}; the others could be read; audit "
                          "again once they have a leader, or narrow --topic")


def _placement(leader: int, o: Any) -> Placement:
    """A partition's Placement from its leader and its eosctl.cluster.wire.Offsets."""
    return Placement(leader, o.log_start, o.high_watermark, o.last_stable, o.disagreement, o.listed)


def _scan_rounds(parts: Sequence[tuple[TP, Placement]]) -> Iterator[list[tuple[TP, Placement]]]:
    """The parts in runs of at most SCAN_RECORDS records and SCAN_PARTITIONS partitions (a bigger partition
    is a run of its own)."""
    run: list[tuple[TP, Placement]] = []
    records = 0
    for tp, pl in parts:
        size = max(0, pl.high_watermark - pl.log_start)
        if run and (records + size > SCAN_RECORDS or len(run) >= SCAN_PARTITIONS):
            yield run
            run, records = [], 0
        run.append((tp, pl))
        records += size
    if run:
        yield run


@dataclass(frozen=True)
class ModelSource:
    """Log models given up front (tests, benchmarks, replays of a saved scan): {(topic, partition): log}."""

    logs: dict[TP, PartitionLog]

    def survey(self, topics: Iterable[str]) -> dict[str, dict[int, Placement]]:
        wanted = set(topics)
        out: dict[str, dict[int, Placement]] = {}
        for (topic, partition), log in sorted(self.logs.items()):
            if topic in wanted:
                out.setdefault(topic, {})[partition] = Placement(0, log.log_start_offset, log.high_watermark,
                                                                 log.last_stable_offset)
        missing = wanted - set(out)
        if missing:
            raise BrokerError(f"topic {sorted(missing)[0]!r} is not in the source model")
        return out

    def existing_topics(self) -> dict[str, list[int]]:
        return {t: sorted(ps) for t, ps in self.survey({t for t, _ in self.logs}).items()}

    def offsets_for_time(self, tps: Sequence[TP], timestamp_ms: int) -> dict[TP, int | None]:
        raise BrokerError("the source model keeps no record times: give the window as offsets "
                          "(TOPIC:PARTITION=OFFSET,...)")

    def scan(self, parts: Sequence[tuple[TP, Placement]], keys: bool | str = False) -> dict[TP, PartitionLog]:
        return {tp: self.logs[tp] for tp, _ in parts}  # keys: the models' own record_keys, if any
