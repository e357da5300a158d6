"""A table's rows as data: the columns, the rows views hand over (`Row`) and `TableData`, the display
strings, column widths and filter text made from them.

`TableData` is pure: it may be built in a worker thread, and a row equal to the one with its key in the
previous data reuses that row's strings, so a refresh formats only what changed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.cells import cell_len
from rich.text import Text

from eosctl.base.safetext import term


@dataclass(frozen=True)
class Col:
    label: str
    numeric: bool = False
    width: int | None = None


@dataclass(frozen=True)
class Row:
    key: str
    cells: tuple[Any, ...]
    level: str | None = None
    # What the row shows (a partition's lag, a finding...), handed back when the row is selected.
    item: Any = field(default=None, compare=False, repr=False)


def display(value: Any) -> str:
    """What a cell shows: '-' for nothing, and never a raw control character (eosctl.base.safetext)."""
    if type(value) is int:  # most cells: offsets, counts, ids
        return str(value)
    if isinstance(value, Text):
        value = value.plain
    if value is None or value == "":
        return "-"
    s = value if isinstance(value, str) else str(value)
    return s if s.isprintable() else term(s)


def _width(s: str) -> int:
    return len(s) if s.isascii() else cell_len(s)



@dataclass(eq=False)
class TableData:
    """Rows ready to draw. Pure data: `of` may run in a worker thread; the widget only reads it."""

    rows: list[Row]
    texts: list[tuple[str, ...]]  # display strings, one tuple per row
    hay: list[str]  # lower-cased text of each row, for the filter
    widths: list[int]  # widest cell per column (before the MAX_COL_WIDTH cap)
    index: dict[str, int]  # row key -> position in rows
    _sort_keys: dict[int, list[Any]] = field(default_factory=dict)

    @classmethod
    def of(cls, columns: Sequence[Col], rows: Sequence[Row], previous: TableData | None = None) -> TableData:
        """Format `rows`; a row equal to the one with its key in `previous` reuses that row's strings."""
        n = len(columns)
        rows = list(rows)
        texts: list[tuple[str, ...]] = []
        hay: list[str] = []
        widths = [0] * n
        old_index = previous.index if previous is not None else {}
        for r in rows:
            i = old_index.get(r.key)
            if i is not None and previous is not None and previous.rows[i] == r:
                t, h = previous.texts[i], previous.hay[i]
            else:
                t = tuple(map(display, r.cells[:n]))
                if len(t) < n:
                    t += ("",) * (n - len(t))
                h = " ".join(t).lower()
            texts.append(t)
            hay.append(h)
            for c, w in enumerate(map(_width, t)):
                if w > widths[c]:
                    widths[c] = w
        return cls(rows, texts, hay, widths, {r.key: i for i, r in enumerate(rows)})

    @classmethod
    def empty(cls, columns: Sequence[Col]) -> TableData:
        return cls([], [], [], [0] * len(columns), {})

    def sort_keys(self, column: int, numeric: bool) -> list[Any]:
        """One comparable key per row for `column` (numbers as numbers; '-' first), computed once."""
        keys = self._sort_keys.get(column)
        if keys is None:
            keys = [_sort_key(t[column], numeric) for t in self.texts]
            self._sort_keys[column] = keys
        return keys


# A duration as tui.fmt.duration writes it: 45s, 12m, 3h05m, 2d4h.
_DURATION = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


def _sort_key(s: str, numeric: bool) -> tuple[int, Any]:
    """Numbers ("1,234", "5+"), offset ranges ("5..9", by their first offset) and durations sort as
    numbers in a numeric column; '-' (nothing) first; anything else as text."""
    if s == "-":
        return (0, 0)
    if numeric:
        try:
            return (1, float(s.replace(",", "").rstrip("+")))
        except ValueError:
            pass
        head = s.split("..", 1)[0].replace(",", "")
        if head.lstrip("-").isascii() and head.lstrip("-").isdigit():
            return (1, float(head))
        m = _DURATION.fullmatch(s)
        if m and any(m.groups()):
            d, h, mi, sec = (int(x or 0) for x in m.groups())
            return (1, float(((d * 24 + h) * 60 + mi) * 60 + sec))
    return (2, s.lower())

