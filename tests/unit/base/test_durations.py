"""Durations as every view shows them (eosctl.base.durations): two units at most, the smaller padded."""

from __future__ import annotations

import pytest

from eosctl.base.durations import human


@pytest.mark.parametrize(("seconds", "shown"), [
    (None, "-"), (-3, "0s"), (0, "0s"), (45.9, "45s"), (60, "1m00s"), (900, "15m00s"), (3599, "59m59s"),
    (3600, "1h00m"), (11_100, "3h05m"), (86_399, "23h59m"), (86_400, "1d00h"), (187_200, "2d04h")])
def test_a_duration_reads_in_two_units_at_most(seconds, shown):
    assert human(seconds) == shown
