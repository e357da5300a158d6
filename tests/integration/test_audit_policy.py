"""The audit's policy on Apache Kafka 4.4 (issue 53): a waiver turns exit 1 into 0 until its expiry (a fixed
clock), the HTML and JUnit reports show the finding waived; levels per kind; --store-failures writes the
sink rows and the Kafka records behind each finding as Parquet.

One topic, one partition, offsets 0-9 (plain produce); the sink misses 3-4 and holds 7 twice."""

from __future__ import annotations

import json
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import duckdb
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.helpers import eosctl

pytestmark = pytest.mark.integration

BEFORE_EXPIRY = 1_798_761_599_000  # 2026-12-31T23:59:59Z
AFTER_EXPIRY = 1_798_761_600_000  # 2027-01-01T00:00:00Z: "expires = 2026-12-31" waived through that day


@pytest.fixture(scope="module")
def topic(bootstrap: str) -> str:
    name = "policy" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])[name].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(10):
        producer.produce(name, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0,
                         headers=[("trace", f"t{i}".encode())])
    assert producer.flush(30) == 0
    return name


@pytest.fixture
def setup(topic: str, bootstrap: str, tmp_path: Path) -> Path:
    sink = tmp_path / "sink.duckdb"
    con = duckdb.connect(str(sink))
    con.execute("CREATE TABLE sink (src_topic VARCHAR, src_partition INTEGER, src_offset BIGINT, v VARCHAR)")
    con.executemany("INSERT INTO sink VALUES (?, 0, ?, ?)",
                    [(topic, o, f"v{o}") for o in (0, 1, 2, 5, 6, 7, 7, 8, 9)])
    con.close()
    (tmp_path / "waivers.toml").write_text(f"""
[[waivers]]
topic = "{topic}"
partition = 0
kind = "gap"
first_offset = 3
last_offset = 4
reason = "lost in the replay of INC-7"
reference = "INC-7"
expires = 2026-12-31
""")
    cfg = tmp_path / "eosctl.toml"
    cfg.write_text(f"""
[clusters.local]
bootstrap_servers = "{bootstrap}"

[pipelines.p]
source_topics = ["{topic}"]

[pipelines.p.sink]
duckdb = "{sink}"

[audit]
engine = "local"
levels.duplicate = "warn"
""")
    return cfg


def clock(monkeypatch: pytest.MonkeyPatch, ms: int) -> None:
    monkeypatch.setattr("eosctl.report.policy.now_ms", lambda: ms)


def test_a_waiver_passes_the_audit_until_its_expiry(setup: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    cfg, waivers = str(setup), str(tmp_path / "waivers.toml")
    plain = eosctl("audit", "-c", cfg, "--format", "json")
    assert plain.exit_code == 1  # the gap fails; the duplicate only warns ([audit.levels])
    doc = json.loads(plain.stdout)
    assert [(f["kind"], f["first_offset"], f["last_offset"]) for f in doc["findings"]] == [
        ("gap", 3, 4), ("duplicate", 7, 7)]
    assert doc["levels"] == [{"kind": "duplicate", "warn": 1, "fail": None, "count": 1, "level": "warn"}]

    clock(monkeypatch, BEFORE_EXPIRY)
    waived = eosctl("audit", "-c", cfg, "--waivers", waivers, "--format", "json")
    assert waived.exit_code == 0, waived.output
    doc = json.loads(waived.stdout)
    assert doc["verdict"] == "pass" and doc["summary"]["waived_findings"] == 1
    assert doc["findings"][0]["waiver"]["reason"] == "lost in the replay of INC-7"
    junit = eosctl("audit", "-c", cfg, "--waivers", waivers, "--format", "junit")
    assert junit.exit_code == 0
    suite = ET.fromstring(junit.stdout)
    assert suite.get("failures") == "0"
    assert [s.get("message") for s in suite.iter("skipped")] == [
        "gap at offsets 3..4 (2) waived: lost in the replay of INC-7 (INC-7), until 2026-12-31"]
    html = tmp_path / "audit.html"
    result = eosctl("audit", "-c", cfg, "--waivers", waivers, "--format", "html", "--out", str(html))
    assert result.exit_code == 0
    page = html.read_text()
    assert '(waived)</span>' in page
    assert "waived: lost in the replay of INC-7 (INC-7), until 2026-12-31" in page

    clock(monkeypatch, AFTER_EXPIRY)
    expired = eosctl("audit", "-c", cfg, "--waivers", waivers)
    assert expired.exit_code == 1 and "gap (waiver expired)" in expired.stdout

    # --level wins over the config's: the duplicate fails too
    clock(monkeypatch, BEFORE_EXPIRY)
    strict = eosctl("audit", "-c", cfg, "--waivers", waivers, "--level", "duplicate=fail", "--format", "json")
    assert strict.exit_code == 1 and json.loads(strict.stdout)["summary"]["failing_findings"] == 1


def test_a_wrong_waiver_file_is_one_line(setup: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[[waivers]]\ntopic = "t"\nkind = "gap"\n')
    result = eosctl("audit", "-c", str(setup), "--waivers", str(bad))
    assert result.exit_code == 2 and "waivers[0]: missing key reason" in result.output
    assert len(result.output.strip().splitlines()) == 1
    # the report never replaces the waiver file it read
    result = eosctl("audit", "-c", str(setup), "--waivers", str(bad), "--out", str(bad), "--force")
    assert result.exit_code == 2 and bad.read_text().startswith("[[waivers]]")


def test_store_failures_writes_the_rows_of_each_finding(setup: Path, tmp_path: Path, topic: str) -> None:
    out = tmp_path / "failures"
    result = eosctl("audit", "-c", str(setup), "--store-failures", str(out))
    assert result.exit_code == 1, result.output
    assert "stored the rows of 2 findings" in result.stderr
    con = duckdb.connect()
    found = con.execute(f"SELECT id, kind, first_offset, last_offset FROM '{out}/findings.parquet' "
                        "ORDER BY id").fetchall()
    assert found == [(0, "gap", 3, 4), (1, "duplicate", 7, 7)]
    records = con.execute(f"SELECT finding_id, \"offset\", key, value, headers FROM "
                          f"'{out}/kafka_records.parquet' ORDER BY finding_id, \"offset\"").fetchall()
    assert [(r[0], r[1], r[2], r[3]) for r in records] == [(0, 3, b"k3", b"v3"), (0, 4, b"k4", b"v4"),
                                                          (1, 7, b"k7", b"v7")]
    assert records[0][4] == [{"key": "trace", "value": b"t3"}]
    rows = con.execute(f"SELECT finding_id, src_topic, src_offset, v FROM '{out}/sink_rows.parquet'"
                       ).fetchall()
    assert rows == [(1, topic, 7, "v7"), (1, topic, 7, "v7")]  # the gap has no rows; the duplicate two
    again = eosctl("audit", "-c", str(setup), "--store-failures", str(out))
    assert again.exit_code == 2 and "exists; name a new directory" in again.output


@pytest.fixture
def configured(setup: Path) -> Path:
    """The config naming its waiver file ([audit] waivers): every entry point reads it, not only `audit`."""
    setup.write_text(setup.read_text().replace('engine = "local"',
                                               'engine = "local"\nwaivers = "waivers.toml"'))
    return setup


def test_snapshot_with_audit_stores_the_configured_waivers_verdict(configured: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from eosctl.inspection.snapshot import load_snapshot

    clock(monkeypatch, BEFORE_EXPIRY)
    snap = tmp_path / "snap.duckdb"
    result = eosctl("snapshot", "-c", str(configured), "-p", "p", "--with-audit", "--out", str(snap))
    assert result.exit_code == 0, result.output
    report = load_snapshot(snap).audit
    assert [(f.kind, f.first_offset, f.waived) for f in report.findings] == [("gap", 3, True),
                                                                           ("duplicate", 7, False)]
    assert report.verdict == "pass" and report.failing == []
    assert report.waivers[0]["reference"] == "INC-7" and report.waivers[0]["matched"] == 1

    clock(monkeypatch, AFTER_EXPIRY)
    again = tmp_path / "again.duckdb"
    assert eosctl("snapshot", "-c", str(configured), "-p", "p", "--with-audit", "--out", str(again)
                  ).exit_code == 0
    assert load_snapshot(again).audit.verdict == "fail"


def test_the_exporters_audit_counts_a_waived_finding_as_not_failing(configured: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    def metrics(path: Path) -> dict[str, float]:
        return {line.split("{")[0]: float(line.rsplit(" ", 1)[1]) for line in path.read_text().splitlines()
                if line.startswith(("eosctl_audit_passed", "eosctl_audit_failing_findings",
                                    "eosctl_audit_waived_findings"))}

    clock(monkeypatch, BEFORE_EXPIRY)
    prom = tmp_path / "eosctl.prom"
    result = eosctl("exporter", "-c", str(configured), "-p", "p", "--once", "--textfile", str(prom),
                    "--audit-every", "1m")
    assert result.exit_code == 0, result.output
    assert metrics(prom) == {"eosctl_audit_passed": 1, "eosctl_audit_failing_findings": 0,
                             "eosctl_audit_waived_findings": 1}
    assert 'eosctl_audit_findings{cluster="local",kind="gap",pipeline="p"} 1' in prom.read_text()

    clock(monkeypatch, AFTER_EXPIRY)
    result = eosctl("exporter", "-c", str(configured), "-p", "p", "--once", "--textfile", str(prom),
                    "--audit-every", "1m", "--force")
    assert result.exit_code == 0, result.output
    assert metrics(prom) == {"eosctl_audit_passed": 0, "eosctl_audit_failing_findings": 1,
                             "eosctl_audit_waived_findings": 0}


def test_the_tui_shows_a_configured_waiver_waived_and_passes(configured: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from tests.support.tui import tui_audit_view

    clock(monkeypatch, BEFORE_EXPIRY)
    _, report, rows, head = asyncio.run(tui_audit_view(["tui", "-c", str(configured), "-p", "p"]))
    assert report.verdict == "pass"
    assert [(r[0], r[3]) for r in rows] == [("gap (waived)", "3..4"), ("duplicate", "7")]
    assert rows[0][5].startswith("waived: lost in the replay of INC-7 (INC-7), until 2026-12-31")
    assert head.startswith(" PASS  2 findings") and "1 finding waived" in head
