"""`eosctl lag`: its JSON document (one per poll; JSON Lines with --watch) and its table."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from rich.console import Group
from rich.text import Text

from eosctl.base import safetext
from eosctl.output.terminal import age_text, table

STATUS_STYLE = {"OK": "green", "WARN": "yellow", "STALL": "red", "STOP": "red", "REWIND": "magenta",
                "ERR": "bold red"}


def lag_document(snapshot: Any, watch: Any = None) -> dict[str, Any]:
    now = snapshot.taken_ms
    groups = []
    for g in snapshot.groups():
        gs = watch.group_status(g) if watch else None
        parts = []
        for p in (p for p in snapshot.partitions if p.group == g):
            ps = watch.partition_status(g, p.topic, p.partition) if watch else None
            txn = p.open_txn
            parts.append({
                "topic": p.topic, "partition": p.partition, "committed": p.committed,
                "log_start": p.log_start, "lso": p.lso, "hw": p.hw, "lag_to_lso": p.lag_to_lso,
                "hw_lag": p.hw_lag, "records_behind": p.records_behind,
                "records_behind_exact": p.records_behind_exact, "blocked": p.blocked,
                "open_transaction": None if txn is None else {
                    "producer_id": txn.producer_id, "producer_epoch": txn.producer_epoch,
                    "transactional_id": txn.transactional_id, "first_offset": txn.first_offset,
                    "started_ms": txn.started_ms, "age_s": _r(txn.age_s(now)), "age_source": txn.age_source},
                "time_lag_s": _r(p.time_lag_s(now)),
                "status": ps.status if ps else None, "cause": (ps.cause or None) if ps else None,
                "error": p.error, "offsets_warning": p.offsets_warning,
                "consumer": None if p.member_id is None else {
                    "member_id": p.member_id, "client_id": p.client_id, "host": p.host},
                "pending_commit": None if p.pending is None else p.pending.to_dict(now),
                "share_progress": None if p.share is None else {
                    "start_offset": p.share.start_offset, "lag": p.share.lag},
            })
        d = snapshot.descriptions.get(g)
        groups.append({"group": g, "state": snapshot.group_states.get(g, "UNKNOWN"),
                       "type": snapshot.group_types.get(g),
                       "status": gs.status if gs else None, "cause": (gs.cause or None) if gs else None,
                       "epoch": None if d is None else d.epoch,
                       "members": None if d is None else [_member(m) for m in d.members],
                       "topology": _topology(d),
                       "share": None if g not in snapshot.share_isolation else {
                           "isolation_level": snapshot.share_isolation[g],
                           "warning": snapshot.share_warnings.get(g)},
                       "partitions": parts})
    return {"taken_ms": now, "taken_at": _iso(now), "error": None, "stale_since": None,
            "age_s": _age_s(now), "groups": groups}


def _tasks(tasks: Any) -> list[dict[str, Any]] | None:
    return None if tasks is None else [{"subtopology": t.subtopology, "partitions": list(t.partitions)}
                                       for t in tasks]


def _member(m: Any) -> dict[str, Any]:
    """One member of a group (eosctl.cluster.groups.Member); the task lists only for a streams group's."""
    return {"member_id": m.member_id, "client_id": m.client_id, "host": m.host,
            "assignment": [{"topic": t, "partition": p} for t, p in m.partitions],
            "process_id": m.process_id, "active_tasks": _tasks(m.active_tasks),
            "standby_tasks": _tasks(m.standby_tasks), "warmup_tasks": _tasks(m.warmup_tasks)}


def _topology(d: Any) -> dict[str, Any] | None:
    """A streams group's topology as its coordinator knows it; null for other types."""
    if d is None or d.type != "streams":
        return None
    return {"epoch": d.topology_epoch, "subtopologies": None if d.subtopologies is None else [
        {"subtopology": s.subtopology, "source_topics": list(s.source_topics)} for s in d.subtopologies]}


def group_line(g: dict[str, Any]) -> str | None:
    """``G: streams group, NOT_READY, 2 members (1 process), 4 active tasks, topology epoch 3`` for a group
    that is not classic (its type, members and state as its describe API says); None for a classic one."""
    kind = g.get("type")
    if not kind or kind == "classic":
        return None
    members = g.get("members")
    text = f"{g['group']}: {kind} group, {g['state']}"
    if members is None:
        return text + ", members not described"
    text += f", {len(members)} member{'' if len(members) == 1 else 's'}"
    if kind == "streams":
        processes = {m["process_id"] for m in members}
        active = sum(len(t["partitions"]) for m in members for t in m["active_tasks"] or ())
        standby = sum(len(t["partitions"]) for m in members for t in m["standby_tasks"] or ())
        text += (f" ({len(processes)} process{'' if len(processes) == 1 else 'es'}), {active} active task"
                 f"{'' if active == 1 else 's'}" + (f", {standby} standby" if standby else ""))
        topology = g.get("topology") or {}
        text += (", no topology yet" if topology.get("subtopologies") is None
                 else f", topology epoch {topology.get('epoch')}")
    if kind == "share" and g.get("share"):
        text += f", {g['share']['isolation_level'] or 'isolation not said'}"
    return text


def _age_s(taken_ms: int | None, now_ms: int | None = None) -> float | None:
    """Seconds since the values were read, when shown."""
    if taken_ms is None:
        return None
    now = int(time.time() * 1000) if now_ms is None else now_ms
    return round(max(0, now - taken_ms) / 1000, 1)


def overdue_document(last: dict[str, Any], reading_s: float, now_ms: int | None = None) -> dict[str, Any]:
    """The last good document shown again while the next poll is still reading, past its interval (a slow
    or stalled link): marked stale since it was taken, with its age; the statuses are left as they were
    (nothing failed yet)."""
    return {**last, "stale_since": last.get("stale_since") or last["taken_at"],
            "age_s": _age_s(last["taken_ms"], now_ms), "reading_s": round(reading_s, 1)}


def outage_document(last: dict[str, Any], reason: str, now_ms: int | None = None) -> dict[str, Any]:
    """A failed poll: the last good document with every status ERR and the reason (Burrow's ERR), marked
    stale since that poll was taken."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    err = {"status": "ERR", "cause": reason}
    groups = [{**g, **err, "partitions": [{**p, **err, "error": reason} for p in g["partitions"]]}
              for g in last["groups"]]
    # ``last`` is the last good poll's document (its taken_ms: when the values shown were read), or none.
    return {"taken_ms": now, "taken_at": _iso(now), "error": reason,
            "stale_since": last.get("stale_since") or last["taken_at"],
            "age_s": _age_s(last.get("taken_ms"), now), "groups": groups}


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def lag_renderable(doc: dict[str, Any], with_status: bool, groups: list[str], topics: list[str]) -> Any:
    from eosctl.txn.opentxn import TRUSTED_CLOCKS  # lazy: see docs/imports.md

    if not doc["groups"]:
        if doc.get("error"):
            return safetext.text(f"ERR: {doc['error']} (retrying every poll)", style="bold red")
        what = f" for {', '.join(topics)}" if topics else ""
        return safetext.text(f"no consumer group has committed offsets{what}" if not groups
                             else f"group {', '.join(groups)} has no committed offsets{what}")
    cols = ["group", "topic", "partition", "committed", "lso", "hw", "lag", "records behind", "blocked",
            "open transaction", "time lag", "hw lag", "consumer"]
    # A group whose next offset commit is pending in an open transaction (UNSTABLE_OFFSET_COMMIT).
    pending = any(p.get("pending_commit") for g in doc["groups"] for p in g["partitions"])
    if pending:
        cols.append("offset commit")
    # A MirrorMaker 2 replica pipeline (eosctl.inspection.failover): where the group resumes on the replica,
    # and what it would process again or never see there.
    replica = any("replica" in p for g in doc["groups"] for p in g["partitions"])
    if replica:
        cols.append("replica")
    if with_status:
        cols.append("status")
    rows = []
    for g in doc["groups"]:
        for p in g["partitions"]:
            txn = p["open_transaction"]
            behind = p["records_behind"]
            row: list[Any] = [
                g["group"], p["topic"], p["partition"], p["committed"], p["lso"], p["hw"], p["lag_to_lso"],
                None if behind is None else (str(behind) if p["records_behind_exact"] else f"<={behind}"),
                p["blocked"] or 0,
                None if txn is None else safetext.text(
                    f"pid {txn['producer_id']}"
                    + (f" {txn['transactional_id']}" if txn.get("transactional_id") else "")
                    + f" @{txn['first_offset']} ({age_text(txn['age_s'])}"
                    + f"{'' if txn['age_source'] in TRUSTED_CLOCKS else '*'})"),
                None if p["time_lag_s"] is None else age_text(p["time_lag_s"]), p["hw_lag"],
                None if not p.get("consumer") else f"{p['consumer']['client_id']}@{p['consumer']['host']} "
                                                   f"({p['consumer']['member_id']})",
            ]
            if pending:
                row.append(pending_text(p.get("pending_commit")))
            if replica:
                row.append(replica_text(p.get("replica")))
            if with_status:
                row.append(_status_text(p["status"], p["cause"] if p["status"] != "OK" else None, Text))
            if p["error"]:
                row[-1] = safetext.text(f"ERR: {p['error']}", style="bold red")
            rows.append(row)
    title = f"Consumer lag (against the LSO) at {doc['taken_at']}"
    age = f", {age_text(doc['age_s'])} old" if doc.get("age_s") is not None else ""
    if doc.get("error"):
        title = (f"Consumer lag (against the LSO) at {doc['taken_at']}: poll failed, values stale since "
                 f"{doc.get('stale_since') or 'the last good poll'}{age}")
    elif doc.get("stale_since"):
        title = (f"Consumer lag (against the LSO) at {doc['taken_at']}: STALE, {age[2:]} (the next poll has "
                 f"been reading for {age_text(doc.get('reading_s') or 0)})")
    parts: list[Any] = [table(title, cols, rows, drop=("hw lag", "hw", "lso", "committed", "time lag",
                                                       "records behind", "consumer"))]
    if any(p["open_transaction"] and p["open_transaction"]["age_source"] not in TRUSTED_CLOCKS
           for g in doc["groups"] for p in g["partitions"]):
        parts.append(Text("* dated only by the producer's record timestamps (CreateTime): the coordinator "
                          "and the broker's clock do not date it"))
    warned = dict.fromkeys(p["offsets_warning"] for g in doc["groups"] for p in g["partitions"]
                           if p.get("offsets_warning"))
    parts += [safetext.text(f"warning: {w}", style="bold red") for w in warned]
    parts += [safetext.text(line) for g in doc["groups"] if (line := group_line(g))]
    parts += [safetext.text(f"warning: {g['share']['warning']}", style="bold red") for g in doc["groups"]
              if (g.get("share") or {}).get("warning")]
    if doc.get("error"):
        parts.insert(0, safetext.text(f"ERR: {doc['error']} (retrying every poll)", style="bold red"))
    if with_status:
        parts += [Text.assemble(safetext.text(f"{g['group']} ({g['state'].lower()}): "),
                                _status_text(g["status"], g["cause"], Text)) for g in doc["groups"]]
    return Group(*parts)


def pending_text(pc: dict[str, Any] | None) -> Any:
    """``pending in TXID (pid P, Ongoing)`` for a partition whose offset commit an open transaction holds
    (a PendingCommit's dict, eosctl.txn.pendingoffsets); None where none does."""
    if pc is None:
        return None
    txns = [f"{t['transactional_id'] or '?'} (pid {t['producer_id']}"
            + (f", {t['coordinator_state']}" if t.get("coordinator_state") else "") + ")"
            for t in pc["transactions"]]
    n = pc["offsets_partition"]
    where = f" on {pc['offsets_topic']}-{n}" if n is not None else ""
    return safetext.text(("pending in " + " or ".join(txns) if txns else "pending in an open transaction")
                         + where, style="yellow")


def replica_text(f: dict[str, Any] | None) -> str:
    """``@D +R again -M never``: the replica offset the group resumes at, the records it would process
    again and the committed records it would never see (a Failover's dict, eosctl.inspection.failover)."""
    if f is None or f.get("resume") is None:
        return "no checkpoint"
    if f.get("rereads") is None or f.get("misses") is None:
        return f"@{f['resume']}"
    return f"@{f['resume']} +{f['rereads']} again -{f['misses']} never"


def _status_text(status: str | None, cause: str | None, text_cls: Any) -> Any:
    if status is None:
        return "-"
    return text_cls(safetext.term(f"{status}: {cause}" if cause else status),
                    style=STATUS_STYLE.get(status, ""))
