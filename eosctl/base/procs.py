"""Servers eosctl starts for the user (the sandbox broker, a local PostgreSQL): is one alive, stop it;
and how a test's servers die with the process that started them."""

from __future__ import annotations

import ctypes
import os
import signal
import time
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def alive(pid: int) -> bool:
    """Whether ``pid`` runs. A zombie (our own child, not yet reaped) still answers kill(0): not running."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def die_with_parent() -> None:
    """A ``preexec_fn``: the child gets a session of its own (a kill of its group reaches all it starts)
    and is SIGKILLed when the thread that started it dies (Linux), so a server a test
    started never outlives a process killed before its finalizers ran (the sandbox's own servers don't ask:
    they outlive eosctl on purpose)."""
    if os.getsid(0) != os.getpid():  # start_new_session=True may have made it one already
        os.setsid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass  # not Linux: the finalizers are all there is


def stop(pid: int, sig: int = signal.SIGTERM, timeout: float = 10.0) -> None:
    """Ask with ``sig`` (each server's own clean shutdown signal), then SIGKILL after ``timeout``; reap it."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reap(pid)
        if not alive(pid):
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    reap(pid)


def reap(pid: int) -> None:
    """Collect ``pid``'s exit status if it is our child (so it leaves no zombie); otherwise nothing."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
