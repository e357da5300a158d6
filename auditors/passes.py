"""The driver-side passes that finish an audit, in order, for every caller (`eosctl audit`, the TUI, the
exporter, `snapshot --with-audit`, the demo): what runs after an engine's tasks, on the driver.

Two lists. ``FROZEN``, while the sink's frozen copy exists (a hop's rows are read from it): a `lineage =
"key"` hop's findings named for keys, its outputs ahead of the stage's commit, a MirrorMaker 2 replica's
findings told as MM2's. ``REPORT``, on the report of a sink (or of hops and sinks merged): key duplicates
followed back through the stage that wrote the audited topic, then the waivers and levels. Each pass does
its reads here and hands them to a rule in eosctl/rules/, which only decides.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eosctl.base.errors import BrokerError
from eosctl.base.progress import Progress, Step, silent
from eosctl.report.findings import AuditReport, Finding
from eosctl.rules import hop, replica, upstream

if TYPE_CHECKING:
    from eosctl.cluster.model import TP, PartitionLog
    from eosctl.config.model import Cluster, Sink
    from eosctl.config.policy import Level, Waiver
    from eosctl.config.target import Target


# --- while the frozen copy exists -----------------------------------------------------------------------

@dataclass(frozen=True)
class FrozenPass:
    """One pass over a frozen sink's findings: ``run(frozen, findings, invalid)`` -> the findings."""

    name: str
    applies: Callable[[Sink], bool]
    run: Callable[[Sink, list[Finding], list[Finding]], list[Finding]]


def _key_names(frozen: Sink, findings: list[Finding], invalid: list[Finding]) -> list[Finding]:
    from eosctl.sink.kafka_topic import HopRows, outputs_topic  # lazy: see docs/imports.md

    with HopRows(frozen) as rows:
        return hop.key_findings(rows, outputs_topic(frozen), findings)


def _ahead(frozen: Sink, findings: list[Finding], invalid: list[Finding]) -> list[Finding]:
    return findings + ahead_of_commit(frozen, findings + invalid)


def ahead_of_commit(frozen: Sink, findings: list[Finding]) -> list[Finding]:
    """The frozen hop's ahead_of_commit findings (eosctl.rules.hop.ahead_of_commit), its rows read here."""
    # lazy: see docs/imports.md
    from eosctl.sink.kafka_topic import HopRows, committed_after, outputs_topic

    after, given = committed_after(frozen), frozen.frozen_from
    if after is None or given is None:
        return []
    with HopRows(frozen) as rows:
        placed = rows.with_lineage()
    return hop.ahead_of_commit(given, after, placed, outputs_topic(frozen), findings)


def _replica(frozen: Sink, findings: list[Finding], invalid: list[Finding]) -> list[Finding]:
    from eosctl.sink.replica import reordered  # lazy: see docs/imports.md

    assert frozen.frozen_from is not None
    return replica.replica_findings(frozen.frozen_from, findings, reordered(frozen))


def out_of_order(frozen: Sink, findings: Sequence[Finding] = ()) -> list[Finding]:
    """A frozen replica hop's out_of_order findings (eosctl.rules.replica.out_of_order), read here."""
    from eosctl.sink.replica import reordered  # lazy: see docs/imports.md

    given = frozen.frozen_from
    if given is None:
        return []
    return replica.out_of_order(reordered(frozen), given.kafka_topic, findings)


def _given(frozen: Sink) -> Sink:
    return frozen.frozen_from or frozen


# In this order: the key names first (ahead_of_commit leaves out rows another finding has), the replica last
# (its out_of_order leaves out the phantoms).
FROZEN: tuple[FrozenPass, ...] = (
    FrozenPass("key lineage", lambda s: bool(_given(s).kafka_topic) and _given(s).lineage == "key",
               _key_names),
    FrozenPass("ahead of commit", lambda s: bool(_given(s).kafka_topic), _ahead),
    FrozenPass("replica", lambda s: bool(_given(s).kafka_topic) and _given(s).lineage == replica.REPLICA,
               _replica),
)


def finish_frozen(frozen: Sink, findings: list[Finding], invalid: list[Finding]) -> list[Finding]:
    """``findings`` through every FROZEN pass that applies to the sink (``invalid``: the rows no partition
    owns, which the passes only look at)."""
    for p in FROZEN:
        if p.applies(frozen):
            findings = p.run(frozen, findings, invalid)
    return findings


# --- on the report ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Judging:
    """The waivers and levels a report is judged by (eosctl.report.policy); None where a pass reads them
    from the config ([audit] waivers, [audit.levels])."""

    waivers: tuple[Waiver, ...] = ()
    levels: tuple[Level, ...] = ()


def finish(report: AuditReport, target: Target, *, progress: Progress = silent,
           judging: Judging | None = None, follow: bool = True) -> AuditReport:
    """The report through the REPORT passes: key duplicates followed through the stage that wrote the
    audited topic (``follow``: a lone sink's report; a pipeline audited hop by hop follows its own stages),
    then the waivers and levels (``judging``, else the config's)."""
    if follow:
        report = follow_upstream(report, target, progress)
    from eosctl.report.policy import apply_policy, configured  # lazy: see docs/imports.md

    if judging is None:
        judging = Judging(*configured(target.config))
    return apply_policy(report, judging.waivers, judging.levels)


def follow_upstream(report: AuditReport, target: Target, progress: Progress = silent) -> AuditReport:
    """Key duplicates followed back through the config's stage that writes the target's topics
    (eosctl.rules.upstream), with the copies' lineage and the inputs' writers read here."""
    stage = upstream_of(target)
    if stage is None:
        return report
    places = upstream.to_follow(report)
    if not places:
        return report
    progress(Step("following key duplicates through the stage's lineage", 0, None))
    sink, output, source = stage
    lineage = read_lineage(output, sink, upstream.wanted(places))
    inputs = upstream.inputs_by_partition(lineage)
    writers = upstream.writers_of(read_inputs(source, inputs), inputs)
    return upstream.follow_upstream(report, places, lineage, writers)


def upstream_of(target: Target) -> tuple[Sink, Cluster, Cluster] | None:
    """(the stage's sink, the cluster of its output, that of its input) when the target's config names the
    Kafka stage that writes the audited topic; its pipeline resolved from the config already read."""
    if target.config is None or target.pipeline is None:
        return None
    name = upstream.upstream_stage(target.config, target.topics, target.pipeline.name)
    if name is None:
        return None
    from eosctl.config.target import resolve  # lazy: see docs/imports.md

    stage = resolve(target.config, name, target.bootstrap)
    assert stage.pipeline is not None and stage.pipeline.sink is not None
    sink = stage.pipeline.sink
    return sink, sink.kafka_cluster or stage.cluster, stage.cluster


# A copy read back in at most this long (a record that is gone: compacted, deleted), and all of them in this
# long; past it, the rest keep the audited topic's cause.
READ_TIMEOUT_S = 2.0
TOTAL_TIMEOUT_S = 30.0


def read_lineage(cluster: Cluster, stage: Sink, places: list[upstream.Place]
                 ) -> dict[upstream.Place, upstream.Place | None]:
    """The input each copy names (None: unreadable lineage, or the copy could not be read)."""
    from confluent_kafka import Consumer, TopicPartition  # lazy: see docs/imports.md

    from eosctl.cluster.clients import quiet_logger  # lazy: see docs/imports.md
    from eosctl.sink.kafka_topic import lineage_reader  # lazy: see docs/imports.md

    read = lineage_reader(stage)
    out: dict[upstream.Place, upstream.Place | None] = {}
    if not places:
        return out
    # assign() and no commits: the group id is required by librdkafka but never joined or written. Each
    # copy is a committed record (the key rule counts no other), so read_uncommitted reads it as it is, and
    # a consumer starting there is served it even by a broker that mis-serves read_committed consumers
    # starting past an ABORT marker (the sandbox: /work/shared/notes/brokers.md).
    consumer = Consumer({**cluster.confluent(), "logger": quiet_logger(), "group.id": "eosctl-lineage-reader",
                         "enable.auto.commit": False, "isolation.level": "read_uncommitted"})
    deadline = time.monotonic() + TOTAL_TIMEOUT_S
    try:
        for place in places:
            if time.monotonic() > deadline:
                break
            topic, partition, offset = place
            consumer.assign([TopicPartition(topic, partition, offset)])
            msgs = consumer.consume(1, READ_TIMEOUT_S)
            m = msgs[0] if msgs else None
            if m is None or m.error() is not None or m.offset() != offset:
                out[place] = None
                continue
            t, p, o = read(m)
            out[place] = (t, p, o) if t is not None and p is not None and o is not None else None
    finally:
        consumer.close()
    return out


def read_inputs(cluster: Cluster, inputs: dict[TP, list[int]], timeout_ms: int = 10_000
                ) -> dict[TP, PartitionLog]:
    """A scan of just the inputs' offsets (and their markers), per input partition; none where the input is
    gone or unreachable (the copies keep the audited topic's cause)."""
    if not inputs:
        return {}
    # lazy: see docs/imports.md
    from eosctl.cluster.logscan import scan_partitions
    from eosctl.cluster.wire import WireClient

    try:
        with WireClient(cluster, timeout_ms=timeout_ms) as client:
            client.metadata(sorted({t for t, _ in inputs}))
            logs: Any = scan_partitions(client, list(inputs),
                                        start={tp: min(os) for tp, os in inputs.items()},
                                        end={tp: max(os) + 1 for tp, os in inputs.items()})
    except BrokerError:
        return {}
    return dict(logs)
