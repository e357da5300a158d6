"""The window an audit judges: what the user asked (`--since`/`--until`, the sink's `retention`) and, per
partition, the offsets it came to (ListOffsets by timestamp, or offsets given per partition).

Offsets of a partition outside [first, end) are not judged: its rows there are counted (`outside_window`),
never findings, and its records there are not expected. Below ``floor`` (the first offset the sink's
retention still keeps) a missing record is expected, not a gap (`expired`); rows held there are judged as
everywhere else (a duplicate is a duplicate)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

TP = tuple[str, int]


@dataclass(frozen=True)
class Bound:
    """One side of a window as given: a time (milliseconds since the epoch), or offsets per partition
    (partitions it does not name are unbounded on that side). ``text``: as the user wrote it."""

    text: str
    timestamp_ms: int | None = None
    offsets: tuple[tuple[TP, int], ...] = ()

    def offset_of(self, tp: TP) -> int | None:
        return next((o for at, o in self.offsets if at == tp), None)

    def to_dict(self) -> dict[str, Any]:
        if self.timestamp_ms is not None:
            return {"given": self.text, "timestamp": iso_ms(self.timestamp_ms)}
        return {"given": self.text, "offsets": [{"topic": t, "partition": p, "offset": o}
                                                for (t, p), o in self.offsets]}


@dataclass(frozen=True)
class WindowSpec:
    """What the audit was asked to judge. ``retention``: the sink's retention as configured (text) and in
    seconds; ``now_ms``: the time the retention counts back from (when the audit read Kafka)."""

    since: Bound | None = None
    until: Bound | None = None
    retention: str | None = None
    retention_seconds: float | None = None
    now_ms: int | None = None

    @property
    def floor_ms(self) -> int | None:
        """The oldest record time the sink still keeps, by its retention."""
        if self.retention_seconds is None or self.now_ms is None:
            return None
        return self.now_ms - int(self.retention_seconds * 1000)

    def to_dict(self) -> dict[str, Any]:
        floor = self.floor_ms
        return {"since": None if self.since is None else self.since.to_dict(),
                "until": None if self.until is None else self.until.to_dict(),
                "retention": self.retention,
                "retention_floor_time": None if floor is None else iso_ms(floor)}

    def describe(self) -> str:
        """One line for people: "since 2026-11-30T00:00:00.000Z until orders:0=900; sink retention 7d"."""
        parts = []
        if self.since is not None:
            parts.append(f"since {self.since.text}")
        if self.until is not None:
            parts.append(f"until {self.until.text}")
        text = " ".join(parts) or "the whole log"
        if self.retention is not None:
            text += f"; sink retention {self.retention}"
            if self.floor_ms is not None:
                text += f" (rows older than {iso_ms(self.floor_ms)} may be gone)"
        return text

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WindowSpec:
        """A report file's window, for rendering it again (the per-partition offsets are the partitions')."""
        def bound(b: Any) -> Bound | None:
            if not isinstance(b, dict):
                return None
            ts = b.get("timestamp")
            offsets = tuple(((o["topic"], int(o["partition"])), int(o["offset"]))
                            for o in b.get("offsets") or ())
            return Bound(str(b.get("given", "")), parse_ms(ts) if isinstance(ts, str) else None, offsets)

        return cls(bound(d.get("since")), bound(d.get("until")), d.get("retention"))


@dataclass(frozen=True)
class PartitionWindow:
    """One partition's window in offsets: [first, end) judged (None: from the log start, to the LSO), and
    the retention's floor (None: the sink keeps everything)."""

    first: int | None = None
    end: int | None = None
    floor: int | None = None

    def holds(self, first: int | None, last: int | None) -> bool:
        """Whether offsets first..last (inclusive) reach into the window."""
        if first is None or last is None:
            return True
        return (self.first is None or last >= self.first) and (self.end is None or first < self.end)

    def to_dict(self) -> dict[str, Any]:
        return {"first_offset": self.first, "end_offset": self.end, "retention_floor": self.floor}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PartitionWindow:
        def n(v: Any) -> int | None:
            return None if v is None else int(v)

        return cls(n(d.get("first_offset")), n(d.get("end_offset")), n(d.get("retention_floor")))


def iso_ms(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def parse_ms(text: str) -> int:
    """An ISO 8601 time ("2026-11-30", "2026-11-30T06:00", "...Z", "...+01:00") as milliseconds since the
    epoch; a time without an offset is UTC. ValueError if it is none."""
    t = text.strip()
    when = datetime.fromisoformat(t[:-1] + "+00:00" if t[-1:] in ("Z", "z") else t)
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def parse_bound(text: str) -> Bound:
    """`--since`/`--until` as given: an ISO 8601 time, or offsets per partition
    (`orders:0=1200,orders:1=900`). ValueError saying what is wrong."""
    if "=" not in text:
        try:
            return Bound(text, timestamp_ms=parse_ms(text))
        except (ValueError, OverflowError, OSError):
            raise ValueError(f"{text!r} is neither a time (2026-11-30, 2026-11-30T06:00:00Z) nor offsets "
                             "per partition (TOPIC:PARTITION=OFFSET,...)") from None
    offsets: dict[TP, int] = {}
    for part in (p.strip() for p in text.split(",")):
        where, _, offset = part.partition("=")
        topic, _, partition = where.strip().rpartition(":")
        if not topic or not partition.strip().isdigit() or not offset.strip().isdigit():
            raise ValueError(f"{part!r} is not TOPIC:PARTITION=OFFSET (e.g. orders:0=1200)")
        tp = (topic, int(partition))
        if tp in offsets:
            raise ValueError(f"{topic}:{partition.strip()} is named twice")
        offsets[tp] = int(offset)
    return Bound(text, offsets=tuple(sorted(offsets.items())))
