"""The rules of a Kafka-to-Kafka hop (a consume-transform-produce stage audited as a sink): its findings
named for keys when `lineage = "key"` pairs outputs with inputs (lost_key, duplicate_key, phantom_key),
and its outputs of input past the stage group's committed offsets (ahead_of_commit).

The frozen hop's rows are read by ``eosctl.sink.kafka_topic`` (``HopRows``, ``committed_after``) and handed
in by the audit's driver (auditors.passes, while the frozen copy exists); this module only decides what
they mean.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol

from eosctl.cluster.model import TP
from eosctl.config.model import Sink
from eosctl.report.findings import Cause, Finding

# A frozen hop row as the rules read it: (key, output partition, output offset, input offset), and with its
# input named: (input topic, input partition, input offset, output partition, output offset).
Paired = tuple[str | None, int, int, int]
Placed = tuple[str, int, int, int, int]


class HopOutputs(Protocol):
    """The outputs a frozen hop holds for a range of one input partition (eosctl.sink.kafka_topic.HopRows)."""

    def outputs_of(self, topic: str | None, partition: int | None, first: int,
                   last: int | None) -> list[Paired]: ...

# The reconciliation's kinds as key lineage names them (eosctl.report.rootcauses.KEY_KINDS, reversed).
_KEY_KIND = {"gap": "lost_key", "duplicate": "duplicate_key", "phantom_aborted": "phantom_key",
             "phantom_uncommitted": "phantom_key"}


def key_findings(hop: HopOutputs, topic: str | None, findings: list[Finding]) -> list[Finding]:
    """A `lineage = "key"` hop's findings named for keys, each with the outputs paired with its input
    offsets (``hop``: the frozen hop's rows; ``topic``: its output topic as the user named it): lost_key,
    duplicate_key and phantom_key, with exact offsets on both sides (input: the finding's; output: its
    detail). A phantom_key counts input records (a stage may have written one twice: its outputs are in
    detail)."""
    out = []
    for f in findings:
        kind = _KEY_KIND.get(f.kind)
        if kind is None or f.first_offset is None:
            out.append(f)
            continue
        rows = hop.outputs_of(f.topic, f.partition, f.first_offset, f.last_offset)
        keys = sorted({k for k, _, _, _ in rows if k is not None})
        detail = (f"key{'s' * (len(keys) != 1)} {', '.join(keys[:5])}" if keys else "") + (
            f"; {_outputs(topic, [(p, o) for _, p, o, _ in rows])}" if rows else "; no output")
        changed = replace(f, kind=kind, detail=detail.lstrip("; "))
        if kind == "phantom_key":
            changed = replace(changed, count=len({o for _, _, _, o in rows}) or f.count)
        elif kind == "duplicate_key":
            changed = _replayed(changed, f.count)
        out.append(changed)
    return out


def _outputs(topic: str | None, places: list[tuple[int, int]]) -> str:
    """``outputs TOPIC[p]@o, ...`` (the first 20)."""
    shown = ", ".join(f"[{p}]@{o}" for p, o in places[:20]) + (" ..." if len(places) > 20 else "")
    return f"outputs {topic}{shown}"


def _replayed(f: Finding, extra: int) -> Finding:
    """A stage's duplicate told as what it is: input processed again from a committed offset below it."""
    if f.cause is None:
        return f
    span = f"offset {f.first_offset}" if f.first_offset == f.last_offset else (
        f"offsets {f.first_offset}..{f.last_offset}")
    summary = (f"The stage wrote outputs of {f.topic}[{f.partition}] {span} again ({extra} extra "
               f"output{'s' * (extra != 1)}): it wrote them before committing those input offsets, then a "
               "restart or rebalance resumed from its committed offset below them and processed them again "
               "(at-least-once; exactly-once commits outputs and offsets in one transaction).")
    return replace(f, cause=replace(f.cause, summary=summary))


def ahead_of_commit(given: Sink, after: dict[TP, int] | None, rows: list[Placed], topic: str | None,
                    findings: list[Finding]) -> list[Finding]:
    """A hop's outputs whose input is past the stage group's committed offsets, read again after the
    output (``after``; so a commit between the reads is lag, not this): the stage wrote them before it
    committed that input, and a restart now writes them again. ``given``: the hop's sink as configured;
    ``rows``: the frozen hop's rows with their inputs; ``topic``: its output topic. One finding per input
    partition, counting input records, the outputs in detail; rows already in another finding (a phantom)
    are that finding's. Nothing for a hop without a group (``after`` None: no committed offsets)."""
    if after is None:
        return []
    taken: dict[TP, list[tuple[int, int | None]]] = {}
    for f in findings:
        if f.topic is not None and f.partition is not None and f.first_offset is not None:
            taken.setdefault((f.topic, f.partition), []).append((f.first_offset, f.last_offset))
    ahead: dict[TP, list[tuple[int, int, int]]] = {}
    for t, p, o, op, oo in rows:
        if t not in given.stage_topics or o < after.get((t, p), 0):
            continue
        if any(lo <= o <= (hi if hi is not None else lo) for lo, hi in taken.get((t, p), ())):
            continue
        ahead.setdefault((t, p), []).append((o, op, oo))
    out = []
    for (t, p), found in sorted(ahead.items()):
        inputs = len({o for o, _, _ in found})
        committed = after.get((t, p))
        mark = f"committed offset {committed}" if committed is not None else "no committed offset"
        outputs = _outputs(topic, [(op, oo) for _, op, oo in found])
        f = Finding("ahead_of_commit", t, p, found[0][0], found[-1][0], inputs,
                    detail=f"{outputs}; group {given.stage_group} {mark}")
        summary = (f"The stage wrote {len(found)} output{'s' * (len(found) != 1)} of {inputs} input "
                   f"record{'s' * (inputs != 1)} of {t}[{p}] at or past its group's {mark}: it writes "
                   "before it commits, so a restart now processes those inputs again and writes them again "
                   "(at-least-once).")
        out.append(replace(f, cause=Cause("ahead_of_commit", summary)))
    return out
