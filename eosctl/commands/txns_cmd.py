"""`eosctl txns ...`: transactions (list, describe, hanging, abort).

JSON shapes (`--format json`, stable): docs/json.md.

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
              --max-age; works where DescribeProducers returns nothing.

    Ages come from the coordinator's start time (DescribeTransactions) where it runs the transaction,
    else from the broker's clock on a LogAppendTime topic. A transaction dated only by its producer's
    record timestamps (CreateTime) is listed, marked *, but does not make the exit status 1 (with
    --max-age 0 its age does not matter). Offsets are ListOffsets cross-checked against Fetch; when the
    broker contradicts itself and nothing is found, exit 2 naming it instead of "no hanging".
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
    if report.counted:
        sys.exit(1)
    if report.offsets_disagreements:
        from eosctl.errors import BrokerError

        # Never "no hanging transactions" on offsets the broker itself contradicts.
        raise BrokerError(f"cannot rule out hanging transactions: {report.offsets_disagreements[0]}")


def _render_hanging(report: Any, topics: list[str]) -> None:
    from eosctl.render import table

    out = out_console()
    dp = report.describe_producers
    source = (f"DescribeProducers returned {report.producers_returned} producers" if dp == "ok"
              else f"DescribeProducers {dp}")
    checked = f"{report.partitions_checked} partitions of {', '.join(topics)}; {source}"
    for line in report.offsets_disagreements:
        out.print(f"warning: {line}", markup=False, highlight=False)
    if not report.hanging:
        if not report.offsets_disagreements:
            out.print(f"no hanging transactions (older than {age_text(report.max_age_s)}) in {checked}")
        return
    rows = [(h.topic, h.partition, h.producer_id, h.producer_epoch, h.first_offset, _age(h),
             h.blocked, h.transactional_id, h.coordinator_state, "+".join(h.rules)) for h in report.hanging]
    counted = report.counted
    title = (f"Hanging transactions ({len(counted)}, open longer than {age_text(report.max_age_s)})"
             if counted else f"Open transactions dated only by producer timestamps ({len(rows)})")
    out.print(table(title, ["topic", "partition", "producer id", "epoch", "first offset", "age", "blocked",
                            "transactional id", "coordinator state", "rule"], rows))
    out.print(f"checked {checked}. blocked = HW - LSO: offsets read_committed consumers cannot reach.")
    unsure = len(rows) - len(counted)
    if unsure:
        out.print(f"{unsure} look older than {age_text(report.max_age_s)} only by their producers' record "
                  "timestamps (CreateTime, set by the client; * above), and neither the coordinator nor the "
                  "broker's clock dates them: not counted as hanging. `eosctl txns describe ID` shows the "
                  "coordinator's start time where it has one.")
    if not counted:
        return
    first = counted[0]
    out.print(f"to abort one: eosctl txns abort --topic {first.topic} --partition {first.partition} "
              f"--start-offset {first.first_offset}")


def _age(h: Any) -> str:
    """The age, marked * when only the producer's record timestamps date it."""
    return age_text(h.age_s) + ("" if h.age_trusted else "*")


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


COMMANDS = [txns]
