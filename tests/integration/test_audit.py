"""`eosctl audit` on the reference pipeline: each fault mode gives exactly its manifest's findings.

The pipelines run once per module (one per fault mode plus a clean run) on the session's broker; the
audits go through the CLI (CliRunner, --format json), every test once per engine: Spark (the session's
one SparkSession) and local (a process pool). test_engines_agree compares the two reports directly.
"""

from __future__ import annotations

import json
import re
import shutil
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from eosctl.cli import main
from eosctl.sandbox.pipeline import FAULTS, run_pipeline
from tests.support.helpers import eosctl

pytestmark = [pytest.mark.integration, pytest.mark.spark]

CLEAN = "clean"
# The stage's own faults are audited hop by hop in test_hop_audit.py; here, the sink's.
SINK_FAULTS = [f for f in FAULTS if not f.startswith("stage-")]


class Runs:
    """Pipeline runs of this module, each made on first use and then shared by every test."""

    def __init__(self, cluster, tmp_path_factory) -> None:
        self.cluster, self.tmp = cluster, tmp_path_factory
        self.done: dict[str, tuple[Path, dict]] = {}

    def __getitem__(self, mode: str) -> tuple[Path, dict]:
        if mode not in self.done:
            prefix = f"a{uuid.uuid4().hex[:8]}{mode.replace('-', '')[:6]}"
            workdir = self.tmp.mktemp(f"audit-{mode}")
            faults = [] if mode == CLEAN else [mode]
            manifest = run_pipeline(self.cluster, prefix, workdir, faults=faults, records=60)
            self.done[mode] = (workdir, manifest)
        return self.done[mode]


@pytest.fixture(scope="module")
def runs(cluster, tmp_path_factory) -> Runs:
    """mode -> (workdir, manifest): a clean run and one run per fault mode, once per module."""
    return Runs(cluster, tmp_path_factory)


ENGINES = ("spark", "local")
_engine = {"name": "spark"}


@pytest.fixture(autouse=True, params=ENGINES)
def engine(request) -> str:
    """Every audit of a test runs on this engine (the helper passes --engine)."""
    if request.param == "spark":
        request.getfixturevalue("spark")  # the suite's session, which the audit borrows
    _engine["name"] = request.param
    return request.param


def audit(*args: str) -> tuple[int, dict | None, str]:
    result = eosctl("audit", "--engine", _engine["name"], *args, columns=None)
    try:
        report = json.loads(result.stdout)
    except ValueError:
        report = None
    return result.exit_code, report, result.stderr


def sink_hop(workdir: Path) -> tuple[str, ...]:
    """The run's config and its sink hop (-p PREFIX): these tests audit the sink; the config's default, the
    whole pipeline, is audited in test_hop_audit.py."""
    prefix = json.loads((workdir / "manifest.json").read_text())["prefix"]
    return ("-c", str(workdir / "eosctl.toml"), "-p", prefix)


def comparable(findings: list[dict]) -> list[tuple]:
    return sorted((f["kind"], f["topic"], f["partition"], f["first_offset"], f["last_offset"], f["count"],
                   f.get("key"), tuple(f["offsets"]) if f.get("offsets") is not None else None)
                  for f in findings)


@pytest.mark.parametrize("mode", [CLEAN, *SINK_FAULTS])
def test_findings_equal_the_manifest(runs, spark, mode):
    workdir, manifest = runs[mode]
    code, report, err = audit(*sink_hop(workdir), "--format", "json")
    assert report is not None, err
    assert comparable(report["findings"]) == comparable(manifest["expected_findings"])
    assert report["verdict"] == ("fail" if manifest["expected_findings"] else "pass")
    assert code == (1 if manifest["expected_findings"] else 0)
    assert {p["topic"] for p in report["partitions"]} == set(manifest["audited_topics"])


def test_clean_run_passes_with_every_committed_record_once(runs, spark):
    workdir, manifest = runs[CLEAN]
    code, report, _ = audit(*sink_hop(workdir), "--format", "json")
    assert code == 0 and report["verdict"] == "pass" and report["findings"] == []
    assert report["summary"]["findings"] == dict.fromkeys(report["summary"]["findings"], 0)
    assert sum(p["expected_records"] for p in report["partitions"]) == manifest["committed_output_records"]
    assert sum(p["sink_rows"] for p in report["partitions"]) == manifest["sink_rows"]
    assert len(report["partitions"]) == manifest["partitions"]


def test_hanging_transaction_holds_the_lso(runs, spark):
    workdir, manifest = runs["hanging"]
    _, report, _ = audit(*sink_hop(workdir), "--format", "json")
    hang = manifest["hanging"][0]
    p0 = next(p for p in report["partitions"] if p["partition"] == hang["partition"])
    assert p0["last_stable_offset"] == hang["first_offset"]
    assert p0["high_watermark"] == hang["last_offset"] + 1


def test_fail_on_limits_what_fails(runs, spark):
    workdir, _ = runs["duplicate-replay"]
    code, report, _ = audit(*sink_hop(workdir), "--format", "json", "--fail-on", "gap")
    assert code == 0 and report["verdict"] == "pass"
    assert [f["kind"] for f in report["findings"]] == ["duplicate"]
    assert report["fail_on"] == ["gap"]


def test_flag_form_table_output_and_out_file(runs, spark, tmp_path):
    workdir, manifest = runs["skip"]
    gap = manifest["expected_findings"][0]
    sink = manifest["sink"]
    out = tmp_path / "report.txt"
    code, _, _ = audit("--bootstrap", manifest["bootstrap"], "--topic", manifest["audited_topics"][0],
                       "--sink-duckdb", sink["duckdb"], "--sink-table", sink["table"], "--out", str(out))
    assert code == 1
    text = out.read_text()
    assert "FAIL" in text and "gap" in text
    assert f"{gap['first_offset']}..{gap['last_offset']}" in text or str(gap["first_offset"]) in text


def test_junit_report(runs, engine):
    workdir, manifest = runs["aborted-leak"]
    result = CliRunner().invoke(main, ["audit", *sink_hop(workdir), "--format", "junit",
                                       "--engine", engine])
    assert result.exit_code == 1, result.stderr
    suite = ET.fromstring(result.stdout)
    assert int(suite.get("failures")) == len(manifest["expected_findings"])
    # A testcase per clean partition and one per failing finding (issue 32).
    failing = {(f["topic"], f["partition"]) for f in manifest["expected_findings"]}
    found = len(manifest["expected_findings"])
    assert int(suite.get("tests")) == manifest["partitions"] - len(failing) + found
    kinds = {f.get("type") for f in suite.iter("failure")}
    assert kinds == {f["kind"] for f in manifest["expected_findings"]}


def test_parquet_sink_gives_the_same_findings(runs, spark, tmp_path):
    import duckdb

    workdir, manifest = runs["duplicate-replay"]
    sink = manifest["sink"]
    with duckdb.connect(sink["duckdb"], read_only=True) as con:
        con.execute(f"COPY {sink['table']} TO '{tmp_path / 'part-0.parquet'}' (FORMAT parquet)")
    code, report, err = audit("--bootstrap", manifest["bootstrap"], "--topic", manifest["audited_topics"][0],
                              "--sink-parquet", str(tmp_path / "*.parquet"), "--format", "json")
    assert report is not None, err
    assert comparable(report["findings"]) == comparable(
        [f for f in manifest["expected_findings"] if f["kind"] != "key_duplicate"])
    assert code == (1 if report["findings"] else 0)


def test_rows_for_unknown_topic_and_partition_are_phantom_beyond_hw(runs, spark, tmp_path):
    import duckdb

    _, manifest = runs[CLEAN]
    sink = manifest["sink"]
    copy = tmp_path / "sink.duckdb"
    shutil.copy(sink["duckdb"], copy)
    topic = manifest["audited_topics"][0]
    with duckdb.connect(str(copy)) as con:
        con.execute(f"INSERT INTO {sink['table']} (src_topic, src_partition, src_offset) VALUES "
                    f"('{topic}', 7, 3), ('{topic}', 7, 4), ('no-such-topic-{uuid.uuid4().hex[:6]}', 0, 0)")
    code, report, err = audit("--bootstrap", manifest["bootstrap"], "--topic", topic, "--sink-duckdb",
                              str(copy), "--sink-table", sink["table"], "--format", "json")
    assert code == 1, err
    phantoms = [(f["topic"] == topic, f["partition"], f["first_offset"], f["last_offset"], f["count"])
                for f in report["findings"]]
    assert sorted(phantoms) == [(False, 0, 0, 0, 1), (True, 7, 3, 4, 2)]
    assert {f["kind"] for f in report["findings"]} == {"phantom_beyond_hw"}
    missing = [p for p in report["partitions"] if not p["exists"]]
    assert len(missing) == 2


def test_wrong_column_names_exit_2_with_one_line(runs, tmp_path):
    import duckdb

    _, manifest = runs[CLEAN]
    bad = tmp_path / "bad.duckdb"
    with duckdb.connect(str(bad)) as con:
        con.execute("CREATE TABLE orders_sink (topic VARCHAR, part INTEGER, off BIGINT)")
    code, _, err = audit("--bootstrap", manifest["bootstrap"], "--topic", manifest["audited_topics"][0],
                         "--sink-duckdb", str(bad), "--sink-table", "orders_sink")
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("eosctl: error:")
    assert "src_topic" in lines[0] and "topic, part, off" in lines[0]
    assert "Traceback" not in err


def test_missing_sink_file_and_unknown_topic_exit_2(runs, tmp_path):
    _, manifest = runs[CLEAN]
    code, _, err = audit("--bootstrap", manifest["bootstrap"], "--topic", manifest["audited_topics"][0],
                         "--sink-duckdb", str(tmp_path / "nope.duckdb"), "--sink-table", "t")
    assert code == 2 and "not found" in err
    sink = manifest["sink"]
    code, _, err = audit("--bootstrap", manifest["bootstrap"], "--topic", f"nope-{uuid.uuid4().hex[:6]}",
                         "--sink-duckdb", sink["duckdb"], "--sink-table", sink["table"])
    assert code == 2 and "does not exist" in err


@pytest.mark.parametrize("engine", ["local"], indirect=True)
def test_bad_fail_on_is_a_usage_error(engine):
    result = CliRunner().invoke(main, ["audit", "--bootstrap", "x:1", "--topic", "t", "--sink-duckdb", "f",
                                       "--fail-on", "gaps"])
    assert result.exit_code == 2 and "unknown finding kind 'gaps'" in result.stderr


def _sink_with_stored_offset(manifest: dict, tmp_path: Path, delta: int) -> tuple[Path, str, int]:
    """A copy of the run's sink with partition 1's stored next offset moved by ``delta``."""
    import duckdb

    sink, topic = manifest["sink"], manifest["audited_topics"][0]
    copy = tmp_path / "sink.duckdb"
    shutil.copy(sink["duckdb"], copy)
    with duckdb.connect(str(copy)) as con:
        (stored,) = con.execute(f"SELECT next_offset FROM {sink['offsets_table']} WHERE topic = ? "
                                f"AND \"partition\" = 1", [topic]).fetchone()
        con.execute(f"UPDATE {sink['offsets_table']} SET next_offset = next_offset + ? "
                    f"WHERE \"partition\" = 1", [delta])
    return copy, topic, stored


def _audit_offsets(manifest: dict, copy: Path, topic: str) -> tuple[int, dict, str]:
    sink = manifest["sink"]
    return audit("--bootstrap", manifest["bootstrap"], "--topic", topic, "--sink-duckdb", str(copy),
                 "--sink-table", sink["table"], "--offsets-table", sink["offsets_table"],
                 "--group", manifest["groups"]["sink"], "--format", "json")


def test_stored_offsets_behind_the_group_are_offset_mismatch(runs, spark, tmp_path):
    _, manifest = runs[CLEAN]
    copy, topic, stored = _sink_with_stored_offset(manifest, tmp_path, -2)
    code, report, err = _audit_offsets(manifest, copy, topic)
    # Only committed data between the two offsets counts: the sink stored its position past the trailing
    # COMMIT marker, which a read_committed consumer never receives.
    markers = {m["offset"] for m in manifest["markers"] if m["topic"] == topic and m["partition"] == 1}
    data = sum(1 for o in (stored - 2, stored - 1) if o not in markers)
    assert data >= 1  # a transaction holds several records: at least one data offset before the marker
    assert code == 1, err
    assert comparable(report["findings"]) == [
        ("offset_mismatch", topic, 1, stored - 2, stored - 1, data, None, None)]
    assert report["findings"][0]["detail"] == (f"sink stored next offset {stored - 2}, "
                                               f"group {manifest['groups']['sink']} committed {stored}")


def test_stored_offset_before_the_trailing_marker_is_not_a_mismatch(runs, spark, tmp_path):
    # A sink that stores "last row + 1" and a group that committed past the COMMIT marker agree.
    _, manifest = runs[CLEAN]
    topic = manifest["audited_topics"][0]
    copy, _, stored = _sink_with_stored_offset(manifest, tmp_path, -1)
    markers = {m["offset"] for m in manifest["markers"] if m["topic"] == topic and m["partition"] == 1}
    assert stored - 1 in markers  # the sink stored its position past the trailing marker
    code, report, err = _audit_offsets(manifest, copy, topic)
    assert code == 0, err
    assert report["findings"] == []


def test_out_in_a_missing_directory_exits_2_before_auditing(runs, tmp_path, engine):
    workdir, _ = runs[CLEAN]
    out = tmp_path / "missing" / "r.json"
    result = CliRunner().invoke(main, ["audit", *sink_hop(workdir), "--format", "json",
                                       "--out", str(out), "--engine", engine])
    assert result.exit_code == 2
    assert result.stderr == (f"eosctl: error: cannot write the report to {out}: directory {out.parent} "
                             "does not exist; create it or pick another --out\n")
    assert result.stdout == ""


@pytest.mark.parametrize("engine", ["local"], indirect=True)
def test_a_failed_report_write_is_one_line(tmp_path, engine):
    from eosctl.base.errors import EosctlError
    from eosctl.commands import audit_cmd

    out = tmp_path / "r.json"
    out.mkdir()  # the directory check passes, then open() fails (IsADirectoryError)
    with pytest.raises(EosctlError, match=f"^cannot write the report to {out}: Is a directory$"):
        audit_cmd._emit("{}", "json", audit_cmd.Written(str(out), (), False))


def _same(report: dict) -> dict:
    keys = ("verdict", "fail_on", "summary", "partitions", "findings", "sink", "group")
    return {k: report[k] for k in keys}


@pytest.mark.parametrize("engine", ["spark"], indirect=True)
@pytest.mark.parametrize("mode", [CLEAN, *SINK_FAULTS])
def test_engines_agree(runs, mode, engine):
    """Spark and local return the identical report (everything but the engine and its timings), with the
    key column and the offsets table of the reference pipeline's config."""
    workdir, manifest = runs[mode]
    args = (*sink_hop(workdir), "--format", "json")
    _, on_spark, err = audit(*args)
    _engine["name"] = "local"
    _, on_local, err2 = audit(*args)
    assert on_spark is not None and on_local is not None, err + err2
    assert _same(on_local) == _same(on_spark)
    assert (on_spark["engine"]["name"], on_local["engine"]["name"]) == ("spark", "local")
    assert comparable(on_local["findings"]) == comparable(manifest["expected_findings"])


@pytest.mark.parametrize("engine", ["spark"], indirect=True)
@pytest.mark.parametrize("kind", ["duckdb", "parquet"])
def test_engines_agree_on_the_edge_cases(runs, tmp_path, engine, kind):
    """Phantom partitions and topics, offsets behind the group and the key rule across partitions; in a
    Parquet export of the sink too, whose key rows Spark reads itself (auditors.spark_sink)."""
    import duckdb

    _, manifest = runs["duplicate-replay"]
    sink, topic = manifest["sink"], manifest["audited_topics"][0]
    copy = tmp_path / "sink.duckdb"
    shutil.copy(sink["duckdb"], copy)
    table = sink["table"]
    with duckdb.connect(str(copy)) as con:
        (key,) = con.execute(f"SELECT order_id FROM {table} WHERE src_partition = 0 LIMIT 1").fetchone()
        con.execute(f"INSERT INTO {sink['table']} (src_topic, src_partition, src_offset, order_id) VALUES "
                    f"('{topic}', 7, 3, 'x'), ('no-such-topic-{uuid.uuid4().hex[:6]}', 0, 0, 'y')")
        # The same business key on a committed record of another partition: a cross-partition duplicate.
        (row,) = con.execute(f"SELECT min(src_offset) FROM {table} WHERE src_partition = 1").fetchone()
        con.execute(f"UPDATE {sink['table']} SET order_id = ? WHERE src_partition = 1 AND src_offset = ?",
                    [key, row])
        con.execute(f"UPDATE {sink['offsets_table']} SET next_offset = next_offset - 2 "
                    "WHERE \"partition\" = 2")
    where = ("--sink-duckdb", str(copy), "--sink-table", sink["table"],
             "--offsets-table", sink["offsets_table"])
    if kind == "parquet":
        with duckdb.connect(str(copy), read_only=True) as con:
            for name, into in ((table, "rows"), (sink["offsets_table"], "offsets")):
                (tmp_path / into).mkdir()
                con.execute(f"COPY {name} TO '{tmp_path / into / 'part-0.parquet'}' (FORMAT parquet)")
        where = ("--sink-parquet", str(tmp_path / "rows" / "*.parquet"),
                 "--offsets-table", str(tmp_path / "offsets" / "*.parquet"))
    args = ("--bootstrap", manifest["bootstrap"], "--topic", topic, *where, "--key-column", "order_id",
            "--group", manifest["groups"]["sink"], "--format", "json")
    # The key rule alone: with the content check, the row given another partition's key holds a key that
    # is not its record's, a content finding and no place of the key (one finding per row, docs/audit.md).
    _, checked, err = audit(*args)
    assert checked is not None, err
    assert [(f["partition"], f["first_offset"], f["cause"]["rule"]) for f in checked["findings"]
            if f["kind"] == "content_mismatch"] == [(1, row, "different_record")]
    assert not [f for f in checked["findings"] if f["kind"] == "key_duplicate" and f["key"] == key]
    args = (*args, "--no-content-check")
    _, on_spark, err = audit(*args)
    _engine["name"] = "local"
    _, on_local, err2 = audit(*args)
    assert on_spark is not None and on_local is not None, err + err2
    assert _same(on_local) == _same(on_spark)
    # Spark reads the Parquet export's keys itself; a DuckDB file's are the tasks'.
    assert (on_spark["engine"]["keys_read_by"], on_local["engine"].get("keys_read_by")) == (
        "spark" if kind == "parquet" else "tasks", None)
    kinds = {f["kind"] for f in on_spark["findings"]}
    assert {"phantom_beyond_hw", "offset_mismatch", "key_duplicate"} <= kinds
    cross = [f for f in on_spark["findings"] if f["kind"] == "key_duplicate" and f["key"] == key]
    assert len(cross) == 1 and cross[0]["detail"].startswith("in ")


def test_the_engine_and_its_timings_are_in_the_report(runs, engine):
    workdir, _ = runs[CLEAN]
    _, report, err = audit(*sink_hop(workdir), "--format", "json")
    e = report["engine"]
    # 3 partitions, one leader: a task per slot on the suite's local[2]; the local engine runs an audit this
    # small as one task in eosctl's own process (no pool: issue 49).
    if engine == "spark":
        assert e["name"] == engine and e["tasks"] == min(3, 2)
    else:
        assert e["name"] == engine and e["tasks"] == 1 and e["workers"] == 0
    phases = ("prepare_seconds", "startup_seconds", "partitions_seconds", "keys_seconds", "scan_seconds",
              "reconcile_seconds")
    assert all(e[k] >= 0 for k in phases)
    # elapsed counts from the command's start: it covers every phase that ran one after the other.
    assert report["elapsed_seconds"] >= e["prepare_seconds"] + e["startup_seconds"] + e["partitions_seconds"]


def test_table_summary_shows_where_the_time_went(runs, engine, tmp_path):
    workdir, _ = runs[CLEAN]
    out = tmp_path / "report.txt"
    code, _, _ = audit(*sink_hop(workdir), "--out", str(out))
    assert code == 0
    last = out.read_text().strip().splitlines()[-1]
    assert re.fullmatch(rf"{engine} .+: metadata [\d.]+s, start-up [\d.]+s, tasks [\d.]+s, keys [\d.]+s "
                        r"\(task time: log scans [\d.]+s, sink [\d.]+s\)", last), last


@pytest.mark.parametrize("engine", ["local"], indirect=True)
def test_config_audit_engine_is_the_default_and_the_flag_wins(tmp_path, engine):
    from auditors import EngineOptions
    from eosctl.config.file import load_config

    path = tmp_path / "c.toml"
    path.write_text('[clusters.c]\nbootstrap_servers = "h:1"\n[audit]\nengine = "local"\n'
                    '[spark]\nmaster = "local[2]"\n')
    conf = load_config(path)
    assert EngineOptions.resolve(conf, "spark").engine == "local"
    assert EngineOptions.resolve(conf, "spark", engine="spark").master == "local[2]"
    assert EngineOptions.resolve(None, "local") == EngineOptions(engine="local", master="local[*]")
    path.write_text('[clusters.c]\nbootstrap_servers = "h:1"\n[audit]\nengine = "dask"\n')
    with pytest.raises(Exception, match=r"audit.engine must be one of local, spark, got 'dask'"):
        load_config(path)


@pytest.mark.parametrize("engine", ["local"], indirect=True)
def test_spark_flags_with_the_local_engine_are_a_usage_error(engine):
    result = CliRunner().invoke(main, ["audit", "--bootstrap", "x:1", "--topic", "t", "--sink-duckdb", "f",
                                       "--engine", "local", "--master", "local[2]"])
    assert result.exit_code == 2
    assert "--master, --remote and --driver-memory are for --engine spark" in result.stderr
