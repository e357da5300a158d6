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

import json
import platform
from dataclasses import dataclass
from datetime import datetime

from eosctl import __version__
from eosctl.cluster.model import TP
from eosctl.output import gapmap as gapmap
from eosctl.output.finding import short_cause, standing, waiver_text
from eosctl.output.gapmap import FINDING_COLOURS, FULL_ROWS
from eosctl.output.htmltext import cell as _t
from eosctl.output.htmltext import escape
from eosctl.output.htmltext import number as _n
from eosctl.output.htmltext import prose as _prose
from eosctl.report.findings import (
    DESCRIPTIONS,
    KINDS,
    PASS,
    AuditReport,
    Finding,
    PartitionSummary,
)

MAX_FINDING_ROWS = 2000  # the findings table stops here; the embedded JSON keeps every finding

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
        gapmap.section(report, by_tp, rows),
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
    waived = sum(1 for f in report.findings if f.waived)
    ignored = len(report.findings) - failing - waived
    parts = len(report.partitions)
    expected = sum(p.expected_records for p in report.partitions)
    rows = sum(p.sink_rows for p in report.partitions)
    unverifiable = sum(p.unverifiable_below for p in report.partitions)
    if report.verdict == PASS:
        headline = "every committed record is in the sink exactly once" if not report.findings else (
            "no failing findings (" + ", ".join(x for x in (
                f"{ignored} ignored by --fail-on or a level" if ignored else "",
                f"{waived} waived" if waived else "") if x) + ")")
    else:
        headline = (f"{failing} failing finding{'s' * (failing != 1)} in {len(by_tp)} of {parts} "
                    f"partition{'s' * (parts != 1)}" + (f", {ignored} ignored" if ignored else "")
                    + (f", {waived} waived" if waived else ""))
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
        *([("sink read at", report.sink_read_point.describe())] if report.sink_read_point is not None
          else []),
        ("engine", _engine(engine)),
        ("versions", " · ".join(versions)),
        ("audited at", when),
        ("audit took", took),
        ("--fail-on", fail_on),
        *([("window judged", report.window.describe())] if report.window is not None else []),
        *[(f"sink {s.name}", f"{s.sink or '-'}: {s.verdict.upper()}, {s.findings} findings")
          for s in report.sinks],
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
    causes = report.root_causes
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


def _partitions(report: AuditReport, by_tp: dict[TP, list[Finding]]) -> str:
    head = ("<tr><th>topic</th><th>partition</th><th>log start</th><th>LSO</th><th>HW</th>"
            "<th>expected</th><th>sink rows</th><th>unverifiable</th><th>findings</th></tr>")

    def row(p: PartitionSummary) -> str:
        n = len(by_tp.get((p.topic, p.partition), []))
        note = "" if p.exists else ' <span class="muted">(not in Kafka)</span>'
        if p.sink is not None:  # one of several sinks: its findings are counted with the partition's
            n = sum(1 for f in by_tp.get((p.topic, p.partition), []) if f.sink == p.sink)
            note += f' <span class="muted">(sink {_t(p.sink)})</span>'
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
        if f.sink is not None:
            part = f"{f.sink}: {part}"
        detail = "; ".join(x for x in (
            "at " + ", ".join(map(str, f.offsets)) if f.offsets else "", f.detail or "", waiver_text(f)) if x)
        state = standing(report, f)
        ignored = f' <span class="muted">({escape(state)})</span>' if state else ""
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
