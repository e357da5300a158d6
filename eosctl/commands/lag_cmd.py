"""`eosctl lag`: consumer lag against the LSO, what is blocked by open transactions, and --watch statuses.

JSON shape (`--format json`, stable; CI parses it): docs/json.md.

A watch carries on through a broker outage, as Burrow does: a failed poll shows every partition of the
last good poll with status ERR, the reason as its cause and error, and the top-level "error"; the numbers
are those of the last good poll. The next polls reconnect, and statuses resume when the broker answers.

Exit status: 0 ok, 2 usage, config or connection error (with --watch: never for the cluster while it
runs: a watch started during an outage shows ERR with the reason from its first poll, says so once on
stderr, and carries on until the cluster answers; a bounded watch, --count N, whose N polls all failed
exits 2 with the last one's cause, and one that saw some fail ends with a line on stderr saying how many).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import click
from rich.live import Live

from eosctl.base.errors import EosctlError, first_line
from eosctl.commands.options import TIMEOUT_MS, Seconds, target_options
from eosctl.output.emit import emit
from eosctl.output.lag import lag_document, lag_renderable, outage_document, overdue_document
from eosctl.output.terminal import console as out_console


@click.command("lag")
@target_options
@click.option("--group", "-g", "groups", multiple=True,
              help="Consumer group (repeatable; default: the pipeline's group, else every group that "
                   "committed offsets for the topics).")
@click.option("--topic", "-t", "topics", multiple=True,
              help="Topic (repeatable; default: the pipeline's source topics, else all the groups' topics).")
@click.option("--watch", "interval", type=Seconds(min=0.1), default=None, metavar="SECONDS",
              help="Poll every SECONDS and show a status per partition and group.")
@click.option("--window", type=click.IntRange(min=2), default=10, show_default=True,
              help="Polls in the --watch sliding window.")
@click.option("--count", type=click.IntRange(min=1), default=None,
              help="With --watch: stop after this many polls (default: until Ctrl-C).")
@click.option("--scan-limit", type=click.IntRange(min=1), default=50_000, show_default=True,
              help="Offsets per partition read to count records behind; beyond: an upper bound.")
def lag(config: str | None, pipeline: str | None, bootstrap: str | None, fmt: str, groups: tuple[str, ...],
        topics: tuple[str, ...], interval: float | None, window: int, count: int | None,
        scan_limit: int) -> None:
    """Consumer lag the way a read_committed consumer sees it.

    \b
    lag        LSO - committed: offsets the consumer can still move over
    behind     data records in [committed, LSO): a trailing commit marker counts 0
    blocked    HW - LSO, held back by the open transaction named next to it
    time lag   age of the oldest committed record not yet consumed
    hw lag     HW - committed, what kafka-consumer-groups.sh shows, for comparison
    replica    a MirrorMaker 2 replica pipeline (sink lineage "replica"): where the group resumes
               on the replica (@offset) and the records it would process again (+N) and never
               see (-N) there (docs/audit.md, "Failover readiness")
    \b
    With --watch SECONDS, each partition and group gets a Burrow-style status over a sliding window of
    polls: OK, WARN (falling behind), STALL (no progress with records to read, or blocked by an open
    transaction: the cause says which), STOP (no active consumer), REWIND (offset went back), ERR.
    A broker outage while watching is ERR with the reason on every partition; the watch reconnects
    at each poll and carries on when the broker is back. With --count N, a watch whose N polls all
    failed exits 2 with the last cause; one that saw some fail says how many on stderr at the end.
    """
    # lazy: see docs/imports.md
    from eosctl.cluster.wire import WireClient
    from eosctl.config.target import resolve
    from eosctl.inspection.lag import poll
    from eosctl.inspection.live import LagHistory, LiveModel

    target = resolve(config, pipeline, bootstrap, topics)
    wanted_groups = list(groups) or target.lag_groups()
    wanted_topics = list(target.topics)
    if interval is None:
        with WireClient(target.cluster, timeout_ms=TIMEOUT_MS) as client:
            per_group = None if groups else dict(target.group_topics)
            doc = lag_document(poll(client, wanted_groups or None, wanted_topics or None, scan_limit,
                                    per_group=per_group))
        _with_replica(doc, target)
        _emit_document(doc, False, fmt, wanted_groups, wanted_topics)
        return
    # The watch reads the live model every interactive reader shares (eosctl.inspection.live), its lag section
    # only, with raw requests on one wire client (no librdkafka handle: see eosctl.cluster.offsets),
    # reconnected after a failed poll: a restarted broker needs new connections.
    # --timeout bounds each poll (the model renews the deadline at each refresh).
    with LiveModel(target, sections=("lag",), lag_groups=list(groups) or None, scan_limit=scan_limit,
                   timeout_ms=TIMEOUT_MS, long_lived=True, partial=False) as model:
        model.lag_history = LagHistory(window, interval_s=interval)

        def measure() -> Any:
            cap = model.refresh()
            if cap.sections.get("lag") != "ok":
                model.reconnect()  # a restarted broker needs new connections; the next poll makes them
                raise EosctlError(cap.errors().get("lag", "the lag could not be read"))
            return cap.lag

        _watch(measure, model.lag_history.watch, interval, count, fmt, wanted_groups, wanted_topics)


def _watch(measure: Any, watch: Any, interval: float, count: int | None, fmt: str, groups: list[str],
           topics: list[str]) -> None:
    """Poll until Ctrl-C (or --count): redraw in place on a terminal, else one table / JSON line per poll.

    A failed poll is shown as an outage (ERR, with the reason) and the watch goes on; a failed first poll
    too (a watch started during an incident must show it and recover with the cluster), with one line on
    stderr saying to check the address if it never answers.
    """
    out = out_console()
    live_view = fmt == "table" and out.is_terminal
    if live_view:
        context: Any = Live(console=out, auto_refresh=False)
    else:
        context = nullcontext()
    polls = failed = 0
    cause = ""
    last = None
    shown: dict[str, Any] | None = None  # the last document shown, for _Overdue
    with context as live, _Overdue(live, interval, lambda: shown, groups, topics) as overdue:
        while True:
            started = time.monotonic()
            try:
                with overdue.polling():
                    snapshot = measure()
            except EosctlError as e:
                failed, cause = failed + 1, first_line(e)
                if last is None:
                    if polls == 0:
                        click.echo(f"eosctl: lag --watch: the first poll failed, retrying every poll (check "
                                   f"the address if it never answers): {first_line(e)}", err=True)
                    doc = outage_document({"groups": [], "taken_at": None}, first_line(e))
                else:
                    doc = outage_document(lag_document(last, watch), first_line(e))
            else:  # measure() fed the snapshot to the watch already (the model's lag history)
                last = snapshot
                doc = lag_document(snapshot, watch)
            shown = doc
            with overdue.lock:
                if live_view:
                    live.update(lag_renderable(doc, True, groups, topics), refresh=True)
                else:
                    _emit_document(doc, True, fmt, groups, topics)
            polls += 1
            if count is not None and polls >= count:
                break
            time.sleep(max(0.0, interval - (time.monotonic() - started)))
    _say_failed(polls, failed, cause)


def _say_failed(polls: int, failed: int, cause: str) -> None:
    """The end of a bounded watch (--count): a script reads its exit code, so a watch that never read the
    cluster is an error (exit 2, the last poll's cause), and one that read it only some of the time says
    how often it could not, after its last document (stdout stays the documents)."""
    if failed and failed == polls:
        raise EosctlError(f"lag --watch: all {polls} polls failed; the last: {cause}")
    if failed:
        click.echo(f"eosctl: lag --watch: {failed} of {polls} polls failed; the last failed one: {cause}",
                   err=True)


class _Overdue:
    """While a poll reads past its interval (a slow or stalled link, up to --timeout), the watch does not
    go quiet: on a terminal the last values are shown again every second marked STALE with their age and
    how long the poll has been reading; otherwise one line on stderr says so (JSON Lines stay one
    document per poll). A daemon thread; the poll itself stays in the main thread (signals, deadline)."""

    def __init__(self, live: Any, interval: float, shown: Any, groups: list[str], topics: list[str]) -> None:
        self.live, self.interval, self.shown = live, interval, shown
        self.groups, self.topics = groups, topics
        self.lock = threading.Lock()  # one writer of the screen or stdout at a time
        self._since: float | None = None
        self._said = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lag-watch-overdue", daemon=True)

    def __enter__(self) -> _Overdue:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(2)

    @contextmanager
    def polling(self) -> Iterator[None]:
        self._since, self._said = time.monotonic(), False
        try:
            yield
        finally:
            self._since = None

    def _run(self) -> None:
        while not self._stop.wait(min(1.0, self.interval)):
            since, doc = self._since, self.shown()
            reading = None if since is None else time.monotonic() - since
            # A failed poll's document is marked stale already (ERR, with its reason).
            if reading is None or reading <= self.interval or doc is None or not doc.get("groups") or \
                    doc.get("error"):
                continue
            with self.lock:
                if self._since is None:
                    continue  # the poll ended meanwhile: its document is on the way
                if self.live is not None:
                    self.live.update(lag_renderable(overdue_document(doc, reading), True, self.groups,
                                                    self.topics), refresh=True)
                elif not self._said:
                    self._said = True
                    click.echo(f"eosctl: lag --watch: a poll is overdue (reading for {reading:.0f} s, every "
                               f"{self.interval:g}s); the values of {doc['taken_at']} are stale", err=True)


def _with_replica(doc: dict[str, Any], target: Any) -> None:
    """A MirrorMaker 2 replica pipeline: each group's failover readiness on its partitions (`replica`)."""
    # lazy: only for a replica pipeline; see docs/imports.md
    from eosctl.inspection.failover import replica_sink, with_failover

    sink = replica_sink(target.pipeline.sink if target.pipeline else None)
    if sink is not None:
        with_failover(doc, sink)


def _emit_document(doc: dict[str, Any], watching: bool, fmt: str, groups: list[str],
                   topics: list[str]) -> None:
    if fmt == "json" and watching:  # JSON Lines: one document per poll

        click.echo(json.dumps(doc, separators=(",", ":")))
        return

    emit(fmt, lambda: doc, lambda: out_console().print(lag_renderable(doc, watching, groups, topics)))


COMMANDS = [lag]
