"""The TUI marks its data STALE in the status line (issue 56): once older than a few refresh periods while
a refresh is still reading (a slow link that has not failed yet), and at once after a failed refresh."""

from __future__ import annotations

import threading

from synthetic import SyntheticSource
from textual.widgets import Static

from tests.support.tui import sync, text_of, until


class Slow(SyntheticSource):
    """Its first fetch answers; the next ones wait until ``go`` is set (or fail when ``fail`` is)."""

    def __init__(self, clock) -> None:
        super().__init__(3, clock=clock)
        self.go = threading.Event()
        self.fail = False

    def fetch(self):
        if self.round >= 1:
            self.go.wait(30)
            if self.fail:
                raise RuntimeError("no answer within the deadline")
        return super().fetch()


@sync
async def test_a_refresh_still_reading_marks_the_data_stale_and_a_fresh_one_clears_it():
    from tui.app import EosApp

    now = [1_800_000_000.0]
    source = Slow(clock=lambda: now[0])
    app = EosApp(source, refresh_seconds=1, clock=lambda: now[0])
    async with app.run_test(size=(120, 30)) as pilot:
        status = app.query_one("#status", Static)
        await until(pilot, lambda: app.dash is not None, "the first data")
        assert "STALE" not in text_of(status)
        now[0] += 2  # the next refresh starts and waits: 2 s old is not stale yet
        await until(pilot, lambda: app.fetching_since is not None, "the second refresh")
        await pilot.pause(1.2)
        assert "STALE" not in text_of(status)
        now[0] += 12
        await until(pilot, lambda: "STALE, 14s old" in text_of(status), "the stale mark", timeout=5)
        source.go.set()
        await until(pilot, lambda: app.fetching_since is None and "STALE" not in text_of(status),
                    "fresh data again", timeout=10)


@sync
async def test_a_failed_refresh_marks_the_data_stale_at_once():
    from tui.app import EosApp

    now = [1_800_000_000.0]
    source = Slow(clock=lambda: now[0])
    source.fail = True
    source.go.set()
    app = EosApp(source, refresh_seconds=1, clock=lambda: now[0])
    async with app.run_test(size=(120, 30)) as pilot:
        status = app.query_one("#status", Static)
        await until(pilot, lambda: app.dash is not None, "the first data")
        now[0] += 2
        await until(pilot, lambda: app.error is not None, "the failed refresh", timeout=10)
        await until(pilot, lambda: "STALE, 2s old" in text_of(status), "the stale mark", timeout=5)
