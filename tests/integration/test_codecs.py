"""A topic written with every codec Kafka has audits to exactly its planted findings, content check on, on
both engines, on Apache Kafka 4.4 and on the sandbox (issue 49 items 1 and 7).

Partitions 0-3: one confluent-kafka transactional producer each, `compression.type` gzip, snappy, lz4 and
zstd, in four transactions of 5 keyed records (the second aborted); partition 4: Kafka's Java producer with
lz4, five one-record transactions (the third aborted). The truth (each offset's key, committed or aborted, or
a marker) is read back with read_committed and read_uncommitted consumers, not assumed. The sink (DuckDB,
key column ``order_id``) holds every committed record once but for one planted fault a partition: a gap (0),
a duplicate (1), two aborted records (2), a row at a marker's offset (3), a gap (4, Java's lz4).
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from eosctl.cluster.batches import decode
from eosctl.cluster.wire import WireClient
from eosctl.config.model import Cluster
from tests.integration.test_content_check import found, make_sink, run_audit
from tests.support.helpers import REPO, eosctl, eosctl_json, eosctl_process
from tests.support.markers import markers_written

# jvm: the Java producer runs beside the sandbox too (tests/support/nojvm.py)
pytestmark = [pytest.mark.integration, pytest.mark.jvm]

CODECS = ("gzip", "snappy", "lz4", "zstd")  # partitions 0-3; partition 4: the Java producer's lz4
JAVA = 4


class Truth:
    """One partition as a consumer sees it: {offset: key} committed and aborted; the rest are markers."""

    def __init__(self, committed: dict[int, str], aborted: dict[int, str], end: int) -> None:
        self.committed, self.aborted = committed, aborted
        self.markers = [o for o in range(end) if o not in committed and o not in aborted]


def _read(bootstrap: str, topic: str, partition: int, isolation: str) -> tuple[dict[int, str], int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "codecs-" + uuid.uuid4().hex[:8],
                  "enable.auto.commit": False, "isolation.level": isolation, "enable.partition.eof": True})
    try:
        _, end = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
        c.assign([TopicPartition(topic, partition, 0)])
        out: dict[int, str] = {}
        for _ in range(200):  # each poll waits at most 1 s: the partition holds a few dozen offsets
            msg = c.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF
                    break
                raise AssertionError(msg.error())
            out[msg.offset()] = msg.key().decode()
        else:
            raise AssertionError(f"{topic}-{partition} ({isolation}): no end of partition in 200 polls")
        return out, end
    finally:
        c.close()


def write_source(bootstrap: str, tmp: Path) -> tuple[str, dict[int, Truth]]:
    from tests.support.txnjava import TxnJava

    topic = "codecs" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=5, replication_factor=1)])[topic].result(30)
    for partition, codec in enumerate(CODECS):
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-{codec}",
                      "compression.type": codec, "linger.ms": 50})
        p.init_transactions(30)
        for txn in range(4):
            p.begin_transaction()
            for i in range(5):
                key = f"{codec}-t{txn}-{i}"
                p.produce(topic, key=key.encode(), value=f"value of {key} ".encode() * 8, partition=partition)
            p.flush(30)
            (p.abort_transaction if txn == 1 else p.commit_transaction)(30)
    TxnJava(tmp).run(bootstrap, topic, f"{topic}-java", "script",
                     script=";".join(f"{'abort' if t == 2 else 'commit'}:{JAVA}" for t in range(5)),
                     compression="lz4")
    # _read takes the high watermark first: with a marker still owed, one short of the log's end
    markers_written(bootstrap, *(f"{topic}-{codec}" for codec in CODECS), f"{topic}-java")
    truth = {}
    for partition in range(5):
        committed, end = _read(bootstrap, topic, partition, "read_committed")
        every, _ = _read(bootstrap, topic, partition, "read_uncommitted")
        truth[partition] = Truth(committed, {o: k for o, k in every.items() if o not in committed}, end)
    return topic, truth


def codecs_stored(bootstrap: str, topic: str) -> dict[int, set[str]]:
    """The compression of each partition's data batches as the broker keeps them (markers: uncompressed)."""
    out: dict[int, set[str]] = {}
    with WireClient(Cluster(name="t", bootstrap_servers=bootstrap)) as client:
        for partition in range(5):
            data = client.fetch_raw(topic, partition, 0, 1 << 20).records
            out[partition] = {b.compression for b in decode(data).batches if not b.is_control}
    return out


def sink_rows(truth: dict[int, Truth]) -> list[tuple[int, int, str]]:
    rows = []
    for partition, t in truth.items():
        kept = dict(t.committed)
        if partition in (0, JAVA):
            del kept[sorted(kept)[1]]  # a gap: the second committed record never stored
        part = sorted(kept.items())
        if partition == 1:
            part.append(part[2])  # a duplicate: the third committed record stored twice
        if partition == 2:
            part += sorted(t.aborted.items())[:2]  # phantom_aborted: the first two aborted records
        if partition == 3:
            marker = t.markers[0]
            part.append((marker, kept[max(o for o in kept if o < marker)]))  # a row at the first marker
        rows += [(partition, o, k) for o, k in part]
    return rows


# Each Python partition: records 0..4, marker 5, aborted 6..10, markers 11, 17, 23 after 12..16, 18..22; the
# Java one (one record a transaction, each followed by its marker): records 0, 2, aborted 4, 6, 8.
PY_LAYOUT = ([0, 1, 2, 3, 4, 12, 13, 14, 15, 16, 18, 19, 20, 21, 22], [6, 7, 8, 9, 10], [5, 11, 17, 23])
JAVA_LAYOUT = ([0, 2, 6, 8], [4], [1, 3, 5, 7, 9])
EXPECTED = [("duplicate", 1, 2, 2, 1), ("gap", 0, 1, 1, 1), ("gap", JAVA, 2, 2, 1),
            ("phantom_aborted", 2, 6, 7, 2), ("phantom_marker", 3, 5, 5, 1)]


def layout(truth: dict[int, Truth]) -> dict[int, tuple[list[int], ...]]:
    return {p: (sorted(t.committed), sorted(t.aborted), t.markers) for p, t in truth.items()}


@pytest.fixture(scope="module")
def kafka_source(bootstrap: str, tmp_path_factory) -> tuple[str, str, dict[int, Truth]]:
    topic, truth = write_source(bootstrap, tmp_path_factory.mktemp("codecs-java"))
    assert layout(truth) == {**dict.fromkeys(range(4), PY_LAYOUT), JAVA: JAVA_LAYOUT}
    return bootstrap, topic, truth


@pytest.fixture(scope="module")
def sandbox_source(sandbox_bootstrap: str, tmp_path_factory) -> tuple[str, str, dict[int, Truth]]:
    topic, truth = write_source(sandbox_bootstrap, tmp_path_factory.mktemp("codecs-java"))
    assert layout(truth) == {**dict.fromkeys(range(4), PY_LAYOUT), JAVA: JAVA_LAYOUT}
    return sandbox_bootstrap, topic, truth


def check_audit(source: tuple[str, str, dict[int, Truth]], tmp_path: Path, engine: str) -> None:
    bootstrap, topic, truth = source
    sink = make_sink(tmp_path / "sink.duckdb", topic, sink_rows(truth))
    reports = {}
    for check in (False, None):  # None: the default, the content check on (the sink names a key column)
        r = run_audit(bootstrap, topic, sink, "--engine", engine, check=check)
        assert r.exit_code == 1, r.stderr  # 2, "... is lz4-compressed and this Python has no lz4 codec"
        reports[check] = report = json.loads(r.stdout)
        assert sum(p["sink_rows"] for p in report["partitions"]) == len(sink_rows(truth))
    assert sorted(f[:5] for f in found(reports[False])) == EXPECTED
    if engine == "local":  # the incremental audit runs in this process, whatever the engine
        # its first run builds its record index from every codec's records: the same findings
        r = run_audit(bootstrap, topic, sink, "--incremental", str(tmp_path / "state"), check=None)
        assert r.exit_code == 1, r.stderr
        assert found(json.loads(r.stdout)) == found(reports[None])
    # The content check adds nothing where no content was planted: the row at a marker's offset is
    # phantom_marker only, not also content_mismatch (one finding per sink row: issue 49 part B).
    assert sorted(f[:5] for f in found(reports[None])) == EXPECTED
    assert found(reports[None]) == found(reports[False])


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_every_codec_audits_to_its_planted_findings_on_apache_kafka(kafka_source, tmp_path, engine, request):
    if engine == "spark":
        request.getfixturevalue("spark")
    check_audit(kafka_source, tmp_path, engine)


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_every_codec_audits_to_its_planted_findings_on_the_sandbox(sandbox_source, tmp_path, engine, request):
    if engine == "spark":
        request.getfixturevalue("spark")
    check_audit(sandbox_source, tmp_path, engine)


def test_an_install_without_lz4_names_the_codec_and_the_package(kafka_source, tmp_path):
    """`lz4` shadowed by a package without lz4.frame (what kafka.codec imports): the audit stops at the first
    lz4 batch with one line naming the codec and what to install, exit 2, never "unknown codec (3)"."""
    bootstrap, topic, truth = kafka_source
    shadow = tmp_path / "shadow"
    (shadow / "lz4").mkdir(parents=True)
    (shadow / "lz4" / "__init__.py").write_text("")
    sink = make_sink(tmp_path / "sink.duckdb", topic, sink_rows(truth))
    done = eosctl_process("audit", "--bootstrap", bootstrap, "--topic", topic, "--sink-duckdb", str(sink),
                          "--sink-table", "orders_sink", "--key-column", "order_id", "--engine", "local",
                          env={"PYTHONPATH": f"{shadow}{os.pathsep}{REPO}"})
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert "is lz4-compressed and this Python has no lz4 codec" in done.stderr
    assert "`pip install lz4`" in done.stderr and "unknown" not in done.stderr


STORED = {0: {"gzip"}, 1: {"snappy"}, 2: {"lz4"}, 3: {"zstd"}, JAVA: {"lz4"}}


def test_apache_kafka_keeps_each_producers_codec(kafka_source):
    """The broker stores the batches as the producers compressed them (Kafka's compression.type=producer):
    the audits above read each codec, not a re-compressed copy."""
    assert codecs_stored(*kafka_source[:2]) == STORED


def test_log_records_table_shows_each_codec(kafka_source):
    bootstrap, topic, _ = kafka_source
    out = eosctl("log", "--bootstrap", bootstrap, "--topic", topic, "--partition", "2", "--records").stdout
    assert "Records" in out
    row = next(line for line in out.splitlines() if "lz4-t0-0" in line)
    assert row.split("│")[1].strip() == "0" and row.split("│")[-2].strip() == "lz4"


def test_the_sandbox_keeps_each_producers_codec(sandbox_source):
    """noida-db accepts all four codecs and stores each batch as written (it does not re-compress)."""
    assert codecs_stored(*sandbox_source[:2]) == STORED


def test_log_and_explain_read_every_codecs_partition(kafka_source):
    """`eosctl log --records` of each partition: its batches named by their codec, every data record with
    its key (aborted ones too); `explain` of its first aborted offset: ABORTED, in a batch of that codec."""
    bootstrap, topic, truth = kafka_source
    for partition, codec in [*enumerate(CODECS), (JAVA, "lz4")]:
        target = ("--bootstrap", bootstrap, "--topic", topic, "--partition", str(partition))
        doc = eosctl_json("log", *target, "--records")
        data = [b for b in doc["batches"] if not b["is_control"]]
        assert {b["compression"] for b in data} == {codec}
        every = {**truth[partition].committed, **truth[partition].aborted}
        assert sum(b["record_count"] for b in data) == len(every)
        assert [(r["offset"], r["key"], r["compression"]) for r in doc["records"]] == [
            (o, k, codec) for o, k in sorted(every.items())]
        if partition < JAVA:
            assert doc["records"][0]["value"] == f"value of {every[0]} " * 8
        aborted = min(truth[partition].aborted)
        doc = eosctl_json("explain", *target, "--offset", str(aborted), codes=(0,))
        assert (doc["kind"], doc["batch"]["compression"], doc["transaction"]["outcome"]) == (
            "ABORTED", codec, "ABORT")

