"""The text of the TUI's cells (tui.fmt): what a user reads in a column, the same on every machine."""

from __future__ import annotations

from tui import fmt


def test_durations_read_as_the_cli_writes_them():
    assert [fmt.duration(s) for s in (45, 750, 11100, None)] == ["45s", "12m30s", "3h05m", "-"]


def test_times_are_utc_and_a_missing_one_is_a_dash():
    assert fmt.clock(1_764_633_600 + 3_723) == "01:02:03"
    assert fmt.stamp(1_764_633_600) == "2025-12-02 00:00:00 UTC"
    assert fmt.ms_stamp(1_764_633_600_500) == "2025-12-02 00:00:00 UTC"
    assert [fmt.clock(None), fmt.stamp(None), fmt.ms_stamp(None), fmt.ms_stamp(-1)] == ["-"] * 4


def test_counts_have_thousands_separators():
    assert [fmt.count(0), fmt.count(1_234_567), fmt.count(None)] == ["0", "1,234,567", "-"]


def test_an_offset_range_collapses_to_one_offset_when_it_is_one():
    assert fmt.offsets(7, 7) == "7"
    assert fmt.offsets(7, 12) == "7..12"


def test_a_sparkline_scales_to_its_largest_value_and_keeps_the_last_width():
    assert fmt.sparkline([0, 1, 2, 4, 8]) == "▁▂▃▅█"
    assert fmt.sparkline([0, 0, 0]) == "▁▁▁"
    assert fmt.sparkline([]) == ""
    assert fmt.sparkline(list(range(20)), width=4) == "▇▇██"
