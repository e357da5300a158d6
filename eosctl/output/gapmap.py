"""The gap map: one bar per partition over its offset space, log start to high watermark, drawn in SVG.

Underneath, the log's layers (committed, not yet stable, and the segments of eosctl.report.segments); on
top, one mark per finding, or their density when a partition has more than MAX_MARKS. ``section`` is the
HTML page's gap-map section (eosctl/output/html.py); marks narrower than a few pixels are widened so a
one-offset defect in a 10M-offset partition stays visible.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from eosctl.cluster.model import TP
from eosctl.output.htmltext import cell, escape, number
from eosctl.report.findings import DESCRIPTIONS, KINDS, AuditReport, Finding, PartitionSummary
from eosctl.report.segments import LogSegment

FULL_ROWS = 12  # up to this many partitions, every one gets a full gap-map bar and table row

# One colour per finding kind (saturated: drawn over the log) and per log segment kind (muted: underneath).
FINDING_COLOURS = {
    "gap": "#d62728",
    "duplicate": "#ff7f0e",
    "phantom_aborted": "#9467bd",
    "phantom_marker": "#e377c2",
    "phantom_uncommitted": "#8c564b",
    "phantom_beyond_hw": "#17becf",
    "key_duplicate": "#b5b800",
    "offset_mismatch": "#1f5fbf",
    "invalid_row": "#111111",  # never on a bar (no offset to place it at): legend and table only
    "content_mismatch": "#2ca02c",
    # key lineage (a Kafka stage without offset lineage): darker shades of the kinds they rename
    "lost_key": "#8b1a1a",
    "duplicate_key": "#b35900",
    "phantom_key": "#5e3c8c",
    "ahead_of_commit": "#6b8e23",
    "out_of_order": "#008080",
    # a sink's dead-letter queue (eosctl.rules.deadletter)
    "sink_and_dlq": "#c71585",
    "dlq_duplicate": "#cd853f",
    "dlq_aborted": "#483d8b",
    "misrouted": "#ff1493",  # a sink with a route
    # a state sink's kinds (eosctl.rules.upsert): at the offset of the record the row is judged by
    "stale_value": "#c7a600",
    "aborted_value": "#7b4fa6",
    "uncommitted_value": "#a0522d",
    "resurrected_key": "#e0509b",
    "missing_key": "#b22222",
    "unknown_key": "#444444",  # never on a bar (no offset): legend and table only
    "value_mismatch": "#3a9d5d",
    "aggregate_mismatch": "#d2691e",
}
LOG_LAYERS = {  # (colour, legend label, what it means)
    "COMMITTED": ("#9ad4a5", "committed, in the sink", "committed records between log start and LSO"),
    "PENDING": ("#e9eef2", "not yet stable (LSO..HW)", "after the last stable offset: not readable yet"),
    "ABORTED": ("#b9b9b9", "aborted transaction", "records of aborted transactions (never delivered)"),
    "MARKER": ("#3d3d3d", "transaction marker", "COMMIT/ABORT control records"),
    "OPEN": ("#f5c542", "open transaction", "records of transactions without a marker yet"),
    "HOLE": ("#f4f4f4", "compacted away", "offsets removed by compaction"),
}

# Gap-map geometry, in CSS pixels: the bar keeps its scale, widths below the minimum are widened around
# their centre so a one-offset defect in a 10M-offset partition is still a visible mark.
BAR_W = 900
BEYOND_W = 56  # stub after the HW for phantom_beyond_hw rows
MIN_FINDING_W = 5.0
# Up to this many findings in one partition, each is its own mark (widened to MIN_FINDING_W, outlined).
# Beyond it, marks would overlap into one white-outlined smear and the SVG would grow by ~180 bytes per
# finding: the partition's findings are drawn as density instead (density_runs), a bounded number
# of marks however many findings there are.
MAX_MARKS = 200
MIN_SEGMENT_W = 1.5


def section(report: AuditReport, by_tp: dict[TP, list[Finding]], links: dict[int, int]) -> str:
    present = {f.kind for f in report.findings}
    segs = {s.kind for p in report.partitions for s in (p.log_segments or ())}
    legend = "".join(
        f'<li data-layer="{k}" class="{"" if k in segs or k in ("COMMITTED", "PENDING") else "absent"}" '
        f'title="{escape(meaning)}"><i style="background:{c}"></i>{escape(label)}</li>'
        for k, (c, label, meaning) in LOG_LAYERS.items())
    counts = report.counts()
    legend += "".join(
        f'<li data-kind="{k}" class="finding{"" if k in present else " absent"}" '
        f'title="{escape(DESCRIPTIONS[k])}">'
        f'<i style="background:{FINDING_COLOURS[k]}"></i>{escape(k)} <b>{counts[k]}</b></li>' for k in KINDS)
    full = [p for p in report.partitions
            if len(report.partitions) <= FULL_ROWS or (p.topic, p.partition) in by_tp]
    shown = {(p.topic, p.partition) for p in full}
    quiet = [p for p in report.partitions if (p.topic, p.partition) not in shown]
    rows = "\n".join(bar_row(p, by_tp.get((p.topic, p.partition), []), compact=False, links=links)
                     for p in full) if not report.hops else "\n".join(
        f'<h3 class="hop">hop {cell(h.name)}: {cell(", ".join(h.topics))} → {cell(h.sink or "")}</h3>\n'
        + "\n".join(bar_row(p, by_tp.get((p.topic, p.partition), []), compact=False, links=links)
                    for p in full if p.topic in h.topics) for h in report.hops)
    # Findings for partitions the report doesn't summarise (shouldn't happen; shown rather than lost).
    known = {(p.topic, p.partition) for p in report.partitions}
    for (t, n), fs in sorted(by_tp.items()):
        if (t, n) not in known:
            rows += "\n" + bar_row(PartitionSummary(t, n, 0, 0, 0, 0, 0, exists=False), fs, compact=False,
                                     links=links)
    if quiet:
        thin = "\n".join(bar_row(p, [], compact=True) for p in quiet)
        rows += (f'\n<details class="quiet"><summary>{number(len(quiet))} partitions without findings '
                 f"(thin bars)</summary>\n<div class=\"thin\">{thin}</div>\n</details>")
    note = ("Each bar spans one partition's offsets from its log start (left) to its high watermark (right); "
            "marks narrower than a few pixels are widened so that a single offset stays visible. "
            "Hover a mark for its offsets.")
    return (f'<section id="gapmap">\n<h2>Gap map</h2>\n<p class="note">{note}</p>\n'
            f'<ul class="legend">{legend}</ul>\n<div class="bars">\n{rows}\n</div>\n</section>')


def bar_row(p: PartitionSummary, findings: list[Finding], compact: bool,
             links: dict[int, int] | None = None) -> str:
    name = f"{p.topic}[{p.partition}]"
    count = f' <b class="nf">{len(findings)} finding{"s" * (len(findings) != 1)}</b>' if findings else ""
    stats = f"{number(p.expected_records)} expected · {number(p.sink_rows)} rows"
    label = (f'<div class="label"><span class="tp">{cell(name)}{"" if compact else count}</span>'
             + ("" if compact else f'<span class="stats">{stats}</span>') + "</div>")
    return (f'<div class="row{" compact" if compact else ""}" data-tp="{escape(name)}">{label}'
            f"{gap_svg(p, findings, compact, links)}</div>")


def _ends(f: Finding) -> tuple[int, int]:
    """A drawn finding's first and last offsets: the findings of a partition's bar all have them."""
    assert f.first_offset is not None and f.last_offset is not None, f
    return f.first_offset, f.last_offset


def gap_svg(p: PartitionSummary, findings: Iterable[Finding], compact: bool = False,
            links: dict[int, int] | None = None) -> str:
    """One partition's bar: log layers underneath, one <rect class="f"> (or <path>) per finding on top;
    ``links`` (id of a finding -> its row in the findings table) makes each mark a link to its row."""
    findings = list(findings)
    band_y, band_h = (1, 8) if compact else (15, 16)
    height = 10 if compact else 52
    lo, hw = p.log_start_offset, p.high_watermark
    beyond = [f for f in findings if f.kind == "phantom_beyond_hw" or not p.exists]
    beyond_ids = {id(f) for f in beyond}
    main_w = BAR_W - (BEYOND_W + 6 if beyond and p.exists else 0)
    span = max(hw - lo, 1)

    def x(offset: int) -> float:
        return max(0.0, min(main_w, (offset - lo) / span * main_w))

    out: list[str] = []
    if p.exists:
        lso = min(max(p.last_stable_offset, lo), hw)
        out.append(_rect("layer", 0, x(lso), band_y, band_h, "COMMITTED",
                         f"offsets {lo}..{lso - 1}: committed records (log start {lo}, LSO {lso})"
                         if lso > lo else f"no committed records (log start {lo})", 0))
        if hw > lso:
            out.append(_rect("layer", x(lso), x(hw), band_y, band_h, "PENDING",
                             f"offsets {lso}..{hw - 1}: after the LSO {lso}, not readable yet", 0))
        for s in at_scale(p.log_segments or (), x):
            # A stretch where the kind is only sprinkled (coalesced markers, say) is a low rug along the
            # band's bottom, so it never hides the committed records between.
            solid = s.count == s.last - s.first + 1
            rug = band_h if solid else max(band_h * 0.3, 2)
            out.append(_rect("seg", x(s.first), x(s.last + 1), band_y + band_h - rug, rug, s.kind,
                             _seg_title(s), MIN_SEGMENT_W))
    else:
        out.append(f'<rect class="layer nokafka" x="0" y="{band_y}" width="{BAR_W}" height="{band_h}">'
                   "<title>this topic/partition does not exist in Kafka</title></rect>")
    fy, fh = (0, height) if compact else (band_y - 6, band_h + 12)
    # Offsets past the HW (or of a partition Kafka lacks) have no log to scale by: their own stub, scaled
    # from the HW (or their first offset) to the last such offset.
    stub_x, stub_w = (main_w + 6, BEYOND_W) if p.exists else (0, BAR_W)
    base = hw if p.exists else min((_ends(g)[0] for g in beyond), default=0)
    stub_span = max(max((_ends(f)[1] for f in beyond), default=base) - base + 1, 1)

    def bx(offset: int) -> float:
        return stub_x + max(0, min(stub_span, offset - base)) / stub_span * stub_w

    dense = len(findings) > MAX_MARKS
    if dense:
        on_bar = [f for f in findings if id(f) not in beyond_ids and f.first_offset is not None]
        for run in density_runs(on_bar, lo, span, main_w):
            out.append(_density(run, fy, fh))
        findings = [f for f in findings if id(f) in beyond_ids][:MAX_MARKS]
    for f in findings:
        first, last = _ends(f)
        if id(f) in beyond_ids:
            mark = _finding(f, bx(first), bx(last + 1), fy, fh)
        elif f.kind == "key_duplicate" and f.offsets:
            here = _offsets_here(f)
            mark = _ticks(f, [x(o) for o in here], [x(o + 1) for o in here], fy, fh)
        else:
            mark = _finding(f, x(first), x(last + 1), fy, fh)
        row = None if links is None else links.get(id(f))
        out.append(mark if row is None else f'<a href="#finding-{row}">{mark}</a>')
    if not compact:
        out.append(_axis(p, x, main_w, beyond))
        if dense:
            out.append(f'<text class="ax" x="{main_w / 2:.2f}" y="48" text-anchor="middle">'
                       f"{number(len(on_bar))} findings, drawn by density: the darker, the more offsets"
                       "</text>")
    # Scales with the page (viewBox); at the usual width one unit is about one CSS pixel.
    return (f'<svg class="gap" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {BAR_W} {height}" '
            f'preserveAspectRatio="xMinYMid meet" role="img" aria-label="gap map of {escape(p.topic)}'
            f'[{p.partition}]">' + "".join(out) + "</svg>")


def _offsets_here(f: Finding) -> tuple[int, ...]:
    """A key duplicate across partitions lists every place in its detail ("in t[p]@o, ..."); only the
    offsets of the finding's own partition belong on its bar."""
    if not f.detail or not f.detail.startswith("in "):
        return f.offsets or ()
    here = tuple(int(o) for t, n, o in re.findall(r"(\S+)\[(\d+)\]@(\d+)", f.detail)
                 if (t, int(n)) == (f.topic, f.partition))
    return here or (f.offsets or ())


def _widen(x1: float, x2: float, minimum: float, limit: float) -> tuple[float, float]:
    if x2 - x1 >= minimum:
        return x1, x2 - x1
    mid = (x1 + x2) / 2
    start = min(max(mid - minimum / 2, 0.0), max(limit - minimum, 0.0))
    return start, minimum


def _rect(cls: str, x1: float, x2: float, y: float, h: float, kind: str, title: str, minimum: float) -> str:
    x, w = _widen(x1, x2, minimum, BAR_W)
    if w <= 0:
        return ""
    return (f'<rect class="{cls}" data-layer="{kind}" x="{x:.2f}" y="{y}" width="{w:.2f}" height="{h}" '
            f'fill="{LOG_LAYERS[kind][0]}"><title>{escape(title)}</title></rect>')


def _finding(f: Finding, x1: float, x2: float, y: float, h: float) -> str:
    x, w = _widen(x1, x2, MIN_FINDING_W, BAR_W)
    return (f'<rect class="f" data-kind="{f.kind}" data-first="{f.first_offset}" data-last="{f.last_offset}" '
            f'x="{x:.2f}" y="{y}" width="{w:.2f}" height="{h}" fill="{FINDING_COLOURS[f.kind]}">'
            f"<title>{escape(finding_title(f))}</title></rect>")


def _density(run: DensityRun, y: float, h: float) -> str:
    """A stretch of one kind's findings, drawn at its density: the share of the stretch's offsets they
    hold sets the opacity (solid where every offset is affected), never less than a visible tint."""
    x, w = _widen(run.x1, run.x2, 1.0, BAR_W)
    opacity = max(0.35, min(1.0, run.offsets / max(run.last - run.first + 1, 1)))
    title = (f"{number(run.findings)} {run.kind} finding{'s' * (run.findings != 1)} in this stretch "
             f"(offsets {run.first}..{run.last}): {number(run.offsets)} offsets, {opacity:.0%} of the "
             "stretch")
    return (f'<rect class="fd" data-kind="{run.kind}" data-findings="{run.findings}" x="{x:.2f}" y="{y}" '
            f'width="{w:.2f}" height="{h}" fill="{FINDING_COLOURS[run.kind]}" fill-opacity="{opacity:.2f}">'
            f"<title>{escape(title)}</title></rect>")


def _ticks(f: Finding, starts: list[float], ends: list[float], y: float, h: float) -> str:
    """A key duplicate is a few separate offsets: one path with a mark at each, one title for all."""
    d = []
    for x1, x2 in zip(starts, ends, strict=True):
        x, w = _widen(x1, x2, MIN_FINDING_W - 2, BAR_W)
        d.append(f"M{x:.2f} {y}h{w:.2f}v{h}h{-w:.2f}z")
    return (f'<path class="f" data-kind="{f.kind}" data-first="{f.first_offset}" data-last="{f.last_offset}" '
            f'd="{"".join(d)}" fill="{FINDING_COLOURS[f.kind]}"><title>{escape(finding_title(f))}</title>'
            "</path>")


def _axis(p: PartitionSummary, x, main_w: float, beyond: list[Finding]) -> str:
    if not p.exists:
        return ('<text class="ax" x="0" y="48">not in Kafka: every row here is phantom_beyond_hw</text>')
    lo, lso, hw = p.log_start_offset, p.last_stable_offset, p.high_watermark
    out = [f'<text class="ax" x="0" y="48">log start {number(lo)}</text>',
           f'<text class="ax" x="{main_w:.2f}" y="48" text-anchor="end">HW {number(hw)}</text>']
    if lo < lso < hw:
        lx = x(lso)
        out.append(f'<line class="lso" x1="{lx:.2f}" x2="{lx:.2f}" y1="2" y2="37"/>')
        anchor = "end" if lx > main_w - 150 else "start"
        dx = -3 if anchor == "end" else 3
        out.append(f'<text class="ax lsot" x="{lx + dx:.2f}" y="7" text-anchor="{anchor}">'
                   f"LSO {number(lso)}</text>")
    if beyond:
        bx = main_w + 6
        out.append(f'<rect class="beyond" x="{bx}" y="15" width="{BEYOND_W}" height="16"><title>beyond the '
                   f"high watermark {hw}: offsets the log never had</title></rect>")
        out.append(f'<text class="ax" x="{BAR_W}" y="48" text-anchor="end">&gt; HW</text>')
    return "".join(out)


def at_scale(segments: Iterable[LogSegment], x) -> list[LogSegment]:
    """Segments of one kind less than a pixel apart become one: the SVG stays small for any partition."""
    out: list[LogSegment] = []
    last_of: dict[str, int] = {}  # kind -> index in out of its latest segment
    for s in sorted(segments, key=lambda s: s.first):
        i = last_of.get(s.kind)
        if i is not None and x(s.first) - x(out[i].last + 1) < 1.0:
            prev = out[i]
            out[i] = LogSegment(s.kind, prev.first, s.last, prev.count + s.count)
        else:
            last_of[s.kind] = len(out)
            out.append(s)
    return out


def _seg_title(s: LogSegment) -> str:
    what = {"ABORTED": "aborted record", "MARKER": "transaction marker", "OPEN": "open-transaction record",
            "HOLE": "offset compacted away"}[s.kind]
    if s.count != 1:
        what = what.replace("record", "records").replace("marker", "markers").replace("offset ", "offsets ")
    where = f"offset {s.first}" if s.first == s.last else f"offsets {s.first}..{s.last}"
    span = s.last - s.first + 1
    return f"{where}: {number(s.count)} {what}" + (" spread over this stretch" if s.count < span else "")


def finding_title(f: Finding) -> str:
    where = f"offset {f.first_offset}" if f.first_offset == f.last_offset else (
        f"offsets {f.first_offset}..{f.last_offset}")
    text = f"{f.kind} {f.topic}[{f.partition}] {where}, count {f.count}"
    if f.key is not None:
        text += f", key {f.key}"
    if f.offsets is not None:
        text += ", at " + ", ".join(map(str, f.offsets))
    if f.detail:
        text += f" ({f.detail})"
    if f.cause is not None:
        text += f". {f.cause.summary}"
    return text


@dataclass(frozen=True)
class DensityRun:
    """Consecutive pixel columns of one partition's bar holding findings of one kind."""

    kind: str
    x1: float
    x2: float
    first: int  # first offset of the stretch the columns cover
    last: int
    findings: int  # findings that touch it
    offsets: int  # offsets those findings hold inside it


def density_runs(findings: Iterable[Finding], lo: int, span: int, width: float) -> list[DensityRun]:
    """A partition's findings as runs of pixel columns per kind, at most ``width`` per kind whatever the
    number of findings: what the gap map draws when one mark per finding would overlap into a smear.

    A finding adds its offsets to each column it covers (in proportion), so a stretch where every other
    offset is missing holds half its offsets, and reads as half-dense, not as solid or blank."""
    columns = max(int(width), 1)
    per_col = span / columns  # offsets per column
    counts: dict[str, dict[int, list[float]]] = {}
    for f in findings:
        first, last = f.first_offset, f.last_offset
        if first is None or last is None:
            continue
        c1 = min(max(int((first - lo) / per_col), 0), columns - 1)
        c2 = min(max(int((last - lo) / per_col), 0), columns - 1)
        cols = counts.setdefault(f.kind, {})
        share = (last - first + 1) / (c2 - c1 + 1)
        for c in range(c1, c2 + 1):
            cell = cols.setdefault(c, [0, 0.0])
            cell[0] += c == c1  # counted once, in the run holding its first offset
            cell[1] += share
    runs = []
    for kind, cols in counts.items():
        start: int | None = None
        prev: int | None = None
        n, offsets = 0, 0.0
        for col in [*sorted(cols), None]:
            if col is not None and prev is not None and col == prev + 1:
                prev, n, offsets = col, n + int(cols[col][0]), offsets + cols[col][1]
                continue
            if start is not None and prev is not None:
                runs.append(DensityRun(kind, start * width / columns, (prev + 1) * width / columns,
                                       lo + int(start * per_col), lo + max(int((prev + 1) * per_col) - 1, 0),
                                       n, round(offsets)))
            if col is not None:
                start, prev, n, offsets = col, col, int(cols[col][0]), cols[col][1]
    return runs
