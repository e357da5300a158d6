"""The one table (tui.tabledata, tui.rowtable, tui.filtertable) at scale: refreshes keep the cursor and
repaint only changed lines, sorting and filtering work on thousands of rows, and 100k audit findings
stay usable."""

from __future__ import annotations

import dataclasses

from synthetic import SyntheticSource

from tests.support.tui import rows_of, started, sync, until
from tui.tabledata import Col, Row, TableData


def test_rows_that_did_not_change_reuse_their_text():
    cols = [Col("name"), Col("n", numeric=True)]
    old = TableData.of(cols, [Row("a", ("a\x1b[2J", 1)), Row("b", ("b", None))])
    new = TableData.of(cols, [Row("b", ("b", None)), Row("a", ("a\x1b[2J", 2)), Row("c", ("[/x]", 3))], old)
    assert new.texts == [("b", "-"), ("a\\x1b[2J", "2"), ("[/x]", "3")]
    assert new.texts[0] is old.texts[1]  # unchanged row: formatted once
    assert new.widths == [len("a\\x1b[2J"), 1]
    assert new.index == {"b": 0, "a": 1, "c": 2}
    # Numbers sort as numbers ("1,000" after "999"), "-" first; offsets ranges by their first offset.
    data = TableData.of(cols, [Row(k, (k, v)) for k, v in [("x", "1,000"), ("y", "999"), ("z", None),
                                                            ("w", "5..9")]])
    order = sorted(range(4), key=data.sort_keys(1, numeric=True).__getitem__)
    assert [data.rows[i].key for i in order] == ["z", "w", "y", "x"]
    times = TableData.of(cols, [Row(v, ("t", v)) for v in ["1m00s", "45s", "2d4h", "3h05m", "12m"]])
    order = sorted(range(5), key=times.sort_keys(1, numeric=True).__getitem__)
    assert [times.rows[i].key for i in order] == ["45s", "1m00s", "12m", "3h05m", "2d4h"]


@sync
async def test_a_refresh_keeps_the_cursor_on_its_row_and_repaints_only_changed_lines():
    from tui.app import EosApp
    from tui.filtertable import FilterTable
    from tui.rowtable import RowTable

    source = SyntheticSource(2000)
    app = EosApp(source, refresh_seconds=3600)
    async with started(app, size=(100, 30)) as pilot:
        app.paused = True
        await pilot.press("6")  # Ledger: one row per partition
        await pilot.pause()
        ft = app.view("ledger").query_one(FilterTable)
        table = ft.table
        assert table.row_count == 2000
        table.move_cursor(700)
        await pilot.pause()
        key, line = table.cursor_key(), table.cursor_row - table.scroll_y
        drawn: list[int] = []
        real = RowTable.render_line

        def spy(self, y):
            drawn.append(y)
            return real(self, y)

        RowTable.render_line = spy
        try:
            # The same rows with one changed (partition 699, on screen): that one line is drawn again.
            dash = app.dash
            old = dash.ledger.partitions[699]
            dash.ledger.partitions[699] = dataclasses.replace(old, duplicate_rows=4)
            app.apply(dash, app.prepare(dash))
            await pilot.pause()
            assert drawn == [699 - table.scroll_y + 1]  # (line 0 is the header)
            # A refresh where every row moves: the cursor stays on its partition, at its place on screen.
            app.apply(*(lambda d: (d, app.prepare(d)))(source.fetch()))
            await pilot.pause()
        finally:
            RowTable.render_line = real
        assert table.cursor_key() == key and table.cursor_row - table.scroll_y == line


@sync
async def test_sorting_and_the_filter_on_thousands_of_rows():
    from tui.app import EosApp
    from tui.filtertable import FilterTable

    source = SyntheticSource(2000)
    app = EosApp(source, refresh_seconds=3600)
    async with started(app, size=(120, 30)) as pilot:
        app.paused = True
        await pilot.press("4", "s", "s")  # Lag, sorted by "committed"
        await pilot.pause()
        ft = app.view("lag").query_one(FilterTable)
        committed = [int(r[1].replace(",", "")) for r in rows_of(app, "lag")]
        assert committed == sorted(committed) and committed != [int(r.cells[1]) for r in ft.rows]
        await pilot.press("S")  # reversed, and still sorted after a refresh
        app.apply(*(lambda d: (d, app.prepare(d)))(source.fetch()))
        await pilot.pause()
        committed = [int(r[1].replace(",", "")) for r in rows_of(app, "lag")]
        assert committed == sorted(committed, reverse=True)
        assert "committed ▼" in " ".join(app.view("lag").query_one("RowTable").render_line(0).text.split())
        await pilot.press("slash", *"[1999]")
        await pilot.pause()
        assert [r[0] for r in rows_of(app, "lag")] == ["synth.orders[1999]"]
        assert ft.table.border_subtitle == "1/2000 rows"
        await pilot.press("escape")
        await pilot.pause()
        assert ft.table.row_count == 2000 and ft.table.border_subtitle is None


@sync
async def test_100k_findings_filter_clear_and_quit():
    from tui.app import EosApp
    from tui.filtertable import FilterTable

    source = SyntheticSource(1000, findings=100_000)
    app = EosApp(source, refresh_seconds=3600)
    async with started(app, size=(120, 30)) as pilot:
        app.paused = True
        await pilot.press("7", "a")
        view = app.view("audit")
        await until(pilot, lambda: view.report is not None and not view.running, "the 100k-finding audit")
        table = view.query_one(FilterTable).table
        assert table.row_count == 100_000
        assert "100000 findings" in str(view.query_one("#audit-head").content).replace(",", "")
        # Partition 999's findings: offsets 0, 2, ... (100 of them); the filter finds exactly those.
        await pilot.press("slash", *"orders 999 ")
        await pilot.pause()
        assert table.row_count == 100
        await pilot.press("escape")
        await pilot.pause()
        assert table.row_count == 100_000
        await pilot.press("end", "enter")  # the last finding opens the Log at its offset
        await until(pilot, lambda: app.view("log").plog is not None, "the finding's log")
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running
