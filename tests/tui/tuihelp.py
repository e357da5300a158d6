"""Helpers for the TUI tests (imported by the test modules; fixtures live in conftest.py)."""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path

DATA = Path(__file__).parent / "data"
SNAPSHOT = DATA / "reference.snap.duckdb"
MANIFEST = DATA / "reference.manifest.json"
# When `make_reference.py` captured SNAPSHOT, as the status bar shows it.
CAPTURED = "2026-11-22 05:00:45 UTC"


def text_of(widget) -> str:
    """Plain text of a Static (what it shows, without colours)."""
    content = widget.content
    return content.plain if hasattr(content, "plain") else str(content)


def rows_of(app, pane: str) -> list[list[str]]:
    """The rows the view's table shows, as plain strings."""
    from tui.table import FilterTable

    table = app.view(pane).query_one(FilterTable).table
    return [[c.plain for c in table.get_row_at(i)] for i in range(table.row_count)]


def cursor_row(app, pane: str) -> list[str]:
    from tui.table import FilterTable

    table = app.view(pane).query_one(FilterTable).table
    return [c.plain for c in table.get_row_at(table.cursor_row)]


# The whole body of one pilot test, Spark start-up on a loaded 2-core machine included.
TEST_DEADLINE_S = 180


def sync(fn):
    """Run an async test body (Textual's Pilot is async; no pytest asyncio plugin is installed)."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        return asyncio.run(asyncio.wait_for(fn(*args, **kwargs), timeout=TEST_DEADLINE_S))

    return run


async def until(pilot, condition, what: str, timeout: float = 60.0, step: float = 0.05) -> None:
    """Pause until ``condition()`` holds; fail naming ``what`` after ``timeout`` seconds (never hang)."""
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {timeout:.0f} s"
        await pilot.pause(step)
