"""Formatting for cells: durations, timestamps, counts and text sparklines (no computation of results)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import lru_cache

from eosctl.base.durations import human

BARS = "▁▂▃▄▅▆▇█"


def duration(seconds: float | None) -> str:
    """A duration in the one style of every view, the CLI's too (eosctl.base.durations): 45s, 12m30s,
    3h05m."""
    return human(seconds)


def clock(epoch_seconds: float | None, utc: bool = True) -> str:
    """A wall-clock time; UTC so a snapshot reads the same on every machine."""
    if epoch_seconds is None:
        return "-"
    t = time.gmtime(epoch_seconds) if utc else time.localtime(epoch_seconds)
    return time.strftime("%H:%M:%S", t)


def stamp(epoch_seconds: float | None) -> str:
    if epoch_seconds is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch_seconds))


def ms_stamp(epoch_ms: int | None) -> str:
    if epoch_ms is None or epoch_ms < 0:
        return "-"
    return stamp(epoch_ms / 1000)


def count(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def sparkline(values: Sequence[float], width: int = 12) -> str:
    """Unicode block sparkline of the last `width` values, scaled to their max (all zero: a flat floor)."""
    return _sparkline(tuple(values[-width:]) if isinstance(values, list | tuple) else tuple(values)[-width:])


@lru_cache(maxsize=16_384)  # 10k partitions whose lag did not move draw the same lines every refresh
def _sparkline(vals: tuple[float, ...]) -> str:
    if not vals:
        return ""
    top = max(vals)
    if top <= 0:
        return BARS[0] * len(vals)
    scale = (len(BARS) - 1) / top
    return "".join(BARS[min(len(BARS) - 1, int(v * scale + 0.5))] for v in vals)


def offsets(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}..{last}"
