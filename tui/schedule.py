"""The TUI's refresh schedule: when the app reads its source again (every refresh period, sooner after a
failure, never while paused or for a snapshot), the thread worker that reads and formats it so the UI
never blocks, and what the status line and the banner say about it (refreshing, paused, the slow broker,
the last error).

``Scheduled`` is the App's half that keeps time; ``tui.app.EosApp`` adds the screens and the navigation,
and says what a refresh is for: ``prepare`` (in the worker) and ``apply`` (on the UI thread). What the status
line says is computed from the reactive state below (``compute_status``) and drawn by its watcher; the
worker hands its result back as a message (``Fetched``, ``FetchFailed``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import App
from textual.message import Message
from textual.reactive import var
from textual.widgets import Static

from eosctl.base.safetext import term
from tui import fmt
from tui.sources import Dashboard, DataSource

# After a failed refresh, retry sooner than the refresh period (but never hammer a sick broker).
RETRY_SECONDS = 3.0
# A refresh still running after this long gets the "slow broker" banner.
SLOW_SECONDS = 8.0
# The data shown is marked STALE in the status line once older than STALE_FACTOR refresh periods (never
# before STALE_MIN_SECONDS), or at once when the last refresh failed: a slow link that has not failed yet
# is visible as such, as the exporter's eosctl_stale and lag --watch's STALE title say it.
STALE_FACTOR = 3.0
STALE_MIN_SECONDS = 10.0


@dataclass(frozen=True)
class Banner:
    """The line under the status line: an error (red) or a warning (``warn``: amber)."""

    message: str
    level: str = "error"


class Scheduled(App[None]):
    """An App refreshed from a DataSource on a schedule (see the module's docstring)."""

    # The Dashboard shown (None: no reading yet); never compared when set (10k partitions).
    dash: var[Dashboard | None] = var(None, always_update=True)
    paused: var[bool] = var(False)
    error: var[str | None] = var(None)  # the last refresh's failure, in one line; None after a success
    fetching_since: var[float | None] = var(None)  # when the refresh under way started
    now: var[float] = var(0.0)  # the 1 s tick's reading of the clock: the status line's age moves with it
    banner: var[Banner | None] = var(None)
    status: var[Text] = var(Text)  # computed (compute_status)

    class Fetched(Message):
        """A refresh read the source: the Dashboard and what ``prepare`` made of it."""

        def __init__(self, dash: Dashboard, prepared: Any) -> None:
            super().__init__()
            self.dash = dash
            self.prepared = prepared

    class FetchFailed(Message):
        """A refresh failed; ``error`` says why in one line."""

        def __init__(self, error: str) -> None:
            super().__init__()
            self.error = error

    def __init__(
        self, source: DataSource, refresh_seconds: float = 5.0, clock: Callable[[], float] = time.time
    ) -> None:
        super().__init__()
        self.source = source
        self.refresh_seconds = max(0.5, refresh_seconds)
        self.clock = clock
        self.next_fetch_at = 0.0

    # ---- what a refresh is for: the app's screens say ----------------------------------------------

    def prepare(self, dash: Dashboard) -> Any:
        """What the worker makes of a fresh Dashboard off the UI thread, handed to ``apply``."""
        raise NotImplementedError

    def apply(self, dash: Dashboard, prepared: Any = None) -> None:
        """Hand a fresh Dashboard to the screens (UI thread)."""
        raise NotImplementedError

    def fetch_failed(self, error: str) -> None:
        """A live refresh failed with ``error`` (UI thread; the banner says so already)."""

    # ---- the schedule -----------------------------------------------------------------------------

    def start_schedule(self) -> None:
        """The first refresh now, then a cheap 1 s tick that decides when to refresh and keeps the status
        line's clock honest."""
        self.fetch()
        self.set_interval(1.0, self._tick)

    def _shutting_down(self) -> bool:
        """The 1 s tick and a finishing worker can land while the app shuts down (widgets going or gone)."""
        return not self.is_running

    def _tick(self) -> None:
        if self._shutting_down():
            return
        now = self.now = self.clock()
        if self.fetching_since is not None and now - self.fetching_since > SLOW_SECONDS:
            self.banner = Banner(
                f"the broker is slow: no answer for {now - self.fetching_since:.0f}s "
                f"(still trying; showing data from {fmt.clock(self.dash.taken_at if self.dash else None)})"
            )
        elif (
            not self.source.is_snapshot
            and not self.paused
            and self.fetching_since is None
            and now >= self.next_fetch_at
        ):
            self.fetch()

    def fetch(self) -> None:
        if self.fetching_since is not None:
            return
        self.fetching_since = self.clock()
        self._fetch_worker()

    @work(thread=True, group="fetch", exit_on_error=False)
    def _fetch_worker(self) -> None:
        try:
            dash = self.source.fetch()
            prepared = self.prepare(dash)
        except Exception as e:  # a refresh that fails is the banner's news, never the app's end
            self.post_message(self.FetchFailed(one_line(e)))  # post_message is thread-safe
        else:
            self.post_message(self.Fetched(dash, prepared))

    @on(Fetched)
    def _fetched(self, event: Fetched) -> None:
        if self._shutting_down():
            return
        self.fetching_since = None
        self.error = None
        self.banner = None
        self.next_fetch_at = self.clock() + self.refresh_seconds
        self.apply(event.dash, event.prepared)

    @on(FetchFailed)
    def _fetch_failed(self, event: FetchFailed) -> None:
        if self._shutting_down():
            return
        self.fetching_since = None
        self.error = event.error
        self.next_fetch_at = self.clock() + min(RETRY_SECONDS, self.refresh_seconds)
        if self.source.is_snapshot:
            self.banner = Banner(f"cannot open the snapshot: {self.error}")
        else:
            since = f"; showing data from {fmt.clock(self.dash.taken_at)}" if self.dash else ""
            self.banner = Banner(
                f"{self.error} (retrying every {min(RETRY_SECONDS, self.refresh_seconds):.0f}s{since})"
            )
            self.fetch_failed(self.error)

    def action_refresh_now(self) -> None:
        if self.source.is_snapshot and self.dash is not None:
            self.notify("a snapshot does not change; nothing to refresh")
            return
        self.fetch()

    def action_toggle_pause(self) -> None:
        if self.source.is_snapshot:
            self.notify("a snapshot is never refreshed")
            return
        if self.paused:
            self.next_fetch_at = 0.0
        self.paused = not self.paused

    # ---- status line and banner --------------------------------------------------------------------

    def compute_status(self) -> Text:
        """The status line: live or snapshot, what is shown and how old, refreshing or paused. Textual
        computes it again whenever a reactive attribute of the app changes (the tick's ``now`` included)."""
        src = self.source
        t = Text()
        if src.is_snapshot:
            t.append(" SNAPSHOT ", style="bold reverse yellow")
            captured = fmt.stamp(self.dash.taken_at) if self.dash else "?"
            t.append(
                f" {term(self.dash.pipeline if self.dash else src.pipeline)} · captured {captured} · "
                f"{term(src.label)}"
            )
            return t
        t.append(" LIVE ", style="bold reverse green")
        t.append(f" {term(src.pipeline)} · {term(src.label)}")
        if self.dash:
            t.append(f" · at {fmt.clock(self.dash.taken_at)}")
            age = self.stale_for()
            if age is not None:
                t.append(" · ")
                t.append(f"STALE, {fmt.duration(age)} old", style="bold reverse red")
        if self.fetching_since is not None:
            t.append(" · refreshing…")
        elif self.paused:
            t.append(" · PAUSED (p resumes)", style="bold yellow")
        else:
            t.append(f" · every {self.refresh_seconds:g}s")
        return t

    def stale_for(self) -> float | None:
        """How old the data shown is, when it is stale (see STALE_FACTOR); None when fresh."""
        if self.dash is None or self.source.is_snapshot:
            return None
        age = max(0.0, self.clock() - self.dash.taken_at)
        limit = max(STALE_MIN_SECONDS, STALE_FACTOR * self.refresh_seconds)
        return age if self.error is not None or age > limit else None

    # The watchers find no widget while the app composes (the status is computed first then): nothing to
    # draw yet.

    def watch_status(self, status: Text) -> None:
        for line in self.query("#status").results(Static):
            line.update(status)

    def watch_banner(self, banner: Banner | None) -> None:
        for line in self.query("#banner").results(Static):
            line.set_class(banner is not None, "shown")
            line.set_class(banner is not None and banner.level == "warn", "warn")
            line.update(Text(f"! {term(banner.message)}") if banner else "")  # errors quote cluster names


def one_line(error: BaseException | None) -> str:
    """An error's first line for the banner or a notice, at most 300 characters, safe to print."""
    if error is None:
        return "unknown error"
    text = str(error).strip().splitlines()
    return term((text[0] if text else error.__class__.__name__)[:300])  # errors quote names from the cluster
