"""`eosctl lag`: consumer lag against the LSO, what is blocked by open transactions, and --watch statuses.

JSON shape (`--format json`, stable; one document, or with --watch one document per line per poll):

    {"taken_ms": int, "taken_at": "YYYY-MM-DDTHH:MM:SSZ",
     "groups": [{"group": str, "state": str,              # STABLE, EMPTY, DEAD, ... (confluent-kafka)
                 "status": str|null, "cause": str|null,   # --watch only: OK WARN STALL STOP REWIND ERR
                 "partitions": [{
                     "topic": str, "partition": int,
                     "committed": int|null,               # null: the group never committed here
                     "log_start": int, "lso": int, "hw": int,
                     "lag_to_lso": int|null,              # LSO - committed
                     "hw_lag": int|null,                  # HW - committed (kafka-consumer-groups' LAG)
                     "records_behind": int|null,          # data records in [committed, LSO): markers excluded
                     "records_behind_exact": bool,        # false: window > --scan-limit, an upper bound
                     "blocked": int,                      # HW - LSO
                     "open_transaction": {"producer_id": int, "producer_epoch": int, "first_offset": int,
                                          "started_ms": int|null, "age_s": float|null} | null,
                     "time_lag_s": float|null,            # age of the oldest unconsumed committed record
                     "status": str|null, "cause": str|null,
                     "error": str|null}]}]}

Exit status: 0 ok, 2 usage, config or connection error.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import click

from eosctl.commands.options import TIMEOUT_MS, age_text, target_options
from eosctl.render import console as out_console

STATUS_STYLE = {"OK": "green", "WARN": "yellow", "STALL": "red", "STOP": "red", "REWIND": "magenta",
                "ERR": "bold red"}


@click.command("lag")
@target_options
@click.option("--group", "-g", "groups", multiple=True,
              help="Consumer group (repeatable; default: the pipeline's group, else every group that "
                   "committed offsets for the topics).")
@click.option("--topic", "-t", "topics", multiple=True,
              help="Topic (repeatable; default: the pipeline's source topics, else all the groups' topics).")
@click.option("--watch", "interval", type=click.FloatRange(min=0.1), default=None, metavar="SECONDS",
              help="Poll every SECONDS and show a status per partition and group.")
@click.option("--window", type=click.IntRange(min=2), default=10, show_default=True,
              help="Polls in the --watch sliding window.")
@click.option("--count", type=click.IntRange(min=1), default=None,
              help="With --watch: stop after this many polls (default: until Ctrl-C).")
@click.option("--scan-limit", type=click.IntRange(min=1), default=50_000, show_default=True,
              help="Offsets per partition read to count records behind; beyond: an upper bound.")
def lag(config: str | None, pipeline: str | None, bootstrap: str | None, fmt: str, groups: tuple[str, ...],
        topics: tuple[str, ...], interval: float | None, window: int, count: int | None,
        scan_limit: int) -> None:
    """Consumer lag the way a read_committed consumer sees it.

    \b
    lag        LSO - committed: offsets the consumer can still move over
    behind     data records in [committed, LSO): a trailing commit marker counts 0
    blocked    HW - LSO, held back by the open transaction named next to it
    time lag   age of the oldest committed record not yet consumed
    hw lag     HW - committed, what kafka-consumer-groups.sh shows, for comparison
    \b
    With --watch SECONDS, each partition and group gets a Burrow-style status over a sliding window of
    polls: OK, WARN (falling behind), STALL (no progress with records to read, or blocked by an open
    transaction: the cause says which), STOP (no active consumer), REWIND (offset went back), ERR.
    """
    from eosctl.clients import confluent_admin
    from eosctl.lag import Watch, poll
    from eosctl.target import resolve
    from eosctl.wire import WireClient

    target = resolve(config, pipeline, bootstrap, topics)
    wanted_groups = list(groups) or ([target.group] if target.group else [])
    wanted_topics = list(target.topics)
    with WireClient(target.cluster, timeout_ms=TIMEOUT_MS) as client:
        admin = confluent_admin(target.cluster, timeout=TIMEOUT_MS / 1000)

        def measure() -> Any:
            return poll(client, admin, wanted_groups or None, wanted_topics or None, scan_limit)

        if interval is None:
            _emit(measure(), None, fmt, wanted_groups, wanted_topics)
            return
        _watch(measure, Watch(window), interval, count, fmt, wanted_groups, wanted_topics)


def _watch(measure: Any, watch: Any, interval: float, count: int | None, fmt: str, groups: list[str],
           topics: list[str]) -> None:
    """Poll until Ctrl-C (or --count): redraw in place on a terminal, else one table / JSON line per poll."""
    from contextlib import nullcontext

    out = out_console()
    live_view = fmt == "table" and out.is_terminal
    if live_view:
        from rich.live import Live

        context: Any = Live(console=out, auto_refresh=False)
    else:
        context = nullcontext()
    polls = 0
    with context as live:
        while True:
            started = time.monotonic()
            snapshot = measure()
            watch.add(snapshot)
            if live_view:
                live.update(_renderable(lag_document(snapshot, watch), True, groups, topics), refresh=True)
            else:
                _emit(snapshot, watch, fmt, groups, topics)
            polls += 1
            if count is not None and polls >= count:
                return
            time.sleep(max(0.0, interval - (time.monotonic() - started)))


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
                    "first_offset": txn.first_offset, "started_ms": txn.started_ms,
                    "age_s": _r(txn.age_s(now))},
                "time_lag_s": _r(p.time_lag_s(now)),
                "status": ps.status if ps else None, "cause": (ps.cause or None) if ps else None,
                "error": p.error,
            })
        groups.append({"group": g, "state": snapshot.group_states.get(g, "UNKNOWN"),
                       "status": gs.status if gs else None, "cause": (gs.cause or None) if gs else None,
                       "partitions": parts})
    taken_at = datetime.fromtimestamp(now / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"taken_ms": now, "taken_at": taken_at, "groups": groups}


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def _emit(snapshot: Any, watch: Any, fmt: str, groups: list[str], topics: list[str]) -> None:
    doc = lag_document(snapshot, watch)
    if fmt == "json":
        if watch is not None:  # JSON Lines: one document per poll
            import json

            click.echo(json.dumps(doc, separators=(",", ":")))
        else:
            from eosctl.render import emit_json

            emit_json(doc)
        return
    out_console().print(_renderable(doc, watch is not None, groups, topics))


def _renderable(doc: dict[str, Any], with_status: bool, groups: list[str], topics: list[str]) -> Any:
    from rich.console import Group
    from rich.text import Text

    from eosctl.render import table

    if not doc["groups"]:
        what = f" for {', '.join(topics)}" if topics else ""
        return Text(f"no consumer group has committed offsets{what}" if not groups
                    else f"group {', '.join(groups)} has no committed offsets{what}")
    cols = ["group", "topic", "partition", "committed", "lso", "hw", "lag", "records behind", "blocked",
            "open transaction", "time lag", "hw lag"]
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
                None if txn is None else f"pid {txn['producer_id']} @{txn['first_offset']} "
                                         f"({age_text(txn['age_s'])})",
                None if p["time_lag_s"] is None else age_text(p["time_lag_s"]), p["hw_lag"],
            ]
            if with_status:
                row.append(_status_text(p["status"], p["cause"] if p["status"] != "OK" else None, Text))
            if p["error"]:
                row[-1] = Text(f"ERR: {p['error']}", style="bold red")
            rows.append(row)
    parts: list[Any] = [table(f"Consumer lag (against the LSO) at {doc['taken_at']}", cols, rows)]
    if with_status:
        parts += [Text.assemble(f"{g['group']} ({g['state'].lower()}): ",
                                _status_text(g["status"], g["cause"], Text)) for g in doc["groups"]]
    return Group(*parts)


def _status_text(status: str | None, cause: str | None, text_cls: Any) -> Any:
    if status is None:
        return "-"
    return text_cls(f"{status}: {cause}" if cause else status, style=STATUS_STYLE.get(status, ""))


COMMANDS = [lag]
