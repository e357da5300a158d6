"""The suite leaves no open transaction on a shared cluster (EOSCTL_TEST_BOOTSTRAP=...).

Every prefix a test gives the reference pipeline or takes from the ``unique`` fixture is recorded here
(``register``). A module's teardown ends the open transactions of the prefixes recorded while it ran
(``end_ongoing``: a new producer instance of the id, whose InitProducerId makes the coordinator abort the
open transaction, exactly as a restarted application would), and the session's end fails if one of the
session's transactional ids is still Ongoing (``still_ongoing``).
"""

from __future__ import annotations

import threading

# Each prefix once, in the order tests made them; a transactional id belongs to a prefix when it starts
# with the prefix and a dot (the pipeline's ids) or equals it.
_PREFIXES: list[str] = []
_LOCK = threading.Lock()


def register(prefix: str) -> str:
    with _LOCK:
        if prefix not in _PREFIXES:
            _PREFIXES.append(prefix)
    return prefix


def prefixes() -> list[str]:
    with _LOCK:
        return list(_PREFIXES)


def _ours(txid: str, among: list[str]) -> bool:
    return any(txid == p or txid.startswith(p + ".") or txid.startswith(p + "-") for p in among)


def still_ongoing(bootstrap: str, among: list[str] | None = None) -> list[tuple[str, str]]:
    """(transactional id, state) of this session's ids whose transaction is not finished."""
    from eosctl.cluster.clients import kafka_admin
    from eosctl.config.model import Cluster
    from eosctl.txn.transactions import list_transactions

    among = prefixes() if among is None else among
    if not among:
        return []
    admin = kafka_admin(Cluster(name="txnguard", bootstrap_servers=bootstrap), timeout=30)
    try:
        listed = list_transactions(admin)
    finally:
        admin.close()
    return [(t.transactional_id, t.state) for t in listed
            if _ours(t.transactional_id, among) and t.state in ("Ongoing", "PrepareCommit", "PrepareAbort")]


def end_ongoing(bootstrap: str, among: list[str] | None = None, timeout: float = 60.0) -> list[str]:
    """End (abort) this session's open transactions: the ids ended."""
    from confluent_kafka import Producer

    ended = []
    for txid, _ in still_ongoing(bootstrap, among):
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txid})
        try:
            producer.init_transactions(timeout)  # fences the old instance; the coordinator aborts its txn
        finally:
            producer.flush(10)
        ended.append(txid)
    return ended
