"""Source stage: an idempotent, transactional producer writes orders, keyed by their business key.

Every few transactions one is aborted after flush(), so its records sit in the log as aborted data, and
is then retried in a new transaction: each order ends up committed exactly once.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from eosctl.config.model import Cluster
from eosctl.sandbox.pipeline.broker import Broker
from eosctl.sandbox.pipeline.topics import Names
from eosctl.sandbox.pipeline.truth import GroundTruth
from eosctl.sandbox.pipeline.txn import TransactionalWriter

TXN_SIZE = 5  # records per source transaction
ABORT_EVERY = 6  # the 3rd, 9th, 15th... transaction is aborted once, then retried


def order_id(i: int) -> str:
    return f"o-{i:06d}"


def make_order(i: int) -> dict:
    # Deterministic values, so two runs of the same size write the same data.
    return {"order_id": order_id(i), "customer": f"c-{i % 17:03d}",
            "amount": round(5 + (i * 37 % 1000) / 10, 2), "currency": "EUR", "seq": i}


def encode(value: dict) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def run_source(cluster: Cluster, names: Names, records: int, broker: Broker, truth: GroundTruth,
               progress: Callable[[str], None]) -> TransactionalWriter:
    writer = TransactionalWriter(cluster, names.source_txid, broker, truth)
    aborted = 0
    for n, start in enumerate(range(0, records, TXN_SIZE)):
        orders = [make_order(i) for i in range(start, min(start + TXN_SIZE, records))]
        attempts = 2 if n % ABORT_EVERY == 2 else 1
        for attempt in range(attempts):
            writer.begin()
            for order in orders:
                writer.produce(names.source_topic, order["order_id"], encode(order))
            if attempt < attempts - 1:
                writer.abort()  # after flush: the records are in the log, then marked aborted
                aborted += 1
            else:
                writer.commit()
    progress(f"source: {records} orders committed to {names.source_topic} "
             f"({aborted} transactions aborted and retried)")
    return writer
