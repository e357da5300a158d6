"""auditors.guard: what an audit started (a child and the child's own child) is stopped with the guard, what
ran before it is left alone, and the processes are found from the audit's own processes' lists of children:
no read of every process of the machine (a file each, four times per audit) where Linux keeps those lists."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from auditors import guard
from tests.support.helpers import wait_until

# A child that starts a grandchild, says its pid and sleeps.
PARENT = ("import subprocess, sys, time\n"
          "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
          "print(p.pid, flush=True)\n"
          "time.sleep(60)\n")

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="the guard reads Linux's /proc")


def alive(pid: int) -> bool:
    """Running (not gone, not a zombie waiting for its parent's wait)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def stop_a_tree(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Start a process before the guard and a child with a grandchild inside it, stop the guard; each stays
    or goes as it should. The directories the guard listed, in order."""
    listed: list[str] = []
    real = os.listdir
    monkeypatch.setattr(guard.os, "listdir", lambda path=".": listed.append(str(path)) or real(path))
    before = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        owned = guard.Owned()
        child = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
        grandchild = int(child.stdout.readline())
        assert {p for p, _ in owned.started()} == {child.pid, grandchild}
        owned.stop()
        # Its own child reaped by the guard already (Popen's wait then finds none: no exit code to check).
        wait_until("the child killed", lambda: not alive(child.pid), 10)
        wait_until("the grandchild killed", lambda: not alive(grandchild), 10)
        child.wait(timeout=10)
        assert before.poll() is None  # not the audit's
        assert not Path(owned.dir).exists()
    finally:
        before.kill()
        before.wait()
    return listed


def test_the_audits_processes_are_found_from_their_own_lists_of_children(monkeypatch) -> None:
    if not Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").exists():
        pytest.skip("this kernel keeps no lists of children (CONFIG_PROC_CHILDREN)")
    listed = stop_a_tree(monkeypatch)
    assert "/proc" not in listed and listed  # each process's threads listed, not the whole machine


def test_without_lists_of_children_the_whole_proc_is_read(monkeypatch) -> None:
    exists = os.path.exists
    monkeypatch.setattr(guard.os.path, "exists", lambda p: not str(p).endswith("/children") and exists(p))
    assert "/proc" in stop_a_tree(monkeypatch)
