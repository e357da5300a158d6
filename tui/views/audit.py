"""Audit: run the reconciliation in a background worker and browse its findings (eosctl.report.findings)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import ProgressBar, Static

from eosctl.base.safetext import term
from eosctl.output.finding import short_cause, standing, waiver_text
from eosctl.report.findings import DESCRIPTIONS, AuditReport, Finding
from tui import fmt
from tui.rowtable import RowTable
from tui.sources import Dashboard
from tui.styles import STYLES
from tui.tabledata import Col, Row
from tui.views.base import Prepared, TableView

COLUMNS = [
    Col("kind"),
    Col("topic"),
    Col("part", numeric=True),
    Col("offsets"),
    Col("count", numeric=True),
    Col("detail"),
]


def finding_key(i: int, f: Finding) -> str:
    return f"f{i}:{f.kind}:{f.topic}:{f.partition}:{f.first_offset}"


def hop_of(report: AuditReport) -> dict[str, int]:
    """A pipeline audited hop by hop: each input topic's hop (its index in ``report.hops``)."""
    return {t: i for i, hop in enumerate(report.hops) for t in hop.topics}


def sink_of(report: AuditReport) -> dict[str, int]:
    """A pipeline of several sinks: each sink's label, its index in ``report.sinks`` (the file's order)."""
    return {s.name: i for i, s in enumerate(report.sinks)}


def finding_rows(report: AuditReport) -> list[Row]:
    """One row per finding, grouped by sink (a pipeline of several, in the config's order) and by hop (a
    pipeline audited hop by hop, in hop order), then by root cause (the groups in the order of their first
    finding); a finding with a cause shows its root cause and cause as its detail (Enter opens the whole
    sentence next to its offsets in the Log view). A waived finding says so and is dimmed, not red: the
    config's waivers judged it, as `eosctl audit` does."""
    failing = {id(f) for f in report.failing}
    rule = {i: r.rule for r in report.root_causes for i in r.findings}
    hops = hop_of(report)
    sinks = sink_of(report)
    first: dict[str | None, int] = {}
    for i in range(len(report.findings)):
        first.setdefault(rule.get(i), i)
    order = sorted(range(len(report.findings)),
                   key=lambda i: (sinks.get(report.findings[i].sink or "", len(sinks)),
                                  hops.get(report.findings[i].topic or "", len(hops)), first[rule.get(i)], i))
    rows = []
    for i in order:
        f = report.findings[i]
        detail = finding_detail(f, rule.get(i))
        if hops and f.topic in hops:
            detail = f"hop {report.hops[hops[f.topic]].name} · {detail}"
        if f.waiver is not None:
            detail = f"{waiver_text(f)} · {detail}"
        if sinks and f.sink is not None:
            detail = f"sink {f.sink} · {detail}"
        stand = standing(report, f)
        kind = f"{f.kind} ({stand})" if stand in ("waived", "waiver expired") else f.kind
        rows.append(
            Row(
                finding_key(i, f),
                (
                    kind,
                    f.topic,
                    f.partition,
                    _offsets(f),
                    fmt.count(f.count),
                    detail,
                ),
                "bad" if id(f) in failing else "muted" if f.waived else "warn",
                f,
            )
        )
    return rows


def _offsets(f: Finding) -> str | None:
    """Its offsets, as the table shows them; None for an invalid_row (it has neither)."""
    if f.first_offset is None or f.last_offset is None:
        return None
    return fmt.offsets(f.first_offset, f.last_offset)


def finding_detail(f: Finding, rule: str | None) -> str:
    """A finding in a few words: its root cause's rule and cause, else what its kind means."""
    if f.cause is not None:
        cause = short_cause(f)
        # "replay: replay: ..." said nothing twice: a cause that starts with its rule is shown as it is.
        return cause if rule is None or cause.split(":", 1)[0] == rule else f"{rule}: {cause}"
    if f.kind == "key_duplicate":
        return f"key {f.key}: offsets {', '.join(map(str, f.offsets or ()))}"
    return f.detail or DESCRIPTIONS.get(f.kind, "")


def describe_finding(f: Finding, rule: str | None = None) -> Text:
    """A finding's whole story for the detail pane: where, how many, its cause in a few words, then the
    cause's whole sentence (the table's detail cell is cut to fit the screen; this never is)."""
    where = f"{f.topic}[{f.partition}]" if f.topic is not None else "rows no partition owns"
    offsets = _offsets(f)
    if offsets is not None:
        where += f" offsets {offsets}"
    t = Text()
    t.append(f"{f.kind} ", style="bold")
    t.append(f"{term(where)} · {fmt.count(f.count)}")
    short = finding_detail(f, rule)
    if short:
        t.append(f"\n{term(short)}")
    if f.cause is not None and f.cause.summary:
        t.append(f"\ncause: {term(f.cause.summary)}")
    if f.sink is not None:
        t.append(f"\nin sink {term(f.sink)}")
    if f.waiver is not None:
        t.append(f"\n{term(waiver_text(f))}", style=STYLES["muted"] if f.waived else STYLES["bad"])
    if f.first_offset is not None:
        t.append("\nEnter opens these offsets in the Log view", style=STYLES["muted"])
    return t


def headline(report: AuditReport | None, taken_at: float | None = None) -> Text:
    if report is None:
        return Text("no audit yet: press a to run one (it reads the sink and the source log)")
    t = Text()
    passed = report.verdict == "pass"
    t.append(" PASS " if passed else " FAIL ", style="bold reverse green" if passed else "bold reverse red")
    n = len(report.findings)
    expected = sum(p.expected_records for p in report.partitions)
    rows = sum(p.sink_rows for p in report.partitions)
    t.append(
        f" {n} finding{'s' if n != 1 else ''} · {len(report.partitions)} partitions · "
        f"{expected:,} expected · {rows:,} sink rows"
    )
    if report.elapsed_seconds is not None:
        t.append(f" · {report.elapsed_seconds:.1f}s")
    for hop in report.hops:  # a pipeline audited hop by hop: each hop's own verdict, in order
        ok = hop.verdict == "pass"
        t.append("\n")
        t.append(" PASS " if ok else " FAIL ", style="green" if ok else "red")
        t.append(f" hop {term(hop.name)}: {term(', '.join(hop.topics))} -> {term(hop.sink or '-')} · "
                 f"{hop.findings} finding{'s' if hop.findings != 1 else ''}"
                 f" ({hop.failing_findings} failing)")
    for label in report.sinks:  # a pipeline of several sinks: each sink's verdict, by its findings now
        mine = [f for f in report.findings if f.sink == label.name]
        bad = sum(1 for f in report.failing if f.sink == label.name)
        waived = sum(1 for f in mine if f.waived)
        t.append("\n")
        t.append(" FAIL " if bad else " PASS ", style="red" if bad else "green")
        t.append(f" sink {term(label.name)}: {term(label.sink or '-')} · {len(mine)} "
                 f"finding{'s' if len(mine) != 1 else ''} ({bad} failing"
                 + (f", {waived} waived" if waived else "") + ")")
    waived = sum(1 for f in report.findings if f.waived)
    if waived and not report.sinks:
        t.append(f"\n{waived} finding{'s' if waived != 1 else ''} waived ([audit] waivers)",
                 style=STYLES["muted"])
    if report.sink:
        t.append(f"\nsink {term(report.sink)}", style=STYLES["muted"])
        if report.sink_read_point is not None:
            t.append(f" · read at {term(report.sink_read_point.describe())}",
                     style=STYLES["muted"])
    return t


class AuditView(TableView):
    """The findings of the last audit. Rows are drawn on demand (tui.rowtable), so 100k findings cost what
    the screen shows; formatting them runs in the audit worker (or the fetch worker), not the UI thread.

    To show something else per row (e.g. findings grouped by root cause), return other rows from `rows`
    with the object Enter should open as each Row's item, and dispatch on its type in `selected`."""

    NAME = "audit"
    COLUMNS = COLUMNS
    # Before any audit: what to do, not "no findings" (that is an audit's result).
    EMPTY = "no audit yet: press a to run one"
    AUDITED_EMPTY = "no findings"

    class OpenLog(Message):
        """Enter on a finding: show its offsets in the Log view."""

        def __init__(self, finding: Finding) -> None:
            super().__init__()
            self.finding = finding

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.running = False
        self._prepared: Prepared | None = None  # the last report formatted by `prepare`
        self._rules_of: AuditReport | None = None
        self._rule: dict[int, str] = {}

    @property
    def report(self) -> AuditReport | None:
        return self.source

    def compose_extra(self) -> ComposeResult:
        with Horizontal(id="audit-progress"):
            yield ProgressBar(total=1.0, show_eta=False, id="audit-bar")
            yield Static("", id="audit-msg")

    def on_mount(self) -> None:
        self.query_one("#audit-head", Static).update(headline(None))

    def rows(self, report: AuditReport) -> list[Row]:
        return finding_rows(report)

    def headline(self, report: AuditReport) -> Text:
        return headline(report)

    def prepare(self, dash: Dashboard) -> Prepared | None:
        """A new report in the data (a snapshot's stored audit); None keeps what is shown."""
        report = dash.audit
        if report is None or report is self.source or self.running:
            return None
        cached = self._prepared
        if cached is None or cached.source is not report:  # formatted once, not on every refresh
            cached = self._prepared = self.prepare_source(report)
        return cached

    def set_report(self, report: AuditReport) -> None:
        self.present(self.prepare_source(report))

    def present(self, prepared: Prepared | None) -> None:
        if prepared is not None:  # an audit's report: from here an empty table means no findings
            self._audited()
        super().present(prepared)

    def _audited(self) -> None:
        for table in self.query(RowTable):
            table.empty = self.AUDITED_EMPTY

    def set_running(self, running: bool, message: str = "") -> None:
        self.running = running
        self.set_class(running, "running")
        bar = self.query_one("#audit-bar", ProgressBar)
        if running:
            bar.update(total=None, progress=0)
            self.query_one("#audit-head", Static).update(
                Text("auditing… (the UI stays usable)", style="bold")
            )
        self.query_one("#audit-msg", Static).update(Text(term(message)))

    def set_progress(self, fraction: float | None, message: str) -> None:
        bar = self.query_one("#audit-bar", ProgressBar)
        if fraction is None:
            bar.update(total=None)
        else:
            bar.update(total=1.0, progress=max(0.0, min(1.0, fraction)))
        self.query_one("#audit-msg", Static).update(Text(term(message)))

    def set_error(self, message: str) -> None:
        self.set_running(False)
        self.query_one("#audit-head", Static).update(
            Text(f"audit failed: {term(message)}", style=STYLES["bad"])
        )

    def describe(self, finding: Finding) -> Text:
        report = self.report
        rule = None
        if report is not None and finding.cause is not None:
            rule = self._rules(report).get(id(finding))
        return describe_finding(finding, rule)

    def _rules(self, report: AuditReport) -> dict[int, str]:
        """Each finding's root-cause rule, by the finding's identity (computed once per report)."""
        if self._rules_of is not report:
            causes = report.root_causes
            self._rule = {id(report.findings[i]): r.rule for r in causes for i in r.findings}
            self._rules_of = report
        return self._rule

    def selected(self, finding: Finding) -> None:
        if finding.first_offset is not None:  # invalid_row has no offsets to show
            self.post_message(self.OpenLog(finding))
