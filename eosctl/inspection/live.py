"""The live model of a pipeline: the one thing every live reader of eosctl refreshes (TUI, `lag --watch`,
the exporter).

A `LiveModel` holds the latest `Capture` plus what only a watcher keeps between readings: when each
section was last read successfully, how often each failed, whether the cluster answered, and the lag
history with its Burrow-style statuses. `refresh()` brings it up to date and returns the current state;
`capture()` stays the one-shot reading, and a snapshot is `model.current` at one moment.

A refresh costs what changed, not all of history:
- each partition's log is read from where the last refresh stopped to the new high watermark: the
  scan itself is kept (eosctl.cluster.logscan.LogScan), so a transaction open at the tail is decided when its
  marker arrives. A partition is scanned afresh when what was scanned may no longer be the log: the log
  start moved past the scanned start (retention, DeleteRecords), the high watermark went backwards
  (truncation), the topic's id changed (deleted and created again, KIP-516), or the log shrank by more
  than retention explains (compaction, see `_Drift`);
- the ledger is built from these logs (no whole-log rescan of its own) and the sink's side, which is
  read at its own cadence (``sink_every_s``) and only when the sink changed;
- the other sections (transactions, producers, lag, hanging) are per-partition requests, not history.
Every refresh is equal to a fresh `capture()` at the same moment (tests/kafka/test_live_model.py).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Literal

from eosctl.base.errors import BrokerError, EosctlError, SinkError, first_line
from eosctl.base.gcpause import LongLived
from eosctl.cluster import deadline
from eosctl.cluster.clients import Admins
from eosctl.cluster.logscan import LogScan, open_scans, run_scans
from eosctl.cluster.model import TP, PartitionLog
from eosctl.cluster.offsets import group_offsets
from eosctl.cluster.wire import Offsets, WireClient
from eosctl.config import sandboxstate
from eosctl.config.model import Sink
from eosctl.config.target import Target
from eosctl.inspection.capture import NOT_CAPTURED, SECTIONS, SKIPPED, Capture, read_sections
from eosctl.inspection.lag import DEFAULT_SCAN_LIMIT, LagSnapshot, Status, Watch, worst_of
from eosctl.inspection.ledger import SinkSide, ledger_of, read_sink
from eosctl.sink import shown
from eosctl.sink.change import change_token
from eosctl.sink.tail import DuckDBTail
from eosctl.txn import transactions as txns_mod
from eosctl.txn.transactions import DEFAULT_MAX_AGE_S, Described

LagKey = tuple[str, str, int]  # group, topic, partition
# Lag samples kept per partition for the sparklines (and the Burrow-style window).
HISTORY = 20
DEFAULT_TIMEOUT_MS = 5_000
# How long one refresh reads a sink's new rows at most (in slices that each keep its writer out < 0.5 s);
# a sink not caught up by then shows its last complete state (the ledger says how far the first read got)
# and the next refresh goes on, so a huge sink never holds up the Kafka sections.
SINK_BUDGET_S = 2.0
# Between two full readings of the offsets (ListOffsets cross-checked against a Fetch, WireClient.offsets), a
# refresh takes them from one Fetch at the high watermarks it last saw: a quarter of the requests. The full
# reading still runs at the first refresh, every OFFSETS_EVERY_S, and at every refresh while the broker's
# answers disagree, so a broker that misanswers is named as soon as and for as long as a capture would.
OFFSETS_EVERY_S = 60.0
# DescribeProducers is asked again only for partitions whose offsets moved (a producer's state changes only
# with what it appends, and with retention), and for all of them every PRODUCERS_EVERY_S: producer ids also
# expire with time alone (producer.id.expiration.ms, a day by default).
PRODUCERS_EVERY_S = 60.0


@dataclass
class LagHistory:
    """Each lag poll fed to eosctl.inspection.lag.Watch (statuses), and the recent series per partition."""

    window: int = HISTORY
    interval_s: float | None = None  # the poll interval, where one is fixed (lag --watch)
    watch: Watch = field(init=False)
    series: dict[LagKey, deque[int]] = field(default_factory=dict)  # records behind, oldest first
    statuses: dict[LagKey, Status] = field(default_factory=dict)
    group_statuses: dict[str, Status] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.watch = Watch(window=self.window, interval_s=self.interval_s)

    def add(self, snap: LagSnapshot) -> None:
        self.watch.add(snap)
        seen = set()
        for p in snap.partitions:
            key = (p.group, p.topic, p.partition)
            seen.add(key)
            value = p.records_behind if p.records_behind is not None else (p.lag_to_lso or 0)
            self.series.setdefault(key, deque(maxlen=self.window)).append(value)
        for key in set(self.series) - seen:
            del self.series[key]
        self.statuses = {key: self.watch.partition_status(*key) for key in self.series}
        # From the statuses just computed: asking the watch again evaluates every partition twice.
        self.group_statuses = {g: worst_of(g, self.statuses) for g in snap.groups()}

    def lists(self) -> dict[LagKey, list[int]]:
        return {k: list(v) for k, v in self.series.items()}


class _Clock:
    """Seconds since the previous call, recorded under each step's name."""

    def __init__(self, into: dict[str, float]) -> None:
        self.into, self.last = into, time.monotonic()
        into.clear()

    def __call__(self, step: str) -> None:
        now = time.monotonic()
        self.into[step], self.last = now - self.last, now


@dataclass
class _Partition:
    """One partition's scan, kept between refreshes, and the log it last gave."""

    scan: LogScan
    log: PartitionLog | None = None
    topic_id: str | None = None
    # Bytes of the log outside the scan (before its start), from the leader's log size at the first
    # reading: the size must stay at least this plus the bytes scanned, or records were removed.
    outside: int | None = None


NO_LEADER = "no leader: the brokers holding its replicas are down"


def readable(known: dict[str, dict[int, int]], cap: Capture) -> dict[str, dict[int, int]]:
    """The partitions of ``known`` (topic -> partition -> leader) that have a leader; the others go to
    ``cap.unreadable``: a broker down for good leaves its partitions without one, and the rest is still
    read and served (the exporter, the TUI), the dark ones named."""
    cap.unreadable = {(t, p): NO_LEADER for t, parts in known.items() for p, leader in sorted(parts.items())
                      if leader < 0}
    if not cap.unreadable:
        return known
    return {t: {p: leader for p, leader in parts.items() if leader >= 0} for t, parts in known.items()}


class LiveModel:
    """The pipeline as last read, refreshed in place.

    ``tail``: the first reading of a partition starts at most N offsets before its end (None: at the log
    start); from then on the model keeps everything from there (the log only grows at the end). Source
    partitions of a pipeline with a sink are always read whole: the ledger needs them.
    ``sink_every_s``: how often the sink is read again, at most (only when it changed).
    ``admins``: clients to share; otherwise the model builds its own and closes them in close().
    ``sections``: what to read (`lag --watch` reads only "lag"); ``lag_groups`` and ``scan_limit``: whose
    lag, and how far its records behind are counted (eosctl.inspection.lag.poll).
    ``partial``: partitions without a leader (a broker down for good) are left out and named in the
    capture's ``unreadable``, the rest read as usual; False: one fails the refresh (`lag --watch` shows its
    last values stale, with the reason).
    ``long_lived``: the process is there for this model (eosctl.base.gcpause: its state is kept out of the
    garbage collector's walks until close()).
    An unreachable cluster makes refresh() raise BrokerError; ``current`` then keeps the last good state.
    """

    def __init__(self, target: Target, *, sink: Sink | None = None, tail: int | None = None,
                 sink_every_s: float = 30.0, max_age_s: float = DEFAULT_MAX_AGE_S,
                 admins: Admins | None = None, timeout_ms: int = DEFAULT_TIMEOUT_MS,
                 sections: Collection[str] = SECTIONS, lag_groups: Sequence[str] | None = None,
                 scan_limit: int = DEFAULT_SCAN_LIMIT, offsets_every_s: float = OFFSETS_EVERY_S,
                 producers_every_s: float = PRODUCERS_EVERY_S, long_lived: bool = False,
                 partial: bool = True) -> None:
        self.target = target
        self.partial = partial
        self.sections = tuple(sections)
        self.lag_groups, self.scan_limit = lag_groups, scan_limit
        pipe = target.pipeline
        self.sink = sink if sink is not None else (pipe.sink if pipe else None)
        self.tail = tail
        self.sink_every_s = sink_every_s
        self.max_age_s = max_age_s
        self.timeout_ms = timeout_ms
        self.offsets_every_s, self.producers_every_s = offsets_every_s, producers_every_s
        self.topics = list(target.watched)
        self._own_admins = admins is None
        self.admins = admins or Admins(target.cluster, timeout=timeout_ms / 1000)
        self._client: WireClient | None = None
        self._current: Capture | None = None
        self._ok_at: dict[str, float] = {}  # section -> time.time() of its last good read
        self.refresh_errors: dict[str, int] = {name: 0 for name in SECTIONS}
        self.last_refresh_seconds = 0.0
        self.bytes_read = 0  # record bytes the last refresh fetched
        self.timings: dict[str, float] = {}  # seconds per step of the last refresh (benchmarks, --debug)
        self.rescans = 0  # partitions scanned afresh after their first reading (retention, recreation...)
        self.up = False
        self.lag_history = LagHistory()
        self._parts: dict[TP, _Partition] = {}
        self._sink_side: SinkSide | None = None
        self._sink_token: object = None
        self._sink_read_at = 0.0  # time.monotonic() of the last sink read
        self._sink_error: str | None = None
        self._tail: DuckDBTail | Literal[False] | None = None  # False: the sink can't be read incrementally
        self._offsets: dict[TP, Offsets] = {}  # as the last refresh read them
        self._offsets_checked_at: float | None = None  # time.monotonic() of the last full reading
        self._described: dict[TP, tuple[tuple[int, int, int], list]] = {}  # offsets when asked, producers
        self._described_all_at: float | None = None
        # eosctl.inspection.ledger.ledger_of's rows by what they were computed from
        self._ledger_rows: dict = {}
        # The process lives for this model (the TUI, `lag --watch`, the exporter): its state is kept out of
        # the garbage collector's walks between refreshes (eosctl.base.gcpause).
        self._heap = LongLived() if long_lived else None

    @property
    def current(self) -> Capture | None:
        return self._current

    def refresh(self) -> Capture:
        # Each refresh is one command's worth of waiting (--timeout): a watcher that runs for weeks renews
        # its deadline here, in the thread that refreshes.
        deadline.renew()
        if self._heap is None:
            return self._refresh()
        with self._heap.refreshing():
            return self._refresh()

    def _refresh(self) -> Capture:
        started = time.monotonic()
        pipe = self.target.pipeline
        cap = Capture(captured_at=datetime.now(UTC), bootstrap=self.target.cluster.bootstrap_servers,
                      pipeline=pipe.name if pipe else None, group=self.target.group, topics=self.topics,
                      tail=self.tail)
        try:
            # The sink first, then Kafka (see eosctl.inspection.ledger.read_sink): every row read was written
            # from a record Kafka committed before the reads below.
            clock = _Clock(self.timings)
            if "ledger" in self.sections:
                self._read_sink()
            clock("sink")
            client = self._connect()
            with client.hold_metadata():
                # Asked even for no topic: the admin client below is used only once the broker answered.
                known = client.metadata(self.topics)
                if self.partial:
                    known = readable(known, cap)
                tps = [(t, p) for t, parts in known.items() for p in sorted(parts)]
                offsets = self._read_offsets(client, tps)
                clock("offsets")
                if "logs" in self.sections:
                    self._read_logs(cap, client, tps, offsets)
                clock("logs")
                read_sections(cap, self.target, client, self.admins, known, self.max_age_s, offsets,
                              only=self.sections, lag_groups=self.lag_groups, scan_limit=self.scan_limit,
                              describe=lambda parts: self._describe(client, parts, offsets),
                              unreadable=cap.unreadable)
                clock("sections")
                if "ledger" in self.sections:
                    self._ledger(cap, client, offsets)
                clock("ledger")
        except BrokerError as e:
            error = e
            self.up = False
            reused = self._client is not None
            self._disconnect()
            if reused:
                # A connection kept from an earlier refresh broke: say whether the broker is still there
                # in the words of a first connection ("cannot reach Kafka at ...: connection refused").
                try:
                    self._connect()
                except BrokerError as again:
                    error = again
            for name in self.sections:
                if name != "ledger" or self.sink is not None:
                    self.refresh_errors[name] += 1
            raise error from None
        finally:
            self.last_refresh_seconds = time.monotonic() - started
        self._settle(cap)
        return cap

    # --- offsets and producers ----------------------------------------------------------------------

    def _read_offsets(self, client: WireClient, tps: list[TP]) -> dict[TP, Offsets]:
        """Every partition's log start, HW and LSO (see OFFSETS_EVERY_S)."""
        if not tps:
            return {}
        now = time.monotonic()
        full = (self._offsets_checked_at is None or now - self._offsets_checked_at >= self.offsets_every_s
                or any(o.disagreement for o in self._offsets.values()))
        if full:
            out = client.offsets(tps)
            self._offsets_checked_at = now
        else:
            out = client.served_offsets({tp: self._offsets[tp].high_watermark
                                         for tp in tps if tp in self._offsets})
            rest = [tp for tp in tps if tp not in out]
            if rest:  # new partitions, or ones truncated or emptied by retention since
                out.update(client.offsets(rest))
            out = {tp: out[tp] for tp in tps}
        self._offsets = out
        return out

    def _describe(self, client: WireClient, tps: list[TP], offsets: dict[TP, Offsets]) -> Described:
        """DescribeProducers' answer for ``tps``, asked only where it may have changed (PRODUCERS_EVERY_S)."""
        now = time.monotonic()
        every = self._described_all_at is None or now - self._described_all_at >= self.producers_every_s
        ask = [tp for tp in tps if every or tp not in self._described
               or self._described[tp][0] != offsets[tp].triple]
        if ask:
            answer, status = txns_mod.describe_producers(self.admins.kafka, ask,
                                                leaders={tp: client.leader(*tp) for tp in ask})
            if status != "ok":
                self._described.clear()
                self._described_all_at = None
                return answer, status
            for tp in ask:
                self._described[tp] = (offsets[tp].triple, answer.get(tp, []))
        if every:
            self._described_all_at = now
        for tp in set(self._described) - set(tps):
            del self._described[tp]
        return {tp: self._described[tp][1] for tp in tps}, "ok"

    # --- logs -------------------------------------------------------------------------------------

    def _read_logs(self, cap: Capture, client: WireClient, tps: list[TP], offsets: dict[TP, Offsets]) -> None:
        if not self.topics:
            cap.sections["logs"] = f"{SKIPPED}no topics (pass --topic or a pipeline)"
            return
        for tp in set(self._parts) - set(tps):
            del self._parts[tp]  # its topic is gone, or has fewer partitions now
        resumed: dict[TP, LogScan] = {}
        fresh: list[TP] = []
        for tp in tps:
            part, o = self._parts.get(tp), offsets[tp]
            if part is not None and self._still_the_log(part, o, client.topic_ids.get(tp[0])):
                if o != part.scan.offsets or not part.scan.done:
                    part.scan.extend(o)
                    resumed[tp] = part.scan
            else:
                self.rescans += part is not None
                fresh.append(tp)
        # Sizes after the offsets: each log then holds at least what the scans will read up to the HW.
        sizes = client.log_sizes(tps) if tps else {}
        self.bytes_read = self._scan(client, fresh, resumed, offsets)
        changed = [tp for tp in tps
                   if self._parts[tp].scan.changed or self._shrank(self._parts[tp], sizes.get(tp))]
        if changed:
            # What was read is no longer this log (compacted below the scanned point, or recreated):
            # read those partitions afresh.
            self.rescans += len(changed)
            self.bytes_read += self._scan(client, changed, {}, offsets)
        for tp in tps:
            part = self._parts[tp]
            size = sizes.get(tp)
            if part.outside is None and size is not None:
                part.outside = size - part.scan.bytes_added
        cap.logs = {}
        for tp in tps:
            log = self._parts[tp].log
            assert log is not None  # every partition in tps was scanned above
            cap.logs[tp] = log
        cap.sections["logs"] = "ok"

    def _scan(self, client: WireClient, fresh: list[TP], resumed: dict[TP, LogScan],
              offsets: dict[TP, Offsets]) -> int:
        """Read the resumed scans on and the fresh ones from their start; returns the bytes read."""
        starts = {tp: self._first_offset(tp, offsets[tp]) for tp in fresh}
        todo = dict(resumed)
        for tp, scan in open_scans(client, fresh, start=starts, offsets=offsets).items():
            self._parts[tp] = _Partition(scan, topic_id=client.topic_ids.get(tp[0]))
            todo[tp] = scan
        read = run_scans(client, todo)
        for tp, scan in todo.items():
            self._parts[tp].log = scan.finish()
        return read

    @staticmethod
    def _shrank(part: _Partition, size: int | None) -> bool:
        """The leader's log is smaller than what the scan read of it: records were removed below the
        scanned point (the cleaner compacted it) or it is another log now. Retention is caught before
        (the log start moves), and a log growing meanwhile only makes it larger."""
        return size is not None and part.outside is not None and size < part.outside + part.scan.bytes_added

    def _first_offset(self, tp: TP, o: Offsets) -> int:
        if self.tail is None or (self.sink is not None and tp[0] in self.target.topics):
            return o.log_start  # the whole log
        return max(o.log_start, o.high_watermark - self.tail)

    def _still_the_log(self, part: _Partition, o: Offsets, topic_id: str | None) -> bool:
        """Whether what the scan read is still this partition's log, so it may go on from where it is."""
        scan = part.scan
        if topic_id != part.topic_id:
            return False  # deleted and created again (or the broker started naming ids)
        if o.high_watermark < scan.end or o.log_start < scan.offsets.log_start:
            return False  # truncated, or a new log under the same id
        # A fresh reading starts at the log start: one that moved past the scan's start changes it.
        return o.log_start <= scan.start if self.tail is not None else o.log_start == scan.offsets.log_start

    # --- sink and ledger --------------------------------------------------------------------------

    def _read_sink(self) -> None:
        """The sink's side of the ledger, again when it is due and the sink changed."""
        if self.sink is None:
            return
        now = time.monotonic()
        if self._sink_side is not None and now - self._sink_read_at < self.sink_every_s:
            return
        try:
            token = change_token(self.sink)
            if self._sink_side is None or token is None or token != self._sink_token:
                self._sink_side = self._sink_now()
            self._sink_token, self._sink_read_at, self._sink_error = token, now, None
            self._ok_at["sink"] = time.time()
        except (EosctlError, SinkError) as e:
            self._sink_side, self._sink_error = None, first_line(e)
            self.refresh_errors["sink"] = self.refresh_errors.get("sink", 0) + 1

    def _sink_now(self) -> SinkSide | None:
        """The sink's side as it is now: a DuckDB file read on from the rows read before (the writer waits
        at most one short slice, eosctl.sink.tail), other sinks read whole. None: not caught up yet."""
        sink = self.sink
        assert sink is not None  # read only for a pipeline with a sink (_refresh_sink)
        if sink.duckdb and self._tail is not False:
            if self._tail is None:
                self._tail = DuckDBTail(sink)
            try:
                if not self._tail.read(budget_s=SINK_BUDGET_S):
                    return self._sink_side  # the rows read so far are not yet a state of the sink
            except SinkError:
                if self._tail.slices > 1:
                    raise
                self._tail = False  # e.g. a view, which has no rowid: read whole from now on
                return read_sink(sink)
            tail = self._tail
            stored = None if tail.state.stored is None else {
                (s.topic, s.partition): s.next_offset for s in tail.state.stored}
            # Copies: the tail appends to its lists in place while a later read is under way.
            islands = {tp: list(i) for tp, i in tail.state.islands.items() if i}
            return SinkSide(tail.summaries(), stored, islands, tail.invalid_rows(),
                            f"{shown(sink)} ({sink.table})")
        return read_sink(sink)

    def _ledger(self, cap: Capture, client: WireClient, offsets: dict[TP, Offsets]) -> None:
        if self.sink is None:
            cap.sections["ledger"] = f"{SKIPPED}the pipeline has no sink"
            return
        if self._sink_side is None:
            tail = self._tail
            why = self._sink_error or (f"reading the sink: {tail.state.rows_read:,} rows so far"
                                       if isinstance(tail, DuckDBTail) else "the sink was not read yet")
            cap.sections["ledger"] = f"{NOT_CAPTURED}{why}"
            return
        group = self.target.group
        whole = {tp: lg for tp, lg in cap.logs.items() if tp[0] in self.target.topics
                 and lg.scanned_from == lg.log_start_offset and lg.scanned_to == lg.high_watermark}
        try:
            committed: dict[TP, int] = {}
            if group:
                in_lag = self._committed_in_lag(cap, group)
                committed = in_lag if in_lag is not None else group_offsets(client, [group])[group]
            # The lag section's pending offset commit (eosctl.txn.pendingoffsets), shown on the ledger too.
            pending = next((r.pending for r in (cap.lag.partitions if cap.lag else ())
                            if r.group == group and r.pending is not None), None)
            cap.ledger = ledger_of(client, self._sink_side, self.target.topics, group, committed,
                                   pipeline=cap.pipeline, logs=whole, offsets=offsets, memo=self._ledger_rows,
                                   pending=pending)
            cap.sections["ledger"] = "ok"
        except EosctlError as e:
            cap.sections["ledger"] = f"{NOT_CAPTURED}{e}"
            if isinstance(e, BrokerError):
                self.admins.reset()

    def _committed_in_lag(self, cap: Capture, group: str) -> dict[TP, int] | None:
        """The group's committed offsets of the pipeline's topics as this refresh's lag section just read
        them (None: it did not), rather than asking again (~0.3 s at 10k partitions)."""
        if cap.lag is None or cap.sections.get("lag") != "ok" or group not in cap.lag.group_states:
            return None
        return {(r.topic, r.partition): r.committed for r in cap.lag.partitions
                if r.group == group and r.committed is not None and r.topic in self.target.topics}

    # --- plumbing ---------------------------------------------------------------------------------

    def _connect(self) -> WireClient:
        if self._client is None:
            self._client = WireClient(self.target.cluster, timeout_ms=self.timeout_ms)
        return self._client

    def _disconnect(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        self.admins.reset()
        self._follow_sandbox()
        # The broker may come back as another (restarted, failed over): read everything in full again.
        self._offsets_checked_at = self._described_all_at = None

    def _follow_sandbox(self) -> None:
        """The sandbox restarted on another port (`down`, then `up` while its port was taken): the next
        connections go there, instead of retrying the old port for ever."""
        if not self.target.sandbox:
            return


        state = sandboxstate.status(sandboxstate.state_dir(self.target.cluster.sandbox_home))
        if state is None or state.bootstrap == self.target.cluster.bootstrap_servers:
            return
        cluster = replace(self.target.cluster, bootstrap_servers=state.bootstrap)
        self.target = replace(self.target, cluster=cluster)
        self.admins.cluster = cluster

    def reconnect(self) -> None:
        """New connections at the next refresh (after a failed read: the broker may have restarted)."""
        self._disconnect()

    def _settle(self, cap: Capture) -> None:
        """Record what this reading says about each section, and keep it as the current state."""
        self.up = True
        now = time.time()
        failed = cap.errors()
        for name in cap.sections:
            if name in failed:
                self.refresh_errors[name] = self.refresh_errors.get(name, 0) + 1
            else:
                self._ok_at[name] = now
        if cap.lag is not None and cap.sections.get("lag") == "ok":
            self.lag_history.add(cap.lag)
        self._current = cap

    def section_age(self, name: str, now: float | None = None) -> float | None:
        """Seconds since the section was last read successfully (None: never). Besides the Capture's
        sections, "sink": since the sink was last read, or found unchanged (the ledger's sink side)."""
        at = self._ok_at.get(name)
        if at is None:
            return None
        return max(0.0, (time.time() if now is None else now) - at)

    def close(self) -> None:
        if self._heap is not None:
            self._heap.release()
        self._disconnect()
        if self._own_admins:
            self.admins.close()

    def __enter__(self) -> LiveModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
