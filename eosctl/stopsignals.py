"""The signals that stop any eosctl command, and the one line and exit code each ends with.

Ctrl-C (SIGINT), SIGTERM and a closed terminal (SIGHUP) take one path (eosctl.cli.unwind_on_signals, the
TUI's and the exporter's own handlers): everything the command started is stopped, then one line and exit
128 + the signal's number (130, 143, 129). Python's default for SIGHUP is to die on the spot, with no
`finally` run: a local-engine audit's pool workers and temp dirs were left behind.
"""

from __future__ import annotations

import signal

STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM,
                                            *((signal.SIGHUP,) if hasattr(signal, "SIGHUP") else ()))

_LINES = {signal.SIGINT: "eosctl: interrupted", signal.SIGTERM: "eosctl: terminated"}
if hasattr(signal, "SIGHUP"):
    _LINES[signal.SIGHUP] = "eosctl: hung up (the terminal was closed)"


def stopped_line(signum: int) -> str:
    return _LINES.get(signum, f"eosctl: stopped by signal {signum}")


def exit_code(signum: int) -> int:
    return 128 + int(signum)


def say_stopped(signum: int) -> None:
    """The one line on stderr; a terminal that is gone (SIGHUP) can't take it, and that is no error."""
    import sys

    try:
        sys.stderr.write(stopped_line(signum) + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
