"""Check a sink against what Kafka holds (eosctl audit), on Spark or on local processes.

`audit` is the one entry point (`audit_hops`, `audit_sinks` and `audit_incremental` build on it); `engine`
runs it (options, the engine policy, timings, clean-up); `plan` cuts the work into items (grouped by
`grouping`), `sources` reads what a task needs of Kafka, `task` is the task both engines run (the
per-partition rule itself is eosctl/rules/), `outcome` what an engine found; `local` and
`spark`/`spark_job` are the two engines (on Spark, `spark_sink` has Spark read a Parquet or Delta sink
itself and `spark_keys` runs the key rule over it); `passes` finishes every audit on the driver (a hop's and a
replica's rules, the upstream stage, the waivers and levels), whoever called it; `guard` stops what an
audit started on every way out. The result is rendered by eosctl/output/.

Inside a task: `window` (an audit's window in each partition's offsets, set once by the driver),
`contentcheck` (each sink row's key against its record's), `fieldcheck` with `fieldfast` and
`fieldcolumns` (the decoded content check, column by column where it can), `keydups` (key duplicates
grouped by DuckDB where the rows are), `deadletters` (a dead-letter queue read once by the driver) and
`findingrows` (findings as Arrow columns between a task and the driver). State sinks: `state` (the audit
of a table keyed by the record's key), `state_spark` (the same on Spark), `statebytes` (their source
records from the log scan's own Fetch answers) and `statecols` (records and rows as columns, judged per key
in DuckDB). The incremental audit: `incremental` (offsets sinks), `stateinc` (state sinks) and `incstate`
(the state file both keep).

Imported only by the commands that audit and the benchmarks, never at eosctl start-up (Spark is slow to
import).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from auditors import engine, passes
from auditors.engine import AUTO, ENGINES, EngineOptions
from auditors.passes import Judging
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
          window: WindowSpec | None = None, judging: Judging | None = None) -> AuditReport:
    """Audit ``sink`` against the target's cluster, topics and group (offset_mismatch needs the group and
    the sink's offsets table), finished by every pass (auditors.passes). ``started``: time.monotonic() at
    the command's start, for elapsed_seconds. ``window``: judge only it (--since/--until); a sink with a
    retention is judged with it too. ``judging``: the waivers and levels (None: the config's)."""
    report = _audit(target, sink, options=options, progress=progress, fail_on=fail_on, started=started,
                    window=window)
    return passes.finish(report, target, progress=progress, judging=judging)


def _audit(target: Target, sink: Sink, *, options: EngineOptions, progress: Progress,
           fail_on: tuple[str, ...], started: float | None, window: WindowSpec | None) -> AuditReport:
    """One sink's report, before the report's passes."""
    if sink.mode != "offsets":  # a state sink: keyed by the record's key, no offsets (auditors.state)
        from auditors.state import audit_state  # lazy: see docs/imports.md

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
                window: WindowSpec | None = None, judging: Judging | None = None) -> AuditReport:
    """A pipeline of several sinks ([pipelines.NAME.sinks.LABEL]), each audited against the pipeline's
    topics with its route: one report, each partition and finding naming its sink, the verdict the
    pipeline's."""
    t0 = started if started is not None else time.monotonic()
    reports = [(s.label, _audit(target, s, options=options, progress=progress, fail_on=fail_on, started=t0,
                                window=window)) for s in sinks]
    merged = merge_sinks(reports, tuple(target.topics), time.monotonic() - t0)
    return passes.finish(merged, target, progress=progress, judging=judging, follow=False)


def with_retention(window: WindowSpec | None, sink: Sink, now_ms: int | None = None) -> WindowSpec | None:
    """The window with the sink's retention (sink.retention), counted back from ``now_ms`` (default: now)."""
    if sink.retention is None:
        return window
    return replace(window or WindowSpec(), retention=sink.retention,
                   retention_seconds=duration_seconds(sink.retention),
                   now_ms=now_ms if now_ms is not None else int(time.time() * 1000))


def audit_hops(hops: list[tuple[str, Target, Sink]], *, options: EngineOptions, progress: Progress = silent,
               fail_on: tuple[str, ...] = KINDS, started: float | None = None,
               window: WindowSpec | None = None, judging: Judging | None = None) -> AuditReport:
    """A pipeline audited hop by hop, in order ((name, target, sink) each): one report with ``hops``, its
    verdict the pipeline's (the hops' own stages explain their key duplicates: merge_hops). One hop: that
    hop's report as `audit` gives it."""
    t0 = started if started is not None else time.monotonic()
    if len(hops) == 1:
        _, target, sink = hops[0]
        return audit(target, sink, options=options, progress=progress, fail_on=fail_on, started=t0,
                     window=window, judging=judging)
    reports = [(name, _audit(target, sink, options=options, progress=progress, fail_on=fail_on, started=t0,
                             window=window))
               for name, target, sink in hops]
    merged = merge_hops(reports, [target.topics for _, target, _ in hops], time.monotonic() - t0)
    return passes.finish(merged, hops[0][1], progress=progress, judging=judging, follow=False)


def audit_pipeline(target: Target, *, options: EngineOptions, progress: Progress = silent,
                   bootstrap: str | None = None, started: float | None = None) -> AuditReport:
    """The target's pipeline as `eosctl audit -c FILE -p NAME` audits it with no other option: hop by hop
    (each hop resolved from the config already read, on ``bootstrap`` if one was given), sink by sink in
    one report, or its one sink."""
    from eosctl.config.target import resolve  # lazy: see docs/imports.md

    assert target.pipeline is not None
    hops, sinks = target.pipeline.hops, target.pipeline.sinks
    if hops:
        runs = [(hop, resolve(target.config, hop, bootstrap, need_topics=True)) for hop in hops]
        return audit_hops([(hop, t, _sink(t)) for hop, t in runs], options=options, progress=progress,
                          started=started)
    if len(sinks) > 1:
        return audit_sinks(target, sinks, options=options, progress=progress, started=started)
    assert target.pipeline.sink is not None
    return audit(target, target.pipeline.sink, options=options, progress=progress, started=started)


def _sink(hop: Target) -> Sink:
    """A hop's sink; one line naming the table to set where it has none."""
    assert hop.pipeline is not None
    if hop.pipeline.sink is None:
        raise ConfigError(f"no sink to read: set [pipelines.{hop.pipeline.name}.sink] (duckdb, parquet, ...)")
    return hop.pipeline.sink


def audit_incremental(target: Target, sink: Sink, state: str, *, judging: Judging | None = None,
                      progress: Progress = silent, **kwargs: Any) -> AuditReport:
    """What is new since the verdict kept in ``state`` (auditors.incremental.audit_incremental, or for a
    sink that keeps state per key auditors.stateinc.audit_state_incremental, its ``kwargs``), finished by
    the same passes as a full audit."""
    if sink.mode != "offsets":
        from auditors.stateinc import audit_state_incremental  # lazy: see docs/imports.md

        report = audit_state_incremental(target, sink, state, progress=progress, **kwargs)
    else:
        from auditors.incremental import audit_incremental as new_since  # lazy: see docs/imports.md

        report = new_since(target, sink, state, progress=progress, **kwargs)
    return passes.finish(report, target, progress=progress, judging=judging)


__all__ = ["AUTO", "ENGINES", "EngineOptions", "Judging", "audit", "audit_hops", "audit_incremental",
           "audit_pipeline", "audit_sinks"]
