"""The reference pipeline against a live broker: the manifest must match what is really in Kafka and DuckDB.

Every expectation here is computed independently of the pipeline code: the log through plain
confluent-kafka consumers (read_committed and read_uncommitted), the sink straight from DuckDB, and the
defect runs with the auditor's rules re-implemented below.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from pathlib import Path

import duckdb
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from eosctl.base.errors import EosctlError
from eosctl.config.file import load_config
from eosctl.config.model import Cluster
from eosctl.sandbox.pipeline import FAULTS, run_pipeline

pytestmark = pytest.mark.integration

RECORDS = 60


# ---- independent views ------------------------------------------------------------------------------


def _consumer(cluster: Cluster, isolation: str, group: str | None = None) -> Consumer:
    return Consumer({**cluster.confluent(), "group.id": group or f"test-view-{uuid.uuid4().hex[:8]}",
                     "isolation.level": isolation, "enable.auto.commit": False})


def read_log(cluster: Cluster, topic: str, committed: bool) -> dict[tuple[int, int], str]:
    """(partition, offset) -> key of every data record a consumer with that isolation level delivers."""
    c = _consumer(cluster, "read_committed" if committed else "read_uncommitted")
    try:
        parts = sorted(c.list_topics(topic, timeout=10).topics[topic].partitions)
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), 10, False)[1] for p in parts}
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        out: dict[tuple[int, int], str] = {}
        deadline = time.monotonic() + 20
        while True:
            for m in c.consume(500, 0.2):
                assert m.error() is None, m.error()
                out[m.partition(), m.offset()] = m.key().decode()
            pos = {tp.partition: tp.offset for tp in c.position([TopicPartition(topic, p) for p in parts])}
            if all(ends[p] == 0 or pos[p] >= ends[p] for p in parts):
                return out
            assert time.monotonic() < deadline, f"could not read {topic} to its end: {pos} vs {ends}"
    finally:
        c.close()


def watermarks(cluster: Cluster, topic: str, partitions: int) -> tuple[dict[int, int], dict[int, int]]:
    """(high watermarks, last stable offsets) per partition."""
    hw, lso = {}, {}
    for isolation, out in (("read_uncommitted", hw), ("read_committed", lso)):
        c = _consumer(cluster, isolation)
        for p in range(partitions):
            out[p] = c.get_watermark_offsets(TopicPartition(topic, p), 10, False)[1]
        c.close()
    return hw, lso


def group_offsets(cluster: Cluster, group: str, topic: str, partitions: int) -> dict[int, int]:
    c = _consumer(cluster, "read_committed", group)
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(partitions)], 10)
        return {tp.partition: tp.offset for tp in tps if tp.offset >= 0}
    finally:
        c.close()


def sink_rows(manifest: dict) -> list[tuple[str, int, int, str]]:
    s = manifest["sink"]
    con = duckdb.connect(s["duckdb"], read_only=True)  # also proves the pipeline closed its connection
    try:
        return con.execute(f"SELECT {s['topic_column']}, {s['partition_column']}, {s['offset_column']}, "
                           f"{s['key_column']} FROM {s['table']}").fetchall()
    finally:
        con.close()


def sink_offsets(manifest: dict) -> dict[int, int]:
    s = manifest["sink"]
    con = duckdb.connect(s["duckdb"], read_only=True)
    try:
        rows = con.execute(f'SELECT "partition", next_offset FROM {s["offsets_table"]} WHERE topic = ?',
                           [manifest["output_topic"]]).fetchall()
        return dict(rows)
    finally:
        con.close()


# ---- the audit rules, re-implemented -----------------------------------------------------------------


def _runs(order: list[int], flagged: set[int]) -> list[list[int]]:
    runs: list[list[int]] = [[]]
    for o in order:
        if o in flagged:
            runs[-1].append(o)
        elif runs[-1]:
            runs.append([])
    return [r for r in runs if r]


def defects(rows, topic: str, committed: dict, uncommitted: dict, lso: dict[int, int]) -> list[dict]:
    """What an audit of the sink against the log finds (gap, duplicate, phantom_aborted, key_duplicate)."""
    count = Counter((p, o) for t, p, o, _ in rows if t == topic)
    keys = {(p, o): k for t, p, o, k in rows if t == topic}
    aborted = {po for po in uncommitted if po not in committed and po[1] < lso[po[0]]}
    found: list[dict] = []
    for p in sorted({p for p, _ in uncommitted}):
        order = sorted(o for q, o in committed if q == p)
        # count: extra rows of a duplicate, missing records of a gap.
        for kind, flagged, weight in (("duplicate", {o for o in order if count[p, o] > 1}, -1),
                                      ("gap", {o for o in order if count[p, o] == 0}, None)):
            for run in _runs(order, flagged):
                n = len(run) if weight is None else sum(count[p, o] + weight for o in run)
                found.append({"kind": kind, "topic": topic, "partition": p, "first_offset": run[0],
                              "last_offset": run[-1], "count": n})
        # Data offsets in log order; markers are in neither view, so they can't split a run.
        data = sorted(o for q, o in uncommitted if q == p)
        leaked = {o for o in data if (p, o) in aborted and count[p, o] > 0}
        for run in _runs(data, leaked):
            found.append({"kind": "phantom_aborted", "topic": topic, "partition": p, "first_offset": run[0],
                          "last_offset": run[-1], "count": sum(count[p, o] for o in run)})
    by_key: dict[str, list[tuple[int, int]]] = {}
    for po in sorted(po for po in count if po in committed):
        by_key.setdefault(keys[po], []).append(po)
    for key, places in sorted(by_key.items()):
        if len(places) > 1:
            offsets = [o for _, o in places]
            found.append({"kind": "key_duplicate", "topic": topic, "partition": places[0][0],
                          "first_offset": min(offsets), "last_offset": max(offsets), "count": len(offsets),
                          "key": key, "offsets": offsets})
    return sorted(found, key=lambda f: (f["kind"], f["topic"], f["partition"], f["first_offset"]))


def without_fault(findings: list[dict]) -> list[dict]:
    return [{k: v for k, v in f.items() if k != "fault"} for f in findings]


# ---- fixtures / helpers -------------------------------------------------------------------------------


def run(cluster: Cluster, unique: str, tmp_path: Path, faults=(), records: int = RECORDS) -> dict:
    manifest = run_pipeline(cluster, unique, tmp_path / "run", faults=faults, records=records)
    assert json.loads((tmp_path / "run" / "manifest.json").read_text()) == manifest
    return manifest


def check_log_ground_truth(cluster: Cluster, manifest: dict) -> None:
    """aborted_ranges and markers of every topic the pipeline wrote match the consumers' views."""
    for topic in (manifest["source_topic"], manifest["output_topic"]):
        committed = read_log(cluster, topic, committed=True)
        uncommitted = read_log(cluster, topic, committed=False)
        hw, lso = watermarks(cluster, topic, manifest["partitions"])
        assert set(committed) <= set(uncommitted)
        aborted = {po for po in uncommitted if po not in committed and po[1] < lso[po[0]]}
        in_ranges = {(r["partition"], o) for r in manifest["aborted_ranges"] if r["topic"] == topic
                     for o in range(r["first_offset"], r["last_offset"] + 1)}
        assert in_ranges == aborted, topic
        markers = {(p, o) for p in hw for o in range(lso[p]) if (p, o) not in uncommitted}
        assert {(m["partition"], m["offset"]) for m in manifest["markers"] if m["topic"] == topic} == markers
        assert all(m["type"] in ("COMMIT", "ABORT") for m in manifest["markers"])


def check_findings(cluster: Cluster, manifest: dict) -> list[dict]:
    topic = manifest["output_topic"]
    committed = read_log(cluster, topic, committed=True)
    uncommitted = read_log(cluster, topic, committed=False)
    _, lso = watermarks(cluster, topic, manifest["partitions"])
    rows = sink_rows(manifest)
    found = defects(rows, topic, committed, uncommitted, lso)
    assert found == without_fault(manifest["expected_findings"])
    assert len(rows) == manifest["sink_rows"]
    # A row's key is the key of the record at its offset.
    assert all(committed.get((p, o), uncommitted.get((p, o))) == k for _, p, o, k in rows)
    return found


# ---- tests --------------------------------------------------------------------------------------------


def test_clean_run_sink_equals_committed_output(cluster: Cluster, unique: str, tmp_path: Path) -> None:
    manifest = run(cluster, unique, tmp_path)
    topic = manifest["output_topic"]
    committed = read_log(cluster, topic, committed=True)
    uncommitted = read_log(cluster, topic, committed=False)
    rows = sink_rows(manifest)

    # Exactly the committed records, once each, with their keys.
    assert Counter((p, o) for _, p, o, _ in rows) == Counter(committed.keys())
    assert {(p, o): k for _, p, o, k in rows} == committed
    assert {t for t, *_ in rows} == {topic}
    aborted = set(uncommitted) - set(committed)
    assert aborted, "the process stage should have left aborted transactions in the output topic"
    assert not aborted & {(p, o) for _, p, o, _ in rows}
    assert manifest["expected_findings"] == []
    assert manifest["source_records"] == RECORDS
    assert manifest["committed_output_records"] == len(committed) == manifest["sink_rows"] == RECORDS
    assert len(set(committed.values())) == RECORDS  # every order exactly once

    # Offsets stored with the rows == where a consumer would go next == the sink group's Kafka offsets;
    # and the processor's transactional offsets reached the end of the source topic.
    hw, lso = watermarks(cluster, topic, manifest["partitions"])
    assert hw == lso
    assert sink_offsets(manifest) == lso
    assert group_offsets(cluster, manifest["groups"]["sink"], topic, manifest["partitions"]) == lso
    _, src_lso = watermarks(cluster, manifest["source_topic"], manifest["partitions"])
    assert group_offsets(cluster, manifest["groups"]["processor"], manifest["source_topic"],
                         manifest["partitions"]) == src_lso

    check_log_ground_truth(cluster, manifest)
    assert all(r["producer_id"] >= 0 for r in manifest["aborted_ranges"])  # DescribeTransactions worked

    config = load_config(tmp_path / "run" / "eosctl.toml")
    pipeline = config.pipeline(unique)
    assert pipeline.source_topics == (topic,)
    assert pipeline.group == manifest["groups"]["sink"]
    assert pipeline.output_topic == topic
    assert pipeline.transactional_id_prefix == f"{unique}."
    assert pipeline.sink is not None and pipeline.sink.duckdb == manifest["sink"]["duckdb"]
    assert (pipeline.sink.table, pipeline.sink.offsets_table, pipeline.sink.key_column) == (
        "orders_sink", "sink_offsets", "order_id")
    assert config.cluster_of(pipeline).bootstrap_servers == cluster.bootstrap_servers


@pytest.mark.parametrize("fault, kind", [
    ("duplicate-replay", "duplicate"),
    ("skip", "gap"),
    ("aborted-leak", "phantom_aborted"),
    ("upstream-retry", "key_duplicate"),
])
def test_sink_fault_matches_manifest(cluster: Cluster, unique: str, tmp_path: Path, fault: str,
                                    kind: str) -> None:
    manifest = run(cluster, unique, tmp_path, faults=[fault])
    found = check_findings(cluster, manifest)
    assert found and {f["kind"] for f in found} == {kind}
    assert {f["fault"] for f in manifest["expected_findings"]} == {fault}
    if fault in ("duplicate-replay", "skip"):
        (f,) = found
        assert f["count"] == f["last_offset"] - f["first_offset"] + 1 >= 2  # one contiguous run
    if fault == "aborted-leak":
        aborted = sum(r["last_offset"] - r["first_offset"] + 1 for r in manifest["aborted_ranges"]
                      if r["topic"] == manifest["output_topic"])
        assert sum(f["count"] for f in found) == aborted
    if fault == "upstream-retry":
        (f,) = found
        assert f["count"] == 2 and f["key"] == f"o-{RECORDS:06d}"
        assert manifest["source_records"] == RECORDS + 2  # one extra order, written twice
    check_log_ground_truth(cluster, manifest)


def test_zombie_is_fenced(cluster: Cluster, unique: str, tmp_path: Path) -> None:
    manifest = run(cluster, unique, tmp_path, faults=["zombie"])
    (fencing,) = manifest["fencing"]
    assert fencing["transactional_id"] == f"{unique}.processor"
    assert fencing["producer_id"] == fencing["old_producer_id"] >= 0
    assert fencing["new_epoch"] > fencing["old_epoch"]
    assert fencing["zombie_error"] in ("_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH")
    assert manifest["zombie_writes"] == []
    # The zombie's open transaction was aborted by the coordinator; the sink is still exactly right.
    assert check_findings(cluster, manifest) == []
    check_log_ground_truth(cluster, manifest)


def test_hanging_transaction_pins_the_lso(cluster: Cluster, unique: str, tmp_path: Path) -> None:
    manifest = run(cluster, unique, tmp_path, faults=["hanging"])
    (h,) = manifest["hanging"]
    assert h["transactional_id"] == f"{unique}.hanging" and h["topic"] == manifest["output_topic"]
    p = h["partition"]
    hw, lso = watermarks(cluster, h["topic"], manifest["partitions"])
    assert lso[p] == h["first_offset"]
    assert hw[p] == h["last_offset"] + 1
    # The sink finished before the transaction began: its offsets sit exactly at the LSO.
    assert sink_offsets(manifest)[p] == h["first_offset"]
    assert check_findings(cluster, manifest) == []
    # Committed data written after the open transaction moves the HW but not the LSO: it stays pinned.
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    producer.produce(h["topic"], b"after", key=b"after", partition=p)
    assert producer.flush(10) == 0
    hw_after, lso_after = watermarks(cluster, h["topic"], manifest["partitions"])
    assert (hw_after[p], lso_after[p]) == (hw[p] + 1, h["first_offset"])


def test_all_faults_together(cluster: Cluster, unique: str, tmp_path: Path) -> None:
    sink_faults = [f for f in FAULTS if not f.startswith("stage-")]  # the stage's: test_hop_audit.py
    manifest = run(cluster, unique, tmp_path, faults=sink_faults)
    found = check_findings(cluster, manifest)
    assert {f["kind"] for f in found} == {"duplicate", "gap", "phantom_aborted", "key_duplicate"}
    assert manifest["faults"] == sink_faults
    assert len(manifest["hanging"]) == 1 and len(manifest["fencing"]) == 1
    check_log_ground_truth(cluster, manifest)


def test_rerun_with_same_prefix_starts_clean(cluster: Cluster, unique: str, tmp_path: Path) -> None:
    # The first run leaves a hanging transaction, a gap and committed group offsets behind.
    run(cluster, unique, tmp_path, faults=["hanging", "skip"], records=30)
    manifest = run(cluster, unique, tmp_path, records=30)
    assert manifest["expected_findings"] == [] and manifest["hanging"] == []
    hw, lso = watermarks(cluster, manifest["output_topic"], manifest["partitions"])
    assert hw == lso  # the old open transaction is gone with the old topic
    assert check_findings(cluster, manifest) == []
    assert manifest["sink_rows"] == 30


def test_unknown_fault_is_rejected(cluster: Cluster, tmp_path: Path) -> None:
    with pytest.raises(EosctlError) as e:
        run_pipeline(cluster, "unused", tmp_path, faults=["chaos-monkey"])
    assert "chaos-monkey" in str(e.value)
    assert all(name in str(e.value) for name in FAULTS)
