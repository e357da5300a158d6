"""A RowTable with its filter: `/` shows an input whose text narrows the rows as it is typed; Enter keeps
the filter, Esc clears it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input

from tui.rowtable import RowTable
from tui.tabledata import Col, Row, TableData


class FilterTable(Vertical):
    """A RowTable + a hidden filter Input (shown by `/`; Esc clears it)."""

    DEFAULT_CSS = """
    FilterTable { height: 1fr; }
    FilterTable > Input { display: none; height: 1; border: none; padding: 0 1; }
    FilterTable.filtering > Input { display: block; }
    FilterTable > RowTable { height: 1fr; }
    """

    BINDINGS: ClassVar = [Binding("escape", "clear_filter", "Clear filter", show=False)]

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
        self.empty = empty

    def compose(self) -> ComposeResult:
        # Compact: no border. Input's own border (tall, and taller on focus) took both lines of a
        # one-line input, so what was typed was never on screen.
        yield Input(placeholder="filter rows (Enter keeps it, Esc clears)", compact=True)
        yield RowTable(self.columns, empty=self.empty)

    @property
    def table(self) -> RowTable:
        return self.query_one(RowTable)

    @property
    def rows(self) -> list[Row]:
        return self.table.data.rows

    @property
    def shown(self) -> list[Row]:
        table = self.table
        return [table.data.rows[i] for i in table.order]

    @property
    def filter_text(self) -> str:
        return self.table.filter_text

    # ---- data -------------------------------------------------------------------------------------

    def set_rows(self, rows: Sequence[Row]) -> None:
        self.set_data(TableData.of(self.columns, rows, self.table.data))

    def set_data(self, data: TableData) -> None:
        self.table.set_data(data)
        self._subtitle()

    def _subtitle(self) -> None:
        table = self.table
        subtitle = f"{table.row_count}/{len(table.data.rows)} rows" if table.filter_text else None
        if table.border_subtitle != subtitle:  # setting it, even to the same text, repaints every line
            table.border_subtitle = subtitle

    def cursor_key(self) -> str | None:
        return self.table.cursor_key()

    def move_to(self, key: str) -> bool:
        """Put the cursor on the row with this key (clearing a filter that hides it)."""
        table = self.table
        index = table.data.index.get(key)
        if index is None:
            return False
        if index not in table.order and table.filter_text:
            self._set_filter("")
        table.move_cursor(table.order.index(index), center=True)
        return True

    # ---- filter -----------------------------------------------------------------------------------

    def start_filter(self) -> None:
        self.add_class("filtering")
        self.query_one(Input).focus()

    def _set_filter(self, text: str) -> None:
        if text == "":
            self.query_one(Input).value = ""
            self.remove_class("filtering")
        self.table.filter_text = text
        self.table.reorder()
        self._subtitle()

    def action_clear_filter(self) -> None:
        if not self.has_class("filtering") and not self.table.filter_text:
            return
        with self.prevent(Input.Changed):
            self._set_filter("")
        self.table.focus()

    @on(Input.Changed)
    def _filter_changed(self, event: Input.Changed) -> None:
        event.stop()
        text = event.value.strip()
        if text != self.table.filter_text:
            self.table.filter_text = text
            self.table.reorder()
            self._subtitle()

    @on(Input.Submitted)
    def _filter_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if not self.table.filter_text:
            self.remove_class("filtering")
        self.table.focus()

    @on(RowTable.Selected)
    def _row_selected(self, event: RowTable.Selected) -> None:
        event.stop()
        self.post_message(self.Selected(self, event.key))
