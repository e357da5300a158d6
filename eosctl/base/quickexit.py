"""The end of an eosctl process without the interpreter's teardown, for commands that opt in.

Python's own exit clears every module and collects what they held: for an audit's ~640 modules (numpy,
pyarrow, DuckDB, kafka-python) that was 0.09 s of a demo-size audit's 0.9 s of CPU (issue 49,
docs/benchmarks.md), spent after the last line was written. A command that has closed what it opened in
its own `with` and `finally` blocks calls ``allow()``; its process then ends with ``os._exit`` once the
command has unwound, after what the teardown would still have done that a user can notice: the atexit
hooks (logging's flush, multiprocessing's children joined, weakref finalizers, a Spark session's stop) and
stdout and stderr flushed. Not while a thread other than a daemon is alive (the interpreter would wait for
it), nor when a flush of the command's output fails (the normal exit then reports it as before), nor for a
command run in-process (click's test runner, the TUI's own handling).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading

_allowed: list[bool] = []


def allow() -> None:
    """This process may end without the interpreter's teardown once its command has unwound (``end``)."""
    _allowed.append(True)


def end(code: int) -> None:
    """End the process with ``code`` at once when a command allowed it and nothing is left running; else
    return (the caller exits the usual way)."""
    if not _allowed:
        return
    if any(not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        return
    if not _flushed():
        return  # the usual exit reports what could not be written
    atexit._run_exitfuncs()
    # What the hooks wrote; if that can't be written, the exit status the interpreter gives then (120).
    os._exit(code if _flushed() else 120)


def _flushed() -> bool:
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        return False
    return True
