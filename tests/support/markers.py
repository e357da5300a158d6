"""Waiting for a transaction's markers: what a test reads after committing or aborting.

A producer's commit_transaction/abort_transaction returns when the coordinator answers EndTxn, and it
answers once PrepareCommit/PrepareAbort is in the transaction log; the COMMIT/ABORT markers reach the
partitions after that (TransactionCoordinator.endTransaction, then TransactionMarkerChannelManager). Until
they do, each partition's high watermark and last stable offset still stand before the marker, and another
producer's records can land ahead of it. On an idle machine the gap is a few milliseconds; on a loaded one it
is long enough for an audit, a scan or a plain producer to get in first. The coordinator moves the id to
CompleteCommit/CompleteAbort once every partition has its marker: that is the event these helpers wait for.
"""

from __future__ import annotations

from tests.support.helpers import wait_until

WAIT_S = 60.0


def markers_written(bootstrap: str, *txids: str, seconds: float = WAIT_S) -> None:
    """Until the last transaction of each of ``txids`` has its marker on every partition it wrote."""
    from eosctl.cluster.clients import kafka_admin
    from eosctl.config.model import Cluster
    from eosctl.txn.transactions import describe_transaction

    admin = kafka_admin(Cluster(name="markers", bootstrap_servers=bootstrap))
    try:
        def settled() -> bool:
            return not any(describe_transaction(admin, t).state.startswith("Prepare") for t in txids)

        wait_until(f"the markers of {', '.join(txids)}'s last transaction", settled, seconds)
    finally:
        admin.close()
