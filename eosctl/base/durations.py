"""Durations for people, in one unit style everywhere (CLI tables, TUI, HTML, hints): 45s, 15m00s, 3h05m,
2d04h. Two units at most, the smaller zero-padded, so columns of them line up and read the same in every
view (a transaction timeout of 900000 ms is 15m00s wherever it is shown)."""

from __future__ import annotations


def human(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"
