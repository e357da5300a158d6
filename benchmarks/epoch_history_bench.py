"""Benchmark: the log classifier on one producer id using transactions v2 (KIP-890), where every
transaction ends on a marker one epoch up, so each transaction adds an epoch and an epoch bump.

    python benchmarks/epoch_history_bench.py [COUNTS] [--rounds 3]

COUNTS are transactions, comma separated (default 2000,4000,8000,16000,64000). Each transaction is one
2-record data batch at epoch e and its marker at e+1 (every 4th an ABORT), fed as decoded batches to the
classifier of eosctl.cluster.logscan (no broker, no byte decoding). Prints the best of --rounds per count, the
time per transaction relative to the smallest count (1.0 = linear) and the history kept per producer,
which must stay bounded (eosctl.cluster.model.MAX_EPOCHS epochs, MAX_EVENTS bumps).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eosctl.cluster.logclassify import LogScan  # noqa: E402
from eosctl.cluster.model import Batch, ProducerState  # noqa: E402
from eosctl.cluster.wire import Offsets  # noqa: E402
from eosctl.txn.fencing import fencing_events  # noqa: E402

PID = 7


def v2_batches(transactions: int) -> list[Batch]:
    out, offset = [], 0
    for epoch in range(transactions):
        out.append(Batch(offset, offset + 1, 2, PID, epoch, 0, 1, True, False, None, 1000, 1000, "none", 100))
        out.append(Batch(offset + 2, offset + 2, 1, PID, epoch + 1, -1, -1, True, True,
                         "ABORT" if epoch % 4 == 3 else "COMMIT", 1000, 1000, "none", 70))
        offset += 3
    return out


def classify(batches: list[Batch]) -> tuple[float, ProducerState]:
    end = batches[-1].last_offset + 1
    c = LogScan("bench", 0, 0, end, Offsets(0, end, end), False)
    started = time.perf_counter()
    for b in batches:
        c.add(b)
    state = c.finish().producers[PID]
    _ = fencing_events(state)
    return time.perf_counter() - started, state


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("counts", nargs="?", default="2000,4000,8000,16000,64000")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    base = None
    for n in (int(x) for x in args.counts.split(",")):
        batches = v2_batches(n)
        runs = [classify(batches) for _ in range(args.rounds)]
        secs, state = min(runs, key=lambda r: r[0])
        per_txn = secs / n
        base = base or per_txn
        print(f"{n:>7} transactions  {secs:7.3f} s  per transaction x{per_txn / base:4.2f}  "
              f"epochs kept {len(state.epochs)} (+{state.earlier_epochs} earlier)  "
              f"bumps kept {len(state.epoch_bumps)} of {state.bumps_total}  fencing {fencing_events(state)}")


if __name__ == "__main__":
    main()
