"""The eosctl TUI: seven tabs over one Dashboard, the keys and palette commands that move between them, the
workers behind the Log and Audit tabs, and the app's lifecycle in a terminal (``EosApp.serve``, with the
process's way out injected as a tui.ending.Ending). When the Dashboard is refreshed (thread workers,
retries, the slow-broker banner, the status line) is tui.schedule's part of the app."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.message import Message
from textual.reactive import var
from textual.screen import Screen
from textual.widgets import Footer, Static, TabbedContent, TabPane
from textual.worker import Worker, get_current_worker

from eosctl.base.errors import EosctlError
from eosctl.base.progress import Step
from eosctl.base.safetext import term
from eosctl.cluster.model import PartitionLog
from tui.ending import QUIT_GRACE_S, Ending, WorkerThreads
from tui.schedule import Banner, Scheduled, one_line
from tui.screens import HelpScreen
from tui.sources import Dashboard, DataSource
from tui.views.audit import AuditView
from tui.views.base import Prepared, View
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
    """The dashboard over ``source``, refreshed every ``refresh_seconds``. ``ending``: how the process ends
    (given by `eosctl tui`); without one (the tests) the app never ends its process and runs its workers on
    Textual's own executor."""

    CSS_PATH = "app.tcss"  # next to this module, whoever subclasses the app
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

    # The visible tab: the `a` binding is shown on the Audit tab only, and a tab formats when it opens.
    active: var[str] = var(VIEWS[0][0], bindings=True)

    class LogRead(Message):
        """The Log tab's worker read a page of a partition's log."""

        def __init__(self, worker: Worker, log: PartitionLog) -> None:
            super().__init__()
            self.worker = worker
            self.log = log

    class LogFailed(Message):
        """The Log tab's worker could not read the log; ``error`` says why in one line."""

        def __init__(self, worker: Worker, error: str) -> None:
            super().__init__()
            self.worker = worker
            self.error = error

    class RecordsRead(Message):
        """The Log tab's records worker read the data records of (topic, partition) from ``first``."""

        def __init__(self, topic: str, partition: int, first: int, records: list[dict[str, Any]]) -> None:
            super().__init__()
            self.topic, self.partition, self.first, self.records = topic, partition, first, records

    class RecordsFailed(Message):
        """The Log tab's records worker could not read them; ``error`` says why in one line."""

        def __init__(self, worker: Worker, error: str) -> None:
            super().__init__()
            self.worker = worker
            self.error = error

    class Audited(Message):
        """The audit the user started is done: its report, formatted for the Audit tab."""

        def __init__(self, prepared: Prepared) -> None:
            super().__init__()
            self.prepared = prepared

    class AuditFailed(Message):
        """The audit the user started failed; ``error`` says why in one line."""

        def __init__(self, error: str) -> None:
            super().__init__()
            self.error = error

    def __init__(
        self, source: DataSource, refresh_seconds: float = 5.0, clock: Callable[[], float] = time.time,
        ending: Ending | None = None,
    ) -> None:
        super().__init__(source, refresh_seconds, clock)
        self.ending = ending
        self.stale: set[str] = set()  # views that have not seen the current Dashboard yet
        self.prepared: dict[str, Any] = {}  # pane -> what its view's `prepare` made of self.dash
        self._views: dict[str, View] = {}
        self.last_apply_seconds: float | None = None  # UI-thread time of the last refresh, for the report

    # ---- lifecycle ----------------------------------------------------------------------------------

    def serve(self) -> int:
        """Run in this terminal until `q` or a stop signal; the status to exit with. A signal is raised
        again once the terminal is restored (see Ending.signals_quit); the source is closed however the
        app ends, and threads still running once the interpreter exits get Ending.at_exit's grace."""
        ending = self.ending = self.ending or Ending()
        try:
            with ending.signals_quit(self):
                self.run()
            ending.settle(self.return_code or 0)
        except EosctlError:
            ending.settle(2)
            raise
        finally:
            ending.stop_work()
            close = getattr(self.source, "close", None)  # a live source's admin clients, kept open
            if close is not None:
                close()
            ending.at_exit()
        return self.return_code or 0

    def on_load(self) -> None:
        if self.ending is not None:
            # Thread workers run on the loop's default executor, which asyncio.run() joins when the app
            # ends: see WorkerThreads.
            import asyncio  # lazy: see docs/imports.md

            asyncio.get_running_loop().set_default_executor(WorkerThreads())

    async def action_quit(self) -> None:
        if self.ending is not None:
            self.ending.within(QUIT_GRACE_S)
        await super().action_quit()

    def on_unmount(self) -> None:
        # An audit the user started runs in a thread worker, which neither `q` nor a signal stops, and the
        # app's loop waits for that thread before it returns: stop what the audit started (its pool or
        # JVM) first, so that the worker fails at once.
        if self.ending is not None:
            self.ending.stop_work()

    # ---- layout -----------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static(self.status, id="status")
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

    # The views the app talks to beyond View's own methods, typed.

    @property
    def overview_view(self) -> OverviewView:
        return self.query_one("#view-overview", OverviewView)

    @property
    def log_view(self) -> LogView:
        return self.query_one("#view-log", LogView)

    @property
    def audit_view(self) -> AuditView:
        return self.query_one("#view-audit", AuditView)

    # ---- what a refresh does -------------------------------------------------------------------------

    def prepare(self, dash: Dashboard) -> dict[str, Any]:
        """Format `dash` for every tab: the fetch worker's job, since at 10k partitions (or 100k findings)
        formatting a table costs more than the UI thread may spend on a refresh; so a tab opened between
        refreshes shows at once too. Rows that did not change reuse their formatted text."""
        return {pane: view.prepare(dash) for pane, view in self._views.items()}

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
            self.banner = Banner("; ".join(warnings), level="warn")
        self.last_apply_seconds = time.perf_counter() - started

    def fetch_failed(self, error: str) -> None:
        """No reading yet: the Overview still names the pipeline the TUI was started for, with why it could
        not be read (no Read on its topic, the broker away), not "no pipeline"."""
        if self.dash is None:
            self.overview_view.unread(self.source.pipeline, error)

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

    def watch_active(self, pane: str) -> None:
        self._show_view(pane)

    # ---- actions ----------------------------------------------------------------------------------

    def action_show_tab(self, pane: str) -> None:
        self.query_one(TabbedContent).active = pane
        self.active = pane
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
        self.log_view.query_one("#log-summary", Static).update(
            Text(f"reading {term(event.topic)}[{event.partition}]…", style="italic")
        )
        self._log_worker(event.topic, event.partition, event.around)

    @work(thread=True, group="log", exclusive=True, exit_on_error=False)
    def _log_worker(self, topic: str, partition: int, around: int | None) -> None:
        worker = get_current_worker()
        try:
            log = self.source.partition_log(topic, partition, around)
        except Exception as e:  # the Log tab says why; the app goes on
            self.post_message(self.LogFailed(worker, one_line(e)))
        else:
            self.post_message(self.LogRead(worker, log))

    @on(LogRead)
    def _log_read(self, event: LogRead) -> None:
        if not self._shutting_down() and not event.worker.is_cancelled:  # not a page another one replaced
            self.log_view.show_log(event.log)

    @on(LogFailed)
    def _log_failed(self, event: LogFailed) -> None:
        if not self._shutting_down() and not event.worker.is_cancelled:
            self.log_view.query_one("#log-summary", Static).update(
                Text(f"cannot read the log: {term(event.error)}", style="bold red")
            )

    @on(LogView.RecordsWanted)
    def _records_wanted(self, event: LogView.RecordsWanted) -> None:
        self._records_worker(event.topic, event.partition, event.first, event.end)

    @work(thread=True, group="records", exclusive=True, exit_on_error=False)
    def _records_worker(self, topic: str, partition: int, first: int, end: int) -> None:
        worker = get_current_worker()
        reader = getattr(self.source, "records", None)
        try:
            records = reader(topic, partition, first, end) if reader is not None else []
        except Exception as e:  # the Log tab says why; the app goes on
            self.post_message(self.RecordsFailed(worker, one_line(e)))
        else:
            self.post_message(self.RecordsRead(topic, partition, first, records))

    @on(RecordsRead)
    def _records_read(self, event: RecordsRead) -> None:
        if not self._shutting_down():  # the view drops records of a range it no longer shows
            self.log_view.show_records(event.topic, event.partition, event.first, event.records)

    @on(RecordsFailed)
    def _records_failed(self, event: RecordsFailed) -> None:
        if not self._shutting_down() and not event.worker.is_cancelled:
            self.log_view.query_one("#log-summary", Static).update(
                Text(f"cannot read the records: {term(event.error)}", style="bold red")
            )

    def open_log(self, topic: str, partition: int, first: int, last: int, why: Text | None = None) -> None:
        self.action_show_tab("log")
        self.log_view.open(topic, partition, Focus(first, last), why)

    @on(LedgerView.OpenLog)
    def _open_ledger(self, event: LedgerView.OpenLog) -> None:
        self.open_log(event.topic, event.partition, event.first, event.last)

    @on(ProducersView.OpenLog)
    def _open_producer(self, event: ProducersView.OpenLog) -> None:
        if event.offset is None:
            self.action_show_tab("log")
            self.log_view.open(event.topic, event.partition)
        else:
            self.open_log(event.topic, event.partition, event.offset, event.offset)

    @on(AuditView.OpenLog)
    def _open_finding(self, event: AuditView.OpenLog) -> None:
        f = event.finding
        if f.topic is None or f.partition is None or f.first_offset is None or f.last_offset is None:
            return  # no offsets to show (the view sends none such: an invalid row no partition owns)
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
        view = self.audit_view
        why_not = self.source.can_audit()
        if why_not:
            self.notify(why_not, severity="warning", markup=False)
            return
        if view.running:
            self.notify("an audit is already running")
            return
        view.set_running(True, "starting…")
        self._audit_worker(view)

    @work(thread=True, group="audit", exclusive=True, exit_on_error=False)
    def _audit_worker(self, view: AuditView) -> None:
        def progress(step: Step) -> None:
            self.call_from_thread(view.set_progress, step.fraction, step.what)

        try:
            # The findings are formatted here too: 100k of them take the UI thread no time.
            prepared = view.prepare_source(self.source.run_audit(progress))
        except Exception as e:  # the Audit tab says why; the app goes on
            self.post_message(self.AuditFailed(one_line(e)))
        else:
            self.post_message(self.Audited(prepared))

    @on(Audited)
    def _audited(self, event: Audited) -> None:
        if self._shutting_down():
            return
        view = self.audit_view
        view.set_running(False)
        view.present(event.prepared)
        if self.dash is not None:
            self.dash.capture.audit = event.prepared.source
            self.overview_view.show(self.dash)

    @on(AuditFailed)
    def _audit_failed(self, event: AuditFailed) -> None:
        if not self._shutting_down():
            self.audit_view.set_error(event.error)

