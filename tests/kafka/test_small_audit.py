"""Issue 49, item 4: a small local audit costs about the CLI's own start-up.

What it must not pay for (timings themselves are benchmarks/small_audit_bench.py's, never a test's): a pool
of worker processes when there is work for one (auditors.local.pool_size: the tasks run in eosctl's own
process), pandas (pyarrow imports it at its first conversion of Python values: eosctl.base.arrowbuffers
builds the audit's arrays from buffers), pyarrow.compute (a cast of text keys), multiprocessing (the pool's
only: auditors.local) and xml.etree (the JUnit report's only: eosctl.output.audit); and with a pool, nothing
a task imports left for each forked worker to import again (auditors.local._preload).

Every audit here is `python -X importtime -m eosctl audit` against the scripted broker, content check on:
the imports it lists are the process's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import duckdb
import pytest

from tests.kafkasim import KafkaSim
from tests.support.helpers import eosctl_process

PARTITIONS, RECORDS, MISSING = 3, 20, (1, 27)
# Imported by nothing a small local audit runs (see the module's docstring).
NEVER = ("pandas", "pyarrow.compute", "multiprocessing", "xml.etree.ElementTree")


@pytest.fixture
def config(kafka_sim: KafkaSim, tmp_path: Path) -> Path:
    """Topic orders: 3 partitions of 20 records keyed k<offset>, partition p's at offsets 20p.. (its log
    start there: every key once in the topic); a DuckDB sink holding each once with its key, but partition
    1's offset 27: one gap."""
    for p in range(PARTITIONS):
        part = kafka_sim.partition("orders", p)
        part.skip(p * RECORDS)
        part.delete_before(p * RECORDS)
        part.data(RECORDS)
    sink = tmp_path / "sink.duckdb"
    with duckdb.connect(str(sink)) as con:
        con.execute("CREATE TABLE sink (src_topic VARCHAR, src_partition INT, src_offset BIGINT, k VARCHAR)")
        con.execute(f"INSERT INTO sink SELECT 'orders', p, p * {RECORDS} + o, 'k' || (p * {RECORDS} + o) "
                    f"FROM range({PARTITIONS}) a(p), range({RECORDS}) b(o) WHERE (p, p * {RECORDS} + o) <> "
                    f"{MISSING}")
    path = tmp_path / "eosctl.toml"
    path.write_text(f'[clusters.c]\nbootstrap_servers = "{kafka_sim.bootstrap}"\n'
                    '[pipelines.p]\ncluster = "c"\nsource_topics = ["orders"]\n'
                    f'[pipelines.p.sink]\nduckdb = "{sink}"\ntable = "sink"\nkey_column = "k"\n')
    return path


def audit(config: Path, workers: str | None = None) -> tuple[dict, list[str]]:
    """The report and the modules the process imported, in the order -X importtime lists them."""
    env = {"PYTHONPROFILEIMPORTTIME": "1"}  # python -X importtime
    if workers is not None:
        env["EOSCTL_LOCAL_WORKERS"] = workers
    proc = eosctl_process("audit", "-c", str(config), "--engine", "local", "--format", "json", env=env)
    assert proc.returncode == 1, proc.stderr[-2000:]  # the gap
    return json.loads(proc.stdout), modules(proc.stderr)


def imports(code: str) -> list[str]:
    """The modules `python -X importtime -c CODE` lists."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True,
                          timeout=60)
    return modules(proc.stderr)


def modules(stderr: str) -> list[str]:
    return [line.split("|")[2].strip() for line in stderr.splitlines()
            if line.startswith("import time:") and "imported package" not in line]


def findings(report: dict) -> list[tuple]:
    return [(f["kind"], f["partition"], f["first_offset"], f["last_offset"], f["count"])
            for f in report["findings"]]


def test_a_small_audit_runs_in_eosctls_process_without_pandas(config: Path) -> None:
    report, imported = audit(config)
    assert findings(report) == [("gap", 1, 27, 27, 1)]
    assert report["engine"]["workers"] == 0 and report["engine"]["tasks"] == 1
    assert "eosctl.rules.content" in imported  # the content check ran (the keys were compared)
    assert [m for m in imported if m.split(".")[0] in NEVER or m in NEVER] == []


def test_a_forced_pool_gives_the_same_report_and_its_workers_import_nothing_again(config: Path) -> None:
    here, imported_here = audit(config)
    pooled, imported = audit(config, workers="2")
    assert pooled["engine"]["workers"] == 2 and pooled["engine"]["tasks"] == 2
    assert (findings(pooled), pooled["partitions"], pooled["summary"]) == \
        (findings(here), here["partitions"], here["summary"])
    # A module listed more often than one process lists it was imported again in a worker (-X importtime
    # lists a module of an import cycle twice in one process: the in-process audit's count is the floor).
    # The pool's driver imports pandas before it forks (_preload: the workers' Arrow batches need it), as
    # pyarrow's first conversion does in any process; and multiprocessing to start the pool, which the
    # in-process audit does not (its modules try `import _winapi` twice, failing off Windows).
    once = Counter(imported_here) | Counter(imports("import pyarrow; pyarrow.array(['x'])")) | Counter(
        imports("from concurrent.futures.process import ProcessPoolExecutor; import multiprocessing; "
                "multiprocessing.get_context('fork')"))
    again = {m: n for m, n in Counter(imported).items() if n > max(1, once[m])}
    assert not again, f"imported by the workers again: {sorted(again)}"


def test_the_drivers_kafka_phases_share_one_client(kafka_sim: KafkaSim, config: Path) -> None:
    # The survey, the group's committed offsets and the task run in the driver (its scan and producer ids)
    # ask on one client (eosctl.cluster.sharedwire). Each connection starts with ApiVersions: one client
    # has three at most (the bootstrap, the leader, node 1 if a Metadata goes to it); a client per phase
    # had two or three each.
    kafka_sim.group("g", {("orders", p): (p + 1) * RECORDS for p in range(PARTITIONS)})
    config.write_text(config.read_text().replace('source_topics = ["orders"]\n',
                                                 'source_topics = ["orders"]\ngroup = "g"\n'))
    report, _ = audit(config)
    assert findings(report) == [("gap", 1, 27, 27, 1)]
    asked = Counter(api for _, api, _ in kafka_sim.requests)
    assert asked["OffsetFetch"] == 1  # the group's offsets were read
    assert asked["ApiVersions"] <= 3, kafka_sim.requests


def test_the_audits_import_of_the_auditors_is_left_out_of_collections() -> None:
    # Thousands of objects that live as long as the process: a collection over them finds nothing to free.
    # Imported with the collector off, then frozen: no later collection walks them either (a pause alone
    # left them all to the first collection after it).
    code = ("import gc, sys; import eosctl.commands.audit_cmd as cmd; assert 'auditors' not in sys.modules; "
            "runs = []; gc.callbacks.append(lambda phase, info: runs.append(phase)); "
            "cmd._judging(None, None, ()); print(runs.count('start'), 'numpy' in sys.modules, "
            "gc.get_freeze_count())")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    runs, imported, frozen = proc.stdout.split()
    assert int(runs) == 0 and imported == "True" and int(frozen) > 20_000, proc.stderr[-2000:]


def test_workers_not_a_number_is_one_line(config: Path) -> None:
    proc = eosctl_process("audit", "-c", str(config), "--engine", "local",
                          env={"EOSCTL_LOCAL_WORKERS": "two"})
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == (
        "eosctl: error: $EOSCTL_LOCAL_WORKERS 'two' is not a number of worker processes; set it to 0 (none: "
        "the audit runs in eosctl's process), 1 or more, or unset it")
