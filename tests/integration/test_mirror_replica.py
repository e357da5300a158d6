"""A MirrorMaker 2 replica audited against its source (eosctl/sink/replica.py), on Apache Kafka: the session's
broker is "src", a second one-node cluster "dr" (the kafka_dr fixture), and MM2 in dedicated mode from Maven
Central's connect-mirror (tests/support/mirror.py) copies a transactional topic (committed and aborted
transactions, the last one left open while MM2 runs; tests/support/streaming.TxnTopic).

- `eos`: MM2 with exactly-once support (`dr.exactly.once.source.support = enabled`, internal REST) reading
  read_committed, IdentityReplicationPolicy (the replica keeps the topic's name), SIGKILLed mid-copy and
  restarted: the replica audits clean. A consumer group of the source then commits mid-partition; MM2
  translates it (checkpoints, and the group's offsets on dr); a consumer started on the replica at the
  translated offset counts what it re-reads and misses, and eosctl's failover numbers must equal them
  (`lag --format json` and its table's replica column, `explain --offset`, the exporter's metric).
- `plain`: MM2 without exactly-once support, reading read_uncommitted (MM2's default), default policy
  (`src.TOPIC`): stopped cleanly after a first copy (its source offsets committed), then more transactions,
  copied and SIGKILLed before Connect commits their offsets, restarted: it copies them again. Its
  duplicates are reported at exactly the source offsets the test's own read of the replica finds twice,
  and the aborted and open records it copied as phantoms at exactly their offsets, with the fix named;
  the spark engine reports the same findings as the local one.

Expected results come from the test's own reads (the producers' delivery reports, a raw read of the
replica), never from eosctl.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console

from eosctl.cli import main
from eosctl.output.lag import lag_renderable
from tests.support.helpers import eosctl_process
from tests.support.mirror import MirrorMaker, high_watermarks, read_records
from tests.support.streaming import PARTITIONS, TxnTopic, audit, documented_config

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


def commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets on a cluster (the test's own OffsetFetch)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], 10)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in tps if tp.offset >= 0}


@pytest.fixture(scope="module")
def eos(bootstrap: str, kafka_dr, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    home = tmp_path_factory.mktemp("mm2-eos")
    topic = TxnTopic(bootstrap, "mirror", transactions=24, per_txn=40)
    mm = MirrorMaker(bootstrap, kafka_dr.bootstrap, home, topic.name, eos=True, read_committed=True,
                     identity=True, poll_records=20)
    # A group of the source has committed mid-partition before MM2 starts: MM2 translates its offset while
    # it copies past it (from offset syncs near it), then the group moves on in partition 0 and rewinds in
    # partition 1 while MM2 is stopped, as a group does between MM2's last checkpoint and a failover.
    group = f"g-{uuid.uuid4().hex[:8]}"
    done = {p: sorted(o for q, o in topic.committed if q == p) for p in range(PARTITIONS)}
    commit(bootstrap, group, topic.name, {p: done[p][150] for p in range(PARTITIONS)})
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
        mm.wait_until("the group's offsets synced to dr",
                      lambda: len(committed(kafka_dr.bootstrap, group, mm.replica)) == PARTITIONS)
        mm.stop()
        # Where MM2 translated to depends on which offset syncs it kept (OffsetSyncStore thins them out):
        # the rewind goes 10 records below the source record a consumer resuming on partition 1 reads first.
        resume = committed(kafka_dr.bootstrap, group, mm.replica)
        where = source_offset(topic)
        first = min((o, key) for q, o, key, _ in read_records(kafka_dr.bootstrap, mm.replica, PARTITIONS)
                    if q == 1 and o >= resume[1])
        below = sum(1 for o in done[1] if o < where[first[1]][1])
        now = {0: done[0][150 + 37], 1: done[1][max(0, below - 10)]}
        commit(bootstrap, group, topic.name, now)
        yield Run(topic, mm, replica_config(home, bootstrap, kafka_dr.bootstrap, topic.name, mm.replica),
                  kafka_dr.bootstrap, group, now)
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


def test_failover_readiness_equals_what_a_consumer_started_on_the_replica_re_reads_and_misses(eos: Run):
    where = source_offset(eos.topic)
    resume = committed(eos.dr, eos.group, eos.mm.replica)  # MM2's translation, synced to dr
    read = read_records(eos.dr, eos.mm.replica, PARTITIONS, start=resume)  # a consumer resuming there
    seen = {p: {where[key][1] for q, _, key, _ in read if q == p} for p in range(PARTITIONS)}
    again = {p: sum(1 for q, _, key, _ in read if q == p and where[key][1] < eos.group_committed[p])
             for p in range(PARTITIONS)}
    never = {p: sum(1 for q, o in eos.topic.committed if q == p and o >= eos.group_committed[p]
                    and o not in seen[p]) for p in range(PARTITIONS)}
    assert again[0] > 0 and never[1] > 0  # the group moved on in 0 and rewound in 1 after the checkpoint

    result = CliRunner().invoke(main, ["lag", "-c", str(eos.config), "-g", eos.group, "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    (group,) = doc["groups"]
    got = {p["partition"]: p["replica"] for p in group["partitions"]}
    for p in range(PARTITIONS):
        assert (got[p]["resume"], got[p]["rereads"], got[p]["misses"]) == (resume[p], again[p], never[p])
        assert (got[p]["source_committed"], got[p]["target_committed"]) == (eos.group_committed[p], resume[p])
    # the table `lag` prints for that document: its replica column
    console = Console(record=True, width=250)
    console.print(lag_renderable(doc, False, [eos.group], []))
    table = console.export_text()
    assert "replica" in table
    assert f"@{resume[0]} +{again[0]} again -{never[0]} never" in table
    assert f"@{resume[1]} +{again[1]} again -{never[1]} never" in table

    # explain --offset: one record re-read in partition 0, one never seen in partition 1
    reread = min(where[key][1] for q, _, key, _ in read if q == 0 and where[key][1] < eos.group_committed[0])
    lost = min(o for q, o in eos.topic.committed
               if q == 1 and o >= eos.group_committed[1] and o not in seen[1])
    for p, o, outcome in ((0, reread, "processed again"), (1, lost, "never seen")):
        result = CliRunner().invoke(main, ["explain", "-c", str(eos.config), "-g", eos.group, "-P", str(p),
                                           "--offset", str(o), "--format", "json"])
        assert result.exit_code == 0, result.output
        replica = json.loads(result.stdout)["replica"]
        assert replica["groups"] == [{"group": eos.group, "source_committed": eos.group_committed[p],
                                      "resume": resume[p], "outcome": outcome}]
        copied = [r for q, r, key, _ in read_records(eos.dr, eos.mm.replica, PARTITIONS)
                  if q == p and where[key][1] == o]
        assert replica["copies"] == copied

    # the exporter's metric, from one audit (--once): the same numbers
    textfile = eos.config.parent / "metrics.prom"
    result = CliRunner().invoke(main, ["exporter", "-c", str(eos.config), "--once", "--textfile",
                                       str(textfile), "--audit-every", "1h"])
    assert result.exit_code == 0, result.output
    metric = {(s.labels["partition"], s.labels["outcome"]): s.value
              for family in text_string_to_metric_families(textfile.read_text())
              for s in family.samples if s.name == "eosctl_replica_failover_records"
              and s.labels["group"] == eos.group}
    assert metric == {(str(p), outcome): float(n) for p in range(PARTITIONS)
                      for outcome, n in (("again", again[p]), ("never", never[p]))}


@pytest.mark.spark
@pytest.mark.own_spark
def test_the_spark_engine_reports_the_same_replica_findings(plain: Run):
    code, local = audit(plain.config)
    # The Spark engine in a process of its own (its own local Spark), as a user runs it.
    child = eosctl_process("audit", "-c", str(plain.config), "--engine", "spark", "--format", "json",
                           timeout=300)
    assert child.returncode in (0, 1), child.stderr[-3000:]
    code_spark, spark = child.returncode, json.loads(child.stdout)

    def found(report: dict) -> list[tuple]:
        return sorted((f["kind"], f["partition"], f["first_offset"], f["last_offset"], f["count"],
                       f["cause"]["summary"]) for f in report["findings"])

    assert (code_spark, found(spark)) == (code, found(local)) and found(local)
