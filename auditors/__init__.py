"""Check a sink against what Kafka holds (eosctl audit), on Spark or on local processes.

`audit` is the one entry point; `engine` runs it (options, timings, clean-up); `plan` cuts the work into
items (grouped by `grouping`), `sources` reads what a task needs of Kafka, `task` is the task both engines
run (the per-partition rule itself is eosctl/rules/), `outcome` what an engine found; `local` and
`spark`/`spark_job` are the two engines. The result is rendered by eosctl/output/. Imported
only by the commands that audit and the benchmarks, never at eosctl start-up (Spark is slow to import).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

from auditors import engine
from auditors.engine import ENGINES, EngineOptions
from auditors.plan import AuditInput
from auditors.sources import KafkaSource
from eosctl.base.errors import ConfigError
from eosctl.base.progress import Progress, silent
from eosctl.config.values import duration_seconds
from eosctl.report.findings import KINDS, AuditReport, merge_hops, merge_sinks
from eosctl.report.window import WindowSpec

if TYPE_CHECKING:
    from eosctl.config.model import Sink
    from eosctl.config.target import Target


def audit(target: Target, sink: Sink, *, options: EngineOptions, progress: Progress = silent,
          fail_on: tuple[str, ...] = KINDS, started: float | None = None,
          window: WindowSpec | None = None) -> AuditReport:
    """Audit ``sink`` against the target's cluster, topics and group (offset_mismatch needs the group and
    the sink's offsets table). ``started``: time.monotonic() at the command's start, for elapsed_seconds.
    ``window``: judge only it (--since/--until); a sink with a retention is judged with it too."""
    if sink.mode != "offsets":  # a state sink: keyed by the record's key, no offsets (auditors.state)
        from auditors.state import audit_state  # lazy: auditors.state 20 ms to import

        if window is not None:
            raise ConfigError("--since/--until judge a window of offsets; a state sink (mode = "
                              f"{sink.mode!r}) is judged whole: drop them")
        return audit_state(target, sink, progress=progress, fail_on=fail_on, started=started, options=options)
    inp = AuditInput(source=KafkaSource(target.cluster), sink=sink, topics=target.topics,
                     cluster=target.cluster, group=target.group, fail_on=fail_on,
                     content_check=options.content_check, window=with_retention(window, sink))
    return engine.run(inp, options, progress, started)


def audit_sinks(target: Target, sinks: tuple[Sink, ...], *, options: EngineOptions,
                progress: Progress = silent, fail_on: tuple[str, ...] = KINDS, started: float | None = None,
                window: WindowSpec | None = None) -> AuditReport:
    """A pipeline of several sinks ([pipelines.NAME.sinks.LABEL]), each audited against the pipeline's
    topics with its route: one report, each partition and finding naming its sink, the verdict the
    pipeline's."""
    t0 = started if started is not None else time.monotonic()
    reports = [(s.label, audit(target, s, options=options, progress=progress, fail_on=fail_on, started=t0,
                               window=window)) for s in sinks]
    return merge_sinks(reports, tuple(target.topics), time.monotonic() - t0)


def with_retention(window: WindowSpec | None, sink: Sink, now_ms: int | None = None) -> WindowSpec | None:
    """The window with the sink's retention (sink.retention), counted back from ``now_ms`` (default: now)."""
    if sink.retention is None:
        return window
    return replace(window or WindowSpec(), retention=sink.retention,
                   retention_seconds=duration_seconds(sink.retention),
                   now_ms=now_ms if now_ms is not None else int(time.time() * 1000))


def audit_hops(hops: list[tuple[str, Target, Sink]], *, options: EngineOptions, progress: Progress = silent,
               fail_on: tuple[str, ...] = KINDS, started: float | None = None,
               window: WindowSpec | None = None) -> AuditReport:
    """A pipeline audited hop by hop, in order ((name, target, sink) each): one report with ``hops``, its
    verdict the pipeline's. One hop: that hop's report as it is."""
    t0 = started if started is not None else time.monotonic()
    reports = [(name, audit(target, sink, options=options, progress=progress, fail_on=fail_on, started=t0,
                            window=window))
               for name, target, sink in hops]
    if len(reports) == 1:
        return reports[0][1]
    return merge_hops(reports, [target.topics for _, target, _ in hops], time.monotonic() - t0)


__all__ = ["ENGINES", "EngineOptions", "audit", "audit_hops", "audit_sinks"]
