"""`eosctl txns ...` (transactions: list, describe, hanging, abort) and `eosctl producers`.

JSON shapes (`--format json`, stable; times in ms since the epoch, ages in seconds; offsets are Kafka
offsets, ``lso``/``hw`` exclusive):

`txns list` -> {"transactions": [TXN, ...]}; `txns describe ID` -> TXN, where

    TXN = {"transactional_id": str, "producer_id": int, "producer_epoch": int|null,
           "state": "Empty"|"Ongoing"|"PrepareCommit"|"PrepareAbort"|"CompleteCommit"|"CompleteAbort"|...,
           "timeout_ms": int|null, "start_time_ms": int|null,
           "age_s": float|null,                       # null unless a transaction is running
           "coordinator_id": int|null, "partitions": [{"topic": str, "partition": int}]}

`txns hanging` ->

    {"max_age_s": float, "partitions_checked": int,
     "describe_producers": {"status": "ok"|"unsupported"|ERROR_NAME, "producers_returned": int},
     "hanging": [{"topic": str, "partition": int, "producer_id": int, "producer_epoch": int,
                  "first_offset": int, "age_s": float|null, "rules": ["kip664"|"lso", ...],
                  "lso": int|null, "hw": int|null, "blocked": int|null,     # HW - LSO
                  "transactional_id": str|null, "coordinator_state": str|null}]}

`txns abort` ->

    {"topic": str, "partition": int, "start_offset": int, "producer_id": int, "producer_epoch": int,
     "coordinator_epoch": int,                        # of the ABORT marker (DescribeProducers', else 0)
     "lso": int, "hw": int, "blocked": int, "age_s": float|null, "transactional_id": str|null,
     "supported": bool,                               # the broker offers WriteTxnMarkers
     "dry_run": bool, "aborted": bool}

`producers` ->

    {"topic": str, "partitions": [int], "source": "describe-producers"|"log-scan", "note": str,
     "scanned": [{"partition": int, "from": int, "to": int}],    # log-scan only, [from, to)
     "producers": [{"topic": str, "partition": int, "producer_id": int, "producer_epoch": int,
                    "last_sequence": int, "last_timestamp_ms": int|null,
                    "current_txn_start_offset": int|null, "coordinator_epoch": int|null,
                    "epochs": [int], "fencing_events": int, "zombie_writes": int,   # these 4: log-scan only
                    "earlier_epochs": int}]}   # epochs keeps the latest 20; fencing rule: README

Exit status: 0 ok; 1 `txns hanging` found hanging transactions; 2 usage, config or connection error, and
`txns abort --yes` on a broker without the abort API.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import click

from eosctl.commands.options import DURATION, TIMEOUT_MS, age_text, target_options, time_text
from eosctl.render import console as out_console


def _now_ms() -> int:
    return int(time.time() * 1000)


def _wire(target: Any) -> Any:
    from eosctl.wire import WireClient

    return WireClient(target.cluster, timeout_ms=TIMEOUT_MS)


def _admin(target: Any) -> Any:
    from eosctl.clients import kafka_admin

    return kafka_admin(target.cluster, timeout=TIMEOUT_MS / 1000)


# --- txns ----------------------------------------------------------------------------------------------


@click.group("txns")
def txns() -> None:
    """Transactions: what the coordinators know, hanging ones, and aborting one."""


@txns.command("list")
@target_options
@click.option("--state", "states", multiple=True, metavar="STATE",
              help="Only these states (repeatable): Ongoing, PrepareCommit, CompleteCommit, Empty, ...")
@click.option("--min-age", type=DURATION, default=None, help="Only transactions running at least this long.")
def txns_list(config: str | None, pipeline: str | None, bootstrap: str | None, fmt: str,
              states: tuple[str, ...], min_age: float | None) -> None:
    """Transactional ids with producer id, epoch, state, timeout, start time, age and partitions.

    With --pipeline, only the pipeline's transactional ids (its transactional_id_prefix).
    """
    from eosctl.target import resolve
    from eosctl.txns import list_transactions

    target = resolve(config, pipeline, bootstrap)
    now = _now_ms()
    with _wire(target):  # fails fast with one clear line when the cluster is unreachable
        admin = _admin(target)
        try:
            infos = list_transactions(admin, states, min_age, now_ms=now)
        finally:
            admin.close()
    prefix = target.pipeline.transactional_id_prefix if target.pipeline else None
    if prefix:
        infos = [i for i in infos if i.transactional_id.startswith(prefix)]
    if fmt == "json":
        from eosctl.render import emit_json

        emit_json({"transactions": [i.to_dict(now) for i in infos]})
        return
    from eosctl.render import table

    rows = [(i.transactional_id, i.producer_id, i.producer_epoch, i.state, i.timeout_ms,
             time_text(i.start_time_ms) if i.active else "-", age_text(i.age_s(now)), _parts(i.partitions))
            for i in infos]
    out = out_console()
    if not rows:
        out.print("no transactions" + (" match" if states or min_age is not None else ""))
        return
    out.print(table(f"Transactions ({len(rows)})", ["transactional id", "producer id", "epoch", "state",
                                                    "timeout", "started (UTC)", "age", "partitions"], rows))


def _parts(tps: Any) -> str:
    return ", ".join(f"{t}[{p}]" for t, p in tps) or "-"


@txns.command("describe")
@target_options
@click.argument("transactional_id")
def txns_describe(config: str | None, pipeline: str | None, bootstrap: str | None, fmt: str,
                  transactional_id: str) -> None:
    """One transactional id: coordinator, producer id/epoch, state, timeout, start, age, partitions."""
    from eosctl.target import resolve
    from eosctl.txns import describe_transaction

    target = resolve(config, pipeline, bootstrap)
    now = _now_ms()
    with _wire(target):
        admin = _admin(target)
        try:
            info = describe_transaction(admin, transactional_id)
        finally:
            admin.close()
    if fmt == "json":
        from eosctl.render import emit_json

        emit_json(info.to_dict(now))
        return
    from eosctl.render import table

    rows = [("transactional id", info.transactional_id), ("coordinator", info.coordinator_id),
            ("producer id", info.producer_id), ("epoch", info.producer_epoch), ("state", info.state),
            ("timeout", f"{info.timeout_ms} ms" if info.timeout_ms is not None else None),
            ("started (UTC)", time_text(info.start_time_ms) if info.active else "-"),
            ("age", age_text(info.age_s(now))), ("partitions", _parts(info.partitions))]
    out_console().print(table(None, ["field", "value"], rows, show_header=False))


@txns.command("hanging")
@target_options
@click.option("--topic", "-t", "topics", multiple=True,
              help="Topic to check (repeatable; default: the pipeline's topics, else every topic).")
@click.option("--max-age", type=DURATION, default="15m", show_default=True,
              help="Open longer than this counts as hanging (Kafka's default transaction.max.timeout.ms).")
def txns_hanging(config: str | None, pipeline: str | None, bootstrap: str | None, fmt: str,
                 topics: tuple[str, ...], max_age: float) -> None:
    """Find hanging transactions; exit 1 if there are any.

    \b
    Two rules, either is enough:
      kip664  DescribeProducers shows an open transaction older than --max-age that its coordinator
              does not list for the partition (what kafka-transactions.sh find-hanging checks);
      lso     the partition's LSO is below its HW and the open transaction at the LSO is older than
              --max-age (age from its first batch's timestamp); works where DescribeProducers
              returns nothing.
    """
    from eosctl.target import resolve
    from eosctl.txns import find_hanging

    target = resolve(config, pipeline, bootstrap, topics)
    wanted = list(topics)
    if not wanted and target.pipeline:
        p = target.pipeline
        wanted = list(dict.fromkeys([*p.source_topics, *([p.output_topic] if p.output_topic else [])]))
    with _wire(target) as client:
        if not wanted:
            wanted = sorted(t for t in client.metadata() if not t.startswith("__"))
        admin = _admin(target)
        try:
            report = find_hanging(client, admin, wanted, max_age) if wanted else None
        finally:
            admin.close()
    if report is None:
        click.echo("no topics to check")
        return
    if fmt == "json":
        from eosctl.render import emit_json

        emit_json(report.to_dict())
    else:
        _render_hanging(report, wanted)
    if report.hanging:
        sys.exit(1)


def _render_hanging(report: Any, topics: list[str]) -> None:
    from eosctl.render import table

    out = out_console()
    dp = report.describe_producers
    source = (f"DescribeProducers returned {report.producers_returned} producers" if dp == "ok"
              else f"DescribeProducers {dp}")
    checked = f"{report.partitions_checked} partitions of {', '.join(topics)}; {source}"
    if not report.hanging:
        out.print(f"no hanging transactions (older than {age_text(report.max_age_s)}) in {checked}")
        return
    rows = [(h.topic, h.partition, h.producer_id, h.producer_epoch, h.first_offset, age_text(h.age_s),
             h.blocked, h.transactional_id, h.coordinator_state, "+".join(h.rules)) for h in report.hanging]
    out.print(table(f"Hanging transactions ({len(rows)}, open longer than {age_text(report.max_age_s)})",
                    ["topic", "partition", "producer id", "epoch", "first offset", "age", "blocked",
                     "transactional id", "coordinator", "rule"], rows))
    out.print(f"checked {checked}. blocked = HW - LSO: offsets read_committed consumers cannot reach.")
    first = report.hanging[0]
    out.print(f"to abort one: eosctl txns abort --topic {first.topic} --partition {first.partition} "
              f"--start-offset {first.first_offset}")


@txns.command("abort")
@target_options
@click.option("--topic", "-t", required=True, help="Topic of the open transaction.")
@click.option("--partition", "-P", type=int, required=True, help="Partition of the open transaction.")
@click.option("--start-offset", type=int, required=True, help="First offset of the open transaction.")
@click.option("--yes", is_flag=True, help="Really write the ABORT marker (without: show what would happen).")
def txns_abort(config: str | None, pipeline: str | None, bootstrap: str | None, fmt: str, topic: str,
               partition: int, start_offset: int, yes: bool) -> None:
    """Abort the open transaction starting at --start-offset on one partition (needs --yes).

    Shows the transaction first (producer id/epoch, transactional id, what it blocks). Aborting writes
    an ABORT marker with WriteTxnMarkers, as kafka-transactions.sh abort does; brokers without that
    API are refused, and nothing is changed.
    """
    from eosctl.target import resolve
    from eosctl.txns import abort, plan_abort

    target = resolve(config, pipeline, bootstrap, (topic,))
    now = _now_ms()
    with _wire(target) as client:
        admin = _admin(target)
        try:
            plan = plan_abort(client, admin, topic, partition, start_offset)
            if yes:
                abort(admin, plan)
        finally:
            admin.close()
    if fmt == "json":
        from eosctl.render import emit_json

        emit_json({**plan.to_dict(now), "dry_run": not yes, "aborted": yes})
        return
    out = out_console()
    who = f"producer {plan.producer_id} epoch {plan.producer_epoch}"
    if plan.transactional_id:
        who += f" (transactional id {plan.transactional_id})"
    age = plan.to_dict(now)["age_s"]
    out.print(f"open transaction on {topic}[{partition}] from offset {start_offset}: {who}, "
              f"open for {age_text(age)}; LSO {plan.lso}, HW {plan.hw}, "
              f"blocking {plan.hw - plan.lso} offsets")
    if yes:
        out.print(f"aborted: ABORT marker written for {who} on {topic}[{partition}]")
    elif plan.supported:
        out.print("dry run: nothing changed; add --yes to write the ABORT marker")
    else:
        out.print("dry run: nothing changed; this broker has no WriteTxnMarkers API, "
                  "so --yes would be refused")


# --- producers ---------------------------------------------------------------------------------------------


@click.command("producers")
@target_options
@click.option("--topic", "-t", help="Topic (default: the pipeline's only source topic).")
@click.option("--partition", "-P", "partitions", type=int, multiple=True,
              help="Only these partitions (repeatable; default: all).")
@click.option("--scan-last", type=click.IntRange(min=1), default=100_000, show_default=True,
              help="When the broker reports no producers: offsets per partition to read from the log's end.")
def producers(config: str | None, pipeline: str | None, bootstrap: str | None, fmt: str, topic: str | None,
              partitions: tuple[int, ...], scan_last: int) -> None:
    """Producers writing to a topic: id, epoch, last sequence, last timestamp, open transaction start.

    All partitions in one DescribeProducers call per leader; when the broker returns no producers
    (or lacks the API) they are read from a log scan instead, and the output says which source it used.
    """
    from eosctl.errors import ConfigError
    from eosctl.producers import describe
    from eosctl.target import resolve

    target = resolve(config, pipeline, bootstrap, (topic,) if topic else (), need_topics=True)
    if len(target.topics) > 1:
        raise ConfigError(f"the pipeline has several source topics ({', '.join(target.topics)}); "
                          "choose one with --topic")
    with _wire(target) as client:
        admin = _admin(target)
        try:
            report = describe(client, admin, target.topics[0], partitions, scan_last)
        finally:
            admin.close()
    if fmt == "json":
        from eosctl.render import emit_json

        emit_json(report.to_dict())
        return
    from eosctl.producers import epochs_text
    from eosctl.render import table

    out = out_console()
    log = report.source == "log-scan"
    cols = ["partition", "producer id", "epoch", "last sequence", "last timestamp (UTC)", "open txn from"]
    if log:
        cols += ["epochs", "fencing", "zombie writes"]
    rows = []
    for r in report.producers:
        row: list[Any] = [r.partition, r.producer_id, r.producer_epoch, r.last_sequence,
                          time_text(r.last_timestamp_ms), r.current_txn_start_offset]
        if log:
            row += [epochs_text(r.epochs, r.earlier_epochs), r.fencing_events, r.zombie_writes]
        rows.append(row)
    if rows:
        out.print(table(f"Producers of {report.topic} ({len(rows)})", cols, rows))
    else:
        out.print(f"no producers with a producer id on {report.topic}")
    out.print(f"source: {report.source} - {report.note}")


COMMANDS = [txns, producers]
