"""Time windows of a windowed aggregate table (``aggregate.window_column``): which windows a record's
timestamp falls in, and a window column's value as its start in epoch milliseconds.

Pure (no I/O). Windows are Kafka Streams' TimeWindows, aligned to the epoch: a tumbling window of SIZE
starts at every multiple of SIZE; a hopping one (``advance`` < SIZE) at every multiple of ADVANCE, and a
record is in each window with start <= timestamp < start + SIZE (TimeWindows.windowsFor).
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any


def window_starts(timestamp: int, size_ms: int, advance_ms: int) -> list[int]:
    """The starts of the windows a record at ``timestamp`` (ms) is in; none for a record without one."""
    if timestamp < 0:
        return []
    start = (max(0, timestamp - size_ms + advance_ms) // advance_ms) * advance_ms
    out = []
    while start <= timestamp:
        out.append(start)
        start += advance_ms
    return out


def window_ms(v: Any) -> int | None:
    """A window column's value as its start in epoch ms: an integer (ms), a timestamp (a naive one is
    UTC), or text holding either; None where it is none of these."""
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, (int, Decimal)):
        return int(v)
    if isinstance(v, float):
        return int(v) if v.is_integer() else None
    if isinstance(v, datetime):
        return int((v if v.tzinfo else v.replace(tzinfo=UTC)).timestamp() * 1000)
    if isinstance(v, date):
        return window_ms(datetime(v.year, v.month, v.day))
    if isinstance(v, str):
        text = v.strip()
        if text.lstrip("-").isdigit():
            return int(text)
        try:
            return window_ms(datetime.fromisoformat(text.replace("Z", "+00:00")))
        except ValueError:
            return None
    return None


def shown_window(start_ms: int, size_ms: int) -> str:
    """A window for people: [start, end) in UTC."""
    return f"[{_iso(start_ms)}, {_iso(start_ms + size_ms)})"


def _iso(ms: int) -> str:
    t = datetime.fromtimestamp(ms / 1000, UTC)
    return t.isoformat(timespec="milliseconds" if ms % 1000 else "seconds").replace("+00:00", "Z")
