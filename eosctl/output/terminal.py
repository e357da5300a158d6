"""The terminal side shared by every command: the console, rich tables, JSON to stdout, progress, times."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn
from rich.progress import Progress as RichProgress
from rich.table import Table
from rich.text import Text

from eosctl import safetext
from eosctl.progress import Progress


def console(stderr: bool = False) -> Console:
    """A rich console; piped stdout (scripts, CI logs, tests) gets wide lines instead of truncated cells."""
    out = Console(stderr=stderr, highlight=False)
    if not stderr and not out.is_terminal:
        out.width = max(out.width, 200)
    return out


def table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[object]], **kw: Any) -> Table:
    """A rich table whose title and cells are text, never markup: they hold names and values from a
    cluster or a sink (a `[/x]` would raise, a `[link=...]` would become a link, an ESC would reach the
    terminal). A cell that is already a rich Text is kept (a styled status)."""
    t = Table(title=None if title is None else safetext.text(title), title_justify="left",
              header_style="bold", **kw)
    for c in columns:
        t.add_column(c, justify="right" if c.isupper() is False and c.lower() in _NUMERIC else "left")
    for r in rows:
        t.add_row(*[v if isinstance(v, Text) else safetext.text(_cell(v)) for v in r])
    return t


_NUMERIC = {
    "partition", "offset", "first", "last", "count", "rows", "epoch", "pid", "producer id", "lso", "hw",
    "committed", "lag", "records behind", "blocked", "log start", "sequence", "age", "timeout",
}


def _cell(v: object) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.1f}"
    return str(v)


def emit_json(obj: object) -> None:
    json.dump(obj, sys.stdout, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")


@contextmanager
def scan_progress() -> Iterator[Progress]:
    """A transient progress bar on stderr while partitions are scanned (offsets done of total); silent
    off a terminal, so piped output and CI logs stay clean."""
    err = console(stderr=True)
    # The description names a topic: text, not markup.
    with RichProgress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                      TextColumn("offsets"), console=err, transient=True, disable=not err.is_terminal) as bar:
        task = bar.add_task("scanning the log", total=None)
        yield lambda step: bar.update(task, description=safetext.term(step.what), completed=step.done,
                                      total=step.total)


def age_text(seconds: float | None) -> str:
    """A duration in the one style of every view (eosctl.durations)."""
    from eosctl.durations import human

    return human(seconds)


def time_text(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
