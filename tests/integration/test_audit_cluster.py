"""Cluster mode is proven, not assumed: the audit runs on a Spark standalone master + worker on loopback
(its tasks, Kafka scans and sink reads happen in an executor process), and through Spark Connect.

Each audit runs in its own `python -m eosctl` process: a driver can only have one master.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path

import pytest

from eosctl.sandbox.noida import free_port, port_open
from eosctl.sandbox.pipeline import run_pipeline
from tests.support.helpers import eosctl_process, exited, wait_until
from tests.support.procs import stop

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.own_spark]

SPARK_HOME = Path(importlib.util.find_spec("pyspark").origin).parent
FAULTS = ["duplicate-replay", "upstream-retry"]  # both phases: per-partition tasks and the key shuffle


def _env() -> dict[str, str]:
    return dict(os.environ, SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1",
                PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)


class Daemons:
    """JVMs this module starts; stopped by their own pids (spark-class execs java, so the pid is it)."""

    def __init__(self, logdir: Path) -> None:
        self.logdir, self.procs = logdir, []

    def start(self, name: str, *args: str) -> subprocess.Popen:
        log = open(self.logdir / f"{name}.log", "w")
        proc = subprocess.Popen([*args], env=_env(), stdout=log, stderr=subprocess.STDOUT, cwd=self.logdir)
        self.procs.append((proc, log))
        return proc

    def stop(self) -> None:
        for proc, log in self.procs:
            stop(proc)
            log.close()


def _wait(what: str, ready, timeout: float, logs: Path, proc: subprocess.Popen) -> None:
    """helpers.wait_until, the Spark daemons' logs on failure; a daemon that exited fails the wait at once."""
    wait_until(what, ready, timeout, interval=0.5, gone=exited("its JVM", proc),
               detail=lambda: str({p.name: p.read_text()[-2000:] for p in logs.glob("*.log")}))


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as r:
            return json.load(r).get("aliveworkers", 0)
    except OSError:
        return 0


@pytest.fixture(scope="module")
def faulty_run(cluster, tmp_path_factory) -> tuple[Path, dict]:
    workdir = tmp_path_factory.mktemp("cluster-run")
    manifest = run_pipeline(cluster, f"c{uuid.uuid4().hex[:8]}", workdir, faults=FAULTS, records=60)
    return workdir, manifest


def _audit(workdir: Path, *spark_args: str) -> tuple[int, dict, str]:
    sink_hop = json.loads((workdir / "manifest.json").read_text())["prefix"]  # not the default, both hops
    proc = eosctl_process("audit", "-c", str(workdir / "eosctl.toml"), "-p", sink_hop, "--format", "json",
                          *spark_args, env=_env(), timeout=300)
    try:
        return proc.returncode, json.loads(proc.stdout), proc.stderr
    except ValueError:
        pytest.fail(f"no JSON on stdout (exit {proc.returncode}): {proc.stdout[-2000:]} "
                    f"{proc.stderr[-3000:]}")


def _comparable(findings: list[dict]) -> list[tuple]:
    return sorted((f["kind"], f["partition"], f["first_offset"], f["last_offset"], f["count"], f.get("key"))
                  for f in findings)


def test_standalone_cluster_runs_the_audit_on_an_executor(faulty_run, tmp_path):
    workdir, manifest = faulty_run
    daemons = Daemons(tmp_path)
    port, ui, worker_ui = free_port(), free_port(), free_port()
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    try:
        master = daemons.start("master", spark_class, "org.apache.spark.deploy.master.Master", "--host",
                               "127.0.0.1", "--port", str(port), "--webui-port", str(ui))
        _wait("Spark master", lambda: port_open(port), 90, tmp_path, master)
        worker = daemons.start("worker", spark_class, "org.apache.spark.deploy.worker.Worker",
                               f"spark://127.0.0.1:{port}", "--host", "127.0.0.1", "--cores", "2", "--memory",
                               "1g", "--webui-port", str(worker_ui), "--work-dir", str(tmp_path / "work"))
        _wait("Spark worker", lambda: _alive_workers(ui) >= 1, 90, tmp_path, worker)

        code, report, err = _audit(workdir, "--master", f"spark://127.0.0.1:{port}")
    finally:
        daemons.stop()
    assert code == 1, err
    assert report["engine"]["master"] == f"spark://127.0.0.1:{port}"
    assert _comparable(report["findings"]) == _comparable(manifest["expected_findings"])
    # The executor ran in the worker's work dir: the tasks really left the driver process.
    assert glob.glob(str(tmp_path / "work" / "app-*" / "*" / "stderr"))


def _connect_available() -> str | None:
    if not list((SPARK_HOME / "jars").glob("spark-connect_*.jar")):
        return "the pyspark package ships no spark-connect server jar"
    missing = [m for m in ("grpc", "grpc_status", "google.protobuf", "pandas", "zstandard")
               if importlib.util.find_spec(m) is None]
    if missing:
        return f"the Spark Connect client needs {', '.join(missing)} (pip install 'pyspark[connect]')"
    return None


def test_spark_connect_runs_the_audit(faulty_run, tmp_path):
    reason = _connect_available()
    if reason:
        pytest.skip(reason)
    workdir, manifest = faulty_run
    daemons = Daemons(tmp_path)
    port = free_port()
    try:
        server = daemons.start("connect", str(SPARK_HOME / "bin" / "spark-submit"), "--class",
                               "org.apache.spark.sql.connect.service.SparkConnectServer", "--master",
                               "local[2]", "--conf", f"spark.connect.grpc.binding.port={port}",
                               "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
                               "--conf", "spark.ui.enabled=false", "--driver-memory", "1g", "spark-internal")
        # A JVM that loads Spark SQL and the Connect service: 120 s was too short once, with two suites
        # sharing two cores. A server that died says so at once (gone), so a long wait costs nothing then.
        _wait("Spark Connect server", lambda: port_open(port), 240, tmp_path, server)
        code, report, err = _audit(workdir, "--remote", f"sc://127.0.0.1:{port}")
    finally:
        daemons.stop()
    assert code == 1, err
    assert report["engine"]["master"] == "spark-connect"
    assert _comparable(report["findings"]) == _comparable(manifest["expected_findings"])


@pytest.mark.parametrize(("master", "remote", "here"), [
    (None, None, True), ("local", None, True), ("local[2]", None, True), ("local[*]", None, True),
    ("spark://127.0.0.1:7077", None, True), ("spark://localhost:7077", None, True),
    ("spark://spark-master.internal:7077", None, False), ("spark://10.0.0.5:7077", None, False),
    ("spark://localhost.example.com:7077", None, False), ("yarn", None, False),
    ("k8s://https://k:6443", None, False),
    (None, "sc://127.0.0.1:15002", True), (None, "sc://connect.example.com:15002", False),
])
def test_which_masters_run_executors_on_this_machine(master, remote, here):
    from auditors.spark import runs_here

    assert runs_here(master, remote) is here


def test_a_duckdb_sink_on_a_remote_master_fails_before_spark_starts():
    from auditors.spark import require_reachable_sink
    from eosctl.base.errors import EosctlError
    from eosctl.config.model import Sink

    require_reachable_sink(Sink(duckdb="/data/sink.duckdb"), "local[*]", None)
    require_reachable_sink(Sink(parquet="s3://bucket/sink/*.parquet"), "yarn", None)
    with pytest.raises(EosctlError) as e:
        require_reachable_sink(Sink(duckdb="/data/sink.duckdb"), "yarn", None)
    assert str(e.value) == ("the DuckDB sink /data/sink.duckdb is a file on this machine, which executors on "
                            "master yarn can't read: audit a Parquet export on shared storage "
                            "(--sink-parquet), or run with --master 'local[*]'")


def test_every_audit_refuses_a_duckdb_sink_on_a_configured_remote_server(tmp_path):
    from auditors import EngineOptions, engine
    from auditors.plan import AuditInput
    from auditors.sources import ModelSource
    from eosctl.base.errors import EosctlError
    from eosctl.config.model import Config, Sink, Spark

    # The config of `snapshot --with-audit` and the TUI: [audit] engine = "spark" and a remote server.
    config = Config(path=tmp_path / "c.toml", clusters={}, pipelines={},
                    spark=Spark(remote="sc://spark.example.com:15002"), audit_engine="spark")
    options = EngineOptions.resolve(config, "local")
    assert (options.engine, options.remote, options.master) == ("spark", "sc://spark.example.com:15002", None)
    inp = AuditInput(source=ModelSource({}), sink=Sink(duckdb="/data/sink.duckdb"), topics=("t",))
    with pytest.raises(EosctlError, match="executors on remote sc://spark.example.com:15002 can't read"):
        engine.run(inp, options)


def test_the_shipped_code_zip_imports_eosctl_and_auditors(tmp_path):
    import zipfile

    from auditors.spark import code_zip

    names = zipfile.ZipFile(code_zip()).namelist()
    assert {"eosctl/__init__.py", "eosctl/rules/reconcile.py", "auditors/__init__.py",
            "auditors/task.py"} <= set(names)
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    # What an executor does with addPyFile: put the zip first on sys.path and import from it.
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import auditors.task, eosctl.rules.reconcile; "
            "print(auditors.task.__file__)")
    out = subprocess.run([sys.executable, "-I", "-c", code, code_zip()], capture_output=True, text=True,
                         cwd=tmp_path, check=True).stdout
    assert out.strip() == os.path.join(code_zip(), "auditors", "task.py")
