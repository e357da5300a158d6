"""What one audit starts on this machine, stopped on every way out (success, error, Ctrl-C, SIGTERM).

An audit starts processes it doesn't hold handles to: Spark's launcher script, its JVM and the Python
workers the JVM forks, or the local engine's pool. They are found as the process tree under every child
of this process that appeared after the guard was entered, and killed together (frozen first, so a
dying parent can't fork a new child meanwhile). Killing with SIGKILL is safe because whatever they write
to disk goes below the guard's own temp directory (Spark's java.io.tmpdir and spark.local.dir, DuckDB's
spill files), which the guard removes itself: no shutdown hook has to run.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from eosctl.base.stopsignals import held

Proc = tuple[int, int]  # (pid, start time in clock ticks): a pid alone may be reused

# Guards not yet stopped, so that a caller whose audit runs in another thread (the TUI's worker, which
# outlives a quit or a signal) can stop it on its own way out: stop_all().
_ACTIVE: set[Owned] = set()
_LOCK = threading.Lock()


# DuckDB connections running an audit's query in this process (the local engine's key rule in the driver):
# stop_all() interrupts them, so the thread running one unwinds (its finally blocks remove the sink's frozen
# copy) instead of being inside DuckDB's C++ when the interpreter ends it at exit (std::terminate, SIGABRT).
_QUERIES: set[Any] = set()


@contextmanager
def interruptible(con: Any) -> Iterator[Any]:
    """``con``'s queries inside the block are interrupted by stop_all()."""
    with _LOCK:
        _QUERIES.add(con)
    try:
        yield con
    finally:
        with _LOCK:
            _QUERIES.discard(con)


def stop_all() -> None:
    """Stop what every audit still running in this process started (from any thread)."""
    with _LOCK:
        active = list(_ACTIVE)
        queries = list(_QUERIES)
    for con in queries:
        try:
            con.interrupt()
        except Exception:  # closed meanwhile: nothing runs on it
            pass
    for owned in active:
        owned.stop()


class Owned:
    def __init__(self) -> None:
        self.before = set(_children(os.getpid()))
        # Ctrl-C and SIGTERM are held until the directory is registered: a signal in between would leave
        # it behind (the `with` that stops this guard has not begun yet; stop_all() finds it once registered).
        with held():
            self.dir = tempfile.mkdtemp(prefix="eosctl-audit-")
            with _LOCK:
                _ACTIVE.add(self)

    def path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    def __enter__(self) -> Owned:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def started(self) -> list[Proc]:
        """Every live process this audit started: new children and all their descendants."""
        children = _lister()
        roots = [c for c in children(os.getpid()) if c not in self.before]
        out: list[Proc] = []
        while roots:
            proc = roots.pop()
            out.append(proc)
            roots.extend(children(proc[0]))
        return out

    def stop(self, timeout: float = 5.0) -> None:
        procs = self.started()
        for _ in range(3):  # a process may fork between the listing and the SIGSTOP: list again
            for pid, _start in procs:
                _signal(pid, signal.SIGSTOP)
            again = self.started()
            if set(again) <= set(procs):
                break
            procs = list(set(procs) | set(again))
        for pid, _start in procs:
            _signal(pid, signal.SIGKILL)
        mine = {pid for pid, _ in _children(os.getpid())}
        deadline = time.monotonic() + timeout
        for pid, _start in procs:
            # Our own children are reaped here; the others were re-parented and their new parent reaps.
            while pid in mine and time.monotonic() < deadline:
                try:
                    if os.waitpid(pid, os.WNOHANG)[0]:
                        break
                except ChildProcessError:
                    break
                time.sleep(0.02)
        shutil.rmtree(self.dir, ignore_errors=True)
        with _LOCK:
            _ACTIVE.discard(self)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _tree() -> dict[int, list[Proc]]:
    """parent pid -> its children, from /proc (Linux). Elsewhere empty: nothing found, nothing killed."""
    out: dict[int, list[Proc]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return out
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] == "Z":  # a zombie is gone already; only its parent's wait is missing
            continue
        out.setdefault(int(fields[1]), []).append((int(entry), int(fields[19])))
    return out


def _children(pid: int) -> list[Proc]:
    return _lister()(pid)


def _lister() -> Callable[[int], list[Proc]]:
    """pid -> its live children. From each process's own list of children where Linux keeps one
    (/proc/PID/task/TID/children): a few files per process of the audit's, where the whole /proc is a file
    per process of the machine's (hundreds on a shared host, read four times per audit: most of a small
    audit's guard). Else from the whole /proc, read once per call."""
    if os.path.exists(f"/proc/{os.getpid()}/task/{threading.get_native_id()}/children"):
        return _own_children
    tree = _tree()
    return lambda pid: tree.get(pid, [])


def _own_children(pid: int) -> list[Proc]:
    """pid's live children from its threads' lists (Linux's CONFIG_PROC_CHILDREN); none if it is gone."""
    out: list[Proc] = []
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in threads:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids = f.read().split()
        except OSError:  # the thread or the process ended meanwhile
            continue
        out += [proc for proc in map(_stat, kids) if proc is not None]
    return out


def _stat(pid: str) -> Proc | None:
    """(pid, start time) of a live process, None if it is gone or a zombie (only its parent's wait is
    missing)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] == "Z" else (int(pid), int(fields[19]))
