"""Consumer lag measured the way a read_committed consumer experiences it.

Tools that compute lag as HW - committed (kafka-consumer-groups.sh, Burrow, kaskade) never reach 0 on a
transactional topic, because the last offset is a commit marker, and they blame the consumer for records
an open transaction holds back. Here, per group and partition:

- ``lag_to_lso`` = LSO - committed: offsets a read_committed consumer can still move over;
- ``records_behind`` = DATA offsets in [committed, LSO): what it will still deliver (a trailing marker
  counts 0), from a log scan of just that window (bounded by ``scan_limit`` offsets per partition;
  beyond it the rest counts as data and the number is flagged inexact);
- ``blocked`` = HW - LSO, with the open transaction that holds the LSO (producer id, first offset, age
  from the timestamp of its first batch);
- ``time_lag_s`` = age of the oldest unconsumed committed record (its batch's first timestamp);
- ``pending``: the group's next offset commit is pending in an open transaction (UNSTABLE_OFFSET_COMMIT,
  eosctl.txn.pendingoffsets), with the transaction and its producer; ``committed`` is then the offset
  committed before it. Context in each status's cause, never a status of its own.

One poll is: one ListOffsets round per leader for every partition (eosctl.cluster.wire), the groups' committed
offsets (eosctl.cluster.offsets: FindCoordinator and OffsetFetch, all groups in flight together), one batched
scan of the partitions whose committed offset is below the LSO, and one batched Fetch at the LSO of the
blocked partitions.

``Watch`` keeps a sliding window of polls and gives each partition and group a Burrow-style status.
"""

from __future__ import annotations

import time
from collections import defaultdict, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from eosctl.base.errors import BrokerError
from eosctl.cluster.groups import GroupDescription, describe_groups
from eosctl.cluster.logscan import scan_partitions
from eosctl.cluster.model import TP, Kind, PartitionLog
from eosctl.cluster.offsets import group_listing, group_positions
from eosctl.cluster.shareprogress import ShareOffset, share_isolation, share_offsets
from eosctl.cluster.wire import Offsets, WireClient
from eosctl.inspection.sharegroups import share_warnings
from eosctl.txn.opentxn import OpenTxn, open_transactions
from eosctl.txn.pendingoffsets import PendingCommit, pending_commits
from eosctl.txn.transactions import coordinator_view, dated

DEFAULT_SCAN_LIMIT = 50_000
# Bytes per partition a lag scan asks for at first (doubled by the scan for a batch that does not fit):
# counting records behind needs batch headers, and a MiB per partition does not arrive in a request's
# timeout over a slow link (1 MiB at 200 KB/s: 5 s).
LAG_SCAN_BYTES = 64 << 10


@dataclass(frozen=True, slots=True)
class PartitionLag:
    group: str
    topic: str
    partition: int
    committed: int | None  # None: the group has no committed offset for this partition
    log_start: int
    lso: int
    hw: int
    records_behind: int | None = None
    records_behind_exact: bool = True
    oldest_unconsumed_ms: int | None = None
    open_txn: OpenTxn | None = None
    error: str | None = None
    # The broker's ListOffsets and Fetch answers disagreed (eosctl.cluster.wire.Offsets): the offsets are the
    # Fetch's, what a read_committed consumer is served, and no status may say OK on them.
    offsets_warning: str | None = None
    # Who consumes it now (DescribeGroups): None when no member of the group is assigned the partition.
    member_id: str | None = None
    client_id: str | None = None
    host: str | None = None
    # The group's next commit of this partition's offset is pending in an open transaction.
    pending: PendingCommit | None = None
    # A share group's progress here (DescribeShareGroupOffsets): ``committed`` is its start offset.
    share: ShareOffset | None = None

    @property
    def lag_to_lso(self) -> int | None:
        return None if self.committed is None or self.lso < 0 else max(0, self.lso - self.committed)

    @property
    def hw_lag(self) -> int | None:
        """What kafka-consumer-groups.sh calls LAG, for comparison."""
        return None if self.committed is None or self.hw < 0 else max(0, self.hw - self.committed)

    @property
    def blocked(self) -> int:
        return max(0, self.hw - self.lso)

    def time_lag_s(self, now_ms: int) -> float | None:
        if self.records_behind == 0:
            return 0.0
        if self.oldest_unconsumed_ms is None:
            return None
        return max(0.0, (now_ms - self.oldest_unconsumed_ms) / 1000)


@dataclass
class LagSnapshot:
    taken_ms: int
    partitions: list[PartitionLag]
    group_states: dict[str, str] = field(default_factory=dict)  # group -> "STABLE", "EMPTY", ...
    # group -> "classic", "consumer" (KIP-848), "streams", "share" (ListGroups v5; absent: not said)
    group_types: dict[str, str] = field(default_factory=dict)
    # group -> its members, epoch and (streams) topology, by the describe API of its type; absent: not
    # described (its coordinator did not answer, or the broker lacks the API)
    descriptions: dict[str, GroupDescription] = field(default_factory=dict)
    # share group -> its share.isolation.level (None: the broker does not say)
    share_isolation: dict[str, str | None] = field(default_factory=dict)
    # share group -> the warning that it reads a transactional topic read_uncommitted
    share_warnings: dict[str, str] = field(default_factory=dict)

    def groups(self) -> list[str]:
        return list(dict.fromkeys(p.group for p in self.partitions))


# --- arithmetic on the log model ------------------------------------------------------------------------


def records_behind(log: PartitionLog | None, committed: int, log_start: int, lso: int) -> tuple[int, bool]:
    """(data records in [committed, LSO), exact?) from a scan of part of that window.

    Offsets the scan did not cover count as data (an upper bound) and make the result inexact; records
    below the log start are gone (retention) and no consumer will receive them, so they don't count.
    """
    lo = max(committed, log_start)
    if lo >= lso:
        return 0, True
    if log is None:
        return lso - lo, False
    known = log.data_between(lo, lso)
    covered_from, covered_to = max(lo, log.scanned_from), min(lso, log.scanned_to)
    covered = max(0, covered_to - covered_from)
    unknown = (lso - lo) - covered
    return known + unknown, unknown == 0


def oldest_unconsumed_ms(log: PartitionLog | None, committed: int, lso: int) -> int | None:
    """First timestamp of the batch holding the first DATA offset in [committed, LSO), if scanned."""
    if log is None or not log.batches:
        return None
    for b in log.batches:
        if b.is_control or b.last_offset < committed:
            continue
        if b.base_offset >= lso:
            break
        offset = max(b.base_offset, committed)
        if log.kind_at(offset) is Kind.DATA:
            return b.first_timestamp
    return None


def scan_windows(committed: Mapping[TP, Iterable[int | None]], offsets: Mapping[TP, Offsets],
                 scan_limit: int) -> dict[TP, tuple[int, int]]:
    """Per partition, the one window [from, to) that answers every group: from the lowest committed
    offset still below the LSO, at most ``scan_limit`` offsets."""
    windows: dict[TP, tuple[int, int]] = {}
    for tp, values in committed.items():
        o = offsets[tp]
        below = [max(c, o.log_start) for c in values if c is not None and max(c, o.log_start) < o.last_stable]
        if below:
            lo = min(below)
            windows[tp] = (lo, min(o.last_stable, lo + scan_limit))
    return windows


def build_rows(committed: Mapping[str, Mapping[TP, int | None]], offsets: Mapping[TP, Offsets],
               logs: Mapping[TP, PartitionLog], open_txns: Mapping[TP, OpenTxn]) -> list[PartitionLag]:
    """One PartitionLag per group and partition from what a poll gathered (pure: no I/O)."""
    rows = []
    for group, tps in committed.items():
        for tp, c in sorted(tps.items()):
            o = offsets[tp]
            base: dict[str, Any] = dict(
                group=group, topic=tp[0], partition=tp[1], committed=c, log_start=o.log_start,
                lso=o.last_stable, hw=o.high_watermark, open_txn=open_txns.get(tp),
                offsets_warning=o.disagreement)
            if c is None:
                rows.append(PartitionLag(**base))
                continue
            if c > o.high_watermark:
                rows.append(PartitionLag(**base, error=(
                    f"committed offset {c} is beyond the high watermark {o.high_watermark}: the log was "
                    "truncated below what the group consumed (an unclean leader election, or a recreated "
                    "topic); its consumer will reset by auto.offset.reset, skipping or re-reading records")))
                continue
            log = logs.get(tp)
            behind, exact = records_behind(log, c, o.log_start, o.last_stable)
            oldest = oldest_unconsumed_ms(log, max(c, o.log_start), o.last_stable) if behind else None
            rows.append(PartitionLag(**base, records_behind=behind, records_behind_exact=exact,
                                     oldest_unconsumed_ms=oldest))
    return rows


# --- talking to the cluster ----------------------------------------------------------------------------


def poll(client: WireClient, groups: Sequence[str] | None = None,
         topics: Sequence[str] | None = None, scan_limit: int = DEFAULT_SCAN_LIMIT,
         now_ms: int | None = None, offsets: Mapping[TP, Offsets] | None = None,
         per_group: Mapping[str, Sequence[str]] | None = None,
         unreadable: Mapping[TP, str] | None = None) -> LagSnapshot:
    """One lag measurement for the given groups (default: every group with committed offsets for
    ``topics``; every group when no topic is given either). ``offsets``: partitions' offsets the caller
    read a moment ago (the live model), used where they cover the groups' partitions. ``per_group``:
    the topics of each group where groups read different topics (a pipeline's hops). ``unreadable``:
    partitions not to read (no leader), each group's row for them carrying the reason as its error."""
    listing = group_listing(client)
    states = {g: state for g, (state, _) in listing.items()}
    wanted = list(groups) if groups else sorted(states)
    types = {g: t for g, (_, t) in listing.items() if t}
    # A share group commits no offsets: its progress is each share-partition's start offset.
    shared = [g for g in wanted if types.get(g) == "share"]
    positions = group_positions(client, [g for g in wanted if g not in shared]) if wanted else {}
    progress = share_offsets(client, shared)
    by_group = {g: positions[g].committed if g in positions else
                {tp: so.start_offset for tp, so in progress[g].items() if so.start_offset >= 0}
                for g in wanted}
    topic_filter = set(topics) if topics else None
    by_group = {g: {tp: c for tp, c in offs.items() if topic_filter is None or tp[0] in topic_filter}
                for g, offs in by_group.items()}
    if not groups:
        by_group = {g: offs for g, offs in by_group.items() if offs}
    group_topics = sorted({tp[0] for offs in by_group.values() for tp in offs} | set(topics or ()))
    partitions, broken = topic_partitions(client, group_topics, set(topics or ()))
    # Every partition of each topic a group committed to, so a partition it never committed shows too.
    committed: dict[str, dict[TP, int | None]] = {}
    for g, offs in by_group.items():
        mine = sorted({tp[0] for tp in offs} | (set(topics) if groups and topics else set()))
        if per_group and g in per_group:
            mine = [t for t in mine if t in per_group[g]]
        committed[g] = {(t, p): offs.get((t, p))
                        for t in mine if t in partitions for p in sorted(partitions[t])}
    skip = unreadable or {}
    dark = [PartitionLag(g, t, p, c, -1, -1, -1, error=skip[(t, p)])
            for g, offs in committed.items() for (t, p), c in offs.items() if (t, p) in skip]
    if dark:
        committed = {g: {tp: c for tp, c in offs.items() if tp not in skip} for g, offs in committed.items()}
    tps = sorted({tp for offs in committed.values() for tp in offs})
    known = offsets or {}
    offsets = {tp: known[tp] for tp in tps} if all(tp in known for tp in tps) else \
        client.offsets(tps) if tps else {}
    per_tp: dict[TP, list[int | None]] = defaultdict(list)
    for group_offsets in committed.values():
        for tp, c in group_offsets.items():
            per_tp[tp].append(c)
    windows = scan_windows(per_tp, offsets, scan_limit)
    logs = scan_partitions(client, list(windows), start={tp: w[0] for tp, w in windows.items()},
                           end={tp: w[1] for tp, w in windows.items()}, keep_batches=True,
                           offsets=offsets, max_bytes=LAG_SCAN_BYTES) if windows else {}
    blocked = [tp for tp in tps if offsets[tp].last_stable < offsets[tp].high_watermark]
    txns = open_transactions(client, blocked, {tp: offsets[tp].last_stable for tp in blocked})
    # Aged as `txns hanging` ages them: by the coordinator's start time where it has one.
    txns = dated(txns, coordinator_view(client, {t.producer_id for t in txns.values()}))
    taken = int(time.time() * 1000) if now_ms is None else now_ms
    rows = build_rows(committed, offsets, logs, txns) + [
        PartitionLag(g, t, p, c, -1, -1, -1, error=broken[t])  # -1: unknown, as Kafka says
        for g, offs in by_group.items() for (t, p), c in sorted(offs.items()) if t in broken] + dark
    order = {g: i for i, g in enumerate(committed)}
    rows.sort(key=lambda r: (order[r.group], r.topic, r.partition))
    described = describe_groups(client, list(committed), types)
    members = {(g, *tp): sorted(ms, key=lambda m: m.member_id)[0]
               for g, d in described.items() for tp, ms in d.partition_members().items()}
    rows = [replace(r, member_id=m.member_id, client_id=m.client_id, host=m.host)
            if (m := members.get((r.group, r.topic, r.partition))) else r for r in rows]
    rows = [replace(r, share=so) if (so := progress.get(r.group, {}).get((r.topic, r.partition))) else r
            for r in rows]
    isolation = share_isolation(client, [g for g in shared if g in committed])
    warned = share_warnings(client, {g: list(committed[g]) for g in isolation}, isolation, offsets, logs,
                            txns) if isolation else {}
    held = pending_commits(client, {g: positions[g].pending for g in committed if g in positions})
    rows = [replace(r, pending=pc) if (pc := held.get(r.group)) and (r.topic, r.partition) in pc.partitions
            else r for r in rows]
    return LagSnapshot(taken, rows, {g: states.get(g, "UNKNOWN") for g in committed},
                       {g: kind for g in committed if (kind := listing.get(g, ("", None))[1])},
                       described, isolation, warned)


def topic_partitions(client: WireClient, topics: Sequence[str],
                     required: set[str]) -> tuple[dict[str, dict[int, int]], dict[str, str]]:
    """(topic -> partition -> leader, topic -> error): a topic a group committed to that was deleted, or that
    the user may not describe, gets its error instead of failing every group's lag; a ``required`` topic
    (named by the user) still fails the poll."""
    if not topics:
        return {}, {}
    try:
        return client.metadata(topics), {}
    except BrokerError:
        pass
    found: dict[str, dict[int, int]] = {}
    broken: dict[str, str] = {}
    for t in topics:
        try:
            found.update(client.metadata([t]))
        except BrokerError as e:
            if t in required:
                raise
            broken[t] = str(e)
    return found, broken


# --- watch: Burrow-style statuses over a sliding window ------------------------------------------------

STATUSES = ("OK", "WARN", "STALL", "STOP", "REWIND", "ERR")  # by severity
# Groups in these states have no members; any other state (UNKNOWN included) counts as consuming.
IDLE_STATES = {"EMPTY", "DEAD"}


@dataclass(frozen=True, slots=True)
class Status:
    status: str
    cause: str = ""

    def __str__(self) -> str:
        return f"{self.status}: {self.cause}" if self.cause else self.status

    @property
    def severity(self) -> int:
        return STATUSES.index(self.status)


# The first poll of a watch has no earlier poll to see an open transaction at: one its coordinator (or the
# partition leader's clock) says has been open at least this long (or the watch's interval, when given)
# already held the LSO where an earlier poll would have been, and is judged as a later poll judges it.
FIRST_POLL_STALL_S = 5.0


def evaluate(samples: Sequence[tuple[int, PartitionLag]], group_active: bool,
             first_poll_stall_s: float = FIRST_POLL_STALL_S) -> Status:
    """Status of one partition from its window of (poll time ms, lag) samples, oldest first.

    Rules, first match wins (Burrow's, read against the LSO instead of the HW):
    ERR    the latest poll failed for this partition, or the broker's offsets contradict each other;
    REWIND the committed offset went backwards inside the window;
    STALL  nothing left to read below the LSO, and the same open transaction held the LSO at every poll
           (the cause names it: the consumer is not at fault); at a single poll: a transaction that its
           coordinator's (or the leader's) clock says is open ``first_poll_stall_s`` or longer;
    OK     records behind was 0 at some poll (or no committed offset / a single poll);
    STOP   committed offset unchanged over the window with records behind and no active members;
    STALL  the same, with members (consuming but not committing);
    WARN   the committed offset moves but records behind never went down;
    OK     otherwise.
    Motion rules need at least two polls.
    """
    now, last = samples[-1]
    if last.error:
        return Status("ERR", last.error)
    if last.offsets_warning:
        return Status("ERR", last.offsets_warning)
    commits = [lag.committed for _, lag in samples if lag.committed is not None]
    if any(b < a for a, b in zip(commits, commits[1:], strict=False)):
        return Status("REWIND", f"committed offset went back from {max(commits[:-1])} to {commits[-1]}")
    if last.committed is None:
        return Status("OK", "no committed offset")
    txn = last.open_txn
    note = f"; blocked by {txn.describe(now)}" if txn else ""
    if last.pending is not None:  # what the stage is doing, never a status by itself
        note += f"; its next offset commit is {last.pending.describe(now)}"
    if len(samples) < 2:
        age = txn.age_s(now) if txn is not None and txn.age_trusted else None
        if txn is not None and age is not None and age >= first_poll_stall_s and last.records_behind == 0:
            return Status("STALL", f"blocked by {txn.describe(now)}")
        return Status("OK", note[2:])
    same_txn = txn is not None and all(
        lag.open_txn is not None and (lag.open_txn.producer_id, lag.open_txn.first_offset)
        == (txn.producer_id, txn.first_offset) for _, lag in samples)
    if txn is not None and same_txn and last.records_behind == 0:
        return Status("STALL", f"blocked by {txn.describe(now)}")
    behind = [lag.records_behind for _, lag in samples if lag.records_behind is not None]
    if not behind or min(behind) == 0:
        return Status("OK", note[2:])
    span = (now - samples[0][0]) / 1000
    if len(set(commits)) == 1:
        if not group_active:
            return Status("STOP", f"no active consumer; committed offset {last.committed}, "
                                  f"{last.records_behind} records behind for {span:.0f}s{note}")
        return Status("STALL", f"committed offset {last.committed} unchanged for {span:.0f}s with "
                               f"{last.records_behind} records behind{note}")
    if all(b >= a for a, b in zip(behind, behind[1:], strict=False)):
        return Status("WARN", f"falling behind: {behind[0]} -> {behind[-1]} records behind{note}")
    return Status("OK", note[2:])


class Watch:
    """Sliding window of the last ``window`` polls per partition; statuses per partition and group."""

    def __init__(self, window: int = 10, interval_s: float | None = None) -> None:
        self.window = window
        # A first poll's open transaction is judged against the poll interval (see FIRST_POLL_STALL_S).
        self.first_poll_stall_s = FIRST_POLL_STALL_S if interval_s is None else interval_s
        self._samples: dict[tuple[str, str, int], deque[tuple[int, PartitionLag]]] = {}
        self._states: dict[str, str] = {}

    def add(self, snapshot: LagSnapshot) -> None:
        seen = set()
        for lag in snapshot.partitions:
            key = (lag.group, lag.topic, lag.partition)
            seen.add(key)
            self._samples.setdefault(key, deque(maxlen=self.window)).append((snapshot.taken_ms, lag))
        for key in set(self._samples) - seen:  # partition or group went away: start over if it returns
            del self._samples[key]
        self._states = dict(snapshot.group_states)

    def partition_status(self, group: str, topic: str, partition: int) -> Status:
        samples = self._samples.get((group, topic, partition))
        if not samples:
            return Status("ERR", "no data")
        return evaluate(list(samples), self._states.get(group, "UNKNOWN") not in IDLE_STATES,
                        self.first_poll_stall_s)

    def group_status(self, group: str) -> Status:
        """The worst partition's status, naming that partition."""
        return worst_of(group, {key: self.partition_status(*key) for key in self._samples if key[0] == group})


def worst_of(group: str, statuses: Mapping[tuple[str, str, int], Status]) -> Status:
    """A group's status from its partitions' (keyed group, topic, partition): the worst, naming where."""
    worst: tuple[Status, str] | None = None
    for (g, topic, partition), s in statuses.items():
        if g == group and (worst is None or s.severity > worst[0].severity):
            worst = (s, f"{topic}[{partition}]")
    if worst is None:
        return Status("ERR", "no partitions")
    status, where = worst
    return Status(status.status, f"{where} {status.cause}" if status.cause else "")
