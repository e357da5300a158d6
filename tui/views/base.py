"""What every tab has in common: it takes a Dashboard and may own a filterable table."""

from __future__ import annotations

from textual.containers import Vertical

from tui.data import Dashboard
from tui.table import FilterTable


class View(Vertical):
    """A tab's content. `show` is called on the UI thread with fresh data; it must only format."""

    DEFAULT_CSS = "View { height: 1fr; }"

    def show(self, dash: Dashboard) -> None:
        raise NotImplementedError

    def filter_table(self) -> FilterTable | None:
        tables = self.query(FilterTable)
        return tables.first() if tables else None
