"""What an engine found, from its tasks' output rows: summaries, findings and timings (either engine)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from auditors.findingrows import findings_from_rows
from eosctl.base.errors import BrokerError, EosctlError, SinkError
from eosctl.report.findings import Finding, LogSegment, PartitionSummary
from eosctl.report.window import PartitionWindow

if TYPE_CHECKING:
    pass

@dataclass
class Outcome:
    """What an engine found; the entry point (auditors.engine) turns it into the report."""

    summaries: list[PartitionSummary]
    findings: list[Finding]
    timings: dict[str, float]  # partitions_seconds, keys_seconds, scan_seconds, reconcile_seconds
    tasks: int = 0  # the tasks the engine ran (groups of partitions)
    # With a key column on the Spark engine: "spark" where Spark read the sink's key rows itself
    # (auditors.spark_sink), "tasks" where the tasks read them; None otherwise.
    keys_read_by: str | None = None


def outcome(rows: Iterable[dict[str, Any]], key_findings: list[Finding], partitions_seconds: float,
            keys_seconds: float, tasks: int = 0, found: Sequence[Finding] = ()) -> Outcome:
    """Task output rows (no key rows) and the key rule's findings, from either engine; ``found``: the
    tasks' findings where the engine made them from the rows already (auditors.findingrows)."""
    rows = list(rows)
    _raise_task_errors(r for r in rows if r["rec"] == "error")
    summaries = [r for r in rows if r["rec"] == "summary"]
    findings = [*found, *findings_from_rows(r for r in rows if r["rec"] == "finding")]
    spent = [r for r in rows if r["rec"] == "task"]
    # Summed over tasks: with several tasks at once they can exceed the phase's wall time.
    timings = {"partitions_seconds": round(partitions_seconds, 3), "keys_seconds": round(keys_seconds, 3),
               "scan_seconds": round(sum(r["scan_seconds"] or 0.0 for r in spent), 3),
               "reconcile_seconds": round(sum(r["reconcile_seconds"] or 0.0 for r in spent), 3)}
    return Outcome([_summary_from(r) for r in summaries], findings + key_findings, timings, tasks)


def _raise_task_errors(errors: Iterable[dict[str, Any]]) -> None:
    for r in errors:
        cls = {"SinkError": SinkError, "BrokerError": BrokerError}.get(r.get("kind") or "", EosctlError)
        raise cls(r["detail"])


def _summary_from(r: dict[str, Any]) -> PartitionSummary:
    detail = r.get("detail")
    segments = None if detail is None else tuple(LogSegment.from_dict(g) for g in json.loads(detail))
    windowed = r.get("outside_window") is not None
    window = PartitionWindow(r.get("window_first"), r.get("window_end"), r.get("window_floor")) \
        if windowed else None
    return PartitionSummary(r["topic"], r["partition"], r["log_start_offset"], r["last_stable_offset"],
                            r["high_watermark"], r["expected_records"], r["sink_rows"], r["unverifiable"],
                            r["present"], segments, window, r.get("outside_window") or 0,
                            r.get("expired") or 0, r.get("dead_lettered"), r.get("filtered"))
