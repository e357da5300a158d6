"""SVG snapshots of each view on the fixed incident snapshot, at 80x24: a rendering change must be
reviewed on purpose (`pytest tests/tui/test_svg.py --snapshot-update` after looking at the new SVGs)."""

from __future__ import annotations

import pytest

from tests.support.tui import SNAPSHOT, until

VIEWS = ["1", "2", "3", "4", "5", "6", "7"]


def _app():
    from tui.app import EosApp
    from tui.sources import SnapshotSource

    app = EosApp(SnapshotSource(str(SNAPSHOT)))
    # The tab underline moves at once: animated, it starts on a timer, which under load fired after the
    # screenshot (ci11: the Producers view with the underline still under Overview).
    app.animation_level = "none"
    return app


@pytest.mark.parametrize(
    "key", VIEWS, ids=["overview", "transactions", "producers", "lag", "log", "ledger", "audit"]
)
def test_view(snap_compare, key):
    async def show(pilot):
        app = pilot.app
        await until(pilot, lambda: app.dash is not None, "the first data")
        await pilot.press(key)
        await pilot.pause(0.1)
        if key == "5":
            await until(pilot, lambda: app.view("log").plog is not None, "the log view's scan")
            # The view opens at the LSO, the table's last row: on a slow machine the scroll to it lands
            # a few frames after the rows, so wait for it rather than for a fixed time.
            # The scrollbar is drawn a frame or two after the scroll itself, so the state must hold for
            # half a second before the screenshot (under load a single check once caught the old thumb).
            table = app.view("log").query_one("FilterTable").table

            def at_the_lso() -> bool:
                return bool(table.row_count and table.cursor_row == table.row_count - 1
                            and table.max_scroll_y and table.scroll_y >= table.max_scroll_y)

            stable = 0
            for _ in range(300):  # at most 30 s; after that the snapshot comparison shows what is wrong
                stable = stable + 1 if at_the_lso() else 0
                if stable >= 5:
                    break
                await pilot.pause(0.1)
        await pilot.wait_for_scheduled_animations()
        await pilot.pause(0.1)

    assert snap_compare(_app(), run_before=show, terminal_size=(80, 24))


def test_help(snap_compare):
    async def show(pilot):
        await until(pilot, lambda: pilot.app.dash is not None, "the first data")
        await pilot.press("question_mark")
        await pilot.pause(0.1)

    assert snap_compare(_app(), run_before=show, terminal_size=(80, 24))
