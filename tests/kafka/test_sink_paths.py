"""Paths that reach SQL or a glob (issue 20, defects 5, 6 and 10): a TMPDIR with a quote is a literal,
never SQL; a `**` glob never walks a symlink loop; a read error names the user's file, not the frozen
copy's; Spark's options keep a path with spaces and quotes in one piece."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from pathlib import Path

import duckdb
import pytest

from auditors.spark import _without_jvm_notices, java_option
from tests.kafkasim import KafkaSim
from tests.support.helpers import eosctl_process

ROOT = Path(__file__).resolve().parents[2]
HOSTILE_DIR = "it's; COPY (SELECT 42) TO 'pwned.csv'; --"


def eosctl(*args: str, cwd: Path, tmpdir: Path | None = None) -> subprocess.CompletedProcess:
    return eosctl_process(*args, cwd=cwd, env={"TMPDIR": str(tmpdir)} if tmpdir is not None else None)


@pytest.fixture
def topic(kafka_sim: KafkaSim) -> KafkaSim:
    for partition in (0, 1):
        kafka_sim.partition("t", partition).data(10)
    kafka_sim.group("g", {("t", 0): 10, ("t", 1): 10})
    return kafka_sim


def parquet_sink(root: Path) -> None:
    """d/p=0/a.parquet, d/p=1/b.parquet, and two links back up the tree (d/up -> .., d/p=1/top -> ../..)."""
    for p, name in ((0, "a"), (1, "b")):
        (root / "d" / f"p={p}").mkdir(parents=True)
        duckdb.sql(f"COPY (SELECT 't' AS src_topic, {p} AS src_partition, range AS src_offset "
                   f"FROM range(10)) "
                   f"TO '{root / 'd' / f'p={p}' / name}.parquet'")
    (root / "d" / "up").symlink_to("..")
    (root / "d" / "p=1" / "top").symlink_to("../..")


def test_a_tmpdir_with_a_quote_is_a_literal(topic: KafkaSim, tmp_path: Path) -> None:
    tmpdir = tmp_path / HOSTILE_DIR
    tmpdir.mkdir()
    sink = tmp_path / "sink.duckdb"
    with duckdb.connect(str(sink)) as con:
        con.execute("CREATE TABLE sink AS SELECT 't' AS src_topic, p AS src_partition, o AS src_offset "
                    "FROM range(2) a(p), range(10) b(o)")
    done = eosctl("audit", "--bootstrap", topic.bootstrap, "-t", "t", "-g", "g", "--sink-duckdb", str(sink),
                  "--engine", "local", "--format", "json", cwd=tmp_path, tmpdir=tmpdir)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["verdict"] == "pass"
    assert not list(tmp_path.rglob("pwned.csv")) and not Path("pwned.csv").exists()
    assert os.listdir(tmpdir) == []


def test_a_symlink_loop_under_a_recursive_glob_is_not_followed(topic: KafkaSim, tmp_path: Path) -> None:
    parquet_sink(tmp_path)
    done = eosctl("ledger", "--bootstrap", topic.bootstrap, "-t", "t", "-g", "g", "--sink-parquet",
                  "d/**/*.parquet", "--format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = {(p["topic"], p["partition"]): p["rows"] for p in json.loads(done.stdout)["partitions"]}
    assert rows == {("t", 0): 10, ("t", 1): 10}  # each file once, not once per way round the loop


def test_a_parquet_read_error_names_the_users_file(topic: KafkaSim, tmp_path: Path) -> None:
    parquet_sink(tmp_path)
    (tmp_path / "d" / "p=1" / "c.parquet").write_bytes(b"PAR1" + b"\0" * 64 + b"PAR1")
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    done = eosctl("ledger", "--bootstrap", topic.bootstrap, "-t", "t", "-g", "g", "--sink-parquet",
                  "d/**/*.parquet", cwd=tmp_path, tmpdir=tmpdir)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert "d/p=1/c.parquet" in line and "eosctl-frozen" not in line and str(tmpdir) not in line, line


@pytest.mark.parametrize("path", ["/tmp/a b", f"/tmp/{HOSTILE_DIR}", '/tmp/x"y\\z'])
def test_a_java_option_stays_one_option(path: str) -> None:
    assert shlex.split(java_option("java.io.tmpdir", path)) == [f"-Djava.io.tmpdir={path}"]


def test_the_jvms_incubator_notice_is_dropped_and_the_rest_passed_on(capfd) -> None:
    with _without_jvm_notices():
        child = subprocess.Popen(["sh", "-c", "echo 'WARNING: Using incubator modules: jdk.incubator.vector'"
                                              " >&2; echo 'a real problem' >&2"])
    child.wait(timeout=10)
    deadline = time.monotonic() + 10
    err = ""
    while "a real problem" not in err and time.monotonic() < deadline:
        time.sleep(0.05)
        err += capfd.readouterr().err
    assert err == "a real problem\n"
