"""The committed records a sink's route (eosctl.config.route) leaves out, per partition, as offset ranges:
read with a read_committed consumer (markers and aborted records are never expected anyway), each record's
key, headers and value judged in Python."""

from __future__ import annotations

import time
from collections.abc import Mapping

from eosctl.base.errors import BrokerError
from eosctl.cluster.consumed import headers, placed
from eosctl.config.model import Cluster
from eosctl.config.route import Route

TP = tuple[str, int]
READ_SECONDS = 300.0


def routed_out(cluster: Cluster, route: Route, ends: Mapping[TP, tuple[int, int]],
               timeout: float = READ_SECONDS) -> tuple[dict[TP, tuple[tuple[int, int], ...]], dict[TP, int]]:
    """Per partition, the committed records in [start, end) the route does not select, as ranges of offsets
    (first, last) that hold no selected record between them, and how many records each range set holds.
    ``ends``: (log start, LSO) per partition."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition  # lazy: see docs/imports.md

    out: dict[TP, list[list[int]]] = {tp: [] for tp in ends}
    counts: dict[TP, int] = dict.fromkeys(ends, 0)
    todo = {tp for tp, (lo, hi) in ends.items() if hi > lo}
    if not todo:
        return {tp: () for tp in ends}, counts
    consumer = Consumer({**cluster.confluent(), "group.id": "eosctl-route-reader",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(t, p, ends[(t, p)][0]) for t, p in sorted(todo)])
        deadline = time.monotonic() + timeout
        selected_since: dict[TP, bool] = dict.fromkeys(ends, True)
        while todo:
            if time.monotonic() > deadline:
                raise BrokerError(f"reading the records a route selects took over {timeout:.0f} s")
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    todo.discard((msg.topic(), msg.partition()))
                    continue
                raise BrokerError(f"reading {msg.topic()}-{msg.partition()} for its route: {error.str()}")
            topic, partition, offset = placed(msg)
            tp = (topic, partition)
            if offset >= ends[tp][1]:
                todo.discard(tp)
                continue
            if route.matches(msg.key(), msg.value(), headers(msg)):
                selected_since[tp] = True
            else:
                ranges = out[tp]
                if ranges and not selected_since[tp]:
                    ranges[-1][1] = offset
                else:
                    ranges.append([offset, offset])
                selected_since[tp] = False
                counts[tp] += 1
            if offset >= ends[tp][1] - 1:
                todo.discard(tp)
    finally:
        consumer.close()
    return {tp: tuple((a, b) for a, b in r) for tp, r in out.items()}, counts
