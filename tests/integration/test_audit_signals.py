"""Ctrl-C and SIGTERM at each phase of `eosctl audit` leave no process and no temp file behind.

Each case runs `python -m eosctl audit` as a subprocess in its own session (so a signal to its process
group is what a terminal's Ctrl-C does) with TMPDIR pointing at an empty directory and
EOSCTL_PROGRESS=lines, which prints one stderr line per phase. When the phase's line appears, the signal
goes out; meanwhile a thread records every process below the audit. Afterwards none of them may run,
no process may carry the test's TMPDIR (Spark's JVM has it as java.io.tmpdir, its Python workers in their
environment), TMPDIR must be empty, and stderr must end with exactly one line about the signal.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from eosctl.sandbox.pipeline import run_pipeline
from tests.prochelp import assert_nothing_left, comm, descendants

pytestmark = [pytest.mark.integration, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]
STARTUP, TASKS, KEYS = "starting Spark", "auditing partitions", "key duplicates"


@pytest.fixture(scope="module")
def config(cluster, tmp_path_factory) -> Path:
    """A clean reference-pipeline run with a key column, so every audit has a key phase."""
    workdir = tmp_path_factory.mktemp("signals")
    run_pipeline(cluster, f"s{uuid.uuid4().hex[:8]}", workdir, faults=[], records=300)
    return workdir / "eosctl.toml"


def _interrupt(config: Path, tmp_path: Path, engine: str, phase: str | None, sig: int,
               to_group: bool) -> tuple[int, list[str], dict[tuple[int, str], str], Path]:
    tmpdir = tmp_path / f"tmp-{uuid.uuid4().hex[:6]}"
    tmpdir.mkdir()
    env = {**os.environ, "TMPDIR": str(tmpdir), "EOSCTL_PROGRESS": "lines",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "eosctl", "audit", "-c", str(config), "--engine", engine,
                             "--format", "json"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                            text=True, start_new_session=True)
    seen: dict[tuple[int, str], str] = {}  # every process below the audit -> its command name
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            for p in descendants(proc.pid):
                # Spark's launcher script execs java in the same process: the name changes, the pid not.
                if seen.get(p) != "java":
                    seen[p] = comm(p[0])
            done.wait(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    lines: list[str] = []
    timer = threading.Timer(240, proc.kill)  # a hung audit fails the test instead of blocking it
    timer.start()
    try:
        for line in proc.stderr:
            lines.append(line.rstrip("\n"))
            if phase is not None and line.startswith(f"eosctl: {phase}"):
                if phase == STARTUP:
                    _wait_for_java(seen)
                if to_group:
                    os.killpg(proc.pid, sig)
                else:
                    proc.send_signal(sig)
                break
        lines += proc.stderr.read().splitlines()
        code = proc.wait(timeout=60)
    finally:
        timer.cancel()
        done.set()
        watcher.join(5)
    return code, lines, seen, tmpdir


def _wait_for_java(seen: dict[tuple[int, str], str]) -> None:
    """The reported case: Ctrl-C 1.5 s after Spark's JVM appeared, while the session still starts."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and "java" not in list(seen.values()):
        time.sleep(0.05)
    time.sleep(1.5)


# SIGINT goes to the process group (a terminal's Ctrl-C: Spark's Python workers get it too), SIGTERM to
# eosctl alone (a supervisor's stop).
CASES = [
    ("spark", STARTUP, signal.SIGINT, True),
    ("spark", STARTUP, signal.SIGTERM, False),
    ("spark", TASKS, signal.SIGINT, True),
    ("spark", KEYS, signal.SIGINT, True),
    ("spark", KEYS, signal.SIGTERM, False),
    ("local", TASKS, signal.SIGINT, True),
    ("local", TASKS, signal.SIGTERM, False),
]


@pytest.mark.parametrize(("engine", "phase", "sig", "to_group"), CASES,
                         ids=[f"{e}-{p.split()[0]}-{s.name}" for e, p, s, _ in CASES])
def test_a_signal_stops_everything_the_audit_started(config, tmp_path, engine, phase, sig, to_group):
    code, lines, seen, tmpdir = _interrupt(config, tmp_path, engine, phase, sig, to_group)
    assert code == 128 + sig, lines
    assert lines[-1] == ("eosctl: interrupted" if sig == signal.SIGINT else "eosctl: terminated"), lines
    assert not [ln for ln in lines if "Traceback" in ln or "py4j" in ln.lower()], lines
    if engine == "spark":
        assert "java" in seen.values(), "no JVM seen"
    assert_nothing_left(seen, tmpdir)


@pytest.mark.parametrize("engine", ["spark", "local"])
def test_a_finished_audit_leaves_nothing_behind(config, tmp_path, engine):
    code, lines, seen, tmpdir = _interrupt(config, tmp_path, engine, None, signal.SIGINT, False)
    assert code == 0, lines
    assert seen  # the JVM or the pool ran
    assert_nothing_left(seen, tmpdir)
