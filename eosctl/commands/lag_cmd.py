"""`eosctl lag`: consumer lag against the LSO, what is blocked by open transactions, and --watch statuses.

JSON shape (`--format json`, stable; CI parses it): docs/json.md.

A watch carries on through a broker outage, as Burrow does: a failed poll shows every partition of the
last good poll with status ERR, the reason as its cause and error, and the top-level "error"; the numbers
are those of the last good poll. The next polls reconnect, and statuses resume when the broker answers.

Exit status: 0 ok, 2 usage, config or connection error (with --watch: only if the first poll fails).
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
    A broker outage while watching is ERR with the reason on every partition; the watch reconnects
    at each poll and carries on when the broker is back.
    """
    from eosctl.clients import confluent_admin
    from eosctl.lag import Watch, poll
    from eosctl.target import resolve
    from eosctl.wire import WireClient

    target = resolve(config, pipeline, bootstrap, topics)
    wanted_groups = list(groups) or ([target.group] if target.group else [])
    wanted_topics = list(target.topics)
    if interval is None:
        with WireClient(target.cluster, timeout_ms=TIMEOUT_MS) as client:
            admin = confluent_admin(target.cluster, timeout=TIMEOUT_MS / 1000)
            _emit(poll(client, admin, wanted_groups or None, wanted_topics or None, scan_limit), None, fmt,
                  wanted_groups, wanted_topics)
        return
    with _Reconnecting(target.cluster) as conn:

        def measure() -> Any:
            client, admin = conn.clients()
            try:
                client.metadata([])  # is the broker there? (see _Reconnecting for why we ask first)
                return poll(client, admin, wanted_groups or None, wanted_topics or None, scan_limit)
            except BaseException:
                conn.drop()  # a restarted broker needs new connections; the next poll makes them
                raise

        _watch(measure, Watch(window), interval, count, fmt, wanted_groups, wanted_topics)


class _Reconnecting:
    """The watch's Kafka clients: the wire client is made on first use and again after any failed poll.

    The confluent-kafka admin client is asked only after the wire client reached the broker, and is
    replaced only once the broker answers again: librdkafka aborts the whole process when a coordinator
    request (ListConsumerGroupOffsets) loses its connection, or when an admin client is destroyed in
    the middle of an outage ("rd_kafka_enq_once_del_source_return: Assertion `eonce->refcnt > 0' failed",
    confluentinc/librdkafka#3663, #4605). Replaced, because an admin client that lived through a broker
    restart keeps timing out on the group coordinator.
    """

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.client: Any = None
        self.admin: Any = None
        self.failed = False

    def clients(self) -> tuple[Any, Any]:
        from eosctl.clients import confluent_admin
        from eosctl.wire import WireClient

        if self.client is None:
            self.client = WireClient(self.cluster, timeout_ms=TIMEOUT_MS)  # raises while the broker is down
            self.client.metadata([])
        if self.admin is None or self.failed:
            self.admin = confluent_admin(self.cluster, timeout=TIMEOUT_MS / 1000)
            self.failed = False
        return self.client, self.admin

    def drop(self) -> None:
        """After a failed poll: a new wire client next time, and a new admin once the broker answers."""
        if self.client is not None:
            self.client.close()
        self.client = None
        self.failed = True

    def __enter__(self) -> _Reconnecting:
        return self

    def __exit__(self, *exc: object) -> None:
        self.drop()


def _watch(measure: Any, watch: Any, interval: float, count: int | None, fmt: str, groups: list[str],
           topics: list[str]) -> None:
    """Poll until Ctrl-C (or --count): redraw in place on a terminal, else one table / JSON line per poll.

    A failed poll after a good one is shown as an outage (ERR, with the reason) and the watch goes on;
    a failed first poll is the usual one line and exit 2 (a wrong address should not look like an outage).
    """
    from contextlib import nullcontext

    from eosctl.errors import EosctlError, first_line

    out = out_console()
    live_view = fmt == "table" and out.is_terminal
    if live_view:
        from rich.live import Live

        context: Any = Live(console=out, auto_refresh=False)
    else:
        context = nullcontext()
    polls = 0
    last = None
    with context as live:
        while True:
            started = time.monotonic()
            try:
                snapshot = measure()
            except EosctlError as e:
                if last is None:
                    raise
                doc = outage_document(lag_document(last, watch), first_line(e))
            else:
                watch.add(snapshot)
                last = snapshot
                doc = lag_document(snapshot, watch)
            if live_view:
                live.update(_renderable(doc, True, groups, topics), refresh=True)
            else:
                _emit_document(doc, True, fmt, groups, topics)
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
                    "age_s": _r(txn.age_s(now)), "age_source": txn.age_source},
                "time_lag_s": _r(p.time_lag_s(now)),
                "status": ps.status if ps else None, "cause": (ps.cause or None) if ps else None,
                "error": p.error, "offsets_warning": p.offsets_warning,
            })
        groups.append({"group": g, "state": snapshot.group_states.get(g, "UNKNOWN"),
                       "status": gs.status if gs else None, "cause": (gs.cause or None) if gs else None,
                       "partitions": parts})
    return {"taken_ms": now, "taken_at": _iso(now), "error": None, "groups": groups}


def outage_document(last: dict[str, Any], reason: str, now_ms: int | None = None) -> dict[str, Any]:
    """A failed poll: the last good document with every status ERR and the reason (Burrow's ERR)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    err = {"status": "ERR", "cause": reason}
    groups = [{**g, **err, "partitions": [{**p, **err, "error": reason} for p in g["partitions"]]}
              for g in last["groups"]]
    return {"taken_ms": now, "taken_at": _iso(now), "error": reason, "groups": groups}


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def _emit(snapshot: Any, watch: Any, fmt: str, groups: list[str], topics: list[str]) -> None:
    _emit_document(lag_document(snapshot, watch), watch is not None, fmt, groups, topics)


def _emit_document(doc: dict[str, Any], watching: bool, fmt: str, groups: list[str],
                   topics: list[str]) -> None:
    if fmt == "json":
        if watching:  # JSON Lines: one document per poll
            import json

            click.echo(json.dumps(doc, separators=(",", ":")))
        else:
            from eosctl.render import emit_json

            emit_json(doc)
        return
    out_console().print(_renderable(doc, watching, groups, topics))


def _renderable(doc: dict[str, Any], with_status: bool, groups: list[str], topics: list[str]) -> Any:
    from rich.console import Group
    from rich.text import Text

    from eosctl.opentxn import TRUSTED_CLOCKS
    from eosctl.render import table

    if not doc["groups"]:
        if doc.get("error"):
            return Text(f"ERR: {doc['error']} (retrying every poll)", style="bold red")
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
                                         f"({age_text(txn['age_s'])}"
                                         f"{'' if txn['age_source'] in TRUSTED_CLOCKS else '*'})",
                None if p["time_lag_s"] is None else age_text(p["time_lag_s"]), p["hw_lag"],
            ]
            if with_status:
                row.append(_status_text(p["status"], p["cause"] if p["status"] != "OK" else None, Text))
            if p["error"]:
                row[-1] = Text(f"ERR: {p['error']}", style="bold red")
            rows.append(row)
    title = f"Consumer lag (against the LSO) at {doc['taken_at']}"
    if doc.get("error"):
        title = f"Consumer lag (against the LSO) at {doc['taken_at']}: poll failed, last good values shown"
    parts: list[Any] = [table(title, cols, rows)]
    if any(p["open_transaction"] and p["open_transaction"]["age_source"] not in TRUSTED_CLOCKS
           for g in doc["groups"] for p in g["partitions"]):
        parts.append(Text("* dated only by the producer's record timestamps (CreateTime): the coordinator "
                          "and the broker's clock do not date it"))
    warned = dict.fromkeys(p["offsets_warning"] for g in doc["groups"] for p in g["partitions"]
                           if p.get("offsets_warning"))
    parts += [Text(f"warning: {w}", style="bold red") for w in warned]
    if doc.get("error"):
        parts.insert(0, Text(f"ERR: {doc['error']} (retrying every poll)", style="bold red"))
    if with_status:
        parts += [Text.assemble(f"{g['group']} ({g['state'].lower()}): ",
                                _status_text(g["status"], g["cause"], Text)) for g in doc["groups"]]
    return Group(*parts)


def _status_text(status: str | None, cause: str | None, text_cls: Any) -> Any:
    if status is None:
        return "-"
    return text_cls(f"{status}: {cause}" if cause else status, style=STATUS_STYLE.get(status, ""))


COMMANDS = [lag]
