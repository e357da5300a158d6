"""A share group (KIP-932) reading a transactional topic with ``share.isolation.level=read_uncommitted``, its
default: the share-partition hands out records up to the high watermark, so its consumers process aborted
records and those of transactions still open, the phantom eosctl's audit finds in a sink whose consumer
reads read_uncommitted (Connect's and Spark's defaults). Said as a warning in `lag`, never a status.

A topic is transactional here when a partition the group reads holds transactional batches in its recent
log (a scan of its last TAIL_OFFSETS offsets, or the window lag already scanned) or an open transaction
holds its LSO now.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from eosctl.cluster.logscan import scan_partitions
from eosctl.cluster.model import TP, PartitionLog
from eosctl.cluster.wire import Offsets, WireClient

TAIL_OFFSETS = 500
TAIL_BYTES = 64 << 10
READ_COMMITTED = "read_committed"


def transactional_partitions(client: WireClient, tps: Iterable[TP], offsets: Mapping[TP, Offsets],
                             logs: Mapping[TP, PartitionLog], open_txns: Iterable[TP]) -> set[TP]:
    """The partitions of ``tps`` whose recent log holds transactional batches (or an open transaction)."""
    held = set(open_txns)
    found = {tp for tp in tps if tp in held or _transactional(logs.get(tp))}
    rest = [tp for tp in tps if tp not in found and tp in offsets and offsets[tp].high_watermark > 0]
    if rest:
        start = {tp: max(offsets[tp].log_start, offsets[tp].high_watermark - TAIL_OFFSETS) for tp in rest}
        end = {tp: offsets[tp].high_watermark for tp in rest}
        tails = scan_partitions(client, rest, start=start, end=end, keep_batches=True, offsets=offsets,
                                max_bytes=TAIL_BYTES)
        found |= {tp for tp, log in tails.items() if _transactional(log)}
    return found


def _transactional(log: PartitionLog | None) -> bool:
    return log is not None and any(b.is_transactional for b in log.batches or ())


def warning(group: str, topics: Iterable[str], isolation: str | None) -> str:
    """What `lag` says of a share group reading transactional ``topics`` without read_committed."""
    names = ", ".join(sorted(topics))
    how = f"share.isolation.level={isolation}" if isolation else \
        "share.isolation.level unsaid (default read_uncommitted)"
    return (f"share group {group} reads transactional topic {names} with {how}: its consumers process "
            f"aborted records and records of open transactions; set it to read_committed "
            f"(kafka-configs.sh --alter --entity-type groups --entity-name {group} "
            f"--add-config share.isolation.level=read_committed)")


def share_warnings(client: WireClient, groups: Mapping[str, Iterable[TP]],
                   isolation: Mapping[str, str | None], offsets: Mapping[TP, Offsets],
                   logs: Mapping[TP, PartitionLog],
                   open_txns: Iterable[TP]) -> dict[str, str]:
    """group -> its warning, for each share group not reading read_committed a topic that is transactional."""
    loose = {g: list(tps) for g, tps in groups.items() if isolation.get(g) != READ_COMMITTED}
    every = sorted({tp for tps in loose.values() for tp in tps})
    if not every:
        return {}
    txnal = transactional_partitions(client, every, offsets, logs, open_txns)
    out = {}
    for g, tps in loose.items():
        topics = {t for t, p in tps if (t, p) in txnal}
        if topics:
            out[g] = warning(g, topics, isolation.get(g))
    return out
