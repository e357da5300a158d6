"""The suite's shared helpers: running eosctl (in this process through click's CliRunner, or as a child
process) and waiting for a condition, always with a deadline and saying what was waited for.

Every test runs eosctl through ``eosctl``/``eosctl_json``/``eosctl_process`` and waits through
``wait_until``: one place for the terminal width, the no-traceback rule and the failure messages.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from click.testing import CliRunner, Result

REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T")


def eosctl(*args: str, columns: int | None = 200, env: dict[str, str | None] | None = None,
           check: bool = True, **invoke: Any) -> Result:
    """`eosctl ARGS` in this process. ``columns``: the terminal width rich sizes tables from (wide enough
    that no cell wraps; None: click's default). With ``check`` (the default) the command must end by its
    own exit: an uncaught exception is raised here with its traceback, and no traceback may be printed.
    ``invoke``: CliRunner.invoke's other arguments (input, terminal_width, prog_name, ...)."""
    from eosctl.cli import main

    full_env: dict[str, str | None] = {} if columns is None else {"COLUMNS": str(columns)}
    full_env.update(env or {})
    result = CliRunner().invoke(main, list(args), env=full_env, **invoke)
    if check:
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception.with_traceback(result.exc_info[2] if result.exc_info else None)
        assert "Traceback" not in result.stderr, result.stderr
    return result


def eosctl_json(*args: str, codes: tuple[int, ...] = (0, 1), **kw: Any) -> Any:
    """The document `eosctl ARGS --format json` prints, its exit code one of ``codes`` (0, or 1 for a
    command that found something)."""
    result = eosctl(*args, "--format", "json", **kw)
    assert result.exit_code in codes, f"eosctl {' '.join(args)}: exit {result.exit_code}\n{result.output}"
    return json.loads(result.stdout)


def eosctl_process(*args: str, env: dict[str, str] | None = None, cwd: Path | str | None = None,
                   timeout: float = 120, **run: Any) -> subprocess.CompletedProcess:
    """`python -m eosctl ARGS` as a child process (for what a test can only see from outside: exit codes
    set by signals, real stdio, TMPDIR, the working directory), killed after ``timeout`` seconds. ``env``
    is added to this process's environment; ``run``: subprocess.run's other arguments (stdout=...)."""
    full_env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                                         os.environ.get("PYTHONPATH")])),
                **(env or {})}
    run.setdefault("stdout", subprocess.PIPE)
    run.setdefault("stderr", subprocess.PIPE)
    return subprocess.run([sys.executable, "-m", "eosctl", *args], env=full_env, cwd=cwd, text=True,
                          timeout=timeout, **run)


def wait_until(what: str, ready: Callable[[], T], seconds: float, *, interval: float = 0.05,
               gone: Callable[[], str | None] | None = None, detail: Callable[[], str] | None = None) -> T:
    """``ready()``'s first true value, polled every ``interval`` seconds; the test fails after ``seconds``
    saying ``what`` it waited for. ``gone``: says why it can never come (a process that exited), failing at
    once; ``detail``: what to show on failure (a log's tail, the screen)."""
    deadline = time.monotonic() + seconds
    while True:
        value = ready()
        if value:
            return value
        why = gone() if gone is not None else None
        if why:
            pytest.fail(f"{why} before {what}:\n{detail() if detail else ''}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {seconds:.0f} s\n{detail() if detail else ''}")
        time.sleep(interval)


def exited(name: str, proc: subprocess.Popen | None) -> Callable[[], str | None]:
    """For wait_until's ``gone``: "NAME exited (CODE)" once the process has exited."""
    def check() -> str | None:
        if proc is not None and proc.poll() is not None:
            return f"{name} exited ({proc.returncode})"
        return None
    return check
