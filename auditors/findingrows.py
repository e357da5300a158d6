"""Findings between an audit task and the driver: Arrow columns one way, Finding objects the other.

A task's findings travel as rows of the task output (auditors.task.OUT_SCHEMA, rec "finding"): built here
column by column rather than a dict per finding, each cause as its JSON text plus the few fields the driver
reads for every finding (eosctl.report.causejson.EAGER), so that the driver makes each Finding without
decoding its cause. At 100k findings the dicts, the decoding and the encoding again were most of the audit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from eosctl.report.causejson import EncodedCause, encode
from eosctl.report.findings import KINDS, Finding

# The finding rows' columns of the task output, in the order finding_columns() gives them.
COLUMNS = ("rec", "topic", "partition", "kind", "first_offset", "last_offset", "count", "detail", "cause",
           "cause_passed_by", "cause_sink_after", "cause_rule")


def finding_columns(findings: Sequence[Finding]) -> dict[str, list[Any]]:
    """The findings as columns named for the task output (COLUMNS). A task's findings have no key or
    offsets (key duplicates are found by the driver)."""
    assert all(f.key is None and f.offsets is None for f in findings)
    causes = [f.cause for f in findings]
    return {
        "rec": ["finding"] * len(findings),
        "topic": [f.topic for f in findings],
        "partition": [f.partition for f in findings],
        "kind": [f.kind for f in findings],
        "first_offset": [f.first_offset for f in findings],
        "last_offset": [f.last_offset for f in findings],
        "count": [f.count for f in findings],
        "detail": [f.detail for f in findings],
        "cause": [None if c is None else encode(c) for c in causes],
        "cause_passed_by": [None if c is None else c.passed_by for c in causes],
        "cause_sink_after": [None if c is None else c.sink_after for c in causes],
        "cause_rule": [None if c is None else c.rule for c in causes],
    }


def findings_from_arrow(table: Any) -> list[Finding]:
    """The Finding of each row of an Arrow table of finding rows (COLUMNS, "rec" aside)."""
    cols = [table.column(name).to_pylist() for name in COLUMNS[1:]]
    return _findings(zip(*cols, strict=True))


def findings_from_rows(rows: Iterable[dict[str, Any]]) -> list[Finding]:
    """The Finding of each finding row given as a dict (Spark's collected rows)."""
    return _findings(tuple(r.get(name) for name in COLUMNS[1:]) for r in rows)


def _findings(rows: Iterable[tuple]) -> list[Finding]:
    out = []
    new = object.__new__
    for topic, partition, kind, first, last, count, detail, text, passed_by, after, rule in rows:
        if kind not in KINDS:
            raise ValueError(f"unknown finding kind {kind!r}")
        f = new(Finding)
        # Finding's own fields, set as its constructor would (it is frozen; no check left to run).
        object.__setattr__(f, "__dict__", {
            "kind": kind, "topic": topic, "partition": partition, "first_offset": first, "last_offset": last,
            "count": count, "key": None, "offsets": None, "detail": detail,
            "cause": None if text is None else EncodedCause.of(kind, text, passed_by, after, rule)})
        out.append(f)
    return out
