"""Check a sink against what Kafka holds (eosctl audit), on Spark or on local processes.

`audit` is the one entry point; `engine` runs it (options, timings, clean-up); `plan` cuts the work into
items (grouped by `grouping`), `sources` reads what a task needs of Kafka, `task` is the task both engines
run (the per-partition rule itself is eosctl/rules/), `outcome` what an engine found; `local` and
`spark`/`spark_job` are the two engines. The result is rendered by eosctl/output/. Imported
only by the commands that audit and the benchmarks, never at eosctl start-up (Spark is slow to import).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from auditors import engine
from auditors.engine import ENGINES, EngineOptions
from auditors.plan import AuditInput
from auditors.sources import KafkaSource
from eosctl.base.progress import Progress, silent
from eosctl.report.findings import KINDS, AuditReport, merge_hops

if TYPE_CHECKING:
    from eosctl.config.model import Sink
    from eosctl.config.target import Target


def audit(target: Target, sink: Sink, *, options: EngineOptions, progress: Progress = silent,
          fail_on: tuple[str, ...] = KINDS, started: float | None = None) -> AuditReport:
    """Audit ``sink`` against the target's cluster, topics and group (offset_mismatch needs the group and
    the sink's offsets table). ``started``: time.monotonic() at the command's start, for elapsed_seconds."""
    if sink.mode != "offsets":  # a state sink: keyed by the record's key, no offsets (auditors.state)
        from auditors.state import audit_state  # lazy: auditors.state 20 ms to import

        return audit_state(target, sink, progress=progress, fail_on=fail_on, started=started)
    inp = AuditInput(source=KafkaSource(target.cluster), sink=sink, topics=target.topics,
                     cluster=target.cluster, group=target.group, fail_on=fail_on,
                     content_check=options.content_check)
    return engine.run(inp, options, progress, started)


def audit_hops(hops: list[tuple[str, Target, Sink]], *, options: EngineOptions, progress: Progress = silent,
               fail_on: tuple[str, ...] = KINDS, started: float | None = None) -> AuditReport:
    """A pipeline audited hop by hop, in order ((name, target, sink) each): one report with ``hops``, its
    verdict the pipeline's. One hop: that hop's report as it is."""
    t0 = started if started is not None else time.monotonic()
    reports = [(name, audit(target, sink, options=options, progress=progress, fail_on=fail_on, started=t0))
               for name, target, sink in hops]
    if len(reports) == 1:
        return reports[0][1]
    return merge_hops(reports, [target.topics for _, target, _ in hops], time.monotonic() - t0)


__all__ = ["ENGINES", "EngineOptions", "audit", "audit_hops"]
