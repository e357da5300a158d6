"""The eosctl command line: the one place that wires core, auditors and TUI together.

Spark, Textual and the Kafka clients are imported inside the commands that need them, so that
`eosctl --help` answers instantly.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import click

from eosctl import __version__
from eosctl.base import quickexit
from eosctl.base.errors import EosctlError
from eosctl.base.exits import Exit
from eosctl.base.files import shown
from eosctl.base.safetext import term
from eosctl.base.stopsignals import STOP_SIGNALS, exit_code, forget_taken, handling, say_stopped, take
from eosctl.config.redaction import Redacting, redact

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@contextmanager
def _redacted_streams() -> Iterator[None]:
    """stdout and stderr through eosctl.config.redaction.Redacting for the command: tables, JSON, progress and
    log lines alike, whichever code writes them, never show a value substituted from the config's ${NAME}s."""
    before = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = Redacting(sys.stdout), Redacting(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = before


class OneLineError(click.ClickException):
    """A click error already worded as eosctl's one line (what is wrong, how to fix it)."""

    def __init__(self, message: str, exit_code: int = Exit.ERROR):
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc]  # click declares it a ClassVar; this error sets its own

    def show(self, file: object = None) -> None:
        click.echo(f"eosctl: error: {redact(self.message)}", err=True)


def usage_line(e: click.ClickException) -> str:
    """click's 3-4 line usage error (Usage: / Try ... / Error: ...) as one line naming the help to read."""
    message = one_line(e.format_message()).replace(". Did you mean", "; did you mean").rstrip(".")
    if message[1:2].islower():  # "No such option" -> "no such option"; "DuckDB ..." stays
        message = message[0].lower() + message[1:]
    ctx = getattr(e, "ctx", None)
    if ctx is None:
        return message
    path = ctx.command_path
    return f"`{path}`: {message} (see `{path} --help`)"


def one_line(message: str) -> str:
    """A message as one line: its lines joined with '; ', and any other character a terminal would not
    print as itself (a control character from a file name, U+2028, a right-to-left override) escaped.
    A value substituted for a ${NAME} of the config is never in it (eosctl.config.redaction.redact)."""
    message = redact(message)
    if "\n" in message or "\r" in message:
        message = "; ".join(line.strip() for line in message.replace("\r", "\n").split("\n") if line.strip())
    return term(message)


# `eosctl` or `eosctl txns` alone: click shows the help (exit 2), which must stay the help.
_HELP_ERRORS = (getattr(click.exceptions, "NoArgsIsHelpError", OneLineError),)


# What a write to stdout fails with when the output can't take it: a full disk (`> /dev/full`), a quota,
# a file over its size limit, a closed pipe (`| head`), a terminal that went away.
_WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EPIPE, errno.EIO, errno.EBADF}


def _output_failed(e: OSError) -> NoReturn:
    """A write to stdout failed: one line on stderr (if stderr still takes one) and exit 2, never 1 (CI
    reads 1 as findings). stdout is pointed at /dev/null first, so that the interpreter's own flush at exit
    doesn't fail again with "Exception ignored" and exit 120."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
    reason = e.strerror or type(e).__name__
    hint = ("whatever read it stopped reading" if e.errno == errno.EPIPE else
            "free some space or write somewhere else (--out FILE)")
    try:
        sys.stderr.write(f"eosctl: error: cannot write the output: {reason}; {hint}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    sys.exit(Exit.ERROR)


def _is_output_error(e: BaseException) -> bool:
    return isinstance(e, OSError) and e.filename is None and e.errno in _WRITE_ERRNOS


class EosctlGroup(click.Group):
    """Turns every EosctlError and usage error into one line on stderr and exit 2: no tracebacks, no
    Usage: blocks for user mistakes. --help output is click's own, unchanged. A write to stdout that
    fails (`> /dev/full`, `--help` too) is one line and exit 2 as well: this is where the CLI ends."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().main(*args, **kwargs)
        except SystemExit:
            # What is still buffered for stdout is written now, where its failure can be reported.
            try:
                sys.stdout.flush()
            except OSError as e:
                if _is_output_error(e):
                    _output_failed(e)
                raise
            raise
        except OSError as e:
            if _is_output_error(e):
                _output_failed(e)
            raise

    def _main_shell_completion(self, ctx_args: Any, prog_name: str, complete_var: str | None = None) -> None:
        # Click reads COMP_WORDS/COMP_CWORD itself and raises KeyError or ValueError when a shell (or a
        # user) calls it without them: one line instead.
        try:
            super()._main_shell_completion(ctx_args, prog_name, complete_var)
        except (KeyError, ValueError, IndexError) as e:
            what = f"{e.args[0]} is not set" if isinstance(e, KeyError) else "COMP_CWORD is not a word index"
            click.echo(f"eosctl: error: shell completion called without its variables ({term(str(what))}); "
                       "load the script from `eosctl completion bash|zsh|fish` instead", err=True)
            sys.exit(Exit.ERROR)

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: object) -> click.Context:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except _HELP_ERRORS:
            raise
        except click.UsageError as e:  # bad options of the group itself (`eosctl --nope`)
            raise OneLineError(usage_line(e), e.exit_code) from None
        except OSError as e:  # `eosctl --help > /dev/full`: before click turns EPIPE into exit 1
            if _is_output_error(e):
                _output_failed(e)
            raise

    def invoke(self, ctx: click.Context):
        try:
            with unwind_on_signals(), _redacted_streams():
                return super().invoke(ctx)
        except (OneLineError, *_HELP_ERRORS):
            raise
        except click.UsageError as e:  # a subcommand's parsing, or a click.UsageError from its body
            raise OneLineError(usage_line(e), e.exit_code) from None
        except click.ClickException as e:
            raise OneLineError(usage_line(e), e.exit_code) from None
        except EosctlError as e:
            click.echo(f"eosctl: error: {one_line(str(e))}", err=True)
            sys.exit(e.exit_code)
        except OSError as e:
            if _is_output_error(e):
                _output_failed(e)
            # A path the OS refused (a name over its limit, a permission) that no check caught first:
            # still one line, never a traceback. Other OSErrors are bugs and keep theirs.
            if e.filename is None:
                raise

            click.echo(f"eosctl: error: {shown(str(e.filename))}: {e.strerror}", err=True)
            sys.exit(Exit.ERROR)
        except KeyboardInterrupt:
            click.echo("eosctl: interrupted", err=True)
            sys.exit(Exit.INTERRUPTED)


class Terminated(BaseException):
    """SIGTERM, raised in the main thread like KeyboardInterrupt, so every `finally` and `with` on the way
    out runs: the audit's guard kills the JVM or the pool, a frozen sink copy and a half-written --out are
    removed."""


# A second signal while the first one unwinds is ignored for this long, so that it can't cut short the
# clean-up (killing a JVM, removing a copy); after it, it raises again (the first may have been swallowed).
_UNWIND_GRACE_S = 3.0


@contextmanager
def unwind_on_signals() -> Iterator[None]:
    """Ctrl-C (SIGINT), SIGTERM and SIGHUP (a closed terminal) unwind the command, then print one line and
    exit 130, 143 or 129 (eosctl.base.stopsignals).

    The signal is remembered: whatever error it causes on the way up (a Ctrl-C also reaches Spark's Python
    workers; DuckDB turns it into its own INTERRUPT error; PySpark asks the JVM for the result in a
    `finally`) is not reported instead of it."""
    got: list[tuple[int, float]] = []

    def on_signal(signum: int, frame: object) -> None:
        now = time.monotonic()
        if got and now - got[-1][1] < _UNWIND_GRACE_S:
            return
        got.append((signum, now))
        take(signum)
        raise KeyboardInterrupt() if signum == signal.SIGINT else Terminated()

    main_thread = threading.current_thread() is threading.main_thread()
    # The handlers stay until the command has unwound and said its line (a second signal meanwhile is ours).
    with handling(on_signal, STOP_SIGNALS if main_thread else ()):
        try:
            try:
                yield
            except BaseException:
                if not got:
                    raise
                _stopped(got[0][0])
            # The exception the handler raised can be swallowed on its way up: kafka-python's event loop,
            # which the main thread drives, logs and drops whatever a task step raises (kafka/net/selector.py,
            # `except BaseException` around each step), and its logger is silenced. The command then ran to
            # its end and exited 0 with no line (ci10, a snapshot's audit); its output is not put in place
            # (eosctl.base.stopsignals.refuse_if_stopped). A signal that came is still the command's end.
            if got:
                _stopped(got[0][0])
        finally:
            forget_taken()


def _stopped(signum: int) -> NoReturn:
    # An audit whose guard was made but not yet entered when the signal came: stop it here too.
    guard = sys.modules.get("auditors.guard")
    if guard is not None:
        guard.stop_all()
    say_stopped(signum)
    sys.exit(exit_code(signum))


def run() -> None:
    """The program's entry (the `eosctl` script, `python -m eosctl`): `main`, ended without the
    interpreter's teardown where the command allowed it (eosctl.base.quickexit)."""
    try:
        main()
    except SystemExit as e:
        if isinstance(e.code, int) or e.code is None:
            quickexit.end(e.code or 0)
        raise
    quickexit.end(0)


@click.group(cls=EosctlGroup, context_settings=CONTEXT)
@click.version_option(__version__, prog_name="eosctl")
def main() -> None:
    """See, inspect and audit Kafka exactly-once pipelines.

    \b
    Start here:
      eosctl demo                      local broker + demo pipeline with planted defects + audit
      eosctl sandbox up|down|status    the embedded Kafka-protocol broker
    \b
    Point it at your own cluster with --config FILE --pipeline NAME (see sample_configs/),
    or with --bootstrap HOST:PORT --topic T --group G.
    """


# Command modules import their heavy libraries (Kafka clients, DuckDB, Spark, Textual) inside the
# commands, so mounting them here costs nothing at start-up.
from eosctl.commands import (  # noqa: E402
    audit_cmd,
    completion_cmd,
    demo_cmd,
    explain_cmd,
    exporter_cmd,
    lag_cmd,
    ledger_cmd,
    log_cmd,
    producers_cmd,
    report_cmd,
    sandbox_cmd,
    snapshot_cmd,
    tui_cmd,
    txns_cmd,
    txns_fence_cmd,  # noqa: F401  (its verb mounts itself on `txns`)
)

for _command in (demo_cmd.demo, sandbox_cmd.sandbox, *txns_cmd.COMMANDS, producers_cmd.producers,
                 *lag_cmd.COMMANDS, *log_cmd.COMMANDS, *ledger_cmd.COMMANDS, snapshot_cmd.snapshot,
                 audit_cmd.audit, report_cmd.report, *explain_cmd.COMMANDS, tui_cmd.tui,
                 *exporter_cmd.COMMANDS,
                 completion_cmd.completion):
    main.add_command(_command)
