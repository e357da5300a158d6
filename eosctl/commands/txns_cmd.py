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

from eosctl.base.errors import BrokerError, EosctlError
from eosctl.base.exits import Exit
from eosctl.commands.options import DURATION, TIMEOUT_MS, target_options
from eosctl.output.emit import emit
from eosctl.output.terminal import console as out_console


def _now_ms() -> int:
    return int(time.time() * 1000)


def _wire(target: Any) -> Any:
    from eosctl.cluster.wire import WireClient  # lazy: see docs/imports.md

    return WireClient(target.cluster, timeout_ms=TIMEOUT_MS)


def _admin(target: Any) -> Any:
    from eosctl.cluster.clients import kafka_admin  # lazy: see docs/imports.md

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
    # lazy: see docs/imports.md
    from eosctl.config.target import resolve
    from eosctl.txn.transactions import coordinator_unseen, list_transactions

    target = resolve(config, pipeline, bootstrap)
    now = _now_ms()
    with _wire(target) as client:  # fails fast with one clear line when the cluster is unreachable
        admin = _admin(target)
        try:
            # The pipeline's prefixes filtered by the brokers where they can (ListTransactions v2).
            infos = list_transactions(admin, states, min_age, now_ms=now,
                                      prefixes=target.txn_id_prefixes if target.pipeline else ())
        finally:
            admin.close()
        # ListTransactions leaves out, without an error, the ids this principal may not Describe.
        unseen = next(filter(None, (coordinator_unseen(client, p)
                                    for p in (target.txn_id_prefixes if target.pipeline else ()) or ("",))),
                      None)
    if target.pipeline:
        infos = [i for i in infos if target.owns_txn(i.transactional_id)]
    if unseen and not infos:
        raise BrokerError(f"cannot list transactions: {unseen}")
    if unseen:
        click.echo(f"note: {unseen}", err=True)
    from eosctl.output.txns import render_txns  # lazy: see docs/imports.md

    emit(fmt, lambda: {"transactions": [i.to_dict(now) for i in infos]},
         lambda: render_txns(out_console(), infos, now, filtered=bool(states) or min_age is not None))


@txns.command("describe")
@target_options
@click.argument("transactional_id")
def txns_describe(config: str | None, pipeline: str | None, bootstrap: str | None, fmt: str,
                  transactional_id: str) -> None:
    """One transactional id: coordinator, producer id/epoch, state, timeout, start, age, partitions."""
    # lazy: see docs/imports.md
    from eosctl.config.target import resolve
    from eosctl.txn.transactions import describe_transaction

    target = resolve(config, pipeline, bootstrap)
    now = _now_ms()
    safeties = []
    with _wire(target) as client:
        admin = _admin(target)
        try:
            info = describe_transaction(admin, transactional_id)
            if info.active and info.partitions:
                safeties = _safeties(client, admin, target, info, now)
        finally:
            admin.close()
    from eosctl.output.txns import render_txn  # lazy: see docs/imports.md

    def document() -> dict[str, Any]:
        doc = info.to_dict(now)
        if info.active:  # "safe to abort?" for each partition of the running transaction
            doc["safety"] = [{"topic": s.tp[0], "partition": s.tp[1], **s.to_dict()} for s in safeties]
        return doc

    emit(fmt, document, lambda: render_txn(out_console(), info, now, safeties))


# The internal topics `txns hanging` checks with every topic (Kafka's find-hanging lists internal topics too).
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")


@txns.command("hanging")
@target_options
@click.option("--topic", "-t", "topics", multiple=True,
              help="Topic to check (repeatable; default: the pipeline's topics, else every topic).")
@click.option("--max-age", type=DURATION, default="15m", show_default=True,
              help="Open longer than this counts as hanging (Kafka's default transaction.max.timeout.ms).")
def txns_hanging(config: str | None, pipeline: str | None, bootstrap: str | None, fmt: str,
                 topics: tuple[str, ...], max_age: float) -> None:
    """Find hanging transactions; exit 1 if there are any.

    Every topic by default, __consumer_offsets and __transaction_state included, as Kafka's find-hanging
    (a stage's transaction holds its group's __consumer_offsets partition too: the groups whose offsets it
    holds are named); a pipeline's topics with -p (add -t __consumer_offsets for its groups' offsets).

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
    # lazy: see docs/imports.md
    from eosctl.config.target import resolve
    from eosctl.txn.pendingoffsets import with_groups
    from eosctl.txn.transactions import find_hanging

    target = resolve(config, pipeline, bootstrap, topics)
    wanted = list(topics)
    if not wanted and target.pipeline:
        wanted = list(target.watched)  # a named pipeline is never "every topic"
    with _wire(target) as client:
        if not wanted:
            # Every topic, the internal ones a transaction writes to included, as Kafka's find-hanging since
            # KAFKA-13288: a stage's transaction holds its group's __consumer_offsets partition too.
            wanted = sorted(t for t in client.metadata() if not t.startswith("__") or t in INTERNAL_TOPICS)
        admin = _admin(target)
        try:
            report = with_groups(client, find_hanging(client, admin, wanted, max_age)) if wanted else None
        finally:
            admin.close()
    if report is None:
        click.echo("no topics to check")
        return
    from eosctl.output.txns import render_hanging  # lazy: see docs/imports.md

    if report.could_not_look and not report.counted:
        # A check that could not look exits 2: never "no hanging transactions" for a cron or an alert.
        raise BrokerError(f"cannot rule out hanging transactions: {report.could_not_look}")
    emit(fmt, report.to_dict, lambda: render_hanging(out_console(), report, wanted, target.args()))
    if report.coordinator_unseen:
        click.echo(f"note: {report.coordinator_unseen}", err=True)
    if report.counted:
        sys.exit(Exit.FOUND)
    if report.offsets_disagreements:
        # Never "no hanging transactions" on offsets the broker itself contradicts.
        raise BrokerError(f"cannot rule out hanging transactions: {report.offsets_disagreements[0]}")


@txns.command("abort")
@target_options
@click.option("--topic", "-t", required=True, help="Topic of the open transaction.")
@click.option("--partition", "-P", type=int, required=True, help="Partition of the open transaction.")
@click.option("--start-offset", type=int, required=True, help="First offset of the open transaction.")
@click.option("--yes", is_flag=True, help="Really write the ABORT marker (without: show what would happen).")
@click.option("--two-phase-decided-abort", "two_phase_abort", is_flag=True,
              help="A two-phase commit transaction (KIP-939) only: its external coordinator decided to abort "
                   "it; abort it here (refused without this).")
def txns_abort(config: str | None, pipeline: str | None, bootstrap: str | None, fmt: str, topic: str,
               partition: int, start_offset: int, yes: bool, two_phase_abort: bool) -> None:
    """Abort the open transaction starting at --start-offset on one partition (needs --yes).

    Shows the transaction first (producer id/epoch, transactional id, what it blocks). Aborting writes
    an ABORT marker with WriteTxnMarkers, as kafka-transactions.sh abort does; brokers without that
    API are refused, and nothing is changed. A two-phase commit transaction (KIP-939: its coordinator's
    timeout is Integer.MAX_VALUE) belongs to an external coordinator, which decides whether it commits:
    --yes refuses it unless --two-phase-decided-abort says that coordinator decided to abort it.
    """
    # lazy: see docs/imports.md
    from eosctl.config.target import resolve
    from eosctl.txn.transactions import abort, plan_abort

    target = resolve(config, pipeline, bootstrap, (topic,))
    now = _now_ms()
    safety = None
    with _wire(target) as client:
        admin = _admin(target)
        try:
            plan = plan_abort(client, admin, topic, partition, start_offset)
            if yes and plan.two_phase and not two_phase_abort:
                raise EosctlError(two_phase_refusal(plan))
            if yes:
                abort(admin, plan)
            else:
                safety = _safety(client, admin, target, (topic, partition), plan.producer_id, plan.lso,
                                 plan.hw, now)
        finally:
            admin.close()
    from eosctl.output.txns import render_abort  # lazy: see docs/imports.md

    emit(fmt, lambda: {**plan.to_dict(now), "dry_run": not yes, "aborted": yes,
                       "safety": safety.to_dict() if safety else None},
         lambda: render_abort(out_console(), plan, now, yes, safety))


def two_phase_refusal(plan: Any) -> str:
    """Why `txns abort --yes` leaves a two-phase commit transaction alone, and what to do instead."""
    who = plan.transactional_id or f"producer {plan.producer_id}"
    return (f"not aborted: {who} runs a two-phase commit transaction (KIP-939: its coordinator's timeout is "
            "Integer.MAX_VALUE), whose outcome its external coordinator decides; aborting it here may undo "
            "what the other systems committed. Ask that coordinator to complete it (KafkaProducer"
            ".completeTransaction), or add --two-phase-decided-abort once it decided to abort it")


def _safeties(client: Any, admin: Any, target: Any, info: Any, now: int) -> list[Any]:
    offsets = client.offsets(list(info.partitions))
    return [_safety(client, admin, target, tp, info.producer_id, o.last_stable, o.high_watermark, now)
            for tp, o in sorted(offsets.items())]


def _safety(client: Any, admin: Any, target: Any, tp: Any, producer_id: int, lso: int, hw: int,
            now: int) -> Any:
    """Is it safe to abort (eosctl.txn.abortsafety), with the facts read now."""
    from eosctl.txn.abortsafety import gather  # lazy: see docs/imports.md
    return gather(client, admin, tp, producer_id, lso, hw, now, tuple(target.lag_groups()))


COMMANDS = [txns]
