"""An audit's window in each partition's offsets (the driver, once, before any task starts), and the pass
over the final findings that keeps those reaching into it (eosctl.report.window)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from eosctl.base.errors import EosctlError
from eosctl.report.findings import Finding
from eosctl.report.window import Bound, PartitionWindow, WindowSpec

if TYPE_CHECKING:
    from auditors.plan import WorkItem
    from auditors.sources import Source

TP = tuple[str, int]


def with_windows(items: list[WorkItem], spec: WindowSpec, source: Source) -> list[WorkItem]:
    """Each partition Kafka has, with its window: a time maps to the first offset of a record at or after it
    (ListOffsets by timestamp). No record that new: a --since starts at the high watermark, an --until
    (or the retention's floor) bounds nothing. Offsets given per partition are taken as they are; a
    partition an offset bound does not name is unbounded on that side."""
    audited = {i.tp: i for i in items if i.in_kafka and i.placement is not None}
    for bound, flag in ((spec.since, "--since"), (spec.until, "--until")):
        if bound is None:
            continue
        for tp, _ in bound.offsets:
            if tp not in audited:
                raise EosctlError(f"{flag} {bound.text}: {tp[0]}:{tp[1]} is not an audited partition; name "
                                  "partitions of the pipeline's topics (TOPIC:PARTITION=OFFSET)")
    tps = list(audited)
    at = {"--since": _offsets(spec.since, tps, source, audited, high_watermark=True),
          "--until": _offsets(spec.until, tps, source, audited, high_watermark=False)}
    floor_ms = spec.floor_ms
    floors = _offsets(Bound("", floor_ms), tps, source, audited, high_watermark=False) \
        if floor_ms is not None else {}
    out = []
    for item in items:
        if item.tp not in audited:
            out.append(item)
            continue
        first, end = at["--since"].get(item.tp), at["--until"].get(item.tp)
        if first is not None and end is not None and first > end:
            raise EosctlError(f"the window is empty on {item.topic}:{item.partition}: --since is offset "
                              f"{first}, --until offset {end}; give a --since before --until")
        out.append(replace(item, window=PartitionWindow(first, end, floors.get(item.tp))))
    return out


def _offsets(bound: Bound | None, tps: list[TP], source: Source, audited: dict[TP, WorkItem], *,
             high_watermark: bool) -> dict[TP, int]:
    """The bound's offset per partition; where no record is as new as its time, the high watermark
    (``high_watermark``) or none."""
    if bound is None:
        return {}
    if bound.timestamp_ms is None:
        return dict(bound.offsets)
    found = source.offsets_for_time(tps, bound.timestamp_ms)
    out = {tp: o for tp, o in found.items() if o is not None}
    if high_watermark:
        out.update({tp: _hw(audited[tp]) for tp in tps if found.get(tp) is None})
    return out


def _hw(item: WorkItem) -> int:
    assert item.placement is not None
    return item.placement.high_watermark


def in_window(findings: Sequence[Finding], items: Sequence[WorkItem]) -> list[Finding]:
    """The findings that reach into their partition's window: a pass over the final list, whatever rule
    made them (the per-partition sweep judges only the window already; key duplicates and the content
    check's findings are cut here). A key duplicate stays if one of its places in one partition is in the
    window; one across partitions stays."""
    windows = {i.tp: i.window for i in items if i.window is not None}
    if not windows:
        return list(findings)
    out = []
    for f in findings:
        w = windows.get((f.topic, f.partition)) if f.topic is not None and f.partition is not None else None
        if w is None:
            out.append(f)
        elif f.kind == "key_duplicate" and f.offsets and f.detail is not None:
            out.append(f)  # places in several partitions: their offsets are not one partition's
        elif f.kind == "key_duplicate" and f.offsets:
            if any(w.holds(o, o) for o in f.offsets):
                out.append(f)
        elif w.holds(f.first_offset, f.last_offset):
            out.append(f)
    return out
