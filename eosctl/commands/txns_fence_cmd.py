"""`eosctl txns fence TRANSACTIONAL_ID`: end a stuck transaction through its coordinator (a dry run unless
--yes), as Kafka's Admin.fenceProducers does (eosctl.txn.fence).

Exit status: 0 ok (the dry run, or fenced); 2 usage, config or connection error, a refused InitProducerId
(naming the grant it needs), or a two-phase commit transaction without --two-phase-decided-abort.
"""

from __future__ import annotations

from typing import Any

import click

from eosctl.base import safetext
from eosctl.base.errors import EosctlError
from eosctl.commands import txns_cmd
from eosctl.commands.options import target_options
from eosctl.output.emit import emit
from eosctl.output.terminal import age_text, table
from eosctl.output.terminal import console as out_console


@txns_cmd.txns.command("fence")
@target_options
@click.argument("transactional_id")
@click.option("--yes", is_flag=True, help="Really fence it (without: show what would happen).")
@click.option("--two-phase-decided-abort", "two_phase_abort", is_flag=True,
              help="A two-phase commit transaction (KIP-939) only: its external coordinator decided to abort "
                   "it; fence it here (refused without this).")
def txns_fence(config: str | None, pipeline: str | None, bootstrap: str | None, fmt: str,
               transactional_id: str, yes: bool, two_phase_abort: bool) -> None:
    """End TRANSACTIONAL_ID's transaction through its coordinator and fence its producer (needs --yes).

    \b
    InitProducerId for the id, as Kafka's Admin.fenceProducers (KIP-618): the coordinator bumps the
    epoch, aborts the transaction it runs on every partition it lists, and the producer still running
    at the old epoch is fenced (its next write or commit fails). Needs Write on the transactional id.
    The dry run shows the partitions and the records it would abort, and which command to prefer:
      fence  for a transaction its coordinator still runs (Ongoing, Prepare*);
      abort  (`eosctl txns abort`, a marker per partition) for one its coordinator lost: `txns hanging`
             lists it with rule kip664, and fence would not touch it.
    """
    # lazy: see docs/imports.md
    from eosctl.config.target import resolve
    from eosctl.txn.fence import fence, plan_fence

    target = resolve(config, pipeline, bootstrap)
    now = txns_cmd._now_ms()
    fenced = None
    with txns_cmd._wire(target) as client:  # the client set-up `txns` uses, so one stand-in serves both
        admin = txns_cmd._admin(target)
        try:
            plan = plan_fence(client, admin, transactional_id)
            if yes and plan.info.two_phase and plan.info.active and not two_phase_abort:
                raise EosctlError(two_phase_refusal(transactional_id))
            if yes:
                fenced = fence(client, admin, plan)
        finally:
            admin.close()

    def document() -> dict[str, Any]:
        return {**plan.to_dict(), "dry_run": not yes, "fenced": fenced is not None,
                "after": fenced.to_dict() if fenced else None}

    emit(fmt, document, lambda: render_fence(out_console(), plan, fenced, yes, now))


def two_phase_refusal(txid: str) -> str:
    return (f"not fenced: {txid} runs a two-phase commit transaction (KIP-939: its coordinator's timeout is "
            "Integer.MAX_VALUE), whose outcome its external coordinator decides; fencing aborts it and may "
            "undo what the other systems committed. Ask that coordinator to complete it "
            "(KafkaProducer.completeTransaction), or add --two-phase-decided-abort once it decided to abort "
            "it")


def render_fence(out: Any, plan: Any, fenced: Any, yes: bool, now_ms: int) -> None:
    i = plan.info
    age = i.age_s(now_ms)
    out.print(safetext.text(f"{i.transactional_id}: producer {i.producer_id} epoch {i.producer_epoch}, "
                            f"coordinator {i.coordinator_id}, {i.state}"
                            + (f" for {age_text(age)}" if age is not None else "")
                            + (" (two-phase commit, KIP-939)" if i.two_phase else "")))
    if plan.partitions:
        out.print(table("Partitions its coordinator aborts",
                        ["topic", "partition", "first offset", "LSO", "HW", "open records"],
                        [(p.topic, p.partition, p.first_offset, p.lso, p.hw, p.open_records)
                         for p in plan.partitions]))
    prefer, why = plan.prefer
    out.print(safetext.text(f"prefer `{prefer}`: {why}"))
    if fenced is not None:
        out.print(safetext.text(f"fenced: {i.transactional_id} is at producer {fenced.producer_id} epoch "
                                f"{fenced.producer_epoch}, {fenced.state}; the producer at epoch "
                                f"{i.producer_epoch} can no longer write or commit"))
        return
    out.print(safetext.text(f"needs: {plan.to_dict()['acl']}"))
    out.print("dry run: nothing changed; add --yes to fence it")



