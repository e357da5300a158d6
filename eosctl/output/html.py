"""`--format html`: one self-contained sign-off document for an audit.

No network, no scripts to run, no external fonts: inline CSS and inline SVG only, so the file can be
attached to a ticket and opened anywhere, years later. Order: the verdict, what was audited, the gap map
(one bar per partition over its offset space, log start to high watermark), the per-partition table, the
findings, and the JSON report itself for machines (<script type="application/json" id="eosctl-report">,
the same object `--format json` prints).

Many partitions: partitions with findings get full bars; the others shrink to thin bars inside a
collapsed <details> once there are more than FULL_ROWS partitions, so 200 partitions read like 3.
"""

from __future__ import annotations

import html
import json
import platform
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from eosctl import __version__, safetext
from eosctl.findings import (
    DESCRIPTIONS,
    KINDS,
    PASS,
    AuditReport,
    Finding,
    LogSegment,
    PartitionSummary,
    root_causes,
)
from eosctl.gapmap import DensityRun, density_runs
from eosctl.model import TP
from eosctl.output.finding import short_cause
from eosctl.sink.base import ReadPoint

FULL_ROWS = 12  # up to this many partitions, every one gets a full gap-map bar and table row
MAX_FINDING_ROWS = 2000  # the findings table stops here; the embedded JSON keeps every finding

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
# finding: the partition's findings are drawn as density instead (gapmap.density_runs), a bounded number
# of marks however many findings there are.
MAX_MARKS = 200
MIN_SEGMENT_W = 1.5


@dataclass(frozen=True)
class AuditContext:
    """What the report itself doesn't record: where, when and by which eosctl it was audited."""

    bootstrap: str | None = None
    pipeline: str | None = None
    topics: tuple[str, ...] = ()
    audited_at: datetime | None = None
    eosctl_version: str | None = None
    origin: str | None = None  # e.g. "eosctl audit", "snapshot incident.duckdb", "report.json"


def render_html(report: AuditReport, context: AuditContext | None = None) -> str:
    ctx = context or AuditContext()
    # Findings placed on the gap map: those at offsets of a topic/partition (an invalid_row has none).
    by_tp: dict[TP, list[Finding]] = {}
    for f in report.findings:
        if f.topic is not None and f.partition is not None and f.first_offset is not None:
            by_tp.setdefault((f.topic, f.partition), []).append(f)
    title = f"eosctl audit: {report.verdict.upper()}"
    # A finding's gap-map mark links to its row of the findings table (rows stop at MAX_FINDING_ROWS).
    rows = {id(f): i for i, f in enumerate(report.findings[:MAX_FINDING_ROWS])}
    body = "\n".join([
        _verdict(report, by_tp),
        _hops(report),
        _root_causes(report),
        _audited(report, ctx),
        _gap_map(report, by_tp, rows),
        _partitions(report, by_tp),
        _findings(report),
        _machine(report, ctx),
    ])
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f'<meta name="generator" content="eosctl {escape(__version__)}">\n'
            f"<title>{escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n<main>\n{body}\n"
            f"</main>\n</body>\n</html>\n")


# ---- sections ------------------------------------------------------------------------------------------


def _verdict(report: AuditReport, by_tp: dict[TP, list[Finding]]) -> str:
    failing = len(report.failing)
    ignored = len(report.findings) - failing
    parts = len(report.partitions)
    expected = sum(p.expected_records for p in report.partitions)
    rows = sum(p.sink_rows for p in report.partitions)
    unverifiable = sum(p.unverifiable_below for p in report.partitions)
    if report.verdict == PASS:
        headline = "every committed record is in the sink exactly once" if not report.findings else (
            f"no failing findings ({ignored} ignored by --fail-on)")
    else:
        headline = (f"{failing} failing finding{'s' * (failing != 1)} in {len(by_tp)} of {parts} "
                    f"partition{'s' * (parts != 1)}" + (f", {ignored} ignored" if ignored else ""))
    chips = "".join(
        f'<span class="chip" data-kind="{k}"><i style="background:{FINDING_COLOURS[k]}"></i>'
        f"{escape(k)} <b>{n}</b>{'' if k in report.fail_on else ' (ignored)'}</span>"
        for k, n in report.counts().items() if n)
    numbers = (f"{_n(parts)} partition{'s' * (parts != 1)} · {_n(expected)} expected records · "
               f"{_n(rows)} sink rows" + (f" · {_n(unverifiable)} unverifiable" if unverifiable else ""))
    return (f'<section class="verdict {escape(report.verdict)}" id="verdict">\n'
            f'<div class="word">{escape(report.verdict.upper())}</div>\n'
            f'<div class="what"><p class="headline">{escape(headline)}</p>\n'
            f'<p class="numbers">{numbers}</p>\n<p class="chips">{chips}</p></div>\n</section>')


def _audited(report: AuditReport, ctx: AuditContext) -> str:
    topics = ctx.topics or tuple(dict.fromkeys(p.topic for p in report.partitions))
    fail_on = "every kind" if set(report.fail_on) == set(KINDS) else ", ".join(report.fail_on)
    engine = report.engine or {}
    versions = [f"eosctl {ctx.eosctl_version or __version__}"]
    if engine.get("spark_version"):
        versions.append(f"Spark {engine['spark_version']}")
    versions.append(f"Python {platform.python_version()} (this page)")
    when = ctx.audited_at.strftime("%Y-%m-%d %H:%M:%S %Z").strip() if ctx.audited_at else "not recorded"
    took = f"{report.elapsed_seconds:.1f} s" if report.elapsed_seconds is not None else "not recorded"
    rows = [
        ("cluster", ctx.bootstrap or "not recorded"),
        ("pipeline", ctx.pipeline or "-"),
        ("topics", ", ".join(topics) or "-"),
        ("consumer group", report.group or "- (offsets not compared)"),
        ("sink", report.sink or "not recorded"),
        *([("sink read at", ReadPoint.from_dict(report.sink_read_point).describe())]
          if report.sink_read_point else []),
        ("engine", _engine(engine)),
        ("versions", " · ".join(versions)),
        ("audited at", when),
        ("audit took", took),
        ("--fail-on", fail_on),
    ]
    if ctx.origin:
        rows.append(("rendered from", ctx.origin))
    cells = "".join(f"<dt>{escape(k)}</dt><dd>{escape(str(v))}</dd>" for k, v in rows)
    return f'<section id="audited">\n<h2>What was audited</h2>\n<dl class="facts">{cells}</dl>\n</section>'


def _engine(engine: dict[str, object]) -> str:
    """Whatever the engine recorded (its keys grow with the engines), seconds made readable."""
    if not engine:
        return "not recorded"
    out = []
    for k, v in engine.items():
        if k == "spark_version":
            continue
        name = k.removesuffix("_seconds").replace("_", " ")
        if k.endswith("_seconds") and isinstance(v, int | float):
            out.append(f"{name} {v:.1f} s")
        else:
            out.append(f"{name} {v}")
    return " · ".join(out)


def _root_causes(report: AuditReport) -> str:
    """What explains the findings, before everything else: one entry per root cause, with links to its
    first findings' rows."""
    causes = root_causes(report.findings)
    if not causes:
        return ""
    items = []
    for r in causes:
        links = " ".join(f'<a href="#finding-{i}">#{i + 1}</a>' for i in r.findings[:12]
                         if i < MAX_FINDING_ROWS)
        more = f" and {_n(len(r.findings) - 12)} more" if len(r.findings) > 12 else ""
        items.append(f'<li data-rule="{escape(r.rule)}"><b>{escape(r.rule)}</b>: {escape(r.summary)}'
                     f'<div class="note">findings {links}{more}</div></li>')
    return (f'<section id="root-causes">\n<h2>Root causes</h2>\n<ol class="causes">{"".join(items)}</ol>\n'
            "</section>")


def _hops(report: AuditReport) -> str:
    """A pipeline audited hop by hop: each hop in order, what it reads and writes, its own verdict."""
    if not report.hops:
        return ""
    rows = "".join(
        f'<tr class="{escape(h.verdict)}"><td>{i}</td><td>{_t(h.name)}</td><td>{_t(", ".join(h.topics))}</td>'
        f'<td>{_t(h.sink or "")}</td><td>{_t(h.group or "")}</td><td>{escape(h.verdict.upper())}</td>'
        f'<td class="n">{_n(h.findings)}</td></tr>' for i, h in enumerate(report.hops, 1))
    return ('<section id="hops">\n<h2>Hops</h2>\n<p class="note">The pipeline audited hop by hop, in order: '
            "a stage's output topic is the audited side of its hop; the verdict above is the pipeline's."
            '</p>\n<table><thead><tr><th>#</th><th>hop</th><th>reads</th><th>writes to</th><th>group</th>'
            f'<th>verdict</th><th>findings</th></tr></thead><tbody>{rows}</tbody></table>\n</section>')


def _gap_map(report: AuditReport, by_tp: dict[TP, list[Finding]], links: dict[int, int]) -> str:
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
    rows = "\n".join(_bar_row(p, by_tp.get((p.topic, p.partition), []), compact=False, links=links)
                     for p in full) if not report.hops else "\n".join(
        f'<h3 class="hop">hop {_t(h.name)}: {_t(", ".join(h.topics))} → {_t(h.sink or "")}</h3>\n'
        + "\n".join(_bar_row(p, by_tp.get((p.topic, p.partition), []), compact=False, links=links)
                    for p in full if p.topic in h.topics) for h in report.hops)
    # Findings for partitions the report doesn't summarise (shouldn't happen; shown rather than lost).
    known = {(p.topic, p.partition) for p in report.partitions}
    for (t, n), fs in sorted(by_tp.items()):
        if (t, n) not in known:
            rows += "\n" + _bar_row(PartitionSummary(t, n, 0, 0, 0, 0, 0, exists=False), fs, compact=False,
                                     links=links)
    if quiet:
        thin = "\n".join(_bar_row(p, [], compact=True) for p in quiet)
        rows += (f'\n<details class="quiet"><summary>{_n(len(quiet))} partitions without findings '
                 f"(thin bars)</summary>\n<div class=\"thin\">{thin}</div>\n</details>")
    note = ("Each bar spans one partition's offsets from its log start (left) to its high watermark (right); "
            "marks narrower than a few pixels are widened so that a single offset stays visible. "
            "Hover a mark for its offsets.")
    return (f'<section id="gapmap">\n<h2>Gap map</h2>\n<p class="note">{note}</p>\n'
            f'<ul class="legend">{legend}</ul>\n<div class="bars">\n{rows}\n</div>\n</section>')


def _bar_row(p: PartitionSummary, findings: list[Finding], compact: bool,
             links: dict[int, int] | None = None) -> str:
    name = f"{p.topic}[{p.partition}]"
    count = f' <b class="nf">{len(findings)} finding{"s" * (len(findings) != 1)}</b>' if findings else ""
    stats = f"{_n(p.expected_records)} expected · {_n(p.sink_rows)} rows"
    label = (f'<div class="label"><span class="tp">{_t(name)}{"" if compact else count}</span>'
             + ("" if compact else f'<span class="stats">{stats}</span>') + "</div>")
    return (f'<div class="row{" compact" if compact else ""}" data-tp="{escape(name)}">{label}'
            f"{gap_svg(p, findings, compact, links)}</div>")


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
    base = hw if p.exists else min((g.first_offset for g in beyond), default=0)
    stub_span = max(max((f.last_offset for f in beyond), default=base) - base + 1, 1)

    def bx(offset: int) -> float:
        return stub_x + max(0, min(stub_span, offset - base)) / stub_span * stub_w

    dense = len(findings) > MAX_MARKS
    if dense:
        on_bar = [f for f in findings if id(f) not in beyond_ids and f.first_offset is not None]
        for run in density_runs(on_bar, lo, span, main_w):
            out.append(_density(run, fy, fh))
        findings = [f for f in findings if id(f) in beyond_ids][:MAX_MARKS]
    for f in findings:
        if id(f) in beyond_ids:
            mark = _finding(f, bx(f.first_offset), bx(f.last_offset + 1), fy, fh)
        elif f.kind == "key_duplicate" and f.offsets:
            here = _offsets_here(f)
            mark = _ticks(f, [x(o) for o in here], [x(o + 1) for o in here], fy, fh)
        else:
            mark = _finding(f, x(f.first_offset), x(f.last_offset + 1), fy, fh)
        row = None if links is None else links.get(id(f))
        out.append(mark if row is None else f'<a href="#finding-{row}">{mark}</a>')
    if not compact:
        out.append(_axis(p, x, main_w, beyond))
        if dense:
            out.append(f'<text class="ax" x="{main_w / 2:.2f}" y="48" text-anchor="middle">'
                       f"{_n(len(on_bar))} findings, drawn by density: the darker, the more offsets</text>")
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
    title = (f"{_n(run.findings)} {run.kind} finding{'s' * (run.findings != 1)} in this stretch "
             f"(offsets {run.first}..{run.last}): {_n(run.offsets)} offsets, {opacity:.0%} of the stretch")
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
    out = [f'<text class="ax" x="0" y="48">log start {_n(lo)}</text>',
           f'<text class="ax" x="{main_w:.2f}" y="48" text-anchor="end">HW {_n(hw)}</text>']
    if lo < lso < hw:
        lx = x(lso)
        out.append(f'<line class="lso" x1="{lx:.2f}" x2="{lx:.2f}" y1="2" y2="37"/>')
        anchor = "end" if lx > main_w - 150 else "start"
        dx = -3 if anchor == "end" else 3
        out.append(f'<text class="ax lsot" x="{lx + dx:.2f}" y="7" text-anchor="{anchor}">'
                   f"LSO {_n(lso)}</text>")
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
    return f"{where}: {_n(s.count)} {what}" + (" spread over this stretch" if s.count < span else "")


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


def escape(s: str) -> str:
    """Text for the page: HTML-escaped, and control and bidi characters shown as escapes, as on a
    terminal (a browser would hide an ESC and reorder a line at a U+202E)."""
    return html.escape(safetext.term(s))


# A name or value longer than this is cut in the middle in a table cell (the whole is its tooltip), so a
# 20,000-character topic can't push the number columns off the page.
CELL_CHARS = 120


def _t(s: str) -> str:
    """Text from a cluster or a sink for a table cell: control and bidi characters shown as escapes (as
    on a terminal), HTML-escaped, and a very long one cut with its length said."""
    s = safetext.term(s)
    if len(s) <= CELL_CHARS:
        return html.escape(s)
    cut = f"{s[:CELL_CHARS * 2 // 3]}…{s[-CELL_CHARS // 4:]}"
    return (f'<span title="{escape(s)}">{escape(cut)} <span class="muted">({len(s):,} characters)</span>'
            "</span>")


def _prose(s: str) -> str:
    """A sentence (a cause, a detail) for a table cell: escaped as _t does, never cut (the producer id a
    middle cut removed is the point of it, and a tooltip is lost on paper); it wraps instead."""
    return html.escape(safetext.term(s))


def _partitions(report: AuditReport, by_tp: dict[TP, list[Finding]]) -> str:
    head = ("<tr><th>topic</th><th>partition</th><th>log start</th><th>LSO</th><th>HW</th>"
            "<th>expected</th><th>sink rows</th><th>unverifiable</th><th>findings</th></tr>")

    def row(p: PartitionSummary) -> str:
        n = len(by_tp.get((p.topic, p.partition), []))
        note = "" if p.exists else ' <span class="muted">(not in Kafka)</span>'
        cls = ' class="bad"' if n else ""
        return (f"<tr{cls}><td>{_t(p.topic)}{note}</td><td>{p.partition}</td>"
                + "".join(f"<td>{_n(v)}</td>" for v in (p.log_start_offset, p.last_stable_offset,
                                                        p.high_watermark, p.expected_records, p.sink_rows))
                + f"<td>{_n(p.unverifiable_below) if p.unverifiable_below else ''}</td>"
                + f"<td>{n or ''}</td></tr>")

    parts = report.partitions
    if len(parts) <= FULL_ROWS:
        table = f'<table class="num">{head}{"".join(row(p) for p in parts)}</table>'
    else:
        bad = [p for p in parts if (p.topic, p.partition) in by_tp]
        rest = [p for p in parts if (p.topic, p.partition) not in by_tp]
        table = (f'<table class="num">{head}{"".join(row(p) for p in bad)}</table>' if bad else "")
        table += (f'<details class="quiet"><summary>{_n(len(rest))} partitions without findings</summary>'
                  f'<table class="num">{head}{"".join(row(p) for p in rest)}</table></details>')
    return (f'<section id="partitions">\n<h2>Partitions</h2>\n<p class="note">expected = committed data '
            "records between the log start and the LSO; sink rows = every row naming the partition; "
            "unverifiable = rows below the log start or at compacted offsets (never findings).</p>\n"
            f"{table}\n</section>")


def _findings(report: AuditReport) -> str:
    if not report.findings:
        return ('<section id="findings">\n<h2>Findings</h2>\n<p class="none">None: every committed record '
                "is in the sink exactly once, and nothing else is.</p>\n</section>")
    rows = []
    for i, f in enumerate(report.findings[:MAX_FINDING_ROWS]):
        where = ("-" if f.first_offset is None else str(f.first_offset) if f.first_offset == f.last_offset
                 else f"{f.first_offset}..{f.last_offset}")
        part = "-" if f.topic is None else f"{f.topic}[{'-' if f.partition is None else f.partition}]"
        detail = "; ".join(x for x in (
            "at " + ", ".join(map(str, f.offsets)) if f.offsets else "", f.detail or "") if x)
        ignored = "" if f.kind in report.fail_on else ' <span class="muted">(ignored)</span>'
        swatch = f'<i class="sw" style="background:{FINDING_COLOURS[f.kind]}"></i>'
        cause = "" if f.cause is None else (f"<b>{_prose(short_cause(f))}</b>"
                                            f'<div class="why">{_prose(f.cause.summary)}</div>')
        rows.append(f'<tr id="finding-{i}" data-kind="{f.kind}"><td>{swatch}{escape(f.kind)}{ignored}</td>'
                    f"<td>{_t(part)}</td>"
                    f'<td class="n">{where}</td><td class="n">{_n(f.count)}</td>'
                    f"<td>{_t(f.key or '')}</td><td>{_prose(detail)}</td><td>{cause}</td></tr>")
    more = len(report.findings) - MAX_FINDING_ROWS
    tail = (f'<p class="note">{_n(more)} more findings are in the embedded JSON report.</p>' if more > 0
            else "")
    kinds = "".join(f"<li><b>{k}</b>: {escape(DESCRIPTIONS[k])}</li>"
                    for k in KINDS if any(f.kind == k for f in report.findings))
    return (f'<section id="findings">\n<h2>Findings</h2>\n<ul class="kinds">{kinds}</ul>\n'
            "<table><tr><th>kind</th><th>partition</th><th>offsets</th><th>count</th><th>key</th>"
            f"<th>detail</th><th>cause</th></tr>{''.join(rows)}</table>\n{tail}</section>")


def _machine(report: AuditReport, ctx: AuditContext) -> str:
    context = {"bootstrap": ctx.bootstrap, "pipeline": ctx.pipeline, "topics": list(ctx.topics),
               "audited_at": ctx.audited_at.isoformat() if ctx.audited_at else None,
               "eosctl_version": ctx.eosctl_version or __version__, "origin": ctx.origin}
    return ('<section id="machine">\n<p class="note">For machines: this file embeds the JSON report '
            '(the object <code>eosctl audit --format json</code> prints) in '
            '<code>&lt;script type="application/json" id="eosctl-report"&gt;</code>, and where and when it '
            'was audited in <code>id="eosctl-context"</code>.</p>\n'
            f'<script type="application/json" id="eosctl-report">{script_json(report.to_dict())}</script>\n'
            f'<script type="application/json" id="eosctl-context">{script_json(context)}</script>\n'
            "</section>")


def script_json(obj: object) -> str:
    """JSON safe inside <script>: no '</script>' or '<!--' can end or confuse the element, whatever a key
    or detail holds; the escapes are valid JSON, so the text parses back to the same object."""
    text = json.dumps(obj, ensure_ascii=True, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _n(v: int) -> str:
    return f"{v:,}"


_CSS = """
:root { --ink:#1d232a; --muted:#66707a; --line:#dde3e8; --pass:#1e8e3e; --fail:#c5221f; }
* { box-sizing: border-box; }
body { margin:0; background:#f6f8fa; color:var(--ink);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
main { max-width: 1200px; margin: 0 auto; padding: 20px 24px 40px; }
h2 { font-size: 17px; margin: 8px 0 8px; }
section { background:#fff; border:1px solid var(--line); border-radius:8px; padding:8px 18px 14px;
  margin-bottom:14px; }
.verdict { display:flex; gap:22px; align-items:center; padding:18px 22px; border-width:0 0 0 10px;
  border-style:solid; }
.verdict.pass { border-color:var(--pass); background:#e9f6ec; }
.verdict.fail { border-color:var(--fail); background:#fdecea; }
.verdict .word { font-size:56px; font-weight:800; letter-spacing:2px; line-height:1; }
.verdict.pass .word { color:var(--pass); } .verdict.fail .word { color:var(--fail); }
.verdict p { margin:2px 0; } .headline { font-size:20px; font-weight:600; }
.numbers { color:var(--muted); }
.chip { display:inline-block; margin:4px 8px 0 0; padding:1px 9px 1px 6px; border-radius:12px;
  background:#fff; border:1px solid var(--line); font-size:13px; }
.chip i, .legend i, i.sw { display:inline-block; width:11px; height:11px; border-radius:2px;
  margin-right:5px; vertical-align:-1px; }
.facts { display:grid; grid-template-columns: max-content 1fr max-content 1fr; gap:3px 18px; margin:0; }
.facts dt { color:var(--muted); } .facts dd { margin:0; overflow-wrap:anywhere; }
.note { color:var(--muted); font-size:12.5px; margin:0 0 8px; }
.legend { list-style:none; padding:0; margin:0 0 10px; display:flex; flex-wrap:wrap; gap:4px 14px;
  font-size:12.5px; }
.legend li.absent { opacity:.38; }
.legend li[data-layer="HOLE"] i, .legend li[data-layer="PENDING"] i { border:1px solid #bbb; }
.row { display:grid; grid-template-columns: 250px 1fr; align-items:center; border-top:1px solid #f0f2f4;
  padding:3px 0; }
.row .label { display:flex; flex-direction:column; font-size:12.5px; overflow:hidden; }
.row .tp { font-weight:600; white-space:nowrap; text-overflow:ellipsis; overflow:hidden; }
.row .stats { color:var(--muted); font-size:11px; white-space:nowrap; }
.row .nf { color:var(--fail); font-weight:600; font-size:11.5px; margin-left:6px; }
.row.compact { padding:0; border:0; }
.row.compact .tp { font-weight:400; font-size:11px; color:var(--muted); }
svg.gap { display:block; width:100%; max-width:900px; height:auto; overflow:visible; }
svg.gap .ax { font-size:10.5px; fill:var(--muted); font-family:inherit; }
svg.gap .lso { stroke:#c77700; stroke-width:1.5; stroke-dasharray:3 2; }
svg.gap .lsot { fill:#c77700; }
svg.gap .beyond { fill:#fff; stroke:#17becf; stroke-dasharray:3 2; }
svg.gap .nokafka { fill:#eaf8fa; stroke:#17becf; stroke-dasharray:3 2; }
svg.gap rect.f, svg.gap path.f { stroke:#fff; stroke-width:.6; }
details.quiet { margin-top:8px; } details.quiet summary { cursor:pointer; color:var(--muted); }
table { border-collapse:collapse; width:100%; font-size:12.5px; margin-top:4px; }
th, td { text-align:left; padding:3px 8px; border-bottom:1px solid #eef1f3; vertical-align:top; }
th { color:var(--muted); font-weight:600; }
table.num td + td, td.n { font-variant-numeric: tabular-nums; }
table.num td:nth-child(n+3), table.num th:nth-child(n+3) { text-align:right; }
tr.bad td { background:#fff5f4; }
.muted { color:var(--muted); }
.kinds { margin:0 0 6px; padding-left:18px; color:var(--muted); font-size:12.5px; }
.none { font-size:15px; color:var(--pass); }
.why { color:var(--muted); font-size:11.5px; }
ol.causes { margin:0; padding-left:22px; } ol.causes li { margin:4px 0; }
tr:target td { background:#fff3c4; }
code { font-size:12px; background:#f0f2f4; padding:0 3px; border-radius:3px; }
@media print { body { background:#fff; } section { break-inside: avoid-page; } details { display:block; } }
"""
