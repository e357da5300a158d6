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
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from eosctl.base import safetext
from eosctl.base.durations import human
from eosctl.base.progress import Progress


def console(stderr: bool = False) -> Console:
    """A rich console; piped stdout (scripts, CI logs, tests) gets wide lines instead of truncated cells.
    No emoji codes: a name from a cluster such as ":fire:" stays text, and the first line printed does not
    import rich's emoji table (12 ms of a small audit)."""
    out = Console(stderr=stderr, highlight=False, emoji=False)
    if not stderr and not out.is_terminal:
        out.width = max(out.width, 200)
    return out


# `--format plain` (set_plain): every table is printed as tab-separated lines, for scripts.
_PLAIN = [False]


def set_plain(on: bool) -> None:
    _PLAIN[0] = on


def table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[object]],
          drop: Sequence[str] = (), **kw: Any) -> Table:
    """A rich table whose title and cells are text, never markup: they hold names and values from a
    cluster or a sink (a `[/x]` would raise, a `[link=...]` would become a link, an ESC would reach the
    terminal). A cell that is already a rich Text is kept (a styled status).

    It fits the width it is printed in without cutting a name: a cell wraps between words, never ends in
    "…"; when even that is too wide, the ``drop`` columns are left out, least important first, and a line
    says which. With `--format plain` it prints as tab-separated lines instead."""
    t = FitTable(title=None if title is None else safetext.text(title), title_justify="left",
                 header_style="bold", **kw)
    t.drop = tuple(drop)
    for c in columns:
        t.add_column(c, justify="right" if c.isupper() is False and c.lower() in _NUMERIC else "left",
                     overflow="fold")
    for r in rows:
        t.add_row(*[v if isinstance(v, Text) else safetext.text(_cell(v)) for v in r])
    return t


class FitTable(Table):
    """A Table that fits the console's width (see table()), or prints plain for `--format plain`."""

    drop: tuple[str, ...] = ()

    def __rich_console__(self, console: Console, options: Any) -> Any:
        if _PLAIN[0]:
            yield from self._plain()
            return
        fitted: Table = self
        dropped: list[str] = []
        for name in self.drop:
            if fitted.__rich_measure__(console, options).minimum <= options.max_width:
                break
            dropped.append(name)
            fitted = self._without(dropped)
        if fitted is self:
            yield from super().__rich_console__(console, options)
        else:
            yield fitted
        if dropped:
            yield Text(f"(left out to fit {options.max_width} columns: {', '.join(dropped)}; a wider "
                       "terminal or "
                       "--format plain shows them)", style="dim")

    def _without(self, names: Sequence[str]) -> Table:
        t = Table(title=self.title, title_justify=self.title_justify, header_style=self.header_style,
                  show_header=self.show_header, box=self.box)
        keep = [c for c in self.columns if str(c.header) not in names]
        for c in keep:
            t.add_column(c.header, justify=c.justify, overflow="fold")
        for i in range(self.row_count):
            t.add_row(*[c._cells[i] for c in keep])
        return t

    def _plain(self) -> Iterator[Segment]:
        """Segments, not Text: rich would expand the tabs into spaces."""
        def cell(v: Any) -> str:
            return (v.plain if isinstance(v, Text) else str(v)).replace("\t", " ").replace("\n", " ")

        lines = [f"# {cell(self.title)}"] if self.title is not None else []
        if self.show_header:
            lines.append("\t".join(cell(c.header) for c in self.columns))
        lines += ["\t".join(cell(c._cells[i]) for c in self.columns) for i in range(self.row_count)]
        for line in lines:
            yield Segment(line)
            yield Segment.line()


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
    """A duration in the one style of every view (eosctl.base.durations)."""
    return human(seconds)


def time_text(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
