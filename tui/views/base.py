"""What every tab has in common, and the one base of the table views (a headline, a table, a detail).

A refresh is split in two so the UI thread only swaps data in: `prepare` formats a Dashboard (pure; the
app runs it in the fetch worker for the visible tab) and `present` shows the result on the UI thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Static

from tui.filtertable import FilterTable
from tui.rowtable import RowTable
from tui.sources import Dashboard
from tui.tabledata import Col, Row, TableData


class View(Vertical):
    """A tab's content."""

    DEFAULT_CSS = "View { height: 1fr; }"

    def prepare(self, dash: Dashboard) -> Any:
        """Format `dash` for this view. Reads no widget: the app may call it from a worker thread."""
        return dash

    def present(self, prepared: Any) -> None:
        """Show what `prepare` returned (UI thread; swapping data in, no formatting)."""
        raise NotImplementedError

    def show(self, dash: Dashboard) -> None:
        self.present(self.prepare(dash))

    def filter_table(self) -> FilterTable | None:
        tables = self.query(FilterTable)
        return tables.first() if tables else None


@dataclass(frozen=True)
class Prepared:
    head: Text
    data: TableData
    source: Any  # what the rows were made from (the Dashboard, an audit report), kept for details


class TableView(View):
    """A headline over a filterable table; Enter on a row calls `selected` with the row's item.

    A subclass names its widgets (`NAME`: ids NAME-head and NAME-table), gives its `COLUMNS` and writes
    `rows` and `headline`, both pure functions of the source; `detail` (a screen for Enter) or `selected`
    (anything else Enter does) is optional, and so is `describe`: the whole story of the row under the
    cursor, wrapped in a pane under the table (a cell is cut to fit; the pane never is).
    """

    NAME: ClassVar[str]
    COLUMNS: ClassVar[Sequence[Col]]
    EMPTY: ClassVar[str] = "nothing to show"
    HEAD: ClassVar[str] = "head"  # the headline's id is NAME-HEAD
    HEAD_BELOW: ClassVar[bool] = False  # the headline under the table (the Overview's reasons)

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.source: Any = None
        self._data: TableData | None = None  # the last data formatted, reused for rows that did not change
        self._head: Text | None = None
        self._described: Text | None = None  # what the detail pane shows

    def compose(self) -> ComposeResult:
        head = Static("", id=f"{self.NAME}-{self.HEAD}", classes="head")
        if not self.HEAD_BELOW:
            yield head
        yield from self.compose_extra()
        yield FilterTable(self.COLUMNS, id=f"{self.NAME}-table", empty=self.EMPTY)
        if self.HEAD_BELOW:
            yield head
        if type(self).describe is not TableView.describe:
            yield Static("", id=f"{self.NAME}-detail", classes="detail-pane")

    def compose_extra(self) -> ComposeResult:
        """Widgets between the headline and the table (the Audit view's progress bar)."""
        yield from ()

    # ---- what a subclass writes --------------------------------------------------------------------

    def rows(self, source: Any) -> list[Row]:
        raise NotImplementedError

    def headline(self, source: Any) -> Text:
        raise NotImplementedError

    def describe(self, item: Any) -> Text | None:
        """The whole text of a row's item for the detail pane (a view without it has no pane)."""
        return None

    def detail(self, item: Any) -> Screen | None:
        """The screen Enter opens for a row's item (None: nothing to open)."""
        return None

    def selected(self, item: Any) -> None:
        screen = self.detail(item)
        if screen is not None:
            self.app.push_screen(screen)

    # ---- refresh ----------------------------------------------------------------------------------

    def prepare(self, dash: Any) -> Prepared | None:
        return self.prepare_source(dash)

    def prepare_source(self, source: Any) -> Prepared:
        data = TableData.of(self.COLUMNS, self.rows(source), self._data)
        return Prepared(self.headline(source), data, source)

    def present(self, prepared: Prepared | None) -> None:
        if prepared is None:  # nothing new to show
            return
        self.source = prepared.source
        self._data = prepared.data
        self._set_head(prepared.head)
        self.table.set_data(prepared.data)

    def _set_head(self, head: Text) -> None:
        """Update the headline; without a layout pass when it keeps its height (a layout pass repaints
        every line of the table below it, not only the lines that changed)."""
        static = self.query_one(f"#{self.NAME}-{self.HEAD}", Static)
        old = self._head
        if head == old:
            return
        width = static.content_size.width
        same_height = (
            old is not None and width > 0
            and len(head.wrap(self.app.console, width)) == len(old.wrap(self.app.console, width))
        )
        static.update(head, layout=not same_height)
        self._head = head

    @property
    def table(self) -> FilterTable:
        return self.query_one(f"#{self.NAME}-table", FilterTable)

    @on(RowTable.Highlighted)
    def _row_highlighted(self, event: RowTable.Highlighted) -> None:
        event.stop()
        panes = self.query(f"#{self.NAME}-detail")
        if not panes:
            return
        data = self._data
        index = data.index.get(event.key) if data is not None and event.key is not None else None
        text = self.describe(data.rows[index].item) if data is not None and index is not None else None
        pane = panes.first(Static)
        pane.set_class(text is not None, "shown")
        if text != self._described:  # the same text again (a refresh) costs no layout pass
            pane.update(text if text is not None else "")
            self._described = text

    @on(FilterTable.Selected)
    def _row_selected(self, event: FilterTable.Selected) -> None:
        data = self._data
        index = data.index.get(event.key) if data is not None else None
        if data is not None and index is not None:
            self.selected(data.rows[index].item)
