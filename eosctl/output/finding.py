"""One finding as text, shared by the audit's renderers (table, JUnit)."""

from __future__ import annotations

from typing import Any

from eosctl.report.findings import Finding, PartitionSummary


def where(f: Finding) -> str:
    if f.first_offset is None:  # invalid_row: the rows have no usable offset
        return "-"
    if f.first_offset == f.last_offset:
        return str(f.first_offset)
    return f"{f.first_offset}..{f.last_offset}"


def extra(f: Finding) -> str:
    parts = []
    if f.key is not None:
        parts.append(f"key {f.key}")
    if f.offsets is not None:
        parts.append("offsets " + ", ".join(map(str, f.offsets)))
    if f.detail:
        parts.append(f.detail)
    return "; ".join(parts)


def short_cause(f: Finding) -> str:
    """The finding's cause in a few words, for a table cell or a JUnit message ("" without a cause);
    ``f.cause.summary`` is the whole sentence."""
    c = f.cause
    if c is None:
        return ""
    kind = c.kind  # a key-lineage kind (lost_key, ...) is explained as the reconciliation's kind it renames
    if kind in ("phantom_aborted", "phantom_uncommitted") or (kind == "gap" and c.transactions):
        writers = _writers(c.transactions, c.omitted)
    else:
        writers = ""
    if kind == "phantom_aborted":
        fenced = " (fenced zombie)" if any(t.fenced for t in c.transactions) else ""
        return f"sink read aborted data{fenced}: {writers}"
    if kind == "phantom_uncommitted":
        return f"sink read uncommitted data: {writers}"
    if kind == "phantom_marker":
        return "sink wrote markers as rows: " + ", ".join(
            f"{m.type}@{m.offset} pid {m.producer_id}" for m in c.markers[:3]) + _more(len(c.markers) - 3)
    if kind == "gap":
        how = {"stored_offsets": "skipped: sink's stored offsets are past it",
               "committed_offsets": "skipped: group's committed offset is past it"}.get(c.passed_by or "")
        if how is None:
            how = f"skipped: sink holds offset {c.sink_after} after it" if c.sink_after is not None else \
                "not yet consumed (lag)"
        return how + (f"; written by {writers}" if writers else "")
    if kind == "duplicate":
        rows = f"{c.rows_max} rows per offset" if c.rows_min == c.rows_max else \
            f"{c.rows_min}-{c.rows_max} rows per offset"
        when = ""
        if c.order_column is not None and c.repeated_write is not None:
            lo, hi = c.repeated_write
            when = f", again at {c.order_column} {lo if lo == hi else f'{lo}..{hi}'}"
        return f"replay: {rows}{when}"
    if kind == "key_duplicate":
        sessions = ", ".join(dict.fromkeys(f"pid {t.producer_id} e{t.producer_epoch}"
                                           for t in c.transactions))
        return f"{(c.rule or '').replace('_', ' ')}: {sessions}"
    if kind == "phantom_beyond_hw":
        return "rows the log never had"
    if kind == "offset_mismatch":
        return "stored and committed offsets disagree"
    if kind == "ahead_of_commit":
        return "written before the stage's commit: a restart writes them again"
    if kind == "out_of_order":
        return "copied after a later record: the replica's producer reordered it"
    if kind == "aggregate_mismatch":
        return (c.rule or "").replace("_", " ")
    if kind in _STATE:
        return _STATE[kind] + (f": {_writers(c.transactions, c.omitted)}" if c.transactions else "")
    if kind in _SHAPES:
        return _SHAPES[kind]
    return "rows without valid source coordinates"


# The kinds of a pipeline's shape (eosctl.rules.deadletter, the sink's route) in a few words.
_SHAPES = {"misrouted": "routed here, though the sink's route does not select it",
           "sink_and_dlq": "written to the sink and dead-lettered too",
           "dlq_duplicate": "dead-lettered more than once",
           "dlq_aborted": "dead-lettered from an aborted or open transaction"}


# A state sink's kinds (eosctl.rules.upsert) in a few words.
_STATE = {"stale_value": "lost update: an older committed value over a newer one",
          "aborted_value": "sink read aborted data", "uncommitted_value": "sink read uncommitted data",
          "resurrected_key": "delete not applied", "missing_key": "key never written (or deleted)",
          "unknown_key": "no record has this key", "value_mismatch": "no record of the key has this value",
          "aggregate_mismatch": "fold differs from the committed records'"}


def _writers(txns: tuple, omitted: int) -> str:
    parts = []
    for t in txns[:2]:
        marker = f" {'ABORT' if t.outcome == 'aborted' else 'COMMIT'}@{t.marker_offset}" \
            if t.marker_offset is not None else f" {t.outcome.replace('_', '-')}"
        parts.append(f"pid {t.producer_id} e{t.producer_epoch}{marker}")
    return ", ".join(parts) + _more(len(txns) - 2 + omitted)


def _more(n: int) -> str:
    return f" +{n} more" if n > 0 else ""


def window_note(p: PartitionSummary) -> str:
    """A partition's window for people: "window 1200-1999, 40 rows outside, 7 expired"."""
    w = p.window
    if w is None:
        return ""
    first = p.log_start_offset if w.first is None else w.first
    end = p.last_stable_offset if w.end is None else w.end
    text = f"window {first}-{end - 1}" if end > first else f"window empty at {first}"
    if p.outside_window:
        text += f", {p.outside_window} rows outside"
    if w.floor is not None:
        text += f", retained from {w.floor}"
    if p.expired:
        text += f", {p.expired} expired"
    return text


def standing(report: Any, f: Finding) -> str:
    """Where a finding stands against the audit's policy, for people: "" (it fails), "ignored" (not in
    --fail-on), "waived", "waiver expired", or "warn" (its kind's level is warn)."""
    if f.kind not in report.fail_on:
        return "ignored"
    if f.waiver is not None:
        return "waiver expired" if f.waiver.expired else "waived"
    level = report.levels.get(f.kind)
    if level is not None and level["level"] != "fail":
        return "warn" if level["level"] == "warn" else "below its level"
    return ""


def waiver_text(f: Finding) -> str:
    """A finding's waiver in one line: "waived: REASON (REFERENCE), until EXPIRES"."""
    if f.waiver is None:
        return ""
    w = f.waiver.waiver
    head = f"waiver expired {w.expires}" if f.waiver.expired else "waived"
    return (f"{head}: {w.reason}" + (f" ({w.reference})" if w.reference else "")
            + (f", until {w.expires}" if w.expires and not f.waiver.expired else ""))
