"""A DataTable with a `/` filter and cheap refreshes: the one table widget every view uses.

Views hand it plain `Row`s (a stable key, the cell values, a level that colours the whole row); the widget
keeps the cursor on the same key across refreshes, so an operator reading row 700 of 1,000 partitions is
not thrown back to the top every few seconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import DataTable, Input
from textual.widgets.data_table import CellKey, ColumnKey, RowKey

# Row levels -> rich styles. Levels that matter (bad/warn) are also bold so they survive NO_COLOR.
STYLES: dict[str | None, str] = {
    None: "",
    "ok": "green",
    "warn": "bold yellow",
    "bad": "bold red",
    "muted": "dim",
    # Log view kinds
    "committed": "green",
    "aborted": "bold red",
    "control": "magenta",
    "open": "bold yellow",
    "hole": "dim",
    "focus": "bold reverse",
}


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


def cell(value: Any, style: str = "", numeric: bool = False) -> Text:
    if isinstance(value, Text):
        text = value.copy()
        if style:
            text.stylize(style)
    else:
        text = Text("-" if value is None or value == "" else str(value), style=style)
    if numeric:
        text.justify = "right"
    return text


def plain(value: Any) -> str:
    return value.plain if isinstance(value, Text) else ("" if value is None else str(value))


class Table(DataTable[Text]):
    """DataTable plus one bulk cell update.

    DataTable.update_cell repaints per call (~30 µs); a refresh that touches thousands of cells must
    repaint once. This does what update_cell does (textual 8's DataTable) for many cells at a time.
    """

    def update_cells(self, cells: list[tuple[str, ColumnKey, Text, bool]]) -> None:
        if not hasattr(self, "_data") or not hasattr(self, "_updated_cells"):  # another textual: slow path
            for row, col, value, wider in cells:
                self.update_cell(row, col, value, update_width=wider)
            return
        for row, col, value, wider in cells:
            row_key = RowKey(row)
            self._data[row_key][col] = value
            if wider:
                self._updated_cells.add(CellKey(row_key, col))
                self._require_update_dimensions = True
        self._update_count += 1
        self.refresh()


class FilterTable(Vertical):
    """DataTable + a hidden filter Input (shown by `/`; Esc clears it)."""

    DEFAULT_CSS = """
    FilterTable { height: 1fr; }
    FilterTable > Input { display: none; height: 1; border: none; padding: 0 1; }
    FilterTable.filtering > Input { display: block; }
    FilterTable > DataTable { height: 1fr; }
    """

    BINDINGS = [Binding("escape", "clear_filter", "Clear filter", show=False)]

    class Selected(Message):
        """Enter (or click) on a row: carries the row's key."""

        def __init__(self, table: FilterTable, key: str) -> None:
            super().__init__()
            self.table = table
            self.key = key

        @property
        def control(self) -> FilterTable:
            return self.table

    def __init__(
        self, columns: Sequence[Col], *, id: str | None = None, empty: str = "nothing to show"
    ) -> None:
        super().__init__(id=id)
        self.columns = list(columns)
        self.rows: list[Row] = []
        self.shown: list[Row] = []
        self.filter_text = ""
        self.empty = empty

    def compose(self) -> ComposeResult:
        yield Input(placeholder="filter rows (Enter keeps it, Esc clears)")
        table = Table(cursor_type="row", zebra_stripes=False)
        yield table

    @property
    def table(self) -> Table:
        return self.query_one(Table)

    def on_mount(self) -> None:
        for i, c in enumerate(self.columns):
            self.table.add_column(
                Text(c.label, justify="right" if c.numeric else "left"), key=str(i), width=c.width
            )

    # ---- data -------------------------------------------------------------------------------------

    def set_rows(self, rows: Sequence[Row]) -> None:
        self.rows = list(rows)
        self._show()

    def _show(self) -> None:
        needle = self.filter_text.lower()
        shown = [r for r in self.rows if needle in _haystack(r)] if needle else self.rows
        table = self.table
        if (
            len(shown) == len(self.shown)
            and table.row_count == len(shown)
            and all(a.key == b.key for a, b in zip(shown, self.shown, strict=True))
        ):
            self._patch(shown)
        else:
            self._rebuild(shown)
        self.shown = shown
        table.border_subtitle = f"{len(shown)}/{len(self.rows)} rows" if needle else None

    def _patch(self, shown: list[Row]) -> None:
        """Same rows in the same order: rewrite only the cells that changed.

        DataTable measures every cell of every added row; at 1,000 partitions a rebuild costs ~250 ms of
        UI time per table, while patching the few cells a refresh changes costs a few milliseconds.
        """
        table = self.table
        widths = {c.key: c.content_width for c in table.ordered_columns}
        keys = [c.key for c in table.ordered_columns]
        updates = []
        for new, old in zip(shown, self.shown, strict=True):
            if new == old:
                continue
            cells = self._cells(new)
            restyled = new.level != old.level
            for i, (value, key) in enumerate(zip(cells, keys, strict=False)):
                if not restyled and i < len(old.cells) and new.cells[i] == old.cells[i]:
                    continue
                # Only a cell wider than its column asks DataTable to re-measure (columns never shrink here).
                wider = value.cell_len > widths[key]
                if wider:
                    widths[key] = value.cell_len
                updates.append((new.key, key, value, wider))
        if updates:
            table.update_cells(updates)

    def _rebuild(self, shown: list[Row]) -> None:
        table = self.table
        keep = self.cursor_key()
        scroll_y = table.scroll_y
        table.clear()
        for r in shown:
            table.add_row(*self._cells(r), key=r.key)
        if keep is not None:
            index = next((i for i, r in enumerate(shown) if r.key == keep), None)
            if index is not None:
                table.move_cursor(row=index, animate=False, scroll=False)
        table.scroll_to(y=scroll_y, animate=False, immediate=True)

    def _cells(self, r: Row) -> list[Text]:
        style = STYLES.get(r.level, r.level or "")
        return [cell(v, style, c.numeric) for v, c in zip(r.cells, self.columns, strict=False)]

    # ---- cursor -----------------------------------------------------------------------------------

    def cursor_key(self) -> str | None:
        table = self.table
        if not self.shown or table.cursor_row >= len(self.shown):
            return None
        return self.shown[table.cursor_row].key

    def move_to(self, key: str) -> bool:
        """Put the cursor on the row with this key (clearing a filter that hides it)."""
        if not any(r.key == key for r in self.shown) and self.filter_text:
            self.filter_text = ""
            self.query_one(Input).value = ""
            self.remove_class("filtering")
            self._show()
        for i, r in enumerate(self.shown):
            if r.key == key:
                self.table.move_cursor(row=i, animate=False)
                return True
        return False

    # ---- filter -----------------------------------------------------------------------------------

    def start_filter(self) -> None:
        self.add_class("filtering")
        self.query_one(Input).focus()

    def action_clear_filter(self) -> None:
        if not self.has_class("filtering") and not self.filter_text:
            return
        self.query_one(Input).value = ""
        self.filter_text = ""
        self.remove_class("filtering")
        self._show()
        self.table.focus()

    @on(Input.Changed)
    def _filter_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.filter_text = event.value.strip()
        self._show()

    @on(Input.Submitted)
    def _filter_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if not self.filter_text:
            self.remove_class("filtering")
        self.table.focus()

    @on(DataTable.RowSelected)
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(self.Selected(self, event.row_key.value))


def _haystack(r: Row) -> str:
    return " ".join(plain(v) for v in r.cells).lower()
