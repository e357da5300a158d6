"""`eosctl txns ...`: the tables and lines of list, describe, hanging and abort (the JSON forms are
eosctl.txn.transactions' to_dict)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from eosctl.base import safetext
from eosctl.output.terminal import age_text, table, time_text


def render_txns(out: Any, infos: list[Any], now: int, filtered: bool) -> None:
    rows = [(i.transactional_id, i.producer_id, i.producer_epoch, i.state,
             _timeout(i.timeout_ms, i.two_phase),
             time_text(i.start_time_ms) if i.active else "-", age_text(i.age_s(now)), _parts(i.partitions))
            for i in infos]
    if not rows:
        out.print("no transactions" + (" match" if filtered else ""))
        return
    out.print(table(f"Transactions ({len(rows)})", ["transactional id", "producer id", "epoch", "state",
                                                    "timeout", "started (UTC)", "age", "partitions"], rows,
                    drop=("started (UTC)", "timeout", "epoch", "age", "partitions")))


def _timeout(ms: int | None, two_phase: bool = False) -> str | None:
    if two_phase:  # Integer.MAX_VALUE: "24d 20h" would read as a deadline the coordinator never keeps
        return "none (two-phase commit)"
    return None if ms is None else age_text(ms / 1000)


def _parts(tps: Any) -> str:
    return ", ".join(f"{t}[{p}]" for t, p in tps) or "-"


def render_txn(out: Any, info: Any, now: int, safeties: Sequence[Any] = ()) -> None:
    rows = [("transactional id", info.transactional_id), ("coordinator", info.coordinator_id),
            ("producer id", info.producer_id), ("epoch", info.producer_epoch), ("state", info.state),
            ("timeout", _timeout(info.timeout_ms, info.two_phase)),
            *([("two-phase commit", "yes (KIP-939): an external coordinator decides whether its transactions "
                                    "commit; Kafka never times them out")] if info.two_phase else []),
            ("started (UTC)", time_text(info.start_time_ms) if info.active else "-"),
            ("age", age_text(info.age_s(now))), ("partitions", _parts(info.partitions))]
    for s in safeties:
        rows += [(f"{label} ({s.tp[0]}[{s.tp[1]}])" if i == 0 else f"  {label}", value)
                 for i, (label, value) in enumerate(s.rows())]
    out.print(table(None, ["field", "value"], rows, show_header=False))


def render_hanging(out: Any, report: Any, topics: list[str], args: str = "") -> None:
    """``args``: the options pointing at the target (eosctl.config.target.Target.args), so the printed hint is
    a command that works copied as printed."""
    dp = report.describe_producers
    source = (f"DescribeProducers returned {report.producers_returned} producers" if dp == "ok"
              else f"DescribeProducers {dp}")
    checked = f"{report.partitions_checked} partitions of {', '.join(topics)}; {source}"
    for line in report.offsets_disagreements:
        out.print(safetext.text(f"warning: {line}"))
    if not report.hanging:
        if not report.offsets_disagreements:  # never "none" on offsets the broker contradicts
            out.print(safetext.text(f"no hanging transactions (older than {age_text(report.max_age_s)}) in "
                                    f"{checked}"))
        _blocking(out, report, args)
        return
    # A transaction on __consumer_offsets-N holds the offsets its stage committed in it: the groups named.
    grouped = any(h.groups for h in report.hanging)
    rows = [(h.topic, h.partition, h.producer_id, h.producer_epoch, h.first_offset,
             age_text(h.age_s) + ("" if h.age_trusted else "*"), h.blocked, h.transactional_id,
             h.coordinator_state, "+".join(h.rules), *((", ".join(h.groups) or None,) if grouped else ()))
            for h in report.hanging]
    counted = report.counted
    title = (f"Hanging transactions ({len(counted)}, open longer than {age_text(report.max_age_s)})"
             if counted else f"Open transactions dated only by producer timestamps ({len(rows)})")
    cols = ["topic", "partition", "producer id", "epoch", "first offset", "age", "blocked",
            "transactional id", "coordinator state", "rule", *(("groups",) if grouped else ())]
    out.print(table(title, cols, rows, drop=("rule", "coordinator state", "epoch", "first offset")))
    if grouped:
        out.print(safetext.text("groups: the consumer groups whose offsets it holds on __consumer_offsets; "
                                "their read_committed consumers wait at those offsets "
                                "(UNSTABLE_OFFSET_COMMIT) until it ends."))
    out.print(safetext.text(f"checked {checked}. blocked = HW - LSO: offsets read_committed consumers "
                            "cannot reach."))
    unsure = len(rows) - len(counted)
    if unsure:
        out.print(f"{unsure} look older than {age_text(report.max_age_s)} only by their producers' record "
                  "timestamps (CreateTime, set by the client; * above), and neither the coordinator nor the "
                  "broker's clock dates them: not counted as hanging. `eosctl txns describe ID` shows the "
                  "coordinator's start time where it has one.")
    _blocking(out, report, args)
    if not counted:
        return
    first = counted[0]
    hint = abort_command(first.topic, first.partition, first.first_offset, args)
    out.print(safetext.text(f"to abort one: {hint}"))


def _blocking(out: Any, report: Any, args: str = "") -> None:
    """The open transactions that hold an LSO now without being hanging (younger than --max-age): what a
    read_committed consumer waits for, named apart from the hanging ones."""
    if not report.blocking:
        return
    grouped = any(h.groups for h in report.blocking)
    rows = [(h.topic, h.partition, h.producer_id, h.producer_epoch, h.transactional_id, h.first_offset,
             age_text(h.age_s) + ("" if h.age_trusted else "*"), h.blocked, h.coordinator_state,
             *((", ".join(h.groups) or None,) if grouped else ())) for h in report.blocking]
    out.print(table(f"Open transactions blocking an LSO now ({len(rows)}, not hanging: younger than "
                    f"{age_text(report.max_age_s)})",
                    ["topic", "partition", "producer id", "epoch", "transactional id", "first offset", "age",
                     "blocked", "coordinator state", *(("groups",) if grouped else ())], rows,
                    drop=("coordinator state", "epoch", "first offset")))
    named = next((h.transactional_id for h in report.blocking if h.transactional_id), None)

    how = (f"`eosctl txns describe {args + ' ' if args else ''}{shlex.quote(named)}`" if named
           else "`eosctl txns describe ID`")
    out.print(safetext.text("read_committed consumers of these partitions wait at the LSO until each "
                            f"commits, aborts or times out; {how} says when its timeout ends it and whether "
                            "to abort."))


def abort_command(topic: str, partition: int, start_offset: int, args: str) -> str:
    """`eosctl txns abort` for one open transaction, as a shell command that works copied as printed."""
    where = f"{args} " if args else ""
    return (f"eosctl txns abort {where}--topic {shlex.quote(topic)} --partition {partition} "
            f"--start-offset {start_offset}")


def render_abort(out: Any, plan: Any, now: int, yes: bool, safety: Any = None) -> None:
    who = f"producer {plan.producer_id} epoch {plan.producer_epoch}"
    if plan.transactional_id:
        who += f" (transactional id {plan.transactional_id})"
    age = plan.to_dict(now)["age_s"]
    out.print(safetext.text(f"open transaction on {plan.topic}[{plan.partition}] from offset "
                            f"{plan.start_offset}: {who}, open for {age_text(age)}; LSO {plan.lso}, "
                            f"HW {plan.hw}, blocking {plan.hw - plan.lso} offsets"))
    if plan.producer_may_be_alive:
        # Kafka's WriteTxnMarkers reaches the partition leader only (KIP-664): the coordinator keeps the
        # transaction Ongoing, and a producer that is still alive commits what it writes next.
        out.print(safetext.text(
            f"note: the coordinator still has {plan.transactional_id} Ongoing; it is not told of this abort: "
            "if that producer is alive it will go on and commit its later records without these; "
            "stop it first"))
    if yes:
        out.print(safetext.text(f"aborted: ABORT marker written for {who} on {plan.topic}[{plan.partition}]"))
        return
    if safety is not None:
        out.print(table(None, ["field", "value"], safety.rows(), show_header=False))
    if plan.two_phase:
        out.print("dry run: nothing changed; a two-phase commit transaction (KIP-939): --yes is refused "
                  "unless its external coordinator decided to abort it (--two-phase-decided-abort)")
    elif plan.supported:
        out.print("dry run: nothing changed; add --yes to write the ABORT marker")
    else:
        out.print("dry run: nothing changed; this broker has no WriteTxnMarkers API, "
                  "so --yes would be refused")
