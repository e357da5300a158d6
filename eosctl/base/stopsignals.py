"""The signals that stop any eosctl command, and the one line and exit code each ends with.

Ctrl-C (SIGINT), SIGTERM and a closed terminal (SIGHUP) take one path (eosctl.cli.unwind_on_signals, the
TUI's and the exporter's own handlers): everything the command started is stopped, then one line and exit
128 + the signal's number (130, 143, 129). Python's default for SIGHUP is to die on the spot, with no
`finally` run: a local-engine audit's pool workers and temp dirs were left behind.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from eosctl.base.exits import Exit

STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM,
                                            *((signal.SIGHUP,) if hasattr(signal, "SIGHUP") else ()))

_LINES: dict[int, str] = {signal.SIGINT: "eosctl: interrupted", signal.SIGTERM: "eosctl: terminated"}
if hasattr(signal, "SIGHUP"):
    _LINES[signal.SIGHUP] = "eosctl: hung up (the terminal was closed)"


def stopped_line(signum: int) -> str:
    return _LINES.get(signum, f"eosctl: stopped by signal {signum}")


def exit_code(signum: int) -> int:
    """The exit status of a command ``signum`` stopped (eosctl.base.exits.Exit: 129, 130, 143)."""
    return Exit.of_signal(signum)


def say_stopped(signum: int) -> None:
    """The one line on stderr; a terminal that is gone (SIGHUP) can't take it, and that is no error."""
    try:
        sys.stderr.write(stopped_line(signum) + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


@contextmanager
def handling(on_signal: Callable[[int, Any], None], signals: tuple[int, ...] = STOP_SIGNALS,
             ) -> Iterator[dict[int, Any]]:
    """``on_signal`` handles ``signals`` inside the block (yielded: the handlers before, by signal); those
    are restored on the way out."""
    before = {s: signal.signal(s, _after_imports(on_signal)) for s in signals}
    try:
        yield before
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


# How soon a stop signal that arrived inside an import or a held() block is sent again.
IMPORT_RETRY_S = 0.05

# held() blocks the main thread is inside.
_HELD = [0]


@contextmanager
def held() -> Iterator[Callable[[], None]]:
    """The stop signals wait while the block runs (a fork, a temp dir made and registered); they arrive
    once it has ended, or from the call of the yielded ``release`` on (inside the block, where a `try`
    already stands).

    The thread's signal mask alone does not hold them: the kernel hands a signal sent to the process to any
    thread that doesn't block it (a client's network thread), and Python runs the handler in the main
    thread at its next instruction, wherever that is. Inside os.fork's at-fork callbacks the exception it
    raised was printed as "Exception ignored in: ... _releaseLock" with a traceback (ci12, under load). So
    eosctl's handlers (``handling``) send the signal again shortly while a held() block runs, as inside an
    import; the mask still keeps it from a child forked inside the block until the child ignores it."""
    mask = getattr(signal, "pthread_sigmask", None)
    before = mask(signal.SIG_BLOCK, set(STOP_SIGNALS)) if mask else None
    main = threading.current_thread() is threading.main_thread()
    if main:
        _HELD[0] += 1
    released = [False]

    def release() -> None:
        if released[0]:
            return
        released[0] = True
        if main:
            _HELD[0] -= 1
        if mask:
            mask(signal.SIG_SETMASK, before)

    try:
        yield release
    finally:
        release()


def _importing(frame: Any) -> bool:
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _after_imports(on_signal: Callable[[int, Any], None]) -> Callable[[int, Any], None]:
    """``on_signal``, but never while a module is being imported: an exception raised inside a native
    module's initialisation aborts the process (duckdb's nanobind: "Critical nanobind error ... enum_create",
    SIGABRT, no line, nothing cleaned up). The signal is sent again shortly, until the import is done; so
    inside a held() block."""

    def handler(signum: int, frame: Any) -> None:
        if _HELD[0] or _importing(frame):
            timer = threading.Timer(IMPORT_RETRY_S, os.kill, (os.getpid(), signum))
            timer.daemon = True
            timer.start()
            return
        on_signal(signum, frame)

    return handler


# The stop signal a command took (eosctl.cli.unwind_on_signals) while it unwinds. The exception the
# handler raised can be swallowed on its way up (kafka-python's event loop drops what a task step raises),
# and the command then runs on: whatever it would write next must not be written (ci, stop 62: a
# snapshot's audit stopped by SIGTERM, its --out written all the same).
_TAKEN: list[int] = []


class StoppedBefore(BaseException):
    """Raised by ``refuse_if_stopped``: a stop signal came before this point; like KeyboardInterrupt, it
    unwinds through every `finally` (the half-written output is removed)."""

    def __init__(self, signum: int) -> None:
        super().__init__(stopped_line(signum))
        self.signum = signum


def take(signum: int) -> None:
    """A stop signal came: the command unwinds (``refuse_if_stopped`` from now on)."""
    _TAKEN.append(signum)


def forget_taken() -> None:
    _TAKEN.clear()


def refuse_if_stopped() -> None:
    """Raise StoppedBefore if a stop signal came: a command's output is not put in place after it."""
    if _TAKEN:
        raise StoppedBefore(_TAKEN[0])


class StopEvent(threading.Event):
    """Set by a stop signal; ``signum`` says which."""

    signum: int | None = None


@contextmanager
def stop_event() -> Iterator[StopEvent]:
    """The stop signals set the event instead of raising (the loops that wait on it end, everything is
    closed in order); the handlers before are restored on the way out."""
    stop = StopEvent()

    def on_signal(signum: int, frame: object) -> None:
        stop.signum = signum
        stop.set()

    with handling(on_signal):
        yield stop
