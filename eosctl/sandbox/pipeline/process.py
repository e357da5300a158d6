"""Process stage: read-process-write with the consumer offsets committed inside the producer's transaction.

The consumer reads read_committed and never commits on its own; each batch becomes one transaction that
holds both the enriched records and the input offsets (send_offsets_to_transaction), so output and
progress commit or abort together. Every few batches a simulated processing error aborts the transaction
after flush() and the consumer rewinds to the committed offsets to retry, which leaves aborted ranges and
ABORT markers in the output topic. Every output record names its input in lineage headers
(`eos.source.topic`, `eos.source.partition`, `eos.source.offset`) and in its value (`source_partition`,
`source_offset`), so eosctl can audit the stage as a hop.

The stage fault modes break the pattern on purpose: `stage-replay` commits a batch's output without its
offsets and rewinds (duplicates downstream), `stage-skip` commits the offsets of a batch it never produced
(loss), `stage-read-uncommitted` reads its input read_uncommitted (outputs derived from aborted input).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from confluent_kafka import Message

from eosctl.base.errors import BrokerError
from eosctl.cluster.consumed import placed
from eosctl.config.model import Cluster
from eosctl.sandbox.pipeline.broker import Broker, key_text, payload
from eosctl.sandbox.pipeline.faults import fence
from eosctl.sandbox.pipeline.reader import Reader, as_tps
from eosctl.sandbox.pipeline.topics import Names
from eosctl.sandbox.pipeline.truth import GroundTruth
from eosctl.sandbox.pipeline.txn import TransactionalWriter

BATCH = 10  # input records per transaction (at most)
ABORT_EVERY = 4  # attempts 1, 5, 9, ... fail after flush and are retried
ZOMBIE_AFTER_COMMITS = 2  # the `zombie` fault strikes in the first batch after this many commits
REPLAY_AFTER_COMMITS = 4  # `stage-replay` strikes in the first committing batch after this many commits
SKIP_AFTER_COMMITS = 6  # `stage-skip` likewise


@dataclass
class ProcessResult:
    writer: TransactionalWriter  # the live producer session (a successor if the zombie fault fenced one)
    commits: int = 0
    aborts: int = 0
    fencing: list[dict] = field(default_factory=list)
    zombie_writes: list[dict] = field(default_factory=list)
    # The stage's own planted failures: {"fault", "partition", "offsets"} of the input records affected.
    planted: list[dict] = field(default_factory=list)


def enrich(msg: Message) -> bytes:
    order = json.loads(payload(msg))
    amount = float(order["amount"])
    order.update(vat=round(amount * 0.2, 2), total=round(amount * 1.2, 2),
                 source_partition=msg.partition(), source_offset=msg.offset(),
                 source={"topic": msg.topic(), "partition": msg.partition(), "offset": msg.offset()})
    return json.dumps(order, separators=(",", ":")).encode()


def run_process(cluster: Cluster, names: Names, broker: Broker, truth: GroundTruth, faults: Sequence[str],
                progress: Callable[[str], None], timeout: float = 120.0) -> ProcessResult:
    # read_committed: never process aborted or still-open source records (`stage-read-uncommitted` breaks
    # exactly that). Starts at the offsets the group committed through earlier transactions (none on a
    # fresh run).
    zombie, replay, skip = "zombie" in faults, "stage-replay" in faults, "stage-skip" in faults
    reader = Reader(cluster, names.source_topic, names.processor_group,
                    read_committed="stage-read-uncommitted" not in faults)
    result = ProcessResult(TransactionalWriter(cluster, names.processor_txid, broker, truth))
    attempt = 0
    deadline = time.monotonic() + timeout
    try:
        while True:
            msgs = reader.poll(BATCH)
            if not msgs:
                if reader.caught_up(broker):
                    break
                if time.monotonic() > deadline:
                    raise BrokerError(f"process stage did not catch up with {names.source_topic} "
                                      f"in {timeout:.0f}s")
                continue
            attempt += 1
            writer = result.writer
            writer.begin()
            if skip and result.commits >= SKIP_AFTER_COMMITS:
                skip = False
                # The stage commits its input offsets first and "crashes" before producing: on restart it
                # resumes past the batch, whose records never reach the output.
                writer.commit(as_tps(reader.topic, reader.next), reader.group_metadata())
                result.planted.extend(_planted("stage-skip", msgs))
                continue
            for m in msgs:
                # Same key and same partition number: per-key order survives the stage.
                source = placed(m)
                writer.produce(names.output_topic, key_text(m), enrich(m), partition=source[1], source=source)
            writer.flush()
            if zombie and result.commits >= ZOMBIE_AFTER_COMMITS:
                zombie = False
                # The zombie would finish its batch: re-send part of it and commit with the offsets.
                retry = [(names.output_topic, key_text(m), enrich(m), placed(m)[1]) for m in msgs[:2]]
                offsets = as_tps(reader.topic, reader.next)
                result.writer, fencing, writes = fence(writer, cluster, broker, truth, retry, offsets,
                                                       reader.group_metadata())
                result.fencing.append(fencing)
                result.zombie_writes.extend(writes)
                reader.assign(reader.committed())  # the successor redoes the batch the zombie never committed
                continue
            if attempt % ABORT_EVERY == 1:
                writer.abort()
                result.aborts += 1
                reader.assign(reader.committed())  # rewind: the batch is read and processed again
                continue
            if replay and result.commits >= REPLAY_AFTER_COMMITS:
                replay = False
                # Offsets committed outside the transaction: the output commits, the stage "crashes" before
                # committing its offsets, and on restart processes the batch again.
                writer.commit()
                result.commits += 1
                result.planted.extend(_planted("stage-replay", msgs))
                reader.assign(reader.committed())
                continue
            writer.commit(as_tps(reader.topic, reader.next), reader.group_metadata())
            result.commits += 1
        # A partition often ends with a COMMIT marker (the source is transactional too): commit the
        # position past it in an offsets-only transaction, so the group shows no lag.
        final = reader.positions()
        if final != reader.committed():
            result.writer.begin()
            result.writer.commit(as_tps(reader.topic, final), reader.group_metadata())
    finally:
        reader.close()
    progress(f"process: {result.commits} transactions committed to {names.output_topic}, "
             f"{result.aborts} aborted after flush and retried")
    for p in result.planted:
        what = "replayed" if p["fault"] == "stage-replay" else "skipped"
        progress(f"{p['fault']}: {names.source_topic}[{p['partition']}] offsets {p['offsets'][0]}.."
                 f"{p['offsets'][-1]} {what} by the stage")
    return result


def _planted(fault: str, msgs: Sequence[Message]) -> list[dict]:
    by_partition: dict[int, list[int]] = {}
    for m in msgs:
        _, partition, offset = placed(m)
        by_partition.setdefault(partition, []).append(offset)
    return [{"fault": fault, "partition": p, "offsets": sorted(o)} for p, o in sorted(by_partition.items())]
