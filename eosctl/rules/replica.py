"""The rules of a MirrorMaker 2 replica hop (`lineage = "replica"`): its findings told as what MM2 did, with
the MM2 setting each points to (docs/audit.md, "MirrorMaker 2"), and its out_of_order findings.

The replica's pairing with its source is read by ``eosctl.sink.replica`` (the frozen hop rows and their read
point: ``reordered``) and handed in by the audit's driver (auditors.passes); this module only decides what
they mean.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from eosctl.config.model import Sink
from eosctl.report.findings import Cause, Finding

REPLICA = "replica"  # the lineage of a MirrorMaker 2 replica (eosctl.config.values.LINEAGE_MODES)

# A replica's source topic and the runs of source records it holds out of order: (partition, the run's
# source offsets), as eosctl.sink.replica.reordered reads them from the frozen hop.
Reordered = tuple[str, list[tuple[int, list[int]]]]


def _span(f: Finding) -> str:
    return (f"offset {f.first_offset}" if f.first_offset == f.last_offset
            else f"offsets {f.first_offset}..{f.last_offset}")


def _records(n: int) -> str:
    return f"{n} record{'s' * (n != 1)}"


def replica_findings(given: Sink, findings: list[Finding], late: Reordered) -> list[Finding]:
    """A replica hop's findings told as what MirrorMaker 2 did (the settings each points to are in
    docs/audit.md, "MirrorMaker 2"), and its out_of_order findings (``late``, read from the frozen hop).
    ``given``: the hop's sink as configured."""
    if given.lineage != REPLICA:
        return findings
    replica = given.kafka_topic
    # MM2's aliases, as the config names the two clusters (mm2.properties' `clusters = src, dr`).
    src = given.stage_cluster.name if given.stage_cluster is not None else "SOURCE"
    dst = given.cluster or "TARGET"
    out = []
    for f in findings:
        if f.cause is None or f.first_offset is None:
            out.append(f)
            continue
        where = f"{f.topic}[{f.partition}] {_span(f)}"
        if f.kind == "duplicate":
            summary = (f"MirrorMaker 2 copied {where} to {replica} again ({f.count} extra "
                       f"cop{'ies' if f.count != 1 else 'y'}): a task restarted without exactly-once "
                       "support: records replayed from its last committed source offset (set "
                       f"`{dst}.exactly.once.source.support = enabled` and read_committed; docs/audit.md)")
        elif f.kind in ("phantom_aborted", "phantom_uncommitted"):
            state = "aborted" if f.kind == "phantom_aborted" else "still open"
            summary = (f"{where} ({_records(f.count)} of {state} transactions at the source) are in "
                       f"{replica}: MM2 consumed read_uncommitted: set "
                       "`source.consumer.isolation.level=read_committed` (in mm2.properties: "
                       f"`{src}.consumer.isolation.level = read_committed`)")
        elif f.kind == "gap":
            summary = (f"{where} ({_records(f.count)} committed at the source) never reached {replica}, "
                       "though later records did: they were deleted at the source before MM2 read them "
                       "(retention), or filtered out (a transform), or written elsewhere")
        else:
            out.append(f)
            continue
        out.append(replace(f, cause=replace(f.cause, summary=summary)))
    return out + out_of_order(late, replica, findings)


def out_of_order(late_runs: Reordered, replica: str | None,
                 findings: Sequence[Finding] = ()) -> list[Finding]:
    """Source records the replica holds once, but after records that follow them: one finding per run of
    consecutive source records (a late batch; markers between them don't split it), every record of it
    counted (``late_runs``: the source topic and its late records; ``replica``: the replica topic). A late
    copy of an aborted or open record is its phantom (``findings``) and only that: one finding per row
    (docs/audit.md); the records around it are runs of their own."""
    topic, late = late_runs
    phantoms: dict[int, list[tuple[int, int]]] = {}
    for f in findings:
        if f.kind.startswith("phantom_") and f.topic == topic and f.first_offset is not None:
            phantoms.setdefault(f.partition or 0, []).append((f.first_offset, f.last_offset or 0))
    out = []
    for p, offsets in late:
        run: list[int] = []
        for o in [*offsets, None]:
            if o is not None and not any(a <= o <= b for a, b in phantoms.get(p, ())):
                run.append(o)
                continue
            if run:
                out.append(_late(topic, p, run, replica))
            run = []
    return out


def _late(topic: str, p: int, run: list[int], replica: str | None) -> Finding:
    first, last, n = run[0], run[-1], len(run)
    after = "a later record" if n == 1 else "later records"
    f = Finding("out_of_order", topic, p, first, last, n, detail=f"in {replica}[{p}] after {after}")
    what = (f"offset {first} is" if n == 1 else f"offsets {first}..{last} ({_records(n)}) are")
    them = "it" if n == 1 else "them"
    summary = (f"{topic}[{p}] {what} in {replica} after records that follow {them} at the "
               "source: the replica's producer reordered a retried batch (MM2's producer needs "
               "`enable.idempotence=true`, or `max.in.flight.requests.per.connection=1`)")
    return replace(f, cause=Cause("out_of_order", summary))
