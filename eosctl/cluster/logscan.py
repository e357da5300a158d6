"""Scan a partition remotely and classify every offset the way a read_committed consumer sees it.

The authoritative path is Kafka's own: a read_uncommitted fetch returns every batch including aborted
ones and the COMMIT/ABORT markers, and a producer's transactional data takes the outcome of that
producer's next marker. (noida-db drops aborted batches from read_committed fetches, real Kafka does
not, so read_committed fetches are never used to classify.)

Memory stays bounded by one fetch response plus the compact result: ranges are merged as they are
produced, and only transactions still waiting for their marker keep per-batch spans.

A scan never classifies an offset it did not read. Leader errors are retried after a metadata refresh;
OFFSET_OUT_OF_RANGE asks ListOffsets(earliest) and goes on from the new log start (what retention
removed is below the log start: unverifiable, never a hole or a gap); throttled answers wait
throttle_time_ms; an answer with no records and no error below the high watermark is asked again. A
partition that makes no progress for RETRY_DEADLINE_S fails the scan with one line naming it. Holes
(compaction) are only ever offsets between or inside batches that were read. The classification itself
(what each batch means for the offsets it covers) is eosctl/cluster/logclassify.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import kafka.errors as Errors

from eosctl.base.errors import BrokerError
from eosctl.base.progress import Progress, Step
from eosctl.cluster.batches import iter_batches
from eosctl.cluster.logclassify import LogScan
from eosctl.cluster.model import (
    PartitionLog,
)
from eosctl.cluster.wire import DEFAULT_MAX_BYTES, FETCH_WAITS_MS, TP, FetchResult, Offsets, WireClient

Bound = int | Mapping[TP, int] | None
# Largest per-partition fetch size we grow to when a single batch does not fit in max_bytes.
MAX_FETCH_BYTES = 64 << 20
_RETRIABLE = {
    Errors.NotLeaderForPartitionError.errno, Errors.LeaderNotAvailableError.errno,
    Errors.UnknownTopicOrPartitionError.errno, Errors.FencedLeaderEpochError.errno,
    Errors.UnknownLeaderEpochError.errno, Errors.KafkaStorageError.errno,
}
_OUT_OF_RANGE = Errors.OffsetOutOfRangeError.errno
# How long one partition may keep answering without progress (errors, throttling, empty answers) before
# the scan gives up with one line naming it.
RETRY_DEADLINE_S = 30.0


def scan_partition(client: WireClient, topic: str, partition: int, start: int | None = None,
                   end: int | None = None, keep_batches: bool = False, progress: Progress | None = None,
                   max_bytes: int = DEFAULT_MAX_BYTES) -> PartitionLog:
    """Classify offsets [max(start, log start), min(end, HW)) of one partition; ``end`` is exclusive."""
    return scan_partitions(client, [(topic, partition)], start, end, keep_batches, progress,
                           max_bytes)[(topic, partition)]


def scan_partitions(client: WireClient, tps: Iterable[TP], start: Bound = None, end: Bound = None,
                    keep_batches: bool = False, progress: Progress | None = None,
                    max_bytes: int = DEFAULT_MAX_BYTES, offsets: Mapping[TP, Offsets] | None = None,
                    keys: bool | str = False) -> dict[TP, PartitionLog]:
    """Scan many partitions together: each round is one Fetch per leader covering all of them.

    ``start``/``end`` may be one offset for all partitions or a per-partition mapping (lag scans each
    partition's own [committed, LSO) window in the same fetches). ``offsets``: already read for every
    partition (an audit's driver reads them once for all tasks); otherwise ListOffsets asks here.
    ``keys``: also decode every record's key (eosctl.cluster.recordkeys) into each log's ``record_keys``;
    "raw" or "md5" (eosctl.cluster.recordkeys.VALUE_MODES): its value's hash too.
    """
    scans = open_scans(client, tps, start, end, keep_batches, offsets, keys)
    run_scans(client, scans, progress, max_bytes)
    return {tp: s.finish() for tp, s in scans.items()}


def open_scans(client: WireClient, tps: Iterable[TP], start: Bound = None, end: Bound = None,
               keep_batches: bool = False, offsets: Mapping[TP, Offsets] | None = None,
               keys: bool | str = False) -> dict[TP, LogScan]:
    """One scan per partition over [max(start, log start), min(end, HW)), nothing read yet. ``offsets``:
    the partitions' offsets if the caller just read them (else one ListOffsets round here)."""
    tps = list(dict.fromkeys(tps))
    snapshot = offsets if offsets is not None else client.offsets(tps)
    scans: dict[TP, LogScan] = {}
    for tp in tps:
        o = snapshot[tp]
        first, stop = _bound(start, tp), _bound(end, tp)
        lo = o.log_start if first is None else max(first, o.log_start)
        hi = o.high_watermark if stop is None else min(stop, o.high_watermark)
        scans[tp] = LogScan(tp[0], tp[1], lo, max(lo, hi), o, keep_batches)
        if keys:
            from eosctl.cluster.recordkeys import (
                KeyCollector,  # lazy: see docs/imports.md
            )

            scans[tp].keys = KeyCollector(lo, max(lo, hi), keys if isinstance(keys, str) else None)
    return scans


def run_scans(client: WireClient, scans: Mapping[TP, LogScan], progress: Progress | None = None,
              max_bytes: int = DEFAULT_MAX_BYTES) -> int:
    """Read until every scan reached its end (and the markers it waits for); returns the record bytes
    read."""
    total = sum(s.end - s.start for s in scans.values())
    sizes = {tp: max_bytes for tp in scans}
    stalls: dict[TP, _Stall] = {}
    read = 0
    while True:
        # After the range, keep reading (markers only) until every transaction that started in it is
        # decided, but never past the high watermark of the snapshot.
        active = {tp: s.position for tp, s in scans.items()
                  if (not s.settled or s.verify) and s.position < s.offsets.high_watermark}
        if not active:
            break
        results = client.fetch_many(active, max(sizes[tp] for tp in active))
        waits = []
        for tp in active:
            s, r = scans[tp], results[tp]
            if not r.records and r.answered and not r.error_code and len(results) > 1:
                # Kafka may leave partitions empty once the response's max_bytes is used up by others;
                # ask again alone before concluding anything.
                r = client.fetch_raw(tp[0], tp[1], s.position, sizes[tp])
            read += len(r.records)
            before = (s.position, s.next, sizes[tp])
            why = _take(client, s, r, sizes, tp)
            if why is None and (s.position, s.next, sizes[tp]) != before:
                stalls.pop(tp, None)
                continue
            stall = stalls.setdefault(tp, _Stall(time.monotonic()))
            stall.rounds += 1
            stall.why = why or "no progress"
            if time.monotonic() - stall.since > RETRY_DEADLINE_S:
                raise BrokerError(f"cannot read {tp[0]}-{tp[1]} at offset {s.position}: {stall.why} "
                                  f"for {RETRY_DEADLINE_S:.0f}s; retry later")
            waits.append(max(r.throttle_ms / 1000, min(2.0, 0.05 * 2 ** stall.rounds)))
        if waits:
            time.sleep(max(waits))
        if progress is not None:
            done = sum(min(s.next, s.end) - s.start for s in scans.values())
            progress(Step("scanning the log", done, total))
    return read


# One partition's resumable scan, for callers that keep scans between reads (eosctl.inspection.live).


@dataclass
class _Stall:
    """A partition whose answers make no progress: retried with backoff until RETRY_DEADLINE_S."""

    since: float
    rounds: int = 0
    why: str = ""


def _take(client: WireClient, s: LogScan, r: FetchResult, sizes: dict[TP, int], tp: TP) -> str | None:
    """Apply one fetch answer to a scan; a reason when it must be asked again instead.

    Errors come from Kafka's ReplicaManager.readFromLog: leader errors (NOT_LEADER_OR_FOLLOWER,
    FENCED/UNKNOWN_LEADER_EPOCH, KAFKA_STORAGE_ERROR) and OFFSET_OUT_OF_RANGE are answered with no records
    and -1 for the high watermark, log start and LSO, so such an answer says nothing about the log.
    """
    if not r.answered:
        if r.throttle_ms:
            return f"the broker left it out of its answer (throttled {r.throttle_ms} ms)"
        tried = [w for w in FETCH_WAITS_MS if w <= r.max_wait_ms] or [r.max_wait_ms]
        return ("the broker left it out of every answer (Fetch with min_bytes 0 and max_wait_ms "
                f"{', '.join(map(str, tried))}, each retried)")
    if r.error_code in _RETRIABLE:
        client.forget_leaders()  # the next request looks the leader up again
        return r.error
    if r.error_code == _OUT_OF_RANGE:
        # Kafka sends log_start_offset -1 here; ask for the log start (ListOffsets earliest) instead.
        log_start = r.log_start_offset
        if log_start <= s.position:
            try:
                log_start = client.list_offsets([tp])[tp].log_start
            except BrokerError as e:
                client.forget_leaders()
                return f"{r.error}, then {e}"
        if log_start > s.position:
            s.retention(log_start)
            return None
        return f"{r.error} although the log starts at {log_start}"
    if r.error_code:
        raise BrokerError(f"fetching {tp[0]}-{tp[1]} at offset {s.position} failed: {r.error}")
    s.broker_aborted.update(r.aborted)
    return _feed(s, r.records, sizes, tp)


def _bound(bound: Bound, tp: TP) -> int | None:
    return bound.get(tp) if isinstance(bound, Mapping) else bound


def _feed(s: LogScan, records: bytes, sizes: dict[TP, int], tp: TP) -> str | None:
    if s.keys is not None:
        s.keys.add(records)
    decoded = False
    for batch in iter_batches(records):
        decoded = True
        s.add(batch)
        if s.settled or s.position >= s.offsets.high_watermark:
            break  # brokers that ignore max_bytes (noida-db) may send far more than the range needs
    if decoded:
        return None
    if records:  # the first batch alone is larger than the fetch size: ask for more next time
        if sizes[tp] >= MAX_FETCH_BYTES:
            raise BrokerError(f"a batch of {tp[0]}-{tp[1]} at offset {s.position} is larger than "
                              f"{MAX_FETCH_BYTES} bytes")
        sizes[tp] *= 2
        return None
    # No records and no error below the high watermark proves nothing (tiered storage answers so while
    # remote fetches are throttled: ReplicaManager.handleOffsetOutOfRangeError). Nor is it a compacted
    # tail: the cleaner keeps the last batch of every cleaning round, even empty (LogCleaner.cleanInto,
    # BatchRetention.RETAIN_EMPTY), so only a batch boundary proves a hole.
    return "no records below the high watermark"
