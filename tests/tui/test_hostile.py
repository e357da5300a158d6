"""Names and values other people chose (topics, group ids, transactional ids, sink keys) holding terminal
commands, Rich markup, bidi overrides and 20k characters: every view keeps its status line, tab bar and
columns, shows them as visible text, and the terminal never receives them raw."""

from __future__ import annotations

import dataclasses
import shutil
import sys
import time
from pathlib import Path

import pytest
from synthetic import SyntheticSource

from eosctl.report.findings import AuditReport, Finding, PartitionSummary
from eosctl.txn.transactions import Hanging, HangingReport
from tests.support.tui import OWN_SEQUENCES, UNSAFE, sync, terminal_output, text_of, until

CLEAR = "\x1b[2J\x1b[H"
TOPIC = f"orders{CLEAR}[/x]\u202e[link=http://evil.example]x[/link]"
GROUP = "grp\x1b]52;c;ZXZpbA==\x07\x9b"  # OSC 52 (set the clipboard), BEL, a C1 CSI
KEY = "\x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\"  # an OSC 8 hyperlink
SINK = "sink\x1b]0;title\x07 (orders)"  # OSC 0 sets the window title
TXN_IDS = [
    f"clear{CLEAR}me",
    "bel\x07nul\x00us\x1fdel\x7fcsi\x9b",
    "abc\u202edef\u2066ghi",
    "[/x]",
    "[link=http://evil.example]richlink[/link]",
    "L" * 20_000,
]
SIZE = (120, 32)
# Column labels each table view must still show in its header line, in order.
HEADERS = {
    "2": ["transactional id", "state", "pid", "epoch", "age", "timeout", "partitions"],
    "3": ["partition", "pid", "epoch", "epochs", "last seq"],
    "4": ["partition", "committed", "LSO", "HW", "behind", "blocked", "time", "status", "trend"],
    "5": ["offsets", "count", "kind", "pid", "epoch", "detail"],
    "6": ["partition", "rows", "offsets", "dup", "stored", "committed", "LSO", "flags"],
    "7": ["kind", "topic", "part", "offsets", "count", "detail"],
}


def hostile_dashboard():
    dash = SyntheticSource(3, topic=TOPIC).fetch()
    cap = dash.capture
    cap.transactions = [
        dataclasses.replace(cap.transactions[0], transactional_id=t, producer_id=5000 + i)
        for i, t in enumerate(TXN_IDS)
    ]
    cap.lag.partitions = [dataclasses.replace(p, group=GROUP) for p in cap.lag.partitions]
    cap.lag.group_states = {GROUP: "STABLE"}
    cap.ledger = dataclasses.replace(cap.ledger, sink=SINK, group=GROUP)
    hanging = Hanging(TOPIC, 0, 77, 0, 5, 1000.0, ("kip664", "lso"), 5, 9, TXN_IDS[0])
    cap.hanging = HangingReport(900.0, 3, [hanging])
    cap.audit = AuditReport.build(
        [PartitionSummary(TOPIC, p, 0, 10, 10, 10, 10) for p in range(3)],
        [
            Finding("key_duplicate", TOPIC, 0, 1, 2, 2, key=KEY, offsets=(1, 2)),
            Finding("duplicate", "T" * 20_000, 1, 3, 3, 1),
        ],
        sink=SINK,
    )
    return dash


class FixedSource:
    """One Dashboard, served like a snapshot (never refreshed)."""

    is_snapshot = True
    label = "hostile corpus"
    pipeline = "hostile"

    def __init__(self, dash) -> None:
        self.dash = dash

    def fetch(self):
        return self.dash

    def partition_log(self, topic: str, partition: int, around: int | None):
        return self.dash.log_of(topic, partition)

    def can_audit(self) -> str | None:
        return "a fixed capture has no cluster"

    def run_audit(self, progress):
        raise AssertionError("never called")


def check_screen(app, what: str) -> list[str]:
    """The invariants every screen keeps with hostile data; returns its lines."""
    raw, lines = terminal_output(app)
    leftover = OWN_SEQUENCES.sub("", raw)
    assert "\x1b" not in leftover, f"{what}: a raw escape sequence reaches the terminal"
    assert not UNSAFE.search(leftover.replace("\n", "")), f"{what}: a raw control or bidi character"
    assert len(lines) == SIZE[1], f"{what}: {len(lines)} lines"
    assert all(len(line) <= SIZE[0] for line in lines), f"{what}: a line wider than the terminal"
    assert lines[0].startswith("  SNAPSHOT  synthetic · captured "), f"{what}: no status line: {lines[0]!r}"
    assert lines[1].split() == ["Overview", "Transactions", "Producers", "Lag", "Log", "Ledger", "Audit"]
    assert "Quit" in lines[-1], f"{what}: the footer is gone"
    return lines


async def started(app, pilot) -> None:
    await until(pilot, lambda: app.dash is not None, "the first data")
    # The footer lists its keys a few frames after the first paint.
    await until(pilot, lambda: "Quit" in terminal_output(app)[1][-1], "the footer's keys")


def header_line(lines: list[str], labels: list[str]) -> str:
    for line in lines:
        words = line.split()
        if words[: len(labels[0].split())] == labels[0].split():
            return line
    raise AssertionError(f"no header line starting with {labels[0]!r} in:\n" + "\n".join(lines))


@sync
async def test_every_view_shows_hostile_names_as_text_and_keeps_its_layout():
    from tui.app import EosApp

    app = EosApp(FixedSource(hostile_dashboard()))
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        lines = check_screen(app, "overview")
        screen = "\n".join(lines)
        # The overview's reasons quote the hanging transaction's topic: escaped, markup left as text.
        assert "orders\\x1b[2J\\x1b[H[/x]\\u202e[link=http://evil.example]x[/link][0]" in screen
        for key, labels in HEADERS.items():
            await pilot.press(key)
            if key == "5":
                await until(pilot, lambda: app.view("log").plog is not None, "the log view")
            await pilot.pause(0.1)
            lines = check_screen(app, f"view {key}")
            header = header_line(lines, labels)
            positions = [header.find(label) for label in labels]
            assert -1 not in positions and positions == sorted(positions), f"view {key}: header {header!r}"
            assert "\\x1b[2J" in "\n".join(lines), f"view {key}: the escaped name is not shown"
        # The Transactions view: each id on its row, escaped; the 20k one cut to its column.
        await pilot.press("2")
        await pilot.pause(0.1)
        screen = "\n".join(check_screen(app, "transactions"))
        for shown in ("clear\\x1b[2J\\x1b[Hme", "bel\\x07nul\\x00us\\x1fdel\\x7fcsi\\x9b",
                      "abc\\u202edef\\u2066ghi", "[/x]", "[link=http://evil.example]richlink[/link]"):
            assert shown in screen
        assert "LLLL…" in screen
        # The Lag view's headline names the group (OSC 52 and BEL shown, not sent).
        await pilot.press("4")
        await pilot.pause(0.1)
        assert "group grp\\x1b]52;c;ZXZpbA==\\x07\\x9b (stable)" in "\n".join(check_screen(app, "lag"))
        # The Audit view: the sink key's OSC 8 link is text, the 20k topic cut to its column.
        await pilot.press("7")
        await pilot.pause(0.1)
        screen = "\n".join(check_screen(app, "audit"))
        assert "sink sink\\x1b]0;title\\x07 (orders)" in screen
        assert "key \\x1b]8;;http://evil.example\\" in screen  # (the rest is off-screen)
        assert "TTTT…" in screen


@sync
async def test_detail_filter_and_sort_with_hostile_names():
    from tui.app import EosApp
    from tui.filtertable import FilterTable

    app = EosApp(FixedSource(hostile_dashboard()))
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await pilot.press("2")
        await pilot.pause(0.1)
        table = app.view("transactions").query_one(FilterTable)
        # The filter matches what is shown: markup and escapes are plain text to it.
        await pilot.press("slash", *"]richlink[", "enter")
        await pilot.pause(0.1)
        assert [r.cells[0] for r in table.shown] == [TXN_IDS[4]]
        await pilot.press("escape")
        await pilot.press("slash", *"\\x07nul", "enter")
        await pilot.pause(0.1)
        assert [r.cells[0] for r in table.shown] == [TXN_IDS[1]]
        await pilot.press("escape", "s", "s")  # sorted by transactional id, then by state
        await pilot.pause(0.1)
        check_screen(app, "sorted")
        assert table.table.sort_column == 1
        # The detail of the 20k id and of the BEL/NUL one: whole, escaped, in a scrollable box.
        await pilot.press("escape", "s", "s", "s", "s", "s", "s")  # back to the view's own order
        await pilot.pause(0.1)
        assert table.table.sort_column is None
        await pilot.press("home", "down", "enter")
        await pilot.pause(0.2)
        assert app.screen.__class__.__name__ == "DetailScreen"
        detail = text_of(app.screen.query_one("Static"))
        assert "bel\\x07nul\\x00us\\x1fdel\\x7fcsi\\x9b" in detail
        raw, _ = terminal_output(app)
        assert "\x1b" not in OWN_SEQUENCES.sub("", raw)
        await pilot.press("escape", "end", "enter")
        await pilot.pause(0.2)
        assert "L" * 20_000 in text_of(app.screen.query_one("Static"))
        check_screen(app, "the 20k detail")


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_hostile_snapshot_in_a_real_terminal(tmux, tmp_path: Path):
    """The same names from a snapshot file, in tmux: no escape sequence clears or retitles the screen."""
    from eosctl.inspection.snapshot import write_snapshot

    cap = hostile_dashboard().capture
    sections = ("logs", "ledger", "transactions", "producers", "lag", "hanging", "audit")
    cap.sections = dict.fromkeys(sections, "ok")
    snap = tmp_path / "hostile.snap.duckdb"
    write_snapshot(cap, snap)
    eosctl = Path(sys.executable).with_name("eosctl")
    tmux.run("new-session", "-d", "-s", tmux.session, "-x", "80", "-y", "24", "-e", "TERM=xterm-256color",
             f"{eosctl} tui --snapshot {snap}; echo EXITED $?; sleep 30")
    title = tmux.run("display-message", "-p", "-t", tmux.session, "#{pane_title}")
    for key, labels in HEADERS.items():
        if key == "5":
            continue  # the Log view reads a partition: covered by the pilot test
        tmux.run("send-keys", "-t", tmux.session, key)
        # The header keeps its first columns in order (the others may be right of 80 columns).
        def header(screen: str, labels=labels) -> bool:
            return any(-1 < line.find(labels[0]) < line.find(labels[1]) for line in screen.splitlines())

        tmux.wait_until(header, f"view {key}'s header")
        time.sleep(0.3)  # a raw ESC[2J would blank what was drawn: look again a moment later
        lines = tmux.wait_until(header, f"view {key}'s header, a moment later").splitlines()
        assert "SNAPSHOT" in lines[0], f"view {key}: {lines[0]!r}"
        assert lines[1].split() == ["Overview", "Transactions", "Producers", "Lag", "Log", "Ledger", "Audit"]
        assert "\\x1b[2J" in "\n".join(lines), f"view {key}"
        assert all(len(line) <= 80 for line in lines)
    # OSC 0 in the sink's name would have retitled the pane.
    assert tmux.run("display-message", "-p", "-t", tmux.session, "#{pane_title}") == title
    tmux.run("send-keys", "-t", tmux.session, "q")
    assert "EXITED 0" in tmux.wait_for("EXITED")


@sync
async def test_a_key_that_is_not_utf8_is_shown_as_escapes():
    """A key_duplicate whose key's bytes are not UTF-8 (eosctl.base.safetext.decode: \\xNN) and hold an OSC 52
    and a C1 CSI, and one holding a lone surrogate (what a surrogateescape decoder leaves): the Audit view
    keeps its layout and shows both as escapes."""
    from eosctl.base.safetext import decode
    from tui.app import EosApp

    key = decode(b"\xff\xfe\x1b]52;c;ZXZpbA==\x07k\xc2\x9b2J")
    assert key == "\\xFF\\xFE\x1b]52;c;ZXZpbA==\x07k\x9b2J"
    dash = hostile_dashboard()
    cap = dash.capture
    cap.audit = AuditReport.build(cap.audit.partitions, [
        Finding("key_duplicate", "orders", 0, 1, 2, 2, key=key, offsets=(1, 2)),
        Finding("key_duplicate", "orders", 1, 3, 4, 2, key="s\udcffx", offsets=(3, 4)),
    ], sink=SINK)
    app = EosApp(FixedSource(dash))
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await pilot.press("7")
        await pilot.pause(0.1)
        screen = "\n".join(check_screen(app, "audit"))
        assert "key \\xFF\\xFE\\x1b]52;c;ZXZpbA==\\x07k\\x9b2J" in screen
        assert "key s\\udcffx" in screen
