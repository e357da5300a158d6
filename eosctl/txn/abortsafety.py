"""Is it safe to abort an open transaction? What its coordinator knows, when its timeout ends it, when its
producer last wrote, and whom it blocks: the answer `txns abort` (dry run), `txns describe` and the TUI's
transaction detail give, computed here from facts their callers read (no request of its own but gather()).

Kafka's coordinator aborts a transaction it runs once transaction.timeout.ms has passed since its start
(TransactionCoordinator.abortTimedOutTransactions); a transaction no coordinator runs on the partition (a
hanging one, KIP-664) is never ended by anything but a marker written from outside. A two-phase commit
transaction (KIP-939: its coordinator's timeout is Integer.MAX_VALUE, eosctl.txn.transactions.TxnInfo
.two_phase) is never timed out: an external coordinator decides whether it commits, so it is never "safe
to abort" from Kafka's side, whatever its age.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from eosctl.base.durations import human
from eosctl.base.errors import EosctlError
from eosctl.cluster.clientcauses import is_denial
from eosctl.cluster.model import TP


@dataclass(frozen=True)
class Safety:
    tp: TP
    producer_id: int
    coordinator_state: str | None  # the coordinator's state for the producer's transactional id; None: none
    tracked: bool  # the coordinator runs a transaction of this producer on this partition
    timeout_ms: int | None
    ends_ms: int | None  # start + transaction.timeout.ms: when the coordinator aborts it itself
    last_write_ms: int | None  # the producer's last write to the partition (DescribeProducers)
    blocked: int  # HW - LSO: offsets a read_committed consumer cannot reach
    groups: dict[str, int] = field(default_factory=dict)  # group -> committed offset, for groups it blocks
    now_ms: int = 0
    # What this principal could not read that the answer depends on (a coordinator that may run the
    # transaction under an id it may not Describe; a refused DescribeProducers): never "yes" then.
    cannot_see: str | None = None
    # Its coordinator runs it as a two-phase commit transaction (KIP-939).
    two_phase: bool = False

    @property
    def writing(self) -> bool:
        """The producer wrote within its transaction timeout (60 s when unknown): it may still be there."""
        if self.last_write_ms is None:
            return False
        return self.now_ms - self.last_write_ms < (self.timeout_ms or 60_000)

    @property
    def verdict(self) -> tuple[str, str]:
        """("yes" | "wait" | "careful" | "unknown" | "no", why), in the user's words."""
        if self.two_phase and self.tracked:
            return "no", ("a two-phase commit transaction (KIP-939): its external coordinator decides "
                          "whether it commits, and Kafka never times it out; aborting it may undo what the "
                          "other systems committed: ask the external coordinator to complete it")
        if self.cannot_see and not self.tracked:
            return "unknown", f"eosctl could not see all it needs to tell: {self.cannot_see}"
        if self.tracked and self.ends_ms is not None and self.ends_ms > self.now_ms:
            return "wait", (f"its coordinator still runs it ({self.coordinator_state}) and aborts it itself "
                            f"in {human((self.ends_ms - self.now_ms) / 1000)}; aborting now fails the "
                            "producer's commit")
        if self.writing and self.last_write_ms is not None:
            return "careful", (f"its producer wrote {human((self.now_ms - self.last_write_ms) / 1000)} ago "
                               "and may still be writing: stop it first, or its next writes fail")
        if self.tracked:
            return "yes", ("its coordinator should have ended it "
                           + (f"{human((self.now_ms - self.ends_ms) / 1000)} ago" if self.ends_ms else "")
                           + " and has not; its producer is quiet")
        return "yes", ("no coordinator runs it (nothing will end it but an ABORT marker) and its producer "
                       "is quiet")

    def rows(self) -> list[tuple[str, str]]:
        """(label, value) lines for a table or a detail pane."""
        word, why = self.verdict
        since = self._since
        coordinator = ("no coordinator lists it" + (" to this principal" if self.cannot_see else "")
                       if self.coordinator_state is None else
                       f"{self.coordinator_state}, " + (f"tracks {self.tp[0]}[{self.tp[1]}]" if self.tracked
                                                        else f"does not list {self.tp[0]}[{self.tp[1]}]"))
        groups = ", ".join(f"{g} (at {c})" for g, c in sorted(self.groups.items())) or "no group"
        timeout = "-" if self.timeout_ms is None else human(self.timeout_ms / 1000)
        return [
            ("safe to abort?", f"{word}: {why}"),
            ("coordinator", coordinator),
            ("timeout ends it", "never (two-phase commit, KIP-939: its external coordinator ends it)"
             if self.two_phase and self.tracked
             else since(self.ends_ms) + f" (transaction.timeout.ms {timeout})"
             if self.ends_ms is not None else "unknown (see above)" if self.cannot_see and not self.tracked
             else f"never (no coordinator runs it; timeout {timeout})"),
            ("producer's last write", since(self.last_write_ms)
             + (" - still writing" if self.writing else "")),
            ("blocks", f"{self.blocked} offsets beyond the LSO, for {groups}"),
        ]

    def _since(self, ms: int | None) -> str:
        if ms is None:
            return "-"
        when = "ago" if ms <= self.now_ms else "from now"
        return f"{_stamp(ms)} ({human(abs(self.now_ms - ms) / 1000)} {when})"

    def to_dict(self) -> dict[str, Any]:
        word, why = self.verdict
        return {"safe": word, "why": why, "coordinator_state": self.coordinator_state,
                "tracked": self.tracked,
                "timeout_ms": self.timeout_ms, "timeout_ends_ms": self.ends_ms,
                "last_write_ms": self.last_write_ms,
                "producer_writing": self.writing, "blocked": self.blocked,
                "blocked_groups": [{"group": g, "committed": c} for g, c in sorted(self.groups.items())],
                "cannot_see": self.cannot_see, "two_phase": self.two_phase}


def assess(tp: TP, producer_id: int, lso: int, hw: int, coordinator: Any | None, last_write_ms: int | None,
           committed: Mapping[str, int | None], now_ms: int, cannot_see: str | None = None) -> Safety:
    """``coordinator``: the producer's eosctl.txn.transactions.TxnInfo (None: no coordinator lists it);
    ``committed``: group -> its committed offset on the partition (groups that never committed there: left
    out). A group is blocked when its consumers cannot pass the LSO while records wait beyond it."""
    tracked = bool(coordinator is not None and coordinator.active and tp in coordinator.partitions
                   and coordinator.producer_id == producer_id)
    two_phase = bool(coordinator is not None and coordinator.two_phase)
    ends = None
    if coordinator is not None and tracked and not two_phase and coordinator.start_time_ms is not None \
            and coordinator.timeout_ms is not None:  # a 2PC one: start + 24d 20h means nothing
        ends = coordinator.start_time_ms + coordinator.timeout_ms
    blocked = {g: c for g, c in committed.items() if c is not None and c < hw and hw > lso}
    return Safety(tp, producer_id, coordinator.state if coordinator is not None else None, tracked,
                  coordinator.timeout_ms if coordinator is not None else None, ends, last_write_ms, hw - lso,
                  blocked, now_ms, cannot_see, two_phase)


def gather(client: Any, kafka_admin: Any, tp: TP, producer_id: int, lso: int, hw: int,
           now_ms: int, groups: tuple[str, ...] = ()) -> Safety:
    """assess() with the facts read now: the coordinator's view of the producer, its last write from
    DescribeProducers, and the committed offsets on the partition of ``groups`` (default: every group)."""
    # lazy: see docs/imports.md
    from eosctl.cluster.offsets import group_offsets, group_states
    from eosctl.txn.transactions import coordinator_unseen, coordinator_view, describe_producers

    coordinator = coordinator_view(client, {producer_id}).get(producer_id)
    cannot_see = coordinator_unseen(client) if coordinator is None else None
    last_write = None
    try:
        described, status = describe_producers(kafka_admin, [tp])
        if is_denial(status):
            cannot_see = cannot_see or status
        last_write = next((p.last_timestamp for p in described.get(tp, [])
                           if p.producer_id == producer_id and p.last_timestamp >= 0), None)
    except EosctlError:
        pass
    committed: dict[str, int | None] = {}
    try:
        wanted = list(groups) or sorted(group_states(client))
        for g, offs in (group_offsets(client, wanted) if wanted else {}).items():
            if tp in offs:
                committed[g] = offs[tp]
    except EosctlError:
        pass
    return assess(tp, producer_id, lso, hw, coordinator, last_write, committed, now_ms, cannot_see)


def _stamp(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def from_capture(cap: Any, tp: TP, producer_id: int, coordinator: Any | None, now_ms: int) -> Safety | None:
    """assess() from what a capture (eosctl.inspection.capture.Capture: live or a snapshot) read; None when it
    holds no offsets for the partition."""
    log = cap.log_of(*tp)
    lags = [r for r in (cap.lag.partitions if cap.lag is not None else []) if (r.topic, r.partition) == tp]
    if log is not None:
        lso, hw = log.last_stable_offset, log.high_watermark
    elif lags:
        lso, hw = lags[0].lso, lags[0].hw
    else:
        return None
    last_write = max((p.last_timestamp_ms for p in cap.producers or []
                      if (p.topic, p.partition) == tp and p.producer_id == producer_id
                      and p.last_timestamp_ms is not None), default=None)
    return assess(tp, producer_id, lso, hw, coordinator, last_write, {r.group: r.committed for r in lags},
                  now_ms)
