"""SVG snapshots of each view on the fixed incident snapshot, at 80x24: a rendering change must be
reviewed on purpose (`pytest tests/tui/test_svg.py --snapshot-update` after looking at the new SVGs)."""

from __future__ import annotations

import pytest
from tuihelp import SNAPSHOT

VIEWS = ["1", "2", "3", "4", "5", "6", "7"]


def _app():
    from tui.app import EosApp
    from tui.data import SnapshotSource

    return EosApp(SnapshotSource(str(SNAPSHOT)))


@pytest.mark.parametrize(
    "key", VIEWS, ids=["overview", "transactions", "producers", "lag", "log", "ledger", "audit"]
)
def test_view(snap_compare, key):
    async def show(pilot):
        app = pilot.app
        while app.dash is None:
            await pilot.pause(0.05)
        await pilot.press(key)
        await pilot.pause(0.1)
        if key == "5":
            while app.view("log").plog is None:
                await pilot.pause(0.05)
        await pilot.pause(0.1)

    assert snap_compare(_app(), run_before=show, terminal_size=(80, 24))


def test_help(snap_compare):
    async def show(pilot):
        while pilot.app.dash is None:
            await pilot.pause(0.05)
        await pilot.press("question_mark")
        await pilot.pause(0.1)

    assert snap_compare(_app(), run_before=show, terminal_size=(80, 24))
