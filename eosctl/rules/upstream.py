"""A key duplicate followed back through the Kafka stage that wrote the audited topic.

A sink hop audited alone (`eosctl audit -p PREFIX`) judges a key duplicate by who wrote the audited topic:
the stage, in one or two of its transactions. When the config names that stage (a pipeline whose sink is
`kafka_topic` = the audited topic, with offset lineage), each copy's lineage names the input record it was
derived from. Copies of two input records that both carry the key were copied faithfully: the duplicate is
the input's, judged by the input's writers (an upstream retry, typically). Copies of one input record are
the stage's own doing (it wrote one input twice: a replay). That is what auditing the pipeline hop by hop
concludes (eosctl.report.findings.follow_stages), at the cost of reading the duplicates' records, not of
auditing the stage.

The driver (auditors.passes) reads what this module asks for (``wanted``: the copies; their lineage; the
inputs' logs) and hands it in; this module only decides.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import replace

from eosctl.cluster.model import TP, PartitionLog
from eosctl.config.model import Config
from eosctl.report.findings import AuditReport, Finding
from eosctl.rules.causes import Writer, committed_writers, key_cause

# Copies read back at most (a few per key duplicate); past it, the rest keep the audited topic's cause.
MAX_PLACES = 2_000

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


def to_follow(report: AuditReport) -> dict[Finding, list[Place]]:
    """The key duplicates to follow through the stage, each with the places of its committed copies."""
    return {f: _places(f) for f in report.findings
            if f.kind == "key_duplicate" and f.cause is not None and f.key}


def wanted(places: Mapping[Finding, list[Place]]) -> list[Place]:
    """The copies to read back (their lineage), in order, at most MAX_PLACES."""
    return sorted({p for ps in places.values() for p in ps})[:MAX_PLACES]


def inputs_by_partition(lineage: Mapping[Place, Place | None]) -> dict[TP, list[int]]:
    """The input records the copies name, per input partition: whose writers the driver scans."""
    by_tp: dict[TP, list[int]] = defaultdict(list)
    for t, p, o in sorted({lin for lin in lineage.values() if lin is not None}):
        by_tp[(t, p)].append(o)
    return dict(by_tp)


def writers_of(logs: Mapping[TP, PartitionLog], inputs: Mapping[TP, list[int]]) -> dict[Place, Writer]:
    """Who wrote each input record, from the scan of just the inputs' offsets (and their markers); an
    input outside the committed data (retention, compaction, an abort) has none."""
    out: dict[Place, Writer] = {}
    for tp, offsets in inputs.items():
        if tp not in logs:
            continue
        runs = committed_writers(logs[tp])
        firsts = [r[0] for r in runs]
        for o in offsets:
            i = bisect_right(firsts, o) - 1
            if i >= 0 and runs[i][0] <= o <= runs[i][1]:
                _, _, pid, epoch, marker = runs[i]
                out[(*tp, o)] = Writer(tp[0], tp[1], o, pid, epoch, marker)
    return out


def follow_upstream(report: AuditReport, places: Mapping[Finding, list[Place]],
                    lineage: Mapping[Place, Place | None], writers: Mapping[Place, Writer]) -> AuditReport:
    """The report with each key duplicate of ``places`` (to_follow) told through the stage: ``lineage``,
    the input each copy names (None or absent: unread); ``writers``, who wrote each input (writers_of)."""
    if not places:
        return report
    followed = {f: _followed(f, [lineage.get(p) for p in ps], writers) for f, ps in places.items()}
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


def _followed(f: Finding, lineage: list[Place | None], writers: Mapping[Place, Writer]) -> Finding:
    assert f.cause is not None
    read = [lin for lin in lineage if lin is not None]
    if len(read) < len(lineage) or len(lineage) < 2:
        return f  # some copy has no readable lineage: nothing proven about the input
    distinct = sorted(set(read))
    if len(distinct) == 1:
        t, p, o = distinct[0]
        return replace(f, cause=replace(f.cause, summary=(
            f"{f.cause.summary} Every copy derives from the one input record {t}[{p}]@{o}: the stage wrote "
            "it more than once (a replay of the stage).")))
    found = [writers.get(lin) for lin in distinct]
    if any(w is None for w in found):
        return f  # an input record is no longer committed data in the log (retention, compaction)
    upstream = key_cause(replace(f, topic=distinct[0][0], partition=distinct[0][1]),
                         [w for w in found if w is not None])
    return replace(f, cause=replace(
        f.cause, rule=upstream.rule, transactions=f.cause.transactions + upstream.transactions,
        summary=f"{f.cause.summary.split(': ', 1)[0]}: the stage copied it faithfully from its input, where "
                f"{upstream.summary[0].lower()}{upstream.summary[1:]}"))
