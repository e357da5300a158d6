"""Pilot tests of every view on the fixed incident snapshot (no broker needed)."""

from __future__ import annotations

from textual.widgets import Static, TabbedContent

from tests.support.tui import CAPTURED, cursor_row, rows_of, started, sync, text_of, until


@sync
async def test_snapshot_is_labelled_with_its_capture_time(snapshot_app):
    app = snapshot_app
    async with started(app) as pilot:
        status = text_of(app.query_one("#status", Static))
        assert status.startswith(f" SNAPSHOT  tuiref · captured {CAPTURED}")
        assert "reference.snap.duckdb" in status
        await pilot.press("p")  # never refreshed: says so instead of pretending to pause
        await pilot.pause()
        assert "PAUSED" not in text_of(app.query_one("#status", Static))


@sync
async def test_a_tick_while_the_app_closes_does_not_crash_it(snapshot_app):
    """The 1 s tick can fire while the app shuts down (seen on a loaded CI machine at exit)."""
    app = snapshot_app
    async with started(app):
        pass
    app._tick()  # shut down: widgets gone


@sync
async def test_overview_is_red_with_reasons_in_words(snapshot_app, manifest):
    app = snapshot_app
    (hang,) = manifest["hanging"]
    async with started(app):
        # the stored audit's verdict, and 1 open transaction of which 1 hanging
        assert rows_of(app, "overview") == [["tuiref", "RED", "FAIL", "0", "1/1", "1", "303"]]
        reasons = text_of(app.query_one("#overview-reasons", Static))
        assert (f"hanging transaction pid {hang['producer_id']} ({hang['transactional_id']}) on "
                f"{hang['topic']}[{hang['partition']}] "
                f"from offset {hang['first_offset']} (3 records blocked)") in reasons
        assert "audit failed: 1 findings (duplicate)" in reasons
        assert "ledger flags 1 sink partition (duplicate)" in reasons
        assert "1 producer fenced" in reasons


@sync
async def test_number_keys_switch_views_and_tabs_follow(snapshot_app):
    app = snapshot_app
    async with started(app) as pilot:
        for key, pane in zip(
            "2345671", ["transactions", "producers", "lag", "log", "ledger", "audit", "overview"], strict=True
        ):
            await pilot.press(key)
            await pilot.pause()
            assert app.query_one(TabbedContent).active == pane


@sync
async def test_transactions_show_the_hanging_one_in_red_and_how_to_clear_it(snapshot_app, manifest):
    from tui.filtertable import FilterTable
    from tui.styles import STYLES

    app = snapshot_app
    (hang,) = manifest["hanging"]
    async with started(app) as pilot:
        await pilot.press("2")
        await pilot.pause()
        head = text_of(app.query_one("#txn-head", Static))
        assert head == "3 transactional ids · 1 open · 1 HANGING (Enter for the detail)"
        rows = rows_of(app, "transactions")
        assert [r[:4] for r in rows] == [
            [hang["transactional_id"], "HANGING Ongoing", str(hang["producer_id"]), "0"],
            ["tuiref.processor", "CompleteCommit", "1001", "1"],
            ["tuiref.source", "CompleteCommit", "1000", "0"],
        ]
        assert rows[0][6] == f"{hang['topic']}[{hang['partition']}]"
        table = app.view("transactions").query_one(FilterTable).table
        assert {str(c.style) for c in table.get_row_at(0)} == {STYLES["bad"]}  # the whole row is red
        assert {str(c.style) for c in table.get_row_at(1)} == {""}
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen.__class__.__name__ == "DetailScreen"
        detail = " ".join(text_of(app.screen.query_one(Static)).split())  # labels are padded
        assert f"HANGING on {hang['topic']}[{hang['partition']}] from offset {hang['first_offset']}" in detail
        assert f"rules lso LSO / HW {hang['first_offset']} / {hang['last_offset'] + 1} (3 blocked)" in detail
        # A command that works copied as printed: it names the broker the snapshot was taken from.
        bootstrap = app.source.fetch().capture.bootstrap
        assert (f"To clear it: eosctl txns abort --bootstrap {bootstrap} --topic {hang['topic']} --partition "
                f"{hang['partition']} --start-offset {hang['first_offset']}") in detail
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen.__class__.__name__ != "DetailScreen"


@sync
async def test_producers_mark_the_epoch_bump_and_enter_opens_it_in_the_log(snapshot_app, manifest):
    app = snapshot_app
    async with started(app) as pilot:
        await pilot.press("3")
        await pilot.pause()
        rows = rows_of(app, "producers")
        assert rows[0][:4] == ["tuiref.enriched[0]", "1001", "1", "0→1"]
        assert rows[0][7] == "FENCED x1"
        assert rows[1][6] == str(manifest["hanging"][0]["first_offset"])  # the hanging producer's open txn
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert app.query_one(TabbedContent).active == "log"
        log = app.view("log").plog
        assert (log.topic, log.partition) == ("tuiref.enriched", 0)


@sync
async def test_lag_shows_the_partition_blocked_by_the_open_transaction(snapshot_app, manifest):
    app = snapshot_app
    lso = manifest["hanging"][0]["first_offset"]
    async with started(app) as pilot:
        await pilot.press("4")
        await pilot.pause()
        rows = rows_of(app, "lag")
        assert rows[0][:6] == ["tuiref.enriched[0]", str(lso), str(lso), str(lso + 3), "0", "3"]
        assert rows[0][7] == "BLOCKED (txn)"  # not OK: a snapshot has one poll, and it is blocked (issue 32)
        head = text_of(app.query_one("#lag-head", Static))
        assert "3 blocked by open transactions" in head
        assert f"open transaction pid 1002 at offset {lso}" in head


@sync
async def test_log_colours_ranges_and_jumps_to_an_offset(snapshot_app, manifest):
    app = snapshot_app
    hang = manifest["hanging"][0]
    first, last = hang["first_offset"], hang["last_offset"]
    async with started(app) as pilot:
        await pilot.press("5")
        await pilot.pause(0.3)
        # Opens on the partition an open transaction holds.
        summary = text_of(app.query_one("#log-summary", Static))
        assert summary.startswith(f"tuiref.enriched[0] start 0 · LSO {first} · HW {last + 1} · "
                                  "3 beyond the LSO")
        rows = rows_of(app, "log")
        assert rows[-1][1:4] == [f"{first}..{last}", "3", "open"]
        kinds = {r[3] for r in rows}
        assert kinds == {"committed", "marker", "aborted", "open"}
        await pilot.click("#log-jump")
        await pilot.press(*"101", "enter")
        await pilot.pause(0.2)
        row = cursor_row(app, "log")
        first, last = (int(x) for x in row[1].split(".."))
        assert first <= 101 <= last


@sync
async def test_ledger_flags_the_duplicate_and_enter_opens_its_offsets(snapshot_app, manifest):
    app = snapshot_app
    dup = manifest["expected_findings"][0]
    async with started(app) as pilot:
        await pilot.press("6")
        await pilot.pause()
        rows = rows_of(app, "ledger")
        assert [r[0] for r in rows] == ["tuiref.enriched[0]", "tuiref.enriched[1]", "tuiref.enriched[2]"]
        assert rows[0][3] == "3"
        assert rows[0][7].startswith(
            f"3 extra sink rows for offsets stored more than once at offsets "
            f"{dup['first_offset']}..{dup['last_offset']}"
        )
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert app.query_one(TabbedContent).active == "log"
        row = cursor_row(app, "log")
        assert row[0] == "▶"
        first, last = (int(x) for x in row[1].split(".."))
        assert first <= dup["first_offset"] and dup["last_offset"] <= last


@sync
async def test_filter_narrows_any_table_and_escape_clears_it(snapshot_app):
    app = snapshot_app
    async with started(app) as pilot:
        await pilot.press("6", "slash", *"[2]")
        await pilot.pause()
        assert [r[0] for r in rows_of(app, "ledger")] == ["tuiref.enriched[2]"]
        await pilot.press("escape")
        await pilot.pause()
        assert len(rows_of(app, "ledger")) == 3


@sync
async def test_help_and_the_audit_stored_in_a_snapshot(snapshot_app, manifest):
    app = snapshot_app
    dup = manifest["expected_findings"][0]
    async with started(app) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert app.screen.__class__.__name__ == "HelpScreen"
        await pilot.press("escape", "7")
        await pilot.pause()
        head = text_of(app.query_one("#audit-head", Static))
        assert head.startswith(f" FAIL  1 finding · 3 partitions · {manifest['committed_output_records']} "
                               f"expected · {manifest['sink_rows']} sink rows · ")
        assert [r[:5] for r in rows_of(app, "audit")] == [
            ["duplicate", dup["topic"], str(dup["partition"]),
             f"{dup['first_offset']}..{dup['last_offset']}", str(dup["count"])]]
        await pilot.press("a")
        await pilot.pause()
        assert not app.view("audit").running  # no cluster: it says why instead of starting
        assert any("snapshot has no cluster" in n.message for n in app._notifications)


@sync
async def test_no_color_keeps_every_state_in_words(monkeypatch):
    from tests.support.tui import SNAPSHOT
    from tui.app import EosApp
    from tui.sources import SnapshotSource

    monkeypatch.setenv("NO_COLOR", "1")
    app = EosApp(SnapshotSource(str(SNAPSHOT)))
    async with started(app) as pilot:
        assert app.no_color
        assert rows_of(app, "overview")[0][1] == "RED"
        await pilot.press("5")
        await pilot.pause(0.3)
        assert {r[3] for r in rows_of(app, "log")} == {"committed", "marker", "aborted", "open"}


@sync
async def test_synthetic_audit_finding_opens_the_log_and_pause_stops_refreshes():
    from synthetic import SyntheticSource

    from tui.app import EosApp

    source = SyntheticSource(200)
    app = EosApp(source, refresh_seconds=1)
    async with started(app) as pilot:
        await pilot.press("p")
        await pilot.pause()
        rounds = source.round
        assert "PAUSED" in text_of(app.query_one("#status", Static))
        await pilot.pause(2.2)
        assert source.round == rounds
        await pilot.press("7", "a")
        await until(pilot, lambda: not app.view("audit").running and app.view("audit").report is not None,
                    "the synthetic audit")
        assert rows_of(app, "audit")[0][:4] == ["duplicate", "synth.orders", "7", "5..9"]
        await pilot.press("enter")
        await until(pilot, lambda: app.view("log").plog is not None and app.view("log").plog.partition == 7,
                    "the finding's log")
        await pilot.pause(0.1)
        row = cursor_row(app, "log")
        assert row[0] == "▶" and row[1] == "0..99"
        await pilot.press("p", "r")
        await pilot.pause(0.5)
        assert source.round > rounds


def test_only_counted_hanging_transactions_are_called_hanging():
    """An open transaction older than the max age only by a producer-set timestamp is not hanging
    (HangingReport.counted): the TUI says so apart, with a *, as `txns hanging` does."""
    from synthetic import SyntheticSource

    from eosctl.txn.transactions import Hanging, HangingReport
    from tui.views.overview import health, overview_rows
    from tui.views.transactions import headline, txn_rows

    dash = SyntheticSource(20).fetch()
    sure = Hanging("synth.orders", 0, 3000, 0, 5, 1000.0, ("kip664", "lso"), 5, 9, "synth.tx0")
    unsure = Hanging("synth.orders", 10, 3010, 0, 5, 1000.0, ("lso",), 5, 9, "synth.tx10")
    dash.capture.hanging = HangingReport(900.0, 20, [sure, unsure])
    assert headline(dash).plain.endswith(
        "1 HANGING (Enter for the detail) · 1 old only by producer timestamps (*, not counted)")
    rows = {r.cells[0]: r for r in txn_rows(dash)}
    assert rows["synth.tx0"].cells[1] == "HANGING Ongoing" and rows["synth.tx0"].level == "bad"
    assert rows["synth.tx10"].cells[1] == "Ongoing (old*)" and rows["synth.tx10"].level == "warn"
    reasons = health(dash).reasons
    assert sum("hanging transaction pid" in r for r in reasons) == 1
    assert ("1 open transaction old only by producer timestamps (not counted as hanging; see Transactions)"
            in reasons)
    assert overview_rows(dash)[0].cells[4] == "2/1"  # open / hanging


def test_the_lag_view_shows_each_group_s_failover_to_a_mirrormaker_replica():
    """A MirrorMaker 2 replica pipeline: after an audit, the Lag view's headline says where each group
    resumes on the replica and what it would process again or never see (eosctl.inspection.failover), and
    a partition's detail says it for that partition."""
    from synthetic import SyntheticSource

    from eosctl.inspection.failover import Failover
    from tui.views.lag import detail, headline

    dash = SyntheticSource(2).fetch()
    p = dash.lag.partitions[0]
    dash.failover = [Failover(p.group, p.topic, p.partition, f"src.{p.topic}", 40, 30, 31, 31, 31, 9, 2)]
    assert (f"failover to the replica: src.{p.topic}[{p.partition}] @31 +9 again -2 never"
            in headline(dash).plain)
    pairs = dict(detail(dash, p).pairs)
    assert pairs["failover"].startswith(f"src.{p.topic}[{p.partition}] @31 +9 again -2 never")


def test_the_lag_view_shows_an_offset_commit_pending_in_a_transaction():
    """A group whose next offset commit an open transaction holds (UNSTABLE_OFFSET_COMMIT): the committed
    cell says pending, the headline and the detail name the transaction; the status stays what it was."""
    from dataclasses import replace

    from synthetic import SyntheticSource

    from eosctl.txn.pendingoffsets import Holder, PendingCommit
    from tui.views.lag import detail, headline, lag_rows

    dash = SyntheticSource(2).fetch()
    p = dash.lag.partitions[0]
    held = PendingCommit(p.group, frozenset({(p.topic, p.partition)}), 31, (
        Holder(4001, 3, 220, "stage-1", "Ongoing", dash.lag.taken_ms - 90_000, True),))
    before = lag_rows(dash)[0]
    dash.lag.partitions[0] = replace(p, pending=held)
    row = lag_rows(dash)[0]
    assert row.cells[1] == f"{p.committed:,} pending"
    assert (row.cells[7], row.level) == (before.cells[7], before.level)
    assert "offset commit pending in transaction stage-1 (pid 4001), open 1m30s" in headline(dash).plain
    assert dict(detail(dash, dash.lag.partitions[0]).pairs)["offset commit"] == (
        "pending in transaction stage-1 (pid 4001), open 1m30s (committed: the offset before it)")


def test_the_transactions_view_shows_a_two_phase_commit_transaction_as_such():
    """KIP-939: a transactional id whose timeout is Integer.MAX_VALUE is shown as 2PC, with no timeout."""
    from synthetic import SyntheticSource

    from eosctl.txn.transactions import TxnInfo
    from tui.views.transactions import detail, txn_rows

    dash = SyntheticSource(2).fetch()
    now_ms = int(dash.taken_at * 1000)
    dash.capture.transactions = [TxnInfo("pay-2pc", 9001, 3, "Ongoing", 2**31 - 1, now_ms - 3_600_000, 1)]
    (row,) = [r for r in txn_rows(dash) if r.cells[0] == "pay-2pc"]
    assert (row.cells[1], row.cells[5]) == ("Ongoing (2PC)", "none (2PC)")
    pairs = dict(detail(dash, dash.transactions[0]).pairs)
    assert pairs["timeout"] == "none (2PC)" and pairs["two-phase commit"].startswith("yes (KIP-939)")


def test_the_lag_headline_names_a_group_s_type_members_and_a_share_group_s_warning():
    """A streams group's headline says its type and members (StreamsGroupDescribe); a share group reading a
    transactional topic read_uncommitted gets the warning `lag` prints, below its line."""
    from synthetic import SyntheticSource

    from eosctl.cluster.groups import GroupDescription, Member
    from tui.views.lag import headline

    dash = SyntheticSource(2).fetch()
    g = dash.lag.partitions[0].group
    dash.lag.group_types[g] = "streams"
    dash.lag.descriptions[g] = GroupDescription(g, "streams", "STABLE", 3, (Member("m1", "c1", "/h"),
                                                                            Member("m2", "c2", "/h")))
    assert f"group {g} (stable, streams group, 2 members): " in headline(dash).plain
    dash.lag.group_types[g] = "share"
    dash.lag.descriptions[g] = GroupDescription(g, "share", "STABLE", 3, (Member("m1", "c1", "/h"),))
    dash.lag.share_warnings[g] = f"share group {g} reads transactional topic orders with ..."
    lines = headline(dash).plain.splitlines()
    assert f"group {g} (stable, share group, 1 member): " in lines[0]
    assert lines[1] == f"  share group {g} reads transactional topic orders with ..."
