"""An output never replaces a file the command reads, nor any file without --force (issue 34, item 1).

Through the CLI, no broker: every refusal comes before anything connects (the config's cluster is a port
nothing listens on). The rule is one helper, eosctl.base.files.output_refusal.
"""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path

import duckdb
import pytest

from eosctl.base.files import shown
from tests.support.helpers import eosctl
from tests.support.samplereports import demo_report

run = partial(eosctl, columns=None, check=False)


def one_line(result) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.fixture
def sink(tmp_path: Path) -> Path:
    path = tmp_path / "sink.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE sink (src_topic VARCHAR, src_partition INT, src_offset BIGINT)")
    con.execute("CREATE TABLE mine AS SELECT 42 AS answer")
    con.close()
    return path


@pytest.fixture
def config(tmp_path: Path, sink: Path) -> Path:
    path = tmp_path / "c.toml"
    path.write_text('[clusters.a]\nbootstrap_servers = "127.0.0.1:1"\n'
                    '[pipelines.p]\nsource_topics = ["t"]\ngroup = "g"\n'
                    '[pipelines.p.sink]\nduckdb = "sink.duckdb"\n')
    return path


def _bytes(path: Path) -> bytes:
    return path.read_bytes()


def test_audit_out_naming_the_configs_sink_is_refused_and_the_sink_stays(config, sink):
    before = _bytes(sink)
    line = one_line(run("audit", "-c", str(config), "-p", "p", "--engine", "local", "--format", "json",
                        "--out", str(sink), "--force"))
    assert line == (f"eosctl: error: --out {shown(str(sink))} is a file this command reads; an output "
                    "never replaces "
                    "an input: pick another --out")
    assert _bytes(sink) == before
    assert duckdb.connect(str(sink), read_only=True).execute("SELECT answer FROM mine").fetchone() == (42,)


def test_audit_out_naming_the_sink_by_another_spelling_or_a_link_is_refused(config, sink, tmp_path):
    before = _bytes(sink)
    link, hard = tmp_path / "link.duckdb", tmp_path / "hard.duckdb"
    os.symlink(sink, link)
    os.link(sink, hard)
    for out in (str(link), str(hard), f"{tmp_path}/./sink.duckdb"):
        line = one_line(run("audit", "-c", str(config), "-p", "p", "--engine", "local", "--out", out,
                            "--force"))
        assert line == (f"eosctl: error: --out {shown(str(out))} is a file this command reads "
                        f"({shown(str(sink))}); an output never "
                        "replaces an input: pick another --out")
    assert _bytes(sink) == before and not sink.is_symlink()


def test_audit_out_naming_the_config_is_refused(config):
    before = config.read_text()
    line = one_line(run("audit", "-c", str(config), "-p", "p", "--out", str(config), "--force"))
    assert line == (f"eosctl: error: --out {shown(str(config))} is a file this command reads; an output "
                    "never replaces "
                    "an input: pick another --out")
    assert config.read_text() == before


def test_audit_out_to_an_existing_file_needs_force(config, tmp_path):
    out = tmp_path / "old.json"
    out.write_text("keep me")
    line = one_line(run("audit", "-c", str(config), "-p", "p", "--out", str(out)))
    assert line == (f"eosctl: error: --out {shown(str(out))} already exists; pass --force to replace it "
                    "or pick another "
                    "--out")
    assert out.read_text() == "keep me"


def test_report_out_naming_its_source_is_refused(tmp_path):
    src = tmp_path / "r.json"
    src.write_text(demo_report().to_json())
    before = src.read_text()
    line = one_line(run("report", str(src), "--out", str(src), "--force"))
    assert line == (f"eosctl: error: --out {shown(str(src))} is a file this command reads; an output "
                    "never replaces "
                    "an input: pick another --out")
    assert src.read_text() == before


def test_report_replaces_an_existing_page_only_with_force(tmp_path):
    src, out = tmp_path / "r.json", tmp_path / "r.html"
    src.write_text(demo_report().to_json())
    out.write_text("old page")
    assert "already exists; pass --force" in one_line(run("report", str(src), "--out", str(out)))
    assert out.read_text() == "old page"
    result = run("report", str(src), "--out", str(out), "--force")
    assert result.exit_code == 0, result.output
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert sorted(os.listdir(tmp_path)) == ["r.html", "r.json"]


def test_report_says_wrote_with_the_path_escaped(tmp_path):
    src = tmp_path / "r.json"
    src.write_text(demo_report().to_json())
    out = tmp_path / "x\x1b]0;pwned\x07.html"
    result = run("report", str(src), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stderr and "\\x1b]0;pwned\\x07.html" in result.stderr


def test_snapshot_force_out_naming_the_sink_is_refused(config, sink):
    before = _bytes(sink)
    line = one_line(run("snapshot", "-c", str(config), "-p", "p", "--force", "--out", str(sink)))
    assert line == (f"eosctl: error: --out {shown(str(sink))} is a file this command reads; an output "
                    "never replaces "
                    "an input: pick another --out")
    assert _bytes(sink) == before


def test_snapshot_out_naming_the_sink_given_on_the_command_line_is_refused(config, sink, tmp_path):
    other = tmp_path / "other.duckdb"
    other.write_bytes(_bytes(sink))
    line = one_line(run("snapshot", "-c", str(config), "-p", "p", "--sink-duckdb", str(other), "--force",
                        "--out", str(other)))
    assert "is a file this command reads" in line


def test_exporter_textfile_naming_the_sink_is_refused(config, sink):
    before = _bytes(sink)
    line = one_line(run("exporter", "-c", str(config), "--once", "--textfile", str(sink), "--force",
                        "--audit-every", "0"))
    assert line == (f"eosctl: error: --textfile {shown(str(sink))} is a file this command reads; an "
                    "output never "
                    "replaces an input: pick another --textfile")
    assert _bytes(sink) == before


def test_exporter_textfile_replaces_another_file_only_with_force(config, tmp_path):
    out = tmp_path / "notes.prom"
    out.write_text("my notes\n")
    line = one_line(run("exporter", "-c", str(config), "--once", "--textfile", str(out),
                        "--audit-every", "0"))
    assert line == (f"eosctl: error: --textfile {shown(str(out))} already exists; pass --force to "
                    "replace it or pick "
                    "another --textfile")
    assert out.read_text() == "my notes\n"


def test_exporter_textfile_replaces_its_own_earlier_reading(tmp_path):
    from eosctl.base.files import output_refusal
    from eosctl.exporter.textfile import earlier_reading

    out = tmp_path / "eosctl.prom"
    out.write_text("# HELP eosctl_up Whether the last refresh reached the cluster.\neosctl_up 1\n")
    assert output_refusal(str(out), (), False, "--textfile", earlier_reading) is None


def test_sandbox_pipeline_refuses_a_workdir_with_files(tmp_path, sink):
    (tmp_path / "eosctl.toml").write_text("mine")
    line = one_line(run("sandbox", "pipeline", "--bootstrap", "127.0.0.1:1", "--yes", "--workdir",
                        str(tmp_path)))
    assert line.startswith(f"eosctl: error: --workdir {shown(str(tmp_path))} is not empty (")
    assert line.endswith("pass --force")
    assert (tmp_path / "eosctl.toml").read_text() == "mine"
    assert duckdb.connect(str(sink), read_only=True).execute("SELECT answer FROM mine").fetchone() == (42,)

