"""The exporter's loops: one live model per pipeline refreshed every --interval, and the audit of each
pipeline with a sink every --audit-every in a thread of its own.

Runs for weeks: a refresh that fails (the broker is away) sets eosctl_up 0 and keeps serving the last
values; the next refresh reconnects. An audit that fails counts in eosctl_audit_errors_total and never ends
the exporter. The audit engine is passed in (``Audit``): the core never imports the auditors.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from eosctl.base.errors import EosctlError, first_line
from eosctl.base.safetext import term
from eosctl.config.redaction import redact
from eosctl.exporter.metrics import Source
from eosctl.inspection.failover import readiness, replica_sink
from eosctl.inspection.live import LiveModel

if TYPE_CHECKING:
    from eosctl.config.target import Target
    from eosctl.exporter.metrics import Exposition

# auditors.audit(target, sink, options=..., started=...) -> the report
Audit = Callable[..., Any]


def say(line: str) -> None:
    """One line on stderr, flushed (the exporter's log)."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def log(message: str) -> None:
    """One line of the exporter's log on stderr: no value substituted from the config's ${NAME}s."""
    say(redact(message))


@contextmanager
def live_sources(targets: list[Target], max_age: float) -> Iterator[list[Source]]:
    """One live model per target, closed on every way out."""
    sources: list[Source] = []
    try:
        for t in targets:
            model = LiveModel(t, max_age_s=max_age, long_lived=True)
            sources.append(Source(t.cluster.name, t.pipeline.name if t.pipeline else "", model))
        yield sources
    finally:
        for s in sources:
            s.model.close()


def first_refresh(sources: list[Source], outage_ok: bool = False) -> None:
    """The first reading of every pipeline. A cluster that does not answer is an error (--once: a cron
    job's exit status says it), or, for a serving exporter (``outage_ok``), an outage from the start: an
    exporter restarted during an incident (a pod rescheduled) must serve eosctl_up 0 with the reason and
    recover with the cluster, not stay down; the log line says to check the address if it never does."""
    for s in sources:
        try:
            cap = s.model.refresh()
        except EosctlError as e:
            if not outage_ok:
                raise
            s.refreshed(None, first_line(e))
            log(f"eosctl exporter: {term(s.pipeline or s.cluster)}: the first refresh failed, serving "
                f"eosctl_up 0 until the cluster answers (check the address if it never does): "
                f"{term(first_line(e))}")
            continue
        s.refreshed(cap)
        log_sections(s, cap)


# (pipeline's source id, section) -> the reason last logged: each section's failure is logged when it starts
# or its reason changes, and its recovery once, not at every refresh.
_FAILING: dict[tuple[int, str], str] = {}


def log_sections(s: Source, cap: Any) -> None:
    """A section that could not be read (eosctl_refresh_errors_total{section} rising) says why in the log,
    and so do partitions that could not be read (eosctl_partition_unreadable)."""
    name = term(s.pipeline or s.cluster)
    log_unreadable(s, name, cap.unreadable)
    errors = cap.errors()
    for section in cap.sections:
        key = (id(s), section)
        why = errors.get(section)
        if why is not None and _FAILING.get(key) != why:
            _FAILING[key] = why
            log(f"eosctl exporter: {name}: section {section} not read (eosctl_refresh_errors_total): "
                f"{term(why)}")
        elif why is None and _FAILING.pop(key, None) is not None:
            log(f"eosctl exporter: {name}: section {section} read again")


def log_unreadable(s: Source, name: str, unreadable: dict[tuple[str, int], str]) -> None:
    """One line when the set of partitions that can't be read changes (names and why), one when it is
    empty again."""
    key = (id(s), "unreadable partitions")
    shown = ""
    if unreadable:
        names = [f"{t}-{p}" for t, p in sorted(unreadable)]
        listed = ", ".join(names[:20]) + (f" and {len(names) - 20} more" if len(names) > 20 else "")
        reasons = "; ".join(sorted(set(unreadable.values())))
        shown = (f"{len(names)} partition{'s' * (len(names) != 1)} can't be read "
                 f"(eosctl_partition_unreadable): {listed}: {reasons}; the others are served")
    if shown and _FAILING.get(key) != shown:
        _FAILING[key] = shown
        log(f"eosctl exporter: {name}: {term(shown)}")
    elif not shown and _FAILING.pop(key, None) is not None:
        log(f"eosctl exporter: {name}: every partition read again")


def refresh_loop(sources: list[Source], exposition: Exposition, interval: float,
                 stop: threading.Event) -> None:
    # Down since the first refresh (first_refresh said so): its recovery is said like any other.
    down: dict[int, str] = {i: s.down_reason for i, s in enumerate(sources) if not s.up and s.down_reason}
    while not stop.is_set():
        started = time.monotonic()
        for i, s in enumerate(sources):
            try:
                cap = s.model.refresh()
            except EosctlError as e:
                s.refreshed(None, first_line(e))
                if i not in down:
                    down[i] = first_line(e)
                    log(f"eosctl exporter: {term(s.pipeline or s.cluster)}: refresh failed, serving "
                        f"the last values (eosctl_up 0): {term(down[i])}")
                continue
            s.refreshed(cap)
            log_sections(s, cap)
            if down.pop(i, None) is not None:
                say(f"eosctl exporter: {term(s.pipeline or s.cluster)}: the cluster answers again")
        exposition.warm()
        stop.wait(max(0.0, interval - (time.monotonic() - started)))


def audit_all(audit: Audit, sources: list[Source], targets: list[Target], options: Any,
              stop: threading.Event | None = None, failing: dict[int, str] | None = None) -> None:
    """One audit per pipeline with a sink; a failed one counts in eosctl_audit_errors_total.

    ``failing``: source index -> the reason its audits fail, kept across runs so that an outage is logged
    when it starts, when its reason changes and when it ends, not at every --audit-every."""
    failing = {} if failing is None else failing
    for i, (s, t) in enumerate(zip(sources, targets, strict=True)):
        sink = t.pipeline.sink if t.pipeline else None
        if sink is None or (stop is not None and stop.is_set()):
            continue
        started = time.monotonic()
        try:
            # finished as `eosctl audit -c FILE` finishes it (auditors.passes), judged by the config's
            # waivers and levels too: a waived finding is no failing one (eosctl_audit_failing_findings),
            # an expired waiver's is again
            report = audit(t, sink, options=options, started=started)
        except Exception as e:  # noqa: BLE001 - an audit that fails must not end the exporter
            if stop is not None and stop.is_set():
                return  # stopped under it (its workers killed): not a failure
            why = first_line(e)
            if not isinstance(e, EosctlError | OSError):  # a crash, not a sink or broker problem: name it
                why = f"{type(e).__name__}: {why}"
            s.audited(None, time.monotonic() - started, why)
            if failing.get(i) != why:
                failing[i] = why
                log(f"eosctl exporter: {term(s.pipeline)}: audit failed: {term(why)} (said once until it "
                    "changes; eosctl_audit_errors_total counts each)")
            continue
        s.audited(report, time.monotonic() - started, failover=_failover(sink))
        if failing.pop(i, None) is not None:
            log(f"eosctl exporter: {term(s.pipeline)}: the audit runs again")


def _failover(sink: Any) -> list[Any]:
    """A MirrorMaker 2 replica pipeline: every checkpointed group's failover readiness (else nothing); a
    broker that fails it leaves the audit's figures standing."""
    mirror = replica_sink(sink)
    if mirror is None:
        return []
    try:
        return readiness(mirror)
    except (EosctlError, OSError) as e:
        log(f"eosctl exporter: failover readiness of {term(mirror.kafka_topic or '')} unread: "
            f"{term(first_line(e))}")
        return []


@contextmanager
def auditing(audit: Audit, stop_audits: Callable[[], None], sources: list[Source], targets: list[Target],
             options: Any, every: float, stop: threading.Event, exposition: Exposition) -> Iterator[None]:
    """The audit thread, from now until the block ends; then stopped, its processes killed if need be
    (``stop_audits``: auditors.guard.stop_all)."""
    if options is None or not any(t.pipeline and t.pipeline.sink for t in targets):
        yield
        return

    def loop() -> None:
        failing: dict[int, str] = {}
        while not stop.is_set():
            audit_all(audit, sources, targets, options, stop, failing)
            exposition.warm()
            stop.wait(every)

    thread = threading.Thread(target=loop, name="audit", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        stop_audits()  # a running audit's workers killed: its pool breaks, the audit unwinds, cleans up
        thread.join(30)
