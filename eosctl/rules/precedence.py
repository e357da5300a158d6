"""One finding per sink row, across the rules that judge rows apart: the content check against the key rule.

The offsets' rule and the content check already give a row one finding (eosctl.rules.content compares only
rows at committed data records; a shift's rows are reconciled where they belong). The key rule
(auditors.keydups, Spark's shuffle) groups the keys the rows hold at the offsets they store, before anyone
knows which rows hold another record: a row the content check names as holding another record's key
(``different_record``, ``rewritten_after_leader_change``) or a neighbour's (``shifted_coordinates``) is not
a place of its key, so it is taken out of the key's places here; a key left at one place is no
key_duplicate. Run by the audit's driver over all of its findings (both engines, the incremental audit).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from eosctl.report.findings import Finding
from eosctl.rules.causes import Writer, key_cause

# eosctl.rules.content's kind and the rules whose rows hold another record than the one at their offset
# (different_value's rows hold their record's key: they are places of it); named here, not imported, so
# that the driver doesn't load numpy for them (tests/unit/rules/test_precedence.py checks the names).
KIND = "content_mismatch"
NOT_THEIRS = ("different_record", "rewritten_after_leader_change", "shifted_coordinates")

Place = tuple[str, int, int]


def key_places(f: Finding) -> list[Place]:
    """A key_duplicate's places (topic, partition, offset): its partition's, or the ones its detail names
    when the key is in several partitions ("in T[P]@O, ...")."""
    if not f.detail:
        return [(f.topic or "", f.partition or 0, o) for o in f.offsets or ()]
    out = []
    for part in f.detail.removeprefix("in ").split(", "):
        where, _, offset = part.rpartition("@")
        topic, _, partition = where.rpartition("[")
        out.append((topic, int(partition.rstrip("]")), int(offset)))
    return out


def content_first(findings: Sequence[Finding]) -> list[Finding]:
    """``findings`` with each key_duplicate's places that a content finding names as holding another
    record taken out (the finding dropped where fewer than two are left, its cause told again of the
    others)."""
    spans: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for f in findings:
        if f.kind == KIND and f.cause is not None and f.cause.rule in NOT_THEIRS \
                and f.topic is not None and f.partition is not None and f.first_offset is not None:
            spans.setdefault((f.topic, f.partition), []).append((f.first_offset, f.last_offset or 0))
    if not spans:
        return list(findings)
    out = []
    for f in findings:
        if f.kind != "key_duplicate":
            out.append(f)
            continue
        places = key_places(f)
        kept = [p for p in places if not any(a <= p[2] <= b for a, b in spans.get((p[0], p[1]), ()))]
        if len(kept) == len(places):
            out.append(f)
        elif len(kept) >= 2:
            out.append(_told_again(f, kept))
    return out


def _told_again(f: Finding, kept: list[Place]) -> Finding:
    """The key_duplicate of the places ``kept``, its cause from their writers (as the cause named them)."""
    txns = f.cause.transactions if f.cause is not None else ()
    writers: list[Writer] = []
    for t, p, o in kept:
        txn = next((x for x in txns
                    if (x.topic, x.partition) == (t, p) and x.first_offset <= o <= x.last_offset), None)
        if txn is None:  # beyond what the cause lists: keep its story as it was
            writers = []
            break
        writers.append(Writer(t, p, o, txn.producer_id, txn.producer_epoch, txn.marker_offset))
    offsets = tuple(sorted(o for _, _, o in kept))
    where = {(t, p) for t, p, _ in kept}
    detail = f.detail if len(where) > 1 else None
    if detail:
        detail = "in " + ", ".join(f"{t}[{p}]@{o}" for t, p, o in sorted(kept))
    first = min(kept)
    g = replace(f, topic=first[0], partition=first[1], first_offset=min(offsets), last_offset=max(offsets),
                count=len(kept), offsets=offsets, detail=detail)
    return replace(g, cause=key_cause(g, writers)) if writers else g
