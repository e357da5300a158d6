"""The eosctl TUI: seven tabs over one Dashboard, the keys and palette commands that move between them, and
the workers behind the Log and Audit tabs. When the Dashboard is refreshed (thread workers, retries, the
slow-broker banner, the status line) is tui.schedule's part of the app."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Static, TabbedContent, TabPane
from textual.worker import Worker, WorkerState

from eosctl.base.progress import Step
from eosctl.base.safetext import term
from tui.schedule import Scheduled, one_line
from tui.screens import HelpScreen
from tui.sources import Dashboard, DataSource
from tui.views.audit import AuditView
from tui.views.base import View
from tui.views.lag import LagView
from tui.views.ledger import LedgerView
from tui.views.log import Focus, LogView
from tui.views.overview import OverviewView
from tui.views.producers import ProducersView
from tui.views.transactions import TransactionsView

# (pane id, tab label, view class): the order is the 1-7 keys.
VIEWS: list[tuple[str, str, type[View]]] = [
    ("overview", "Overview", OverviewView),
    ("transactions", "Transactions", TransactionsView),
    ("producers", "Producers", ProducersView),
    ("lag", "Lag", LagView),
    ("log", "Log", LogView),
    ("ledger", "Ledger", LedgerView),
    ("audit", "Audit", AuditView),
]


class EosApp(Scheduled):
    CSS_PATH = "app.tcss"
    TITLE = "eosctl"
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("r", "refresh_now", "Refresh"),
        Binding("p", "toggle_pause", "Pause"),
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("question_mark", "help", "Help", key_display="?"),
        # An app binding (shown on the Audit tab only), so `a` right after `7` works before focus moves.
        Binding("a", "run_audit", "Run audit"),
        *[
            Binding(str(i + 1), f"show_tab('{pane}')", label, show=False)
            for i, (pane, label, _) in enumerate(VIEWS)
        ],
    ]

    def __init__(
        self, source: DataSource, refresh_seconds: float = 5.0, clock: Callable[[], float] = time.time
    ) -> None:
        super().__init__(source, refresh_seconds, clock)
        self.stale: set[str] = set()  # views that have not seen the current Dashboard yet
        self.prepared: dict[str, Any] = {}  # pane -> what its view's `prepare` made of self.dash
        self.active = VIEWS[0][0]  # the visible tab
        self._views: dict[str, View] = {}
        self.last_apply_seconds: float | None = None  # UI-thread time of the last refresh, for the report

    # ---- layout -----------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static(self._status_text(), id="status")
        yield Static("", id="banner")
        with TabbedContent(id="tabs"):
            for pane, label, cls in VIEWS:
                with TabPane(label, id=pane):
                    yield cls(id=f"view-{pane}")
        yield Footer()

    def on_mount(self) -> None:
        self._views = {pane: self.query_one(f"#view-{pane}", View) for pane, _, _ in VIEWS}
        if self.source.is_snapshot:
            self.add_class("snapshot")
        self.start_schedule()

    def views(self) -> list[View]:
        return [self.view(pane) for pane, _, _ in VIEWS]

    def view(self, pane: str) -> View:
        return self._views.get(pane) or self.query_one(f"#view-{pane}", View)

    # ---- what a refresh does -------------------------------------------------------------------------

    def prepare(self, dash: Dashboard) -> dict[str, Any]:
        """Format `dash` for every tab: the fetch worker's job, since at 10k partitions (or 100k findings)
        formatting a table costs more than the UI thread may spend on a refresh; so a tab opened between
        refreshes shows at once too. Rows that did not change reuse their formatted text."""
        return {pane: view.prepare(dash) for pane, view in self._views.items()}

    def worker_changed(self, worker: Worker) -> None:
        if worker.group == "log":
            self._log_done(worker)
        elif worker.group == "records":
            self._records_done(worker)
        elif worker.group == "audit":
            self._audit_done(worker)

    def apply(self, dash: Dashboard, prepared: dict[str, Any] | None = None) -> None:
        """Hand fresh data to the views (UI thread: what `prepare` made of it is swapped in)."""
        started = time.perf_counter()
        self.dash = dash
        self.prepared = prepared or {}
        # Only the visible view formats now; the others catch up when their tab is opened, so one refresh
        # costs one table's worth of UI time however many tabs there are.
        self.stale = {pane for pane, _, _ in VIEWS}
        self._show_view(self.query_one(TabbedContent).active or VIEWS[0][0])
        self._show_view("overview")  # cheap, and the status colour matters everywhere
        warnings = [f"{k}: {v}" for k, v in sorted(dash.errors.items())]
        if dash.unreadable:
            warnings.insert(0, dash.unreadable)
        if warnings:
            self._banner("; ".join(warnings), level="warn")
        self.last_apply_seconds = time.perf_counter() - started
        self._status()

    def fetch_failed(self, error: str) -> None:
        """No reading yet: the Overview still names the pipeline the TUI was started for, with why it could
        not be read (no Read on its topic, the broker away), not "no pipeline"."""
        if self.dash is None:
            self.view("overview").unread(self.source.pipeline, error)

    def _show_view(self, pane: str) -> None:
        if self.dash is None or pane not in self.stale:
            return
        self.stale.discard(pane)
        view = self.view(pane)
        try:
            if pane in self.prepared:
                view.present(self.prepared.pop(pane))
            else:  # a tab opened between refreshes formats here, once
                view.show(self.dash)
        except Exception as e:  # one view's bug must not take the dashboard down mid-incident
            self.log.error(f"{pane} failed to render", e)
            self.notify(f"{pane}: cannot render ({one_line(e)})", severity="error", markup=False)

    @on(TabbedContent.TabActivated)
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if event.pane.id:
            self.active = event.pane.id
            self.refresh_bindings()
            self._show_view(event.pane.id)

    # ---- actions ----------------------------------------------------------------------------------

    def action_show_tab(self, pane: str) -> None:
        self.query_one(TabbedContent).active = pane
        self.active = pane
        self.refresh_bindings()
        self._show_view(pane)
        table = self.view(pane).filter_table()
        if table is not None:
            table.table.focus()

    def action_filter(self) -> None:
        table = self.current_view().filter_table()
        if table is not None:
            table.start_filter()

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def current_view(self) -> View:
        return self.view(self.query_one(TabbedContent).active or VIEWS[0][0])

    def get_system_commands(self, screen: Screen) -> Any:
        yield from super().get_system_commands(screen)
        for i, (pane, label, _) in enumerate(VIEWS):
            yield SystemCommand(
                f"Show {label}",
                f"Switch to the {label} view (key {i + 1})",
                lambda pane=pane: self.action_show_tab(pane),
            )
        yield SystemCommand("Refresh now", "Read the cluster again (key r)", self.action_refresh_now)
        yield SystemCommand("Pause / resume auto-refresh", "Key p", self.action_toggle_pause)
        yield SystemCommand(
            "Run audit", "Reconcile source offsets with the sink (Audit view, key a)", self._palette_audit
        )

    def _palette_audit(self) -> None:
        self.action_show_tab("audit")
        self.run_audit()

    # ---- log view ---------------------------------------------------------------------------------

    @on(LogView.Wanted)
    def _log_wanted(self, event: LogView.Wanted) -> None:
        self.view("log").query_one("#log-summary", Static).update(
            Text(f"reading {term(event.topic)}[{event.partition}]…", style="italic")
        )
        self._log_worker(event.topic, event.partition, event.around)

    @work(thread=True, group="log", exclusive=True, exit_on_error=False)
    def _log_worker(self, topic: str, partition: int, around: int | None) -> Any:
        return self.source.partition_log(topic, partition, around)

    def _log_done(self, worker: Worker) -> None:
        view = self.view("log")
        assert isinstance(view, LogView)
        if worker.state is WorkerState.SUCCESS:
            view.show_log(worker.result)
        elif worker.state is WorkerState.ERROR:
            view.query_one("#log-summary", Static).update(
                Text(f"cannot read the log: {term(one_line(worker.error))}", style="bold red")
            )

    @on(LogView.RecordsWanted)
    def _records_wanted(self, event: LogView.RecordsWanted) -> None:
        self._records_worker(event.topic, event.partition, event.first, event.end)

    @work(thread=True, group="records", exclusive=True, exit_on_error=False)
    def _records_worker(self, topic: str, partition: int, first: int, end: int) -> Any:
        reader = getattr(self.source, "records", None)
        return topic, partition, first, reader(topic, partition, first, end) if reader is not None else []

    def _records_done(self, worker: Worker) -> None:
        view = self.view("log")
        assert isinstance(view, LogView)
        if worker.state is WorkerState.SUCCESS:
            view.show_records(*worker.result)
        elif worker.state is WorkerState.ERROR:
            view.query_one("#log-summary", Static).update(
                Text(f"cannot read the records: {term(one_line(worker.error))}", style="bold red")
            )

    def open_log(self, topic: str, partition: int, first: int, last: int, why: Text | None = None) -> None:
        self.action_show_tab("log")
        view = self.view("log")
        assert isinstance(view, LogView)
        view.open(topic, partition, Focus(first, last), why)

    @on(LedgerView.OpenLog)
    def _open_ledger(self, event: LedgerView.OpenLog) -> None:
        self.open_log(event.topic, event.partition, event.first, event.last)

    @on(ProducersView.OpenLog)
    def _open_producer(self, event: ProducersView.OpenLog) -> None:
        if event.offset is None:
            self.action_show_tab("log")
            view = self.view("log")
            assert isinstance(view, LogView)
            view.open(event.topic, event.partition)
        else:
            self.open_log(event.topic, event.partition, event.offset, event.offset)

    @on(AuditView.OpenLog)
    def _open_finding(self, event: AuditView.OpenLog) -> None:
        f = event.finding
        why = None if f.cause is None else Text(term(f"cause: {f.cause.summary}"), style="yellow")
        self.open_log(f.topic, f.partition, f.first_offset, f.last_offset, why)

    # ---- audit ------------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "run_audit":
            return self.active == "audit"
        return True

    def action_run_audit(self) -> None:
        self.run_audit()

    def run_audit(self) -> None:
        view = self.view("audit")
        assert isinstance(view, AuditView)
        why_not = self.source.can_audit()
        if why_not:
            self.notify(why_not, severity="warning", markup=False)
            return
        if view.running:
            self.notify("an audit is already running")
            return
        view.set_running(True, "starting…")
        self._audit_worker()

    @work(thread=True, group="audit", exclusive=True, exit_on_error=False)
    def _audit_worker(self) -> Any:
        view = self.view("audit")
        assert isinstance(view, AuditView)

        def progress(step: Step) -> None:
            self.call_from_thread(view.set_progress, step.fraction, step.what)

        # The findings are formatted here too: 100k of them take the UI thread no time.
        return view.prepare_source(self.source.run_audit(progress))

    def _audit_done(self, worker: Worker) -> None:
        view = self.view("audit")
        assert isinstance(view, AuditView)
        if worker.state is WorkerState.SUCCESS:
            view.set_running(False)
            view.present(worker.result)
            if self.dash is not None:
                self.dash.capture.audit = worker.result.source
                self.view("overview").show(self.dash)
        elif worker.state is WorkerState.ERROR:
            view.set_error(one_line(worker.error))
        elif worker.state is WorkerState.CANCELLED:
            view.set_running(False)

