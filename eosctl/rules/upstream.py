"""A key duplicate followed back through the Kafka stage that wrote the audited topic.

A sink hop audited alone (`eosctl audit -p PREFIX`) judges a key duplicate by who wrote the audited topic:
the stage, in one or two of its transactions. When the config names that stage (a pipeline whose sink is
`kafka_topic` = the audited topic, with offset lineage), each copy's lineage names the input record it was
derived from. Copies of two input records that both carry the key were copied faithfully: the duplicate is
the input's, judged by the input's writers (an upstream retry, typically). Copies of one input record are
the stage's own doing (it wrote one input twice: a replay). That is what auditing the pipeline hop by hop
concludes (eosctl.report.findings.follow_stages), at the cost of reading the duplicates' records, not of
auditing
the stage.
"""

from __future__ import annotations

import time
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import replace

from eosctl.base.errors import BrokerError
from eosctl.cluster.clients import quiet_logger
from eosctl.cluster.logscan import scan_partitions
from eosctl.cluster.model import TP
from eosctl.cluster.wire import WireClient
from eosctl.config.model import Cluster, Config, Sink
from eosctl.report.findings import AuditReport, Finding
from eosctl.rules.causes import Writer, committed_writers, key_cause

# Copies read back at most (a few per key duplicate), and for how long in all; past either, the rest keep the
# audited topic's cause.
MAX_PLACES = 2_000
READ_TIMEOUT_S = 2.0  # one copy (a record that is gone: compacted, deleted)
TOTAL_TIMEOUT_S = 30.0

Place = tuple[str, int, int]


def upstream_stage(config: Config, topics: Iterable[str], pipeline: str | None) -> str | None:
    """The config's pipeline whose sink is a stage writing one of ``topics`` with offset lineage."""
    wanted = set(topics)
    for name, other in config.pipelines.items():
        sink = other.sink
        paired = sink is not None and sink.lineage in ("key", "value")  # no record names its input
        if name != pipeline and sink is not None and sink.kafka_topic in wanted and not paired:
            return name
    return None


def follow_upstream(report: AuditReport, stage: Sink, output: Cluster, source: Cluster,
                    timeout_ms: int = 10_000) -> AuditReport:
    """The report with each key duplicate's cause followed through ``stage`` (the resolved sink of the
    stage's pipeline: its lineage, its input topics), reading the copies from ``output`` and their inputs'
    writers from ``source``."""
    todo = [f for f in report.findings if f.kind == "key_duplicate" and f.cause is not None and f.key]
    if not todo:
        return report
    places = {f: _places(f) for f in todo}
    wanted = sorted({p for ps in places.values() for p in ps})[:MAX_PLACES]
    lineage = _lineage_of(output, stage, wanted)
    inputs = {lin for lin in lineage.values() if lin is not None}
    writers = _writers(source, inputs, timeout_ms)
    followed = {f: _followed(f, [lineage.get(p) for p in places[f]], writers) for f in todo}
    findings = [followed.get(f, f) if f.kind == "key_duplicate" else f for f in report.findings]
    return replace(report, findings=findings)


def _places(f: Finding) -> list[Place]:
    """Where the key's committed copies are: the finding's offsets in its partition, or, spread over
    partitions, the places its cause names."""
    assert f.topic is not None and f.partition is not None and f.cause is not None
    if f.detail is None and f.offsets:
        return [(f.topic, f.partition, o) for o in f.offsets]
    out = {(t.topic or f.topic, f.partition if t.partition is None else t.partition, o)
           for t in f.cause.transactions for o in (t.first_offset, t.last_offset)}
    return sorted(out)


def _lineage_of(cluster: Cluster, stage: Sink, places: list[Place]) -> dict[Place, Place | None]:
    """The input each copy names (None: unreadable lineage, or the copy could not be read)."""
    from confluent_kafka import Consumer, TopicPartition  # lazy: confluent_kafka 13 ms to import

    from eosctl.sink.kafka_topic import lineage_reader  # lazy: eosctl.sink.kafka_topic 36 ms to import

    read = lineage_reader(stage)
    out: dict[Place, Place | None] = {}
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


def _writers(cluster: Cluster, inputs: set[Place], timeout_ms: int) -> dict[Place, Writer]:
    """Who wrote each input record, from a scan of just the inputs' offsets (and their markers)."""
    by_tp: dict[TP, list[int]] = defaultdict(list)
    for t, p, o in inputs:
        by_tp[(t, p)].append(o)
    if not by_tp:
        return {}
    out: dict[Place, Writer] = {}
    try:
        with WireClient(cluster, timeout_ms=timeout_ms) as client:
            client.metadata(sorted({t for t, _ in by_tp}))
            logs = scan_partitions(client, list(by_tp), start={tp: min(os) for tp, os in by_tp.items()},
                                   end={tp: max(os) + 1 for tp, os in by_tp.items()})
    except BrokerError:
        return {}  # the input is gone or unreachable: the copies keep the audited topic's cause
    for tp, offsets in by_tp.items():
        runs = committed_writers(logs[tp])
        firsts = [r[0] for r in runs]
        for o in offsets:
            i = bisect_right(firsts, o) - 1
            if i >= 0 and runs[i][0] <= o <= runs[i][1]:
                _, _, pid, epoch, marker = runs[i]
                out[(*tp, o)] = Writer(tp[0], tp[1], o, pid, epoch, marker)
    return out


def _followed(f: Finding, lineage: list[Place | None], writers: dict[Place, Writer]) -> Finding:
    assert f.cause is not None
    if any(lin is None for lin in lineage) or len(lineage) < 2:
        return f  # some copy has no readable lineage: nothing proven about the input
    distinct = sorted(set(lineage))
    if len(distinct) == 1:
        t, p, o = distinct[0]
        return replace(f, cause=replace(f.cause, summary=(
            f"{f.cause.summary} Every copy derives from the one input record {t}[{p}]@{o}: the stage wrote "
            "it more than once (a replay of the stage).")))
    found = [writers.get(lin) for lin in distinct]  # type: ignore[arg-type]
    if any(w is None for w in found):
        return f  # an input record is no longer committed data in the log (retention, compaction)
    upstream = key_cause(replace(f, topic=distinct[0][0], partition=distinct[0][1]),
                         [w for w in found if w is not None])
    return replace(f, cause=replace(
        f.cause, rule=upstream.rule, transactions=f.cause.transactions + upstream.transactions,
        summary=f"{f.cause.summary.split(': ', 1)[0]}: the stage copied it faithfully from its input, where "
                f"{upstream.summary[0].lower()}{upstream.summary[1:]}"))
