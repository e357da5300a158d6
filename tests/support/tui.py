"""Helpers for the TUI tests (imported by the test modules; fixtures live in conftest.py)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import io
import re
import subprocess
import time
import uuid
from pathlib import Path

from tests.support.helpers import wait_until

DATA = Path(__file__).resolve().parents[1] / "tui" / "data"
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
    from tui.filtertable import FilterTable

    table = app.view(pane).query_one(FilterTable).table
    return [[c.plain for c in table.get_row_at(i)] for i in range(table.row_count)]


def cursor_row(app, pane: str) -> list[str]:
    from tui.filtertable import FilterTable

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

    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {timeout:.0f} s"
        await pilot.pause(step)


# What a terminal must never receive from data: C0 controls (but newline), DEL, C1 controls, and the
# bidi marks, embeddings, overrides and isolates that reorder a line.
UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# The only escape sequences Textual itself writes for a screen: colours (SGR) and "go to row;column".
OWN_SEQUENCES = re.compile(r"\x1b\[[0-9;]*m|\x1b\[[0-9]+;[0-9]+H")


async def first_data(pilot) -> None:
    """The app's first refresh has arrived (after a short pause for its first paint)."""
    await pilot.pause(0.2)
    await until(pilot, lambda: pilot.app.dash is not None, "the first data")


@contextlib.asynccontextmanager
async def running(app, size: tuple[int, int] = (80, 24)):
    """The app running headless at ``size``: the pilot. Its source is closed after, as `eosctl tui` does (a
    live source's Kafka clients would otherwise keep reconnecting for the rest of the test process)."""
    try:
        async with app.run_test(size=size) as pilot:
            yield pilot
    finally:
        close = getattr(app.source, "close", None)
        if close is not None:
            close()


@contextlib.asynccontextmanager
async def started(app, size: tuple[int, int] = (80, 24)):
    """The app running headless at ``size`` with its first data on screen: the pilot."""
    async with running(app, size) as pilot:
        await first_data(pilot)
        yield pilot


async def audited(pilot) -> None:
    """The first data, then the Audit view (7) and an audit run in it (a), until its report is in."""
    app = pilot.app
    await first_data(pilot)
    await pilot.press("7", "a")
    await until(pilot, lambda: not app.view("audit").running and app.view("audit").report is not None,
                "the audit")


async def tui_audit(args: list[str], timeout: float = 120.0):
    """`eosctl tui ARGS` as the command builds it (its options parsed by the command, its live source and
    audit runner), headless: the first data, then 7 and a until the Audit tab has the report. The Overview's
    rows before the audit, and the report."""
    overview, report, _, _ = await tui_audit_view(args, timeout)
    return overview, report


async def tui_audit_view(args: list[str], timeout: float = 120.0):
    """tui_audit, and what the Audit tab shows of the report: its rows and its headline's text."""
    from eosctl.commands.tui_cmd import live_source, tui
    from tui.app import EosApp

    assert args[0] == "tui", args
    p = tui.make_context("tui", list(args[1:])).params
    app = EosApp(live_source(p["config"], p["pipeline"], p["bootstrap"], p["topics"], p["group"],
                             p["max_age"]), refresh_seconds=60)
    async with running(app, (160, 40)) as pilot:
        await first_data(pilot)
        overview = rows_of(app, "overview")
        why_not = app.source.can_audit()
        assert why_not is None, why_not  # what `a` would answer instead of auditing
        await pilot.press("7", "a")
        view = app.view("audit")
        await until(pilot, lambda: not view.running and view.report is not None, "the TUI's audit",
                    timeout=timeout, step=0.2)
        await pilot.pause(0.1)
        return overview, view.report, rows_of(app, "audit"), text_of(app.query_one("#audit-head"))


def terminal_output(app) -> tuple[str, list[str]]:
    """What the terminal receives for the current screen (escape sequences included) and its lines of
    text, as Textual writes them (the same render as App.export_screenshot, without the SVG)."""
    from rich.console import Console

    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor", record=True, legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.file.getvalue(), console.export_text(styles=False).splitlines()


class Tmux:
    def __init__(self) -> None:
        self.socket = f"eosctl-test-{uuid.uuid4().hex[:8]}"  # a private server: never touches the user's
        self.session = "tui"

    def run(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-L", self.socket, *args], check=True, capture_output=True, text=True
        ).stdout

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", self.session)

    def wait_for(self, text: str, timeout: float = 20.0) -> str:
        """The screen, once `text` is on it."""
        return self.wait_until(lambda screen: text in screen, f"{text!r} on the screen", timeout)

    def wait_until(self, holds, what: str, timeout: float = 20.0) -> str:
        """The screen, once `holds(screen)` is true (fails naming `what` after `timeout` seconds)."""
        def ready() -> str | None:
            screen = self.screen()
            return screen if holds(screen) else None
        return wait_until(what, ready, timeout, interval=0.1,
                          detail=lambda: "the screen shows:\n" + self.screen())

    def alive(self) -> bool:
        return (
            subprocess.run(
                ["tmux", "-L", self.socket, "has-session", "-t", self.session], capture_output=True
            ).returncode
            == 0
        )


def shown_in(app, widget) -> list[str]:
    """The lines of text the terminal shows inside `widget`'s region (what a user reads of it: a widget
    whose content is cut by its height or width shows only the part on screen)."""
    _, lines = terminal_output(app)
    r = widget.region
    return [line[r.x:r.x + r.width] for line in lines[r.y:r.y + r.height]]


def words(text: str) -> str:
    """Text with its line breaks and runs of spaces as single spaces (wrapped text compared whole)."""
    return " ".join(text.split())
