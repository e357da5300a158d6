"""Benchmark: the audit's cost at a fixed total over ever more partitions, both engines next to the same
reconciliation as plain DuckDB SQL, in one run (audit_bench.py's partitions dimension).

    python benchmarks/audit_partitions_bench.py [CELLS] [--workdir DIR] [--driver-memory 2g] [--timeout 900]
    python benchmarks/audit_bench.py --partitions-dimension      # the cells of issue 21

CELLS are comma separated, each TOTAL or TOTALxPARTITIONS: source offsets in all, over that many
partitions (default 4). Default 1M,10M; the partitions dimension (a fixed total over ever more partitions)
is 10Mx8,10Mx1000,10Mx10000,20kx1000,20kx10000.

Source, by size:
- totals of --real-io-below (1M) and more: synthetic range models given to the job (no broker):
  transactions of 50-150 records + a commit marker, 5% short aborted transactions (~1% markers/aborted);
- smaller totals: real I/O on a broker started here (noida-db, or Apache Kafka with --broker kafka): a
  topic of that many partitions written by a transactional producer (transactions of 1,000 records over
  all partitions, 5% aborted), then
  audited by scanning the broker, as `eosctl audit` does.
Sink: every committed offset once, except 0.1% missing and 0.1% stored twice (a DuckDB file).

Timed, per cell, each in a child process of its own (peak RSS: that process and its descendants, Spark's
JVM and Python workers or the local pool included), all through auditors.engine.run (what `eosctl audit`
runs):
- spark cold: the child's start to its first report, Spark's start-up included;
- spark warm: the same audit again on that child's session, once its first job has run;
- local: the local engine (process pool, no JVM), the audit from its start to its report;
- duckdb: the DuckDB SQL baseline (full outer join of the per-offset expected list with the sink's offset
  counts, then runs) on a fresh connection; for real-I/O cells it is handed the log's ranges (the scan of
  the broker is not in its time).
A measurement that takes longer than --timeout is stopped and shown as ">N s".
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

_T0 = time.monotonic()  # the "cold" Spark measurement counts from here (the child process's start)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
# Spark's Python workers unpickle the synthetic source, whose code comes from audit_bench: let them import it.
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(Path(__file__).resolve().parent),
                                                       os.environ.get("PYTHONPATH")) if p)
from audit_bench import build, measure_duckdb, synthetic_log, tree_rss, workdir_and_memory_flags  # noqa: E402
from benchdata import create_topics, parse_size  # noqa: E402

TOPIC = "bench"
PARTITIONS = 4
DIMENSION = "10Mx8,10Mx1000,10Mx10000,20kx1000,20kx10000"
TXN_RECORDS = 1000  # records per transaction of the real-I/O producer


@dataclass(frozen=True)
class SyntheticSource:
    """Deterministic range models, rebuilt inside each task (only the seed and sizes travel)."""

    total: int
    partition_count: int = PARTITIONS
    seed: int = 7

    def _size(self, partition: int) -> int:
        base, extra = divmod(self.total, self.partition_count)
        return base + (partition < extra)

    # The job's Source protocol (auditors.sources.Source).
    def survey(self, topics):
        from auditors.sources import Placement

        return {t: {p: Placement(0, 0, self._size(p), self._size(p)) for p in range(self.partition_count)}
                for t in topics}

    def scan(self, parts):
        return {(t, p): synthetic_log(t, p, self._size(p), self.seed) for (t, p), _ in parts}

    def existing_topics(self):
        return {TOPIC: list(range(self.partition_count))}

    # What the job asked before issue 21 (one task per partition): kept so the same script measures main.
    def partitions(self, topics):
        return {t: list(range(self.partition_count)) for t in topics}

    def load(self, topic: str, partition: int):
        return synthetic_log(topic, partition, self._size(partition), self.seed)


# ---- real I/O: a topic on a broker ---------------------------------------------------------------


def produce(bootstrap: str, topic: str, total: int, partitions: int, seed: int = 7) -> None:
    """``total`` records over ``partitions`` partitions in transactions of TXN_RECORDS, 5% aborted."""
    from confluent_kafka import Producer

    create_topics(bootstrap, {topic: partitions})
    rng = random.Random(seed)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}.bench",
                         "linger.ms": 20, "log_level": 3})
    producer.init_transactions(30)
    value = b"x" * 100
    for first in range(0, total, TXN_RECORDS):
        producer.begin_transaction()
        for i in range(first, min(first + TXN_RECORDS, total)):
            producer.produce(topic, value=value, key=str(i).encode(), partition=i % partitions)
        if rng.random() < 0.05:
            # the records reach the log before the abort (else librdkafka purges them, and Apache Kafka 4.4
            # answers the EndTxn of the empty transaction with INVALID_TXN_STATE, fatal to the producer)
            producer.flush(30)
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
    producer.flush(30)


def scanned_ranges(bootstrap: str, topic: str, partitions: int) -> dict[tuple[str, int], list]:
    """The log's ranges per partition, read the way the audit reads them (untimed: for the sink and the
    DuckDB baseline)."""
    from eosctl.cluster.logscan import scan_partitions
    from eosctl.cluster.wire import WireClient

    tps = [(topic, p) for p in range(partitions)]
    out = {}
    with WireClient(bootstrap) as client:
        for i in range(0, len(tps), 500):  # noida-db ignores fetch size limits: a few partitions at a time
            for tp, log in scan_partitions(client, tps[i:i + 500]).items():
                out[tp] = log.ranges
    return out


# ---- measuring -----------------------------------------------------------------------------------


def parse_cell(text: str) -> tuple[int, int]:
    total, _, partitions = text.lower().partition("x")
    return parse_size(total), int(partitions or PARTITIONS)


def _counts(report) -> dict[str, int]:
    counts = {"gap": 0, "duplicate": 0}
    for f in report.findings:
        counts[f.kind] = counts.get(f.kind, 0) + f.count
    return counts


def _input(cell: dict):
    from auditors.plan import AuditInput, TaskSettings
    from auditors.sources import KafkaSource
    from eosctl.config.model import Cluster, Sink

    if cell.get("bootstrap"):
        source = KafkaSource(Cluster(name="bench", bootstrap_servers=cell["bootstrap"]))
    else:
        source = SyntheticSource(cell["total"], cell["partitions"])
    return AuditInput(source=source, sink=Sink(duckdb=cell["path"], table="sink"),
                          topics=(cell["topic"],),
                          settings=TaskSettings(duckdb_memory=cell["task_memory"]))


def child(args: argparse.Namespace) -> None:
    """One measurement in a process of its own; prints its numbers as one JSON line."""
    from auditors import engine
    from auditors import spark as sparks
    from auditors.engine import EngineOptions

    cell = json.loads(args.child)
    inp = _input(cell)
    if cell["engine"] == "local":
        from auditors.local import _preload

        _preload()  # what `eosctl audit` has imported by the time it audits
        t = time.monotonic()
        report = engine.run(inp, EngineOptions("local"))
        seconds = time.monotonic() - t
        print(json.dumps({**_counts(report), "seconds": seconds, "tasks": report.engine["tasks"],
                          "engine": report.engine}))
        return
    options = EngineOptions("spark", master="local[*]", driver_memory=cell["driver_memory"])
    first = engine.run(inp, options, started=_T0)  # starts Spark and stops it again, like the command
    out = {**_counts(first), "startup": first.engine["startup_seconds"], "first": first.elapsed_seconds,
           "tasks": first.engine["tasks"]}
    sparks.session(master="local[*]", driver_memory=cell["driver_memory"], shuffle_partitions=4)
    engine.run(inp, options)  # the session's first job and Python workers: not "warm" yet
    t = time.monotonic()
    again = engine.run(inp, options)
    out["warm"] = time.monotonic() - t
    print(json.dumps({**out, "agree_warm": _counts(again) == _counts(first)}))


def run_child(cell: dict, timeout: float) -> tuple[dict | None, int]:
    """(the child's numbers, or None when it ran out of time; the peak RSS of its process tree)."""
    cmd = [sys.executable, __file__, "--child", json.dumps(cell)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, start_new_session=True)
    peak, deadline = 0, time.monotonic() + timeout
    try:
        while proc.poll() is None:
            if time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return None, peak
            peak = max(peak, tree_rss(proc.pid))
            time.sleep(0.2)
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    if proc.returncode != 0:
        raise SystemExit(f"the {cell['engine']} run failed (exit {proc.returncode})")
    return json.loads(proc.stdout.read().strip().splitlines()[-1]), peak


TIMED_OUT = "timed out"


def _secs(value: float | str | None, timeout: float) -> str:
    """A measurement: seconds, ">N s" when it ran out of time, "-" when not run."""
    if value is None:
        return "-"
    return f">{timeout:.0f}s" if value == TIMED_OUT else f"{value:.1f}s"


def _ratio(a: float | str | None, b: float | str | None) -> str:
    if not isinstance(a, float) or not isinstance(b, float) or b == 0:
        return "-"
    return f"{a / b:.2f}x"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cells", nargs="?", default="1M,10M")
    ap.add_argument("--partitions-dimension", action="store_true", help=f"run the cells {DIMENSION}")
    workdir_and_memory_flags(ap)
    ap.add_argument("--real-io-below", default="1M", help="totals below this are produced to the broker")
    ap.add_argument("--broker", choices=["noida", "sandbox", "kafka"], default="noida",
                    help="the broker real-I/O cells are produced to (sandbox = noida; kafka = Apache Kafka)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per measurement")
    ap.add_argument("--engines", default="spark,local")
    ap.add_argument("--child", help=argparse.SUPPRESS)  # internal: one measurement
    args = ap.parse_args()
    if args.child:
        child(args)
        return

    from contextlib import ExitStack

    from benchbroker import broker

    workdir = args.workdir  # made by the flag's type
    cells = [parse_cell(c) for c in (DIMENSION if args.partitions_dimension else args.cells).split(",")]
    real_below = parse_size(args.real_io_below)
    engines = args.engines.split(",")
    results, stack, bootstrap, name = [], ExitStack(), None, "range models"
    with stack:  # the broker, if one is started, is stopped on every exit path
        if any(total < real_below for total, _ in cells):
            started = stack.enter_context(broker(args.broker))
            bootstrap, name = started.bootstrap, started.name
        for n, (total, partitions) in enumerate(cells):
            path = workdir / f"bench_{total}x{partitions}.duckdb"
            real = total < real_below
            topic = f"bench{n}x{partitions}" if real else TOPIC
            t = time.monotonic()
            if real:
                produce(bootstrap, topic, total, partitions)
                print(f"{total:,} records produced to {name} in {time.monotonic() - t:.1f}s", flush=True)
                ranges_of = scanned_ranges(bootstrap, topic, partitions)
            else:
                source = SyntheticSource(total, partitions)
                ranges_of = {(TOPIC, p): source.load(TOPIC, p).ranges for p in range(partitions)}
            truth = build(path, ranges_of)
            del ranges_of
            where = name if real else "range models"
            print(f"\n{total:,} offsets over {partitions:,} partitions ({where}): built in "
                  f"{time.monotonic() - t:.1f}s ({truth})", flush=True)
            want = {"gap": truth["gap_records"], "duplicate": truth["duplicate_rows"]}
            cell = {"path": str(path), "total": total, "partitions": partitions, "topic": topic,
                    "bootstrap": bootstrap if real else None, "task_memory": args.task_memory,
                    "driver_memory": args.driver_memory}
            row: dict[str, object] = {"total": total, "partitions": partitions, "real": real, "broker": name}
            agree = True
            if "spark" in engines:
                out, peak = run_child({**cell, "engine": "spark"}, args.timeout)
                row["spark_rss"] = peak
                if out is None:
                    row.update(cold=TIMED_OUT, warm=TIMED_OUT)
                else:
                    row.update(cold=out["first"], startup=out["startup"], warm=out["warm"],
                               spark_tasks=out["tasks"])
                    agree &= {k: out[k] for k in want} == want and out["agree_warm"]
                print(f"  spark cold  {_secs(row.get('cold'), args.timeout):>8} "
                      f"warm {_secs(row.get('warm'), args.timeout):>8}  tasks {row.get('spark_tasks', '-')}  "
                      f"peak {peak / 2**30:.2f} GB", flush=True)
            if "local" in engines:
                out, peak = run_child({**cell, "engine": "local"}, args.timeout)
                row["local_rss"] = peak
                if out is None:
                    row["local"] = TIMED_OUT
                else:
                    row.update(local=out["seconds"], local_tasks=out["tasks"])
                    print(f"  local engine: {out['engine']}", flush=True)
                    agree &= {k: out[k] for k in want} == want
                print(f"  local       {_secs(row.get('local'), args.timeout):>8}  "
                      f"tasks {row.get('local_tasks', '-')}  peak {peak / 2**30:.2f} GB", flush=True)
            row["duckdb"], row["duckdb_rss"], duck = measure_duckdb(path, args.duckdb_memory)
            agree &= duck == want
            row["agree"] = agree
            results.append(row)
            path.unlink()
    report(results, args.timeout)


def report(results: list[dict], timeout: float) -> None:
    print("\n       total  partitions  spark cold  spark warm    local  duckdb | local/duckdb warm/duckdb "
          "| vs fewest partitions: local warm | findings")
    fewest: dict[int, dict] = {}
    for r in results:
        if r["total"] not in fewest or r["partitions"] < fewest[r["total"]]["partitions"]:
            fewest[r["total"]] = r
    for r in results:
        base = fewest[r["total"]]
        vs = (f"{_ratio(r.get('local'), base.get('local')):>6} {_ratio(r.get('warm'), base.get('warm')):>6}"
              if base is not r else f"{'(base)':>13}")
        print(f"{r['total']:>12,}  {r['partitions']:>10,}  {_secs(r.get('cold'), timeout):>10}  "
              f"{_secs(r.get('warm'), timeout):>10}  {_secs(r.get('local'), timeout):>7}  "
              f"{r['duckdb']:5.1f}s | "
              f"{_ratio(r.get('local'), r['duckdb']):>12} {_ratio(r.get('warm'), r['duckdb']):>11} | "
              f"{vs:>31} | {'agree' if r['agree'] else 'DIFFER'}"
              f"{' (of those that finished)' if TIMED_OUT in (r.get('local'), r.get('warm')) else ''}"
              f"{'  (real I/O: ' + r['broker'] + ')' if r['real'] else ''}")
    print("cold: a fresh process's start to its report, Spark's start-up included;\n"
          "warm: a repeat audit on a used session; local: the local engine;\n"
          "duckdb: the SQL baseline on the same sink (for real-I/O cells given the log's ranges, without the "
          "broker scan);\nvs fewest partitions: the same total over the fewest partitions measured in this "
          "run.\nTargets (issue 21): 10,000 partitions at most 2x the cost of 8 at a fixed total; 20k "
          "offsets over 10,000 partitions under 10 s on the local engine.")


if __name__ == "__main__":
    main()
