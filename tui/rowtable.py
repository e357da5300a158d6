"""The table widget every view shows: rows drawn with Textual's line API, so a refresh costs what is shown.

Views hand it plain `Row`s (a stable key, the cell values, a level that colours the whole row). They are
turned into `TableData` (display strings made safe for a terminal, column widths, filter text), which is
pure and may be built in a worker thread; the widget then swaps it in on the UI thread, keeps the cursor
on the same key (an operator reading row 700 of 10,000 partitions is not thrown back to the top every few
seconds) and repaints only the visible lines whose text changed.

Why not Textual's DataTable or textual-fastdatatable: DataTable measures and stores every cell of every
row (10k partitions: ~1 s of UI time per rebuild), and textual-fastdatatable keeps its data in an Arrow
table whose `update_cell` rebuilds a whole column per cell, has no per-row colours and renders strings as
markup. Here a row is a tuple of strings; rendering one line is a handful of segments.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tui.styles import STYLES, parsed
from tui.tabledata import Col, Row, TableData

# A cell wider than this is cut with "…" (a 20k-character topic must not push the other columns off
# screen); the filter still searches the whole text and a view's detail shows it.
MAX_COL_WIDTH = 48
PAD = 1  # blank cells either side of a column


class RowTable(ScrollView, can_focus=True):
    """A header line and one line per row, drawn on demand (Textual's line API)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"rowtable--header", "rowtable--cursor", "rowtable--empty"}
    DEFAULT_CSS = """
    RowTable {
        background: $surface;
        color: $foreground;
        height: 1fr;
        & > .rowtable--header { text-style: bold; background: $panel; color: $foreground; }
        &:ansi > .rowtable--header { background: ansi_bright_blue; color: ansi_default; }
        & > .rowtable--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        &:focus {
            background-tint: $foreground 5%;
            & > .rowtable--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
        }
        & > .rowtable--empty { color: $text-muted; text-style: italic; }
    }
    """
    BINDINGS: ClassVar = [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "cursor_to(0)", "First", show=False),
        Binding("end", "cursor_to(-1)", "Last", show=False),
        Binding("enter", "select", "Select", show=False),
        Binding("s", "sort", "Sort"),
        Binding("S", "reverse", "Reverse sort", show=False),
    ]

    class Selected(Message):
        """Enter (or a click on the highlighted row): carries the row's key."""

        def __init__(self, table: RowTable, key: str) -> None:
            super().__init__()
            self.table = table
            self.key = key

        @property
        def control(self) -> RowTable:
            return self.table

    class Highlighted(Message):
        """The cursor is on another row (a detail pane follows it): carries the row's key, None for none."""

        def __init__(self, table: RowTable, key: str | None) -> None:
            super().__init__()
            self.table = table
            self.key = key

        @property
        def control(self) -> RowTable:
            return self.table

    def __init__(
        self, columns: Sequence[Col], *, empty: str = "nothing to show", id: str | None = None
    ) -> None:
        super().__init__(id=id)
        self.columns = list(columns)
        self.empty = empty
        self.data = TableData.empty(self.columns)
        self.order: list[int] = []  # positions in data.rows, as shown (filtered, sorted)
        self.cursor_row = 0
        self.filter_text = ""
        self.sort_column: int | None = None
        self.sort_reverse = False
        self._widths: list[int] = [0] * len(self.columns)
        self._scroll_pending = False  # the cursor wants to be in view once the table has a size
        self._announced: tuple[str | None, TableData | None] = (None, None)  # the last Highlighted sent

    def on_mount(self) -> None:
        self._layout()  # the header and "nothing to show" before any data

    # ---- data -------------------------------------------------------------------------------------

    @property
    def row_count(self) -> int:
        return len(self.order)

    def set_data(self, data: TableData) -> None:
        """Show `data`: same cursor key, same place on screen; repaint only the lines that changed."""
        old, old_order = self.data, self.order
        keep = self.cursor_key()
        screen_line = self.cursor_row - int(self.scroll_y)
        self.data = data
        order = self._ordered()
        self.order = order
        cursor = data.index.get(keep) if keep is not None else None
        if cursor is not None and (self.filter_text or self.sort_column is not None):
            cursor = order.index(cursor) if cursor in order else None
        self.cursor_row = min(cursor if cursor is not None else self.cursor_row, max(0, len(order) - 1))
        layout = self._layout()
        self._announce()
        if layout or len(order) != len(old_order) or self.cursor_row - int(self.scroll_y) != screen_line:
            self.scroll_to(y=max(0, self.cursor_row - screen_line), animate=False, force=True)
            self.refresh()
            return
        # Same size and place: repaint the visible lines whose row (or its text) is not the one drawn.
        top = int(self.scroll_y)
        for line in range(max(0, self.scrollable_content_region.height - 1)):
            i = top + line
            if i >= len(order):
                break
            a, b = old_order[i], order[i]
            if old.rows[a].key != data.rows[b].key or old.texts[a] != data.texts[b] or (
                old.rows[a].level != data.rows[b].level
            ):
                self.refresh(Region(0, line + 1, self.size.width, 1))

    def _ordered(self) -> list[int]:
        data = self.data
        needle = self.filter_text.lower()
        if needle:
            order = [i for i, h in enumerate(data.hay) if needle in h]
        else:
            order = list(range(len(data.rows)))
        if self.sort_column is not None:
            keys = data.sort_keys(self.sort_column, self.columns[self.sort_column].numeric)
            order.sort(key=keys.__getitem__, reverse=self.sort_reverse)
        return order

    def _layout(self) -> bool:
        """Column widths from the data (capped); True when they changed (then everything is redrawn)."""
        widths = [
            c.width
            if c.width is not None
            else min(MAX_COL_WIDTH, max(cell_len(c.label) + (2 if i == self.sort_column else 0), w))
            for i, (c, w) in enumerate(zip(self.columns, self.data.widths, strict=True))
        ]
        if widths and self.columns[-1].width is None:
            # The last column (a cause, a detail) is the story: it takes the rest of the screen, so a wide
            # terminal shows it whole instead of cutting it at MAX_COL_WIDTH like the names before it.
            room = self.size.width - sum(widths[:-1]) - 2 * PAD * len(widths)
            widths[-1] = max(widths[-1], min(self.data.widths[-1], room))
        height = len(self.order) + 1 + (1 if not self.order else 0)
        size = Size(sum(widths) + 2 * PAD * len(widths), height)
        changed = widths != self._widths or size != self.virtual_size
        self._widths = widths
        self.virtual_size = size
        return changed

    def reorder(self) -> None:
        """Filter or sort changed: recompute the shown order, keeping the cursor on its row if shown."""
        keep = self.cursor_key()
        self.order = self._ordered()
        pos = {i: n for n, i in enumerate(self.order)} if keep is not None else {}
        index = self.data.index.get(keep) if keep is not None else None
        self.cursor_row = pos.get(index, 0) if index is not None else 0
        self._layout()
        self._scroll_to_cursor(center=True)
        self.refresh()
        self._announce()

    def cursor_key(self) -> str | None:
        if not self.order or self.cursor_row >= len(self.order):
            return None
        return self.data.rows[self.order[self.cursor_row]].key

    def row_at(self, index: int) -> Row:
        return self.data.rows[self.order[index]]

    def get_row_at(self, index: int) -> list[Text]:
        """The shown row at `index` as styled Texts (what a test or a copy would read)."""
        i = self.order[index]
        style = STYLES.get(self.data.rows[i].level, self.data.rows[i].level or "")
        return [Text(t, style=style) for t in self.data.texts[i]]

    # ---- cursor -----------------------------------------------------------------------------------

    def move_cursor(self, row: int, center: bool = False) -> None:
        if not self.order:
            return
        old = self.cursor_row
        self.cursor_row = max(0, min(row, len(self.order) - 1))
        self._scroll_to_cursor(center)
        for r in (old, self.cursor_row):
            self._refresh_row(r)
        self._announce()

    def _announce(self) -> None:
        """Say which row the cursor is on when that row (or the data it comes from) changed."""
        now = (self.cursor_key(), self.data)
        if now[0] != self._announced[0] or now[1] is not self._announced[1]:
            self._announced = now
            # Sent by the table itself: Textual never bubbles a message back to its sender, and the
            # sender is whoever runs this (the FilterTable, on a filter), so it would stop there.
            self.post_message(self.Highlighted(self, now[0]).set_sender(self))

    def _visible_rows(self) -> int:
        return max(1, self.scrollable_content_region.height - 1)

    def _scroll_to_cursor(self, center: bool = False) -> None:
        if self.scrollable_content_region.height <= 1:  # not laid out yet (a hidden tab): on resize
            self._scroll_pending = True
            return
        top, visible = int(self.scroll_y), self._visible_rows()
        if top <= self.cursor_row < top + visible and not center:
            return
        if center:
            y = self.cursor_row - visible // 2
        elif self.cursor_row < top:
            y = self.cursor_row
        else:
            y = self.cursor_row - visible + 1
        self.scroll_to(y=max(0, y), animate=False, force=True)

    def _on_resize(self, event: events.Resize) -> None:
        if self._layout():  # the last column takes the room the new width gives
            self.refresh()
        # Keep the cursor in view when the table shrinks (a headline grew) or first gets its size.
        center, self._scroll_pending = self._scroll_pending, False
        self.call_after_refresh(self._scroll_to_cursor, center)

    def _refresh_row(self, index: int) -> None:
        line = index - int(self.scroll_y) + 1
        if 1 <= line < self.size.height:
            self.refresh(Region(0, line, self.size.width, 1))

    def action_cursor(self, delta: int) -> None:
        self.move_cursor(self.cursor_row + delta)

    def action_page(self, direction: int) -> None:
        self.move_cursor(self.cursor_row + direction * self._visible_rows())

    def action_cursor_to(self, row: int) -> None:
        self.move_cursor(row if row >= 0 else len(self.order) - 1)

    def action_select(self) -> None:
        key = self.cursor_key()
        if key is not None:
            self.post_message(self.Selected(self, key))

    # ---- sorting ----------------------------------------------------------------------------------

    def sort_by(self, column: int | None, reverse: bool = False) -> None:
        self.sort_column, self.sort_reverse = column, reverse
        self.reorder()

    def action_sort(self) -> None:
        """s: sort by the next column; after the last one, back to the view's own order."""
        nxt = 0 if self.sort_column is None else self.sort_column + 1
        self.sort_by(nxt if nxt < len(self.columns) else None)

    def action_reverse(self) -> None:
        if self.sort_column is not None:
            self.sort_by(self.sort_column, not self.sort_reverse)

    # ---- mouse ------------------------------------------------------------------------------------

    # async as Widget._on_click is: Textual runs both (each class's handler in the MRO), awaiting this one.
    async def _on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        if offset.y == 0:  # the header: sort by this column, again to reverse
            x = offset.x + int(self.scroll_x)
            for c, w in enumerate(self._widths):
                x -= w + 2 * PAD
                if x < 0:
                    self.sort_by(c, not self.sort_reverse if self.sort_column == c else False)
                    break
            return
        row = int(self.scroll_y) + offset.y - 1
        if row < len(self.order):
            if row == self.cursor_row:
                self.action_select()
            else:
                self.move_cursor(row)

    def _on_focus(self, event: events.Focus) -> None:
        super()._on_focus(event)
        self.refresh()

    def _on_blur(self, event: events.Blur) -> None:
        super()._on_blur(event)
        self.refresh()

    # ---- drawing ----------------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        base = self.rich_style
        scroll_x = int(self.scroll_x)
        if y == 0:
            style = base + self.get_component_rich_style("rowtable--header")
            labels = []
            for c, col in enumerate(self.columns):
                mark = "" if c != self.sort_column else (" ▼" if self.sort_reverse else " ▲")
                labels.append(col.label + mark)
            return self._strip(labels, style, width, scroll_x)
        index = int(self.scroll_y) + y - 1
        if index >= len(self.order):
            if index == 0:
                return self._strip([self.empty], base + self.get_component_rich_style("rowtable--empty"),
                                   width, scroll_x, plain_line=True)
            return Strip.blank(width, base)
        i = self.order[index]
        row = self.data.rows[i]
        style = base + parsed(STYLES.get(row.level, row.level or ""))
        if index == self.cursor_row:
            style += self.get_component_rich_style("rowtable--cursor")
        return self._strip(self.data.texts[i], style, width, scroll_x)

    def _strip(self, cells: Sequence[str], style: Style, width: int, scroll_x: int,
               plain_line: bool = False) -> Strip:
        if plain_line:
            text = " " * PAD + cells[0]
            return Strip([Segment(set_cell_size(text, width), style)], width)
        segments = []
        pad = " " * PAD
        for text, w, col in zip(cells, self._widths, self.columns, strict=False):
            if cell_len(text) > w:
                text = set_cell_size(text, max(0, w - 1)) + "…"
            elif col.numeric:
                text = " " * (w - cell_len(text)) + text
            else:
                text = set_cell_size(text, w)
            segments.append(Segment(pad + text + pad, style))
        total = sum(self._widths) + 2 * PAD * len(self._widths)
        strip = Strip(segments, total)
        if scroll_x:
            strip = strip.crop(scroll_x, scroll_x + width)
        return strip.extend_cell_length(width, style)

