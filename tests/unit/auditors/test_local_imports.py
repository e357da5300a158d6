"""What a small local audit does not import (issue 49: its wall time near the CLI's start-up), the other
side of tests/kafka/test_small_audit.py's NEVER: the modules left out are still there where they are used
(JUnit's xml.etree), and the pool's context, decided without importing multiprocessing, is the one
multiprocessing would pick. Each child process starts clean, so what it imported is what the path needs."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
from pathlib import Path

import pytest

from auditors import local
from eosctl.config.model import Sink

ROOT = Path(__file__).resolve().parents[3]

# The modules a `--engine local --format json` audit of a DuckDB sink imports before its tasks run, then
# what it calls that could need the pool or JUnit: the pool's context check and the JSON rendering.
SMALL_PATH = """
import sys
import eosctl.cli, auditors, auditors.local, eosctl.output.audit, eosctl.cluster.logscan, eosctl.sink
from auditors.local import prepare_context
from eosctl.config.model import Sink
from eosctl.output.audit import render
from eosctl.report.findings import AuditReport
prepare_context(Sink(duckdb="sink.duckdb", key_column="k"))
{render}
print(" ".join(m for m in ("multiprocessing", "concurrent.futures.process", "xml.etree.ElementTree")
               if m in sys.modules) or "none")
"""


def _imported(render: str) -> str:
    out = subprocess.run([sys.executable, "-c", SMALL_PATH.format(render=render)], capture_output=True,
                         text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def _report() -> str:
    return ("r = AuditReport(verdict='pass', partitions=[], findings=[])\n"
            "assert render(r, '{fmt}')\n")


def test_only_a_junit_report_imports_xml_etree():
    assert _imported(_report().format(fmt="json")) == "none"
    # The rule's other side: the JUnit report still renders, with xml.etree (else NEVER proves nothing).
    assert _imported(_report().format(fmt="junit")) == "xml.etree.ElementTree"


@pytest.mark.parametrize("sink, spawns", [
    (Sink(duckdb="sink.duckdb"), False),
    (Sink(delta="/tmp/table"), True),  # deltalake's runtime refuses a forked child: spawned workers
    (Sink(delta="/tmp/table", files=("a.parquet",)), False),  # its pinned files, read by DuckDB
])
def test_the_pool_context_is_the_one_multiprocessing_would_pick(sink, spawns):
    """_spawns answers without importing multiprocessing; the pool's context is what it said before:
    fork where multiprocessing offers it (Linux), spawn for a Delta sink read with deltalake."""
    assert local._spawns(sink) is spawns
    assert local._spawns(None) is ("fork" not in multiprocessing.get_all_start_methods()
                                   or sys.platform == "darwin")
    assert local._context(sink).get_start_method() == ("spawn" if spawns else "fork")
