"""Benchmark: `txns list -p PREFIX` (and the TUI's and exporter's refresh) at many transactional ids, with
ListTransactions' server-side prefix filter (v2's TransactionalIdPattern, KIP-1152) vs the path before
issue 52 (every id listed, every id described, the prefix filtered afterwards).

    python benchmarks/txns_list_bench.py [--ids 20000] [--mine 20] [--rounds 3] [--bootstrap HOST:PORT]

Makes --ids transactional ids with InitProducerId (Empty: nothing written), --mine of them under the
pipeline's prefix, then times both paths (the best of --rounds) and counts their requests and the ids
they describe. Prints the broker's name beside the figures.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchbroker import broker  # noqa: E402  (benchmarks/ is on the path: run as python benchmarks/NAME.py)

BATCH = 1000


def make_ids(bootstrap: str, ids: list[str]) -> None:
    """InitProducerId for each id, BATCH requests in flight at a time, retried until each is accepted."""
    from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
    from kafka.protocol.producer.transaction import InitProducerIdRequest

    from eosctl.cluster.wire import WireClient

    with WireClient(bootstrap, timeout_ms=60_000) as client:
        pending, deadline = list(ids), time.monotonic() + 600
        while pending:
            chunk, pending = pending[:BATCH], pending[BATCH:]
            found = client.request_all([(client.any_node(), FindCoordinatorRequest(
                key=i, key_type=1, max_version=3)) for i in chunk])
            ready = [(i, f.node_id) for i, f in zip(chunk, found, strict=True) if not f.error_code]
            answers = client.request_all([(node, InitProducerIdRequest(
                transactional_id=i, transaction_timeout_ms=60_000, max_version=4)) for i, node in ready])
            done = {i for (i, _), a in zip(ready, answers, strict=True) if not a.error_code}
            again = [i for i in chunk if i not in done]
            if again:
                if time.monotonic() > deadline:
                    raise SystemExit(f"InitProducerId kept failing for {len(again)} ids")
                time.sleep(0.3)
                pending = again + pending


def counted(admin) -> Counter:
    """Count the requests the admin client sends, by API."""
    sent: Counter = Counter()
    manager = admin._manager
    send = manager.send

    def counting(request, *a, **k):
        sent[type(request).__name__.removesuffix("Request")] += 1
        return send(request, *a, **k)

    manager.send = counting
    return sent


def before(admin, prefix: str) -> int:
    """The path before issue 52: list every id, describe every id, keep the prefix's."""
    listed = admin.list_transactions()
    ids = sorted({t.transactional_id for per_broker in listed.values() for t in per_broker})
    described = admin.describe_transactions(ids) if ids else {}
    return sum(1 for i in described if i.startswith(prefix))


def after(admin, prefix: str) -> int:
    from eosctl.txn.transactions import list_transactions

    return len(list_transactions(admin, prefixes=[prefix]))


def timed(fn, admin, prefix: str, rounds: int) -> tuple[float, int, Counter, int]:
    sent = counted(admin)
    best, found = float("inf"), 0
    for _ in range(rounds):
        sent.clear()
        started = time.perf_counter()
        found = fn(admin, prefix)
        best = min(best, time.perf_counter() - started)
    return best, found, Counter(sent), rounds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ids", type=int, default=20_000)
    ap.add_argument("--mine", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bootstrap")
    ap.add_argument("--broker", default="kafka")
    args = ap.parse_args()
    from eosctl.cluster.clients import kafka_admin
    from eosctl.config.model import Cluster
    from eosctl.txn.transactions import Listing, list_transactions

    run = uuid.uuid4().hex[:8]
    prefix = f"bench-{run}.mine."
    ids = [f"{prefix}{i}" for i in range(args.mine)] + \
          [f"bench-{run}.other.{i}" for i in range(args.ids - args.mine)]
    with broker(args.broker, args.bootstrap) as b:
        started = time.perf_counter()
        make_ids(b.bootstrap, ids)
        print(f"{b.name}: {len(ids):,} transactional ids made in {time.perf_counter() - started:.1f} s, "
              f"{args.mine} under {prefix!r}")
        admin = kafka_admin(Cluster("bench", b.bootstrap), timeout=120)
        try:
            listing = Listing()
            list_transactions(admin, prefixes=[prefix], listing=listing)
            rows = []
            for name, fn in (("before (list all, describe all)", before),
                             ("server-side prefix filter", after)):
                secs, found, sent, _ = timed(fn, admin, prefix, args.rounds)
                rows.append((name, secs, found, sent))
            base = rows[0][1]
            for name, secs, found, sent in rows:
                requests = ", ".join(f"{api} {n}" for api, n in sorted(sent.items()))
                print(f"  {name:<32} {secs * 1000:9.1f} ms  x{secs / base:5.3f}  found {found}  "
                      f"requests: {requests}")
            print(f"  the filtered path: server filters {listing.server_filters}, "
                  f"{listing.described} ids described (before: every id on the cluster)")
        finally:
            admin.close()


if __name__ == "__main__":
    main()
