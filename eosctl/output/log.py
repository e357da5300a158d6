"""`eosctl log`: its JSON document (a remote dump-log of one partition) and its tables.

`batches` is null with --no-batches; otherwise it covers `batches_window`, at most --limit offsets from
the scan start (so memory stays bounded whatever the range): page on with --from.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from rich.text import Text

from eosctl.base import safetext
from eosctl.cluster.model import Kind
from eosctl.output.records import field_text
from eosctl.output.terminal import table
from eosctl.txn import fencing
from eosctl.txn.rotation import rotations

TABLE_ROWS = 200  # rows per section in table output; JSON is always complete


def log_document(plog: Any, window: tuple[int, int, bool] | None,
                 records: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The stable JSON form of a scanned partition (see the module docstring); ``records``: with --records,
    the data records of the window as eosctl.inspection.records documents them."""
    d = plog.to_dict()
    rotated = rotations(plog)
    producers = [{**_producer_doc(d["producers"][str(pid)], p), "continues_producer_id": rotated.get(pid)}
                 for pid, p in sorted(plog.producers.items())]
    # The coordinator names only the id a rotated transactional id moved to: its old id takes that name.
    named = {p["producer_id"]: p.get("transactional_id") for p in producers}
    for new, old in rotated.items():
        for p in producers:
            if p["producer_id"] == old and not p.get("transactional_id") and named.get(new):
                p["transactional_id"] = named[new]
    return {
        "topic": plog.topic,
        "partition": plog.partition,
        "log_start_offset": plog.log_start_offset,
        "high_watermark": plog.high_watermark,
        "last_stable_offset": plog.last_stable_offset,
        "scanned_from": plog.scanned_from,
        "scanned_to": plog.scanned_to,
        "counts": {k.value: plog.count(k) for k in Kind},
        "ranges": d["ranges"],
        "transactions": d["transactions"],
        "aborted_ranges": [{k: r[k] for k in ("first", "last", "producer_id", "producer_epoch")}
                           for r in d["ranges"] if r["kind"] == Kind.ABORTED.value],
        # The marker batch's own epoch, as in batches[] and ranges: a fencing ABORT and every v2 marker
        # carry a newer epoch than the data they close.
        "markers": [{"offset": t.marker_offset, "type": t.outcome, "producer_id": t.producer_id,
                     "producer_epoch": t.producer_epoch if t.marker_epoch is None else t.marker_epoch}
                    for t in sorted(plog.transactions, key=lambda t: t.marker_offset or -1)
                    if t.marker_offset is not None],
        "producers": producers,
        "batches": d["batches"],
        "batches_window": None if window is None else {"from": window[0], "to": window[1],
                                                        "complete": window[2]},
        "leader_epochs": d["leader_epochs"],
        "records": records,
        "warnings": d["warnings"],
    }


def _producer_doc(d: dict[str, Any], p: Any) -> dict[str, Any]:
    """A producer's JSON entry: its state plus the verdicts
    (eosctl.txn.fencing.fencing_events)."""
    verdicts = (fencing.bump_verdict(p, b) for b in p.epoch_bumps)
    bumps = [{**b, "fencing": is_fencing, "why": why, "routine": fencing.routine(p, bump)}
             for b, bump, (is_fencing, why) in zip(d["epoch_bumps"], p.epoch_bumps, verdicts, strict=True)]
    return {**d, "epoch_bumps": bumps, "current_epoch": p.current_epoch, "protocol": p.protocol,
            "fencing_events": fencing.fencing_events(p), "timeouts": fencing.timeouts(p),
            "routine": fencing.routine_summary(p)}


def _ts(ms: int | None, date: bool = True) -> str | None:
    if ms is None or ms < 0:
        return None
    fmt = "%Y-%m-%d %H:%M:%S.%f" if date else "%H:%M:%S.%f"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime(fmt)[:-3]


def _capped(rows: list[Any]) -> tuple[list[Any], str | None]:
    if len(rows) <= TABLE_ROWS:
        return rows, None
    return rows[:TABLE_ROWS], f"... {len(rows) - TABLE_ROWS} more (use --format json, or narrow --from/--to)"


def render_log(out: Any, doc: dict[str, Any]) -> None:
    from eosctl.txn.producers import epochs_text  # lazy: see docs/imports.md

    c = doc["counts"]
    out.print(Text.assemble(
        safetext.text(f"{doc['topic']}-{doc['partition']}", style="bold"),
        f"  log start {doc['log_start_offset']}  "
        f"LSO {doc['last_stable_offset']}  HW {doc['high_watermark']}  "
        f"scanned {doc['scanned_from']}..{doc['scanned_to'] - 1}: {c['DATA']} data, "
        f"{c['MARKER']} markers, {c['ABORTED']} aborted, {c['OPEN']} open, {c['HOLE']} holes"))
    epochs = doc["leader_epochs"]
    if epochs:
        out.print(leader_epochs_text(epochs), highlight=False)
    if doc["batches"] is not None:
        rows, more = _capped([
            (f"{b['base_offset']}..{b['last_offset']}", b["record_count"], b["producer_id"],
             b["producer_epoch"],
             "-" if b["base_sequence"] < 0 else f"{b['base_sequence']}..{b['last_sequence']}",
             "yes" if b["is_transactional"] else "no", "yes" if b["is_control"] else "no", b["marker"],
             _ts(b["first_timestamp"], date=False), _ts(b["max_timestamp"], date=False))
            for b in doc["batches"]])
        w = doc["batches_window"]
        title = "Batches" + ("" if w["complete"] else f" (offsets {w['from']}..{w['to'] - 1} only; "
                                                      f"page with --from {w['to']})")
        out.print(table(title, ["offsets", "count", "pid", "epoch", "sequence", "txn", "ctrl", "marker",
                                "first ts (UTC)", "max ts"], rows))
        if more:
            out.print(more)
    if doc["records"] is not None:
        # A key or value decoded through the registry: its schema and fields (eosctl.output.records).
        rows, more = _capped([(r["offset"], _cell(r["key"], r["key_decoded"]),
                               _cell(r["value"], r["value_decoded"]), _ts(r["timestamp"], date=False),
                               r["compression"]) for r in doc["records"]])
        out.print(table("Records", ["offset", "key", "value", "timestamp (UTC)", "codec"], rows))
        if more:
            out.print(more)
    rows, more = _capped([(t["producer_id"], t["producer_epoch"], f"{t['first_offset']}..{t['last_offset']}",
                           t["data_records"], t["outcome"], t["marker_offset"], t["marker_epoch"])
                          for t in doc["transactions"]])
    cols = ["pid", "epoch", "offsets", "records", "outcome", "marker", "marker epoch"]
    out.print(table("Transactions", cols, rows))
    if more:
        out.print(more)
    rows, more = _capped([(r["first"], r["last"], r["last"] - r["first"] + 1, r["producer_id"],
                           r["producer_epoch"]) for r in doc["aborted_ranges"]])
    out.print(table("Aborted ranges", ["first", "last", "count", "pid", "epoch"], rows))
    if more:
        out.print(more)
    out.print(table("Producers", ["pid", "transactional id", "epochs", "batches", "records", "last sequence",
                                  "last timestamp", "open txn from", "txn protocol", "fencing"],
                    [(_pid(p), safetext.text(p.get("transactional_id") or "-"),
                      epochs_text(p["epochs"], p["earlier_epochs"]), p["batches"],
                      p["records"], p["last_sequence"], _ts(p["last_timestamp"]), p["open_txn_first_offset"],
                      p["protocol"], p["fencing_events"])
                     for p in doc["producers"]]))
    events = sorted([*_events(doc["producers"]), *_rotation_events(doc)], key=lambda e: (e[0], e[1]))
    if events:
        rows, more = _capped([(o, pid, text) for o, pid, text in events])
        out.print(table("Epoch timeline and anomalies", ["offset", "pid", "event"], rows))
        if more:
            out.print(more)
    for w in doc["warnings"]:
        out.print(Text.assemble(("warning:", "yellow"), " ", safetext.text(w)))


def _pid(p: dict[str, Any]) -> str:
    old = p.get("continues_producer_id")
    return str(p["producer_id"]) if old is None else f"{p['producer_id']} (continues {old})"


def _rotation_events(doc: dict[str, Any]) -> list[tuple[int, int, str]]:
    """A producer-id rotation (eosctl.txn.rotation) at the new id's first transaction: the same session
    going on, so it is told as that, never as a new instance or a take-over."""
    out = []
    for p in doc["producers"]:
        old = p.get("continues_producer_id")
        firsts = [t["first_offset"] for t in doc["transactions"] if t["producer_id"] == p["producer_id"]]
        if old is not None and firsts:
            out.append((min(firsts), p["producer_id"],
                        f"producer-id rotation: continues producer id {old}, whose epochs ran out (its "
                        "marker at 32767; transactions v2, KAFKA-18660): one session going on, not a new "
                        "instance"))
    return out


def _cell(s: str | None, decoded: dict[str, Any] | None = None, width: int = 40) -> Text | str:
    """A key or value for a table cell: escaped, cut to ``width`` characters; null as "-"; one the registry
    decoded (or found unframed) as eosctl.output.records shows it, cut at its own width."""
    if decoded is not None:
        return safetext.text(field_text(decoded, s))
    if s is None:
        return "-"
    return safetext.text(s if len(s) <= width else s[:width - 1] + "…")


def leader_epochs_text(epochs: list[dict[str, Any]]) -> str:
    """One line: each partition leader epoch and where its writes begin; after the first, where a new
    leader truncated whatever an earlier one wrote beyond and had not replicated."""
    parts = [f"{e['leader_epoch']} from offset {e['start_offset']}" for e in epochs[:20]]
    more = f" and {len(epochs) - 20} more" if len(epochs) > 20 else ""
    text = "leader epochs: " + ", ".join(parts) + more
    if len(epochs) > 1:
        starts = ", ".join(str(e["start_offset"]) for e in epochs[1:20])
        text += (f" (a new leader's writes begin at {starts}: whatever an earlier leader wrote from there on "
                 "without replicating it to this one was truncated; after an unclean election, records "
                 "consumers had already read)")
    return text


def _events(producers: list[dict[str, Any]]) -> list[tuple[int, int, str]]:
    out = []
    for p in producers:
        pid = p["producer_id"]
        routine = [b for b in p["epoch_bumps"] if b["routine"]]
        text = p.get("routine")
        if text:
            first = [b["offset"] for b in routine]
            first += [p["routine_offset"]] if p.get("routine_offset", -1) >= 0 else []
            out.append((min(first), pid, text))
        for b in p["epoch_bumps"]:
            if b in routine:
                continue
            epochs = f"epoch {b['old_epoch']} -> {b['new_epoch']}"
            if b.get("next_epoch") is not None:
                epochs += f" -> {b['next_epoch']}"
            out.append((b["offset"], pid, f"{epochs} ({b['why']})"))
        unlisted = p["bumps_total"] - len(p["epoch_bumps"]) - p.get("commit_bumps", 0) - max(
            0, p.get("own_aborts", 0) - sum(1 for b in p["epoch_bumps"] if b.get("continued")))
        if unlisted > 0 and p["epoch_bumps"]:
            out.append((p["epoch_bumps"][-1]["offset"], pid, f"... {unlisted} more epoch bumps"))
        for z in p["zombie_writes"]:
            out.append((z["offset"], pid,
                        f"ZOMBIE write at epoch {z['epoch']} after epoch {z['current_epoch']}"))
        if p["zombie_total"] > len(p["zombie_writes"]):
            out.append((p["zombie_writes"][-1]["offset"], pid,
                        f"... {p['zombie_total'] - len(p['zombie_writes'])} more zombie writes"))
        for s in p["sequence_anomalies"]:
            out.append((s["offset"], pid, f"sequence {s['kind']} at epoch {s['epoch']}: expected "
                                          f"{s['expected']}, got {s['got']}"))
    return out
