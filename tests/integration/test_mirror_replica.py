"""A MirrorMaker 2 replica audited against its source (eosctl/sink/replica.py), on Apache Kafka: the session's
broker is "src", a second one-node cluster "dr" (the kafka_dr fixture), and MM2 in dedicated mode from Maven
Central's connect-mirror (tests/mirrorhelp.py) copies a transactional topic (committed and aborted
transactions, the last one left open while MM2 runs; tests/streaminghelp.TxnTopic).

- `eos`: MM2 with exactly-once support (`dr.exactly.once.source.support = enabled`, internal REST) reading
  read_committed, IdentityReplicationPolicy (the replica keeps the topic's name), SIGKILLed mid-copy and
  restarted: the replica audits clean. A consumer group of the source then commits mid-partition; MM2
  translates it (checkpoints, and the group's offsets on dr); a consumer started on the replica at the
  translated offset counts what it re-reads and misses, and eosctl's failover numbers must equal them.
- `plain`: MM2 without exactly-once support, reading read_uncommitted (MM2's default), default policy
  (`src.TOPIC`): stopped cleanly after a first copy (its source offsets committed), then more transactions,
  copied and SIGKILLed before Connect commits their offsets, restarted: it copies them again. Its
  duplicates are reported at exactly the source offsets the test's own read of the replica finds twice,
  and the aborted and open records it copied as phantoms at exactly their offsets, with the fix named.

Expected results come from the test's own reads (the producers' delivery reports, a raw read of the
replica), never from eosctl.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.mirrorhelp import MirrorMaker, high_watermarks, read_records
from tests.streaminghelp import PARTITIONS, TxnTopic, audit, documented_config

pytestmark = [pytest.mark.integration]


@dataclass
class Run:
    topic: TxnTopic
    mm: MirrorMaker
    config: Path
    dr: str
    group: str = ""
    group_committed: dict[int, int] = field(default_factory=dict)


def replica_config(home: Path, src: str, dr: str, topic: str, replica: str) -> Path:
    """docs/audit.md's MirrorMaker 2 config, pointed at this run."""
    text = documented_config("MirrorMaker 2")
    text = (text.replace("kafka-a.internal:9092", src).replace("kafka-b.internal:9092", dr)
            .replace('kafka_topic = "src.orders"', f'kafka_topic = "{replica}"')
            .replace('["orders"]', f'["{topic}"]'))
    path = home / "replica.toml"
    path.write_text(text)
    return path


def source_offset(topic: TxnTopic) -> dict[str, tuple[int, int]]:
    """Each key the test produced -> its (partition, offset) at the source (keys are unique)."""
    return {k: tp for d in (topic.committed, topic.aborted, topic.open) for tp, k in d.items()}


def copies(dr: str, replica: str, topic: TxnTopic) -> Counter:
    """The test's own read of the replica: how many copies of each source (partition, offset) it holds."""
    where = source_offset(topic)
    return Counter(where[key] for _, _, key, _ in read_records(dr, replica, PARTITIONS))


@pytest.fixture(scope="module")
def eos(bootstrap: str, kafka_dr, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    home = tmp_path_factory.mktemp("mm2-eos")
    topic = TxnTopic(bootstrap, "mirror", transactions=24, per_txn=40)
    mm = MirrorMaker(bootstrap, kafka_dr.bootstrap, home, topic.name, eos=True, read_committed=True,
                     identity=True, poll_records=20)
    try:
        mm.start()
        mm.wait_until("the first copies",
                      lambda: sum(high_watermarks(kafka_dr.bootstrap, mm.replica, PARTITIONS).values()) >= 60)
        mm.kill()  # mid-copy: its open transaction on dr is aborted when the restarted task fences it
        assert len(copies(kafka_dr.bootstrap, mm.replica, topic)) < len(topic.committed), "copied before kill"
        mm.start()
        mm.wait_until("every committed record copied",
                      lambda: set(copies(kafka_dr.bootstrap, mm.replica, topic)) == set(topic.committed))
        topic.close()  # the open transaction ends (aborted) while MM2 waits at its LSO
        yield Run(topic, mm, replica_config(home, bootstrap, kafka_dr.bootstrap, topic.name, mm.replica),
                  kafka_dr.bootstrap)
    finally:
        mm.stop()
        topic.close()


@pytest.fixture(scope="module")
def plain(bootstrap: str, kafka_dr, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    home = tmp_path_factory.mktemp("mm2-plain")
    topic = TxnTopic(bootstrap, "mirror", transactions=6, per_txn=20)
    mm = MirrorMaker(bootstrap, kafka_dr.bootstrap, home, topic.name, eos=False, read_committed=False,
                     identity=False, flush_ms=600_000)
    first = {**topic.committed, **topic.aborted, **topic.open}
    try:
        mm.start()
        mm.wait_until("the first transactions copied",
                      lambda: set(copies(kafka_dr.bootstrap, mm.replica, topic)) == set(first))
        mm.stop()  # a clean stop commits the source offsets copied so far
        for t in range(100, 103):  # while MM2 is down: two committed, one aborted transaction
            kind = "aborter" if t == 101 else "source"
            topic._txn(kind, t, 20, False, "abort" if kind == "aborter" else "commit")
        everything = {**topic.committed, **topic.aborted, **topic.open}
        mm.start()
        mm.wait_until("the new transactions copied",
                      lambda: set(copies(kafka_dr.bootstrap, mm.replica, topic)) == set(everything))
        mm.kill()  # before Connect commits their source offsets (every 600 s)
        mm.start()
        second = set(everything) - set(first)
        mm.wait_until("the new transactions copied again",
                      lambda: {tp for tp, n in copies(kafka_dr.bootstrap, mm.replica, topic).items()
                               if n == 2} == second)
        mm.stop()
        yield Run(topic, mm, replica_config(home, bootstrap, kafka_dr.bootstrap, topic.name, mm.replica),
                  kafka_dr.bootstrap)
    finally:
        mm.stop()
        topic.close()


def test_mm2_with_exactly_once_support_killed_mid_copy_leaves_a_clean_replica(eos: Run):
    code, report = audit(eos.config)
    assert (code, report["findings"]) == (0, []), report
    assert report["verdict"] == "pass"


def test_mm2_without_exactly_once_support_killed_duplicates_are_reported_at_their_source_offsets(plain: Run):
    held = copies(plain.dr, plain.mm.replica, plain.topic)
    twice = {tp for tp, n in held.items() if n == 2 and tp in plain.topic.committed}
    assert twice  # the test's own read: the second run's committed records, copied twice
    code, report = audit(plain.config)
    assert code == 1
    reported = {(f["partition"], o) for f in report["findings"] if f["kind"] == "duplicate"
                for o in range(f["first_offset"], f["last_offset"] + 1)}
    assert reported & set(plain.topic.committed) == twice
    dup = next(f for f in report["findings"] if f["kind"] == "duplicate")
    assert ("a task restarted without exactly-once support: records replayed from its last committed source "
            "offset") in dup["cause"]["summary"]
    assert "`dr.exactly.once.source.support = enabled`" in dup["cause"]["summary"]


def test_mm2_reading_read_uncommitted_copies_aborted_and_open_records_reported_as_phantoms(plain: Run):
    code, report = audit(plain.config)
    assert code == 1
    phantoms = {(f["partition"], o) for f in report["findings"] if f["kind"].startswith("phantom_")
                for o in range(f["first_offset"], f["last_offset"] + 1)}
    copied = set(copies(plain.dr, plain.mm.replica, plain.topic))
    not_committed = (set(plain.topic.aborted) | set(plain.topic.open)) & copied
    assert not_committed and phantoms & (set(plain.topic.aborted) | set(plain.topic.open)) == not_committed
    assert not phantoms & set(plain.topic.committed)
    for f in report["findings"]:
        if f["kind"].startswith("phantom_"):
            assert ("MM2 consumed read_uncommitted: set `source.consumer.isolation.level=read_committed`"
                    in f["cause"]["summary"])
            assert "`src.consumer.isolation.level = read_committed`" in f["cause"]["summary"]
    assert {f["kind"] for f in report["findings"]} <= {"duplicate", "phantom_aborted", "phantom_uncommitted"}
