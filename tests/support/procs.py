"""Processes a test started: stopping one on every exit path, and what a command left running, read from
/proc (the signal tests' evidence; Linux)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

Proc = tuple[int, str]  # (pid, start time): a reused pid is another process


def stop(proc: subprocess.Popen, seconds: float = 20.0) -> int:
    """SIGTERM, then SIGKILL if it has not exited within ``seconds``; reaped either way. Its exit status."""
    if proc.poll() is None:
        proc.terminate()
        try:
            return proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait(timeout=10)


def stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def descendants(root: int) -> set[Proc]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (st := stat(int(entry))) is not None:
            children.setdefault(int(st[1]), []).append(int(entry))
    out, todo = set(), list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if (st := stat(pid)) is not None:
            out.add((pid, st[19]))
        todo.extend(children.get(pid, []))
    return out


def running(proc: Proc) -> bool:
    st = stat(proc[0])
    return st is not None and st[19] == proc[1] and st[0] != "Z"


def comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def carrying(marker: str) -> list[int]:
    """Live processes whose command line or environment names ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                text = f.read()
            with open(f"/proc/{entry}/environ", "rb") as f:
                text += f.read()
        except OSError:
            continue
        st = stat(int(entry))
        if marker.encode() in text and st is not None and st[0] != "Z":
            found.append(int(entry))
    return found


def assert_nothing_left(seen: set[Proc] | dict[Proc, str], tmpdir: Path) -> None:
    """None of ``seen`` runs, no process carries ``tmpdir``, and ``tmpdir`` is empty."""
    deadline = time.monotonic() + 10  # SIGKILLed processes vanish at once; re-parented ones need a reap
    while time.monotonic() < deadline and ([p for p in seen if running(p)] or carrying(str(tmpdir))):
        time.sleep(0.05)
    assert [p for p in seen if running(p)] == []
    assert carrying(str(tmpdir)) == []
    left = sorted(str(f.relative_to(tmpdir)) for f in tmpdir.rglob("*"))
    assert left == [], f"left in {tmpdir}: {left}"
