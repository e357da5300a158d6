"""Issue 32, item 9, on the fixed incident snapshot at 80x24: what is typed is on screen (the filter), an
offset typed in the Log view goes to the offset (not to the view keys), and a marker does not look like an
aborted record in the colours the terminal receives."""

from __future__ import annotations

import re

from textual.widgets import TabbedContent

from tests.support.tui import cursor_row, rows_of, started, sync, terminal_output, until


@sync
async def test_the_filter_text_is_on_screen_while_it_is_typed(snapshot_app):
    app = snapshot_app
    async with started(app) as pilot:
        await pilot.press("6", "slash", *"ched[1")
        await pilot.pause(0.2)
        assert [r[0] for r in rows_of(app, "ledger")] == ["tuiref.enriched[1]"]  # the filter works...
        _, lines = terminal_output(app)
        # ...and its line shows what was typed (the input's border took its one line: nothing showed).
        assert "ched[1" in [line.strip() for line in lines], "\n".join(lines)


@sync
async def test_g_and_digits_jump_to_the_offset_and_do_not_switch_views(snapshot_app, manifest):
    app = snapshot_app
    async with started(app) as pilot:
        await pilot.press("5")
        await until(pilot, lambda: app.view("log").plog is not None, "the log view's scan")
        for offset in (101, 43, 0):  # inside a committed run, a marker, the first offset
            await pilot.press("g", *str(offset), "enter")
            await pilot.pause(0.2)
            assert app.query_one(TabbedContent).active == "log"  # digits went to the offset box
            row = cursor_row(app, "log")
            first, _, last = row[1].partition("..")
            assert int(first) <= offset <= int(last or first), row
            assert row[0] == "▶", row  # the focus mark is on the row holding the offset
        # Back in the table, digits are the view keys again.
        await pilot.press("6")
        await pilot.pause()
        assert app.query_one(TabbedContent).active == "ledger"


FOREGROUND = re.compile(r"\x1b\[([0-9;]*)m([^\x1b]*)")


def _foregrounds(raw: str, word: str) -> set[str]:
    """The foreground colours the terminal receives for text runs holding `word` (e.g. ' marker ')."""
    out = set()
    for sgr, text in FOREGROUND.findall(raw):
        if word in text:
            m = re.search(r"(?:^|;)38;2;(\d+;\d+;\d+)", sgr)
            out.add(m.group(1) if m else "default")
    return out


@sync
async def test_markers_and_aborted_records_are_drawn_in_different_colours(snapshot_app):
    app = snapshot_app
    async with started(app) as pilot:
        await pilot.press("5")
        await until(pilot, lambda: app.view("log").plog is not None, "the log view's scan")
        await pilot.pause(0.2)
        await until(pilot, lambda: {r[3] for r in rows_of(app, "log")} >= {"marker", "aborted"}, "the rows")
        raw, lines = terminal_output(app)
        # The kind column, padded to "committed" (a detail like "ABORT marker at 10" is not it).
        marker, aborted = _foregrounds(raw, " marker    "), _foregrounds(raw, " aborted   ")
        assert marker and aborted, "\n".join(lines)
        assert not marker & aborted, (marker, aborted)
        # The summary's counts too ("marker 11  aborted 30").
        assert not _foregrounds(raw, "marker 11") & _foregrounds(raw, "aborted 30")
