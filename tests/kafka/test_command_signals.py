"""Ctrl-C and SIGTERM during `ledger`, `snapshot` (with and without `--with-audit`) and `report`: one line,
exit 130 or 143, and nothing left behind: no process, no frozen sink copy, no `eosctl-audit-*`, no half
`--out` (issue 20, defect 4; `audit` itself: tests/integration/test_audit_signals.py).

Each command runs as `python -m eosctl` in its own session (so a signal to its process group is what a
terminal's Ctrl-C does) with TMPDIR pointing at an empty directory. The phase is held, not timed: the
scripted broker holds every Fetch (the scan while the frozen copy exists; the audit's pool workers), or
the test holds the DuckDB file's write lock (eosctl waits for it).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest

from eosctl.inspection.capture import Capture
from eosctl.inspection.snapshot import write_snapshot
from tests.kafkasim import KafkaSim
from tests.support.helpers import exited, wait_until
from tests.support.procs import Proc, assert_nothing_left, descendants
from tests.support.samplereports import TOPIC, demo_report

ROOT = Path(__file__).resolve().parents[2]


class FetchGate:
    """Holds every Fetch the scripted broker gets while ``when()`` is true, until released."""

    def __init__(self, sim: KafkaSim, when: Callable[[], bool] = lambda: True) -> None:
        self.when, self.arrived, self.released = when, threading.Event(), threading.Event()
        sim.inject("fetch", before=self._hold, times=None)

    def _hold(self) -> None:
        if self.when() and not self.released.is_set():
            self.arrived.set()
            self.released.wait(60)


@pytest.fixture
def pipeline(kafka_sim: KafkaSim, tmp_path: Path) -> Iterator[tuple[KafkaSim, Path]]:
    """Topic t (two partitions of 20 committed records), group g at the end, a DuckDB sink holding them."""
    for partition in (0, 1):
        p = kafka_sim.partition("t", partition)
        p.data(10)
        p.data(10)
    kafka_sim.group("g", {("t", 0): 20, ("t", 1): 20})
    sink = tmp_path / "sink.duckdb"
    with duckdb.connect(str(sink)) as con:
        con.execute("create table sink (src_topic varchar, src_partition int, src_offset bigint)")
        con.execute("insert into sink select 't', p, o from range(2) a(p), range(20) b(o)")
    yield kafka_sim, sink


class Run:
    """One `python -m eosctl ...` in its own session, its stderr read by a thread, its processes watched."""

    def __init__(self, args: list[str], tmpdir: Path, cwd: Path) -> None:
        env = {**os.environ, "TMPDIR": str(tmpdir), "EOSCTL_LOCAL_WORKERS": "2",
               "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        self.proc = subprocess.Popen([sys.executable, "-m", "eosctl", *args], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, env=env, cwd=cwd, text=True,
                                     start_new_session=True)
        self.seen: set[Proc] = set()
        self.lines: list[str] = []
        self._done = threading.Event()
        self._threads = [threading.Thread(target=self._watch, daemon=True),
                         threading.Thread(target=self._read, daemon=True)]
        for t in self._threads:
            t.start()

    def _watch(self) -> None:
        while not self._done.is_set():
            self.seen |= descendants(self.proc.pid)
            self._done.wait(0.02)

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def signal(self, sig: int, to_group: bool) -> None:
        if to_group:
            os.killpg(self.proc.pid, sig)
        else:
            self.proc.send_signal(sig)

    def finish(self, timeout: float = 60) -> int:
        try:
            code = self.proc.wait(timeout=timeout)
        finally:
            self.proc.kill()
            self._done.set()
            for t in self._threads:
                t.join(5)
        return code


def wait_for(what: Callable[[], object], run: Run, deadline_s: float = 60) -> None:
    """Until the command reached the phase ``what()`` sees (tests.support.helpers.wait_until)."""
    wait_until("the phase", what, deadline_s, interval=0.02, gone=exited("eosctl", run.proc),
               detail=lambda: str(run.lines))


def catches(pid: int, sig: int) -> bool:
    """Whether process ``pid`` has a handler for ``sig`` (its SigCgt mask in /proc): eosctl's own are set."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    mask = next(int(line.split()[1], 16) for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(mask >> (sig - 1) & 1)


LINES = {signal.SIGINT: "eosctl: interrupted", signal.SIGTERM: "eosctl: terminated",
         signal.SIGHUP: "eosctl: hung up (the terminal was closed)"}


def assert_one_line(run: Run, code: int, sig: int) -> None:
    assert code == 128 + sig, run.lines
    assert run.lines == [LINES[sig]]


CASES = [("ledger", "sink", signal.SIGTERM, False), ("ledger", "sink", signal.SIGINT, True),
         ("ledger", "scan", signal.SIGINT, False), ("snapshot", "sink", signal.SIGTERM, False),
         ("snapshot", "scan", signal.SIGTERM, False), ("snapshot", "scan", signal.SIGINT, True)]


@pytest.mark.parametrize(("command", "phase", "sig", "to_group"), CASES,
                         ids=[f"{c}-{p}-{'ctrl-c' if g else s.name}" for c, p, s, g in CASES])
def test_a_signal_leaves_no_frozen_copy_and_no_out(pipeline, tmp_path, command, phase, sig, to_group):
    """sink: eosctl waits for the sink's write lock (a writer holds it), its frozen copy's directory made;
    scan: the broker holds its Fetch."""
    sim, sink = pipeline
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    args = [command, "--bootstrap", sim.bootstrap, "-t", "t", "-g", "g", "--sink-duckdb", str(sink)]
    out = tmp_path / "snap.duckdb"
    if command == "snapshot":
        args += ["--out", str(out)]
    gate = FetchGate(sim, when=lambda: phase == "scan")
    writer = duckdb.connect(str(sink)) if phase == "sink" else None
    try:
        run = Run(args, tmpdir, tmp_path)
        if phase == "sink":
            wait_for(lambda: any(tmpdir.glob("eosctl-frozen-*")), run)
        else:
            wait_for(gate.arrived.is_set, run)
        run.signal(sig, to_group)
        code = run.finish()
    finally:
        gate.released.set()
        if writer is not None:
            writer.close()
    assert_one_line(run, code, sig)
    assert_nothing_left(run.seen, tmpdir)
    assert sorted(os.listdir(tmp_path)) == ["sink.duckdb", "tmp"]


@pytest.mark.parametrize(("sig", "to_group"), [(signal.SIGTERM, False), (signal.SIGINT, True),
                                               (signal.SIGHUP, True)],
                         ids=["SIGTERM", "ctrl-c-to-group", "hangup-to-group"])
def test_a_signal_during_the_snapshots_audit_stops_its_pool(pipeline, tmp_path, sig, to_group):
    sim, sink = pipeline
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    gate = FetchGate(sim, when=lambda: any(tmpdir.glob("eosctl-audit-*")))
    out = tmp_path / "snap.duckdb"
    run = Run(["snapshot", "--bootstrap", sim.bootstrap, "-t", "t", "-g", "g", "--sink-duckdb", str(sink),
               "--with-audit", "--out", str(out)], tmpdir, tmp_path)
    try:
        wait_for(gate.arrived.is_set, run)
        # The pool's workers run (one of them holds the gated Fetch). `seen` is the watcher thread's sample
        # every 20 ms: on a loaded machine (ci28) it had not yet looked since the workers started.
        wait_for(lambda: [p for p in run.seen if p[0] != run.proc.pid], run)
        run.signal(sig, to_group)
        code = run.finish()
    finally:
        gate.released.set()
    assert_one_line(run, code, sig)
    assert_nothing_left(run.seen, tmpdir)
    assert sorted(os.listdir(tmp_path)) == sorted(["sink.duckdb", "tmp"])


@pytest.mark.parametrize(("sig", "to_group"), [(signal.SIGTERM, False), (signal.SIGINT, True)],
                         ids=["SIGTERM", "ctrl-c-to-group"])
def test_a_signal_while_report_waits_for_its_snapshot(tmp_path, sig, to_group):
    """`report` on a snapshot another process holds open for writing waits for it: the signal ends it."""
    snap = tmp_path / "snap.duckdb"
    write_snapshot(Capture(captured_at=datetime.now(UTC), bootstrap="b:9092", pipeline=None, group=None,
                           topics=[TOPIC], audit=demo_report(), sections={"audit": "ok"}), snap)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    html = tmp_path / "report.html"
    with duckdb.connect(str(snap)):  # the write lock
        run = Run(["report", str(snap), "--out", str(html)], tmpdir, tmp_path)
        # Started (its handlers set: a loaded machine takes seconds to import), then no phase to see from
        # outside: whether it waits or not, the signal must be clean.
        wait_for(lambda: catches(run.proc.pid, signal.SIGTERM), run)
        time.sleep(0.5)
        run.signal(sig, to_group)
        code = run.finish()
    assert_one_line(run, code, sig)
    assert_nothing_left(run.seen, tmpdir)
    assert not html.exists() and not list(tmp_path.glob(".report.html*"))


class Pty:
    """`python -m eosctl ARGS` on a pseudo-terminal (the TUI's real home), its output collected."""

    def __init__(self, args: list[str], tmpdir: Path, cwd: Path) -> None:
        import pty

        env = {**os.environ, "TMPDIR": str(tmpdir), "EOSCTL_LOCAL_WORKERS": "2", "TERM": "xterm-256color",
               "COLUMNS": "100", "LINES": "30",
               "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: its own session already (pty.fork), the pty its terminal
            try:
                os.chdir(cwd)
                os.execve(sys.executable, [sys.executable, "-m", "eosctl", *args], env)
            finally:
                os._exit(127)
        self.out = b""
        self.seen: set[Proc] = set()

    def read_until(self, wanted: Callable[[bytes], bool], deadline_s: float = 60) -> None:
        import select

        deadline = time.monotonic() + deadline_s
        while not wanted(self.out):
            assert time.monotonic() < deadline, f"never seen; last output: {self.out[-2000:]!r}"
            self.seen |= descendants(self.pid)
            ready, _, _ = select.select([self.fd], [], [], 0.05)
            if ready:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:  # EIO: the child is gone
                    chunk = b""
                assert chunk, f"exited first: {self.out[-2000:]!r}"
                self.out += chunk

    def send(self, keys: bytes) -> None:
        os.write(self.fd, keys)

    def finish(self, timeout: float = 30) -> int:
        import select

        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                done, status = os.waitpid(self.pid, os.WNOHANG)
                ready, _, _ = select.select([self.fd], [], [], 0.05)
                if ready:
                    try:
                        self.out += os.read(self.fd, 65536)
                    except OSError:
                        pass
                if done:
                    return os.waitstatus_to_exitcode(status)
            raise AssertionError(f"still running: {self.out[-2000:]!r}")
        finally:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.close(self.fd)


LEAVE_ALT_SCREEN = b"\x1b[?1049l"


@pytest.mark.parametrize(("sig", "to_group"), [(signal.SIGTERM, False), (signal.SIGINT, True)],
                         ids=["SIGTERM", "ctrl-c-to-group"])
def test_a_signal_to_the_tui_restores_the_terminal(tmp_path, sig, to_group):
    snapshot = ROOT / "tests" / "tui" / "data" / "reference.snap.duckdb"
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    tui = Pty(["tui", "--snapshot", str(snapshot)], tmpdir, tmp_path)
    tui.read_until(lambda out: b"Overview" in out)
    shown = len(tui.out)
    (os.killpg if to_group else os.kill)(tui.pid, sig)
    code = tui.finish()
    after = tui.out[shown:]
    assert code == 128 + sig, after
    assert LEAVE_ALT_SCREEN in after  # the terminal is the user's again
    assert after.rstrip().endswith(b"eosctl: interrupted" if sig == signal.SIGINT else b"eosctl: terminated")
    assert_nothing_left(tui.seen, tmpdir)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_to_the_tui_during_an_audit_stops_its_pool(pipeline, tmp_path, sig):
    """The TUI's audit runs in a thread worker, which the app's loop waits for: its pool is stopped when
    the app unmounts (on `q` too)."""
    sim, sink = pipeline
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    config = tmp_path / "eosctl.toml"
    config.write_text(f'[clusters.c]\nbootstrap_servers = "{sim.bootstrap}"\n\n'
                      '[pipelines.p]\ncluster = "c"\nsource_topics = ["t"]\ngroup = "g"\n\n'
                      f'[pipelines.p.sink]\nduckdb = "{sink}"\ntable = "sink"\n')
    gate = FetchGate(sim, when=lambda: any(tmpdir.glob("eosctl-audit-*")))
    tui = Pty(["tui", "-c", str(config), "-p", "p"], tmpdir, tmp_path)
    try:
        tui.read_until(lambda out: b"Overview" in out)
        tui.send(b"7")
        time.sleep(0.5)
        tui.send(b"a")
        deadline = time.monotonic() + 60
        while not gate.arrived.is_set():
            assert time.monotonic() < deadline, tui.out[-2000:]
            tui.read_until(lambda out: True)
            tui.seen |= descendants(tui.pid)
            time.sleep(0.05)
        tui.seen |= descendants(tui.pid)
        assert tui.seen  # the pool's workers run
        # A closed terminal's SIGHUP goes to the whole foreground group, the pool's workers too.
        (os.killpg if sig == signal.SIGHUP else os.kill)(tui.pid, sig)
        code = tui.finish()
    finally:
        gate.released.set()
    assert code == 128 + sig, tui.out[-2000:]
    assert_nothing_left(tui.seen, tmpdir)
