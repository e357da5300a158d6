"""`eosctl explain`: one offset's facts as a table, or a report's root causes with their findings."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.text import Text

from eosctl.base.durations import human
from eosctl.base.safetext import text
from eosctl.output.finding import short_cause, where
from eosctl.output.records import cut, field_text
from eosctl.output.terminal import table, time_text
from eosctl.report.findings import AuditReport


def offset_table(doc: dict[str, Any]) -> Any:
    """Field / value rows, then the producer's epoch history around the offset, then the sentence."""
    rows: list[tuple[str, Any]] = [("offset", text(f"{doc['topic']}[{doc['partition']}] {doc['offset']}")),
                                   ("kind", doc["kind"])]
    log = doc["log"]
    rows.append(("log", f"log start {log['log_start_offset']}, LSO {log['last_stable_offset']}, "
                        f"HW {log['high_watermark']}"
                        + ("; delivered to read_committed" if log["read_committed_delivers"] else "")))
    b = doc["batch"]
    if b is not None:
        seq = "-" if b["base_sequence"] < 0 else f"{b['base_sequence']}..{b['last_sequence']}"
        rows.append(("batch", f"offsets {b['base_offset']}..{b['last_offset']}, producer {b['producer_id']} "
                              f"epoch {b['producer_epoch']}, sequence {seq}"
                              + (", transactional" if b["is_transactional"] else "")
                              + (f", {b['marker']} marker" if b["marker"] else "")))
        # When it was written: the batch's timestamps (the record's own lies between them).
        clock = "LogAppendTime, the broker's clock" if b.get("log_append_time") else \
            "CreateTime, the producer's clock"
        first, last = time_text(b["first_timestamp"]), time_text(b["max_timestamp"])
        rows.append(("written", (first if first == last else f"between {first} and {last}")
                     + f" UTC ({clock})"))
    t = doc["transaction"]
    if t is not None:
        rows.append(("transaction", f"producer {t['producer_id']} epoch {t['producer_epoch']}, offsets "
                                    f"{t['first_offset']}..{t['last_offset']}, {t['outcome']}"
                                    + (f" (marker at {t['marker_offset']}, epoch {t['marker_epoch']})"
                                       if t["marker_offset"] is not None else "")
                                    + (", FENCED" if t["fenced"] else "")))
    p = doc["producer"]
    if p is not None:
        rows.append(("producer", f"{p['producer_id']}: epochs {p['epochs']}, protocol {p['protocol']}, "
                                 f"{p['fencing_events']} fencing"))
    r = doc.get("record")
    if r is not None:
        rows.append(("key", field_text(r["key_decoded"], r["key"])))
        rows.append(("value", field_text(r["value_decoded"], r["value"])))
        if r["headers"]:
            rows.append(("headers", cut(", ".join(f"{h['key']}={h['value']}" for h in r["headers"]))))
    g = doc["group"]
    if g is not None:
        rows.append(("group", text(f"{g['group']}: committed {g['committed_offset']}"
                                   + ("" if g["consumed"] is None else
                                      " (consumed)" if g["consumed"] else " (not reached yet)"))))
    s = doc["sink"]
    if s is not None:
        rows.append(("sink rows", s["rows"]))
        if s["keys"]:
            rows.append(("key", text(", ".join(s["keys"]))))
        if s["same_key"]:
            rows.append(("same key at", text(", ".join(f"{x['topic']}[{x['partition']}]@{x['offset']}"
                                                       + (f" ({x['kind']})" if x["kind"] else "")
                                                       for x in s["same_key"][:20]))))
        if s["stored_offset"] is not None:
            rows.append(("sink stored", f"next offset {s['stored_offset']}"))
        if s["write_time_column"] is None:
            rows.append(("sink wrote", "not known: the sink's config names no write_time_column"))
        elif s["written_at"]:
            rows.append(("sink wrote", text("; ".join(_written(w) for w in s["written_at"][:20])
                                            + f" ({s['write_time_column']})")))
    r = doc.get("replica")
    if r is not None:  # a MirrorMaker 2 replica pipeline: its copies, and each group's failover
        copies = ", ".join(f"@{o}" for o in r["copies"][:20]) or "none"
        rows.append(("replica", text(f"{r['topic']}: copies {copies}")))
        for g in r["groups"]:
            rows.append(("failover", text(f"{g['group']} resumes at {r['topic']}@{g['resume']} "
                                          f"(committed {g['source_committed']} at the source): "
                                          f"{g['outcome']}")))
    parts: list[Any] = [table(None, ["field", "value"], rows, show_header=False)]
    if p is not None and p["epoch_history"]:
        parts.append(table(f"Epochs of producer {p['producer_id']} around offset {doc['offset']}",
                           ["offset", "epoch", "fencing", "why"],
                           [(e["offset"], f"{e['old_epoch']} -> {e['new_epoch']}",
                             "yes" if e["fencing"] else "no", e["why"]) for e in p["epoch_history"]]))
    parts.append(text(doc["summary"], style="bold"))
    parts += [text(f"warning: {w}", style="yellow") for w in doc["warnings"]]
    return Group(*parts)


def _written(w: dict[str, Any]) -> str:
    """One row's write time, and how long after the record's timestamp."""
    if w["timestamp_ms"] is None:
        return str(w["value"])
    when = time_text(w["timestamp_ms"]) + " UTC"
    lag = w["after_record_ms"]
    if lag is None:
        return when
    # To the second, as the times are shown: a batch's records a few milliseconds apart have one lag.
    lo, hi = round(lag["min_ms"] / 1000), round(lag["max_ms"] / 1000)
    if hi < 0:
        return f"{when}, {human(-hi)} before the record's timestamp (their clocks differ)"
    span = human(hi) if human(max(lo, 0)) == human(hi) else f"{human(max(lo, 0))}..{human(hi)}"
    return f"{when}, {span} after the record"


def report_document(report: AuditReport, origin: str) -> dict[str, Any]:
    """The root causes of a report, each with its findings (`explain REPORT.json --format json`)."""
    return {"source": origin, "verdict": report.verdict,
            "root_causes": [{**r.to_dict(), "findings": [{"index": i, **report.findings[i].to_dict()}
                                                         for i in r.findings]}
                            for r in report.root_causes]}


# Findings listed per root cause in the table: a person reads the first ones; all of them are in
# `--format json` (a table of a million rows took minutes to lay out).
TABLE_FINDINGS = 100


def report_table(report: AuditReport, origin: str) -> Any:
    parts: list[Any] = [text(f"{origin}: {report.verdict.upper()}, {len(report.findings)} findings",
                             style="bold")]
    if not report.findings:
        parts.append(Text("no findings: nothing to explain"))
    for n, r in enumerate(report.root_causes, 1):
        parts.append(Text(""))
        parts.append(text(f"{n}. {r.rule}: {r.summary}", style="bold"))
        listed = r.findings[:TABLE_FINDINGS]
        parts.append(table(None, ["kind", "partition", "offsets", "count", "cause"],
                           [(f.kind, text(f"{f.topic}[{f.partition}]"), where(f), f.count,
                             text(short_cause(f))) for f in (report.findings[i] for i in listed)]))
        if len(r.findings) > len(listed):
            parts.append(Text(f"... and {len(r.findings) - len(listed)} more findings of this root cause "
                              "(all of them: --format json)"))
    return Group(*parts)
