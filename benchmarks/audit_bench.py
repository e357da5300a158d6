"""Benchmark: the Spark auditor vs the same reconciliation as plain DuckDB SQL, in one run.

    python benchmarks/audit_bench.py [SIZES] [--workdir DIR] [--driver-memory 2g]

SIZES are total source offsets, comma separated (default 1M,10M; the issue's full set is 1M,10M,50M).
Synthetic source: 4 partitions of transactions (50-150 records + a commit marker; 5% are short aborted
transactions), i.e. ~1% markers/aborted, given to the job as PartitionLog range models (no broker).
Synthetic sink: every committed offset once, except 0.1% missing and 0.1% stored twice.

Timed: the Spark audit on an already started session (start-up printed separately), and the DuckDB SQL
(full outer join of the per-offset expected list with the sink's offset counts, then runs) on a fresh
connection. Both read the same DuckDB file. Peak RSS is the sum over this process and all of its
descendants (Spark's JVM and Python workers, DuckDB in-process), sampled every 0.2 s.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TOPIC = "bench"
PARTITIONS = 4


@dataclass(frozen=True)
class SyntheticSource:
    """Deterministic range models, rebuilt inside each Spark task (only the seed and size travel)."""

    total: int
    seed: int = 7

    def partitions(self, topics):
        return {t: list(range(PARTITIONS)) for t in topics}

    def existing_topics(self):
        return {TOPIC: list(range(PARTITIONS))}

    def load(self, topic: str, partition: int):
        return synthetic_log(topic, partition, self.total // PARTITIONS, self.seed)


def synthetic_log(topic: str, partition: int, n: int, seed: int):
    from eosctl.model import Kind, OffsetRange, PartitionLog

    rng = random.Random(seed * 1000 + partition)
    ranges, o, pid = [], 0, 1000 + partition
    while o < n:
        aborted = rng.random() < 0.05
        k = min(rng.randint(1, 5) if aborted else rng.randint(50, 150), n - o)
        ranges.append(OffsetRange(o, o + k - 1, Kind.ABORTED if aborted else Kind.DATA, pid, 0))
        o += k
        if o < n:
            ranges.append(OffsetRange(o, o, Kind.MARKER, pid, 0))
            o += 1
    return PartitionLog(topic, partition, 0, n, n, 0, n, ranges)


def build(path: Path, source: SyntheticSource) -> dict[str, int]:
    """Write ranges, the per-offset expected list (for the DuckDB baseline) and the sink table."""
    import duckdb
    import pyarrow as pa

    if path.exists():
        path.unlink()
    cols: dict[str, list] = {"t": [], "p": [], "first": [], "last": [], "kind": []}
    for p in range(PARTITIONS):
        for r in source.load(TOPIC, p).ranges:
            cols["t"].append(TOPIC)
            cols["p"].append(p)
            cols["first"].append(r.first)
            cols["last"].append(r.last)
            cols["kind"].append(r.kind.value)
    ranges = pa.table(cols)
    with duckdb.connect(str(path)) as con:
        con.register("ranges_arrow", ranges)
        con.execute("CREATE TABLE ranges AS SELECT * FROM ranges_arrow")
        con.execute("CREATE TABLE src AS SELECT t, p, unnest(range(first, last + 1)) AS o FROM ranges "
                    "WHERE kind = 'DATA'")
        # 0.1% missing (h = 0), 0.1% twice (h = 1): a fixed hash, so both engines see the same sink.
        con.execute("""CREATE TABLE sink AS
            WITH h AS (SELECT t, p, o, hash(o * 7 + p) % 1000 AS h FROM src)
            SELECT t AS src_topic, p AS src_partition, o AS src_offset FROM h WHERE h <> 0
            UNION ALL SELECT t, p, o FROM h WHERE h = 1""")
        expected = con.execute("SELECT count(*) FROM src").fetchone()[0]
        rows = con.execute("SELECT count(*) FROM sink").fetchone()[0]
        gaps = con.execute("SELECT count(*) FROM src WHERE hash(o * 7 + p) % 1000 = 0").fetchone()[0]
        dups = con.execute("SELECT count(*) FROM src WHERE hash(o * 7 + p) % 1000 = 1").fetchone()[0]
    return {"expected": expected, "sink_rows": rows, "gap_records": gaps, "duplicate_rows": dups}


DUCKDB_SQL = """
WITH s AS (SELECT src_topic AS t, src_partition AS p, src_offset AS o, count(*) AS c FROM sink GROUP BY ALL),
j AS (SELECT coalesce(e.t, s.t) AS t, coalesce(e.p, s.p) AS p, coalesce(e.o, s.o) AS o,
             e.o IS NOT NULL AS expected, coalesce(s.c, 0) AS c
      FROM src e FULL OUTER JOIN s ON e.t = s.t AND e.p = s.p AND e.o = s.o
      WHERE e.o IS NULL OR s.o IS NULL OR s.c > 1),
k AS (SELECT j.*, CASE WHEN expected AND c = 0 THEN 'gap' WHEN expected THEN 'duplicate'
                       ELSE 'phantom_' || lower(coalesce(r.kind, 'beyond_hw')) END AS kind
      FROM j ASOF LEFT JOIN ranges r ON j.t = r.t AND j.p = r.p AND j.o >= r.first),
g AS (SELECT *, o - row_number() OVER (PARTITION BY kind, t, p ORDER BY o) AS grp FROM k)
SELECT kind, t, p, min(o), max(o),
       sum(CASE WHEN kind = 'gap' THEN 1 WHEN kind = 'duplicate' THEN c - 1 ELSE c END)
FROM g GROUP BY kind, t, p, grp ORDER BY t, p, 4
"""


def duckdb_reconcile(path: Path, memory_limit: str) -> list[tuple]:
    import duckdb

    with duckdb.connect(str(path), read_only=True) as con:
        con.execute(f"SET memory_limit = '{memory_limit}'")
        return con.execute(DUCKDB_SQL).fetchall()


class PeakRSS:
    """Peak of the summed RSS of this process tree, sampled in a thread."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while True:
            self.peak = max(self.peak, tree_rss(os.getpid()))
            if self._stop.wait(0.2):
                return


def tree_rss(root: int) -> int:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        try:
            with open(f"/proc/{pid}/statm") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            pass
    return total


def parse_size(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 10**3, "M": 10**6, "G": 10**9}.get(text[-1:], 1)
    return int(float(text.rstrip("KMG")) * scale)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sizes", nargs="?", default="1M,10M")
    ap.add_argument("--workdir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "eosctl-bench"))
    ap.add_argument("--driver-memory", default="2g")
    ap.add_argument("--duckdb-memory", default="4GB", help="memory_limit of the DuckDB baseline")
    ap.add_argument("--task-memory", default="1GB", help="memory_limit of DuckDB inside each Spark task")
    args = ap.parse_args()

    from auditors import job
    from auditors import spark as sparks
    from eosctl.config import Sink

    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    t = time.monotonic()
    spark = sparks.session(master="local[*]", driver_memory=args.driver_memory, shuffle_partitions=4)
    print(f"spark session start: {time.monotonic() - t:.1f}s", flush=True)

    results = []
    for size in (parse_size(s) for s in args.sizes.split(",")):
        source = SyntheticSource(size)
        path = workdir / f"bench_{size}.duckdb"
        t = time.monotonic()
        truth = build(path, source)
        print(f"\n{size:,} offsets: built in {time.monotonic() - t:.1f}s ({truth})", flush=True)

        inp = job.AuditInput(source=source, sink=Sink(duckdb=str(path), table="sink"), topics=(TOPIC,),
                             settings=job.TaskSettings(duckdb_memory=args.task_memory))
        with PeakRSS() as spark_rss:
            t = time.monotonic()
            report = job.run_audit(spark, inp)
            spark_s = time.monotonic() - t
        with PeakRSS() as duck_rss:
            t = time.monotonic()
            rows = duckdb_reconcile(path, args.duckdb_memory)
            duck_s = time.monotonic() - t

        counts = {"gap": 0, "duplicate": 0}
        for f in report.findings:
            counts[f.kind] = counts.get(f.kind, 0) + f.count
        duck_counts = {"gap": 0, "duplicate": 0}
        for kind, *_, n in rows:
            duck_counts[kind] = duck_counts.get(kind, 0) + n
        agree = (counts == duck_counts and counts["gap"] == truth["gap_records"]
                 and counts["duplicate"] == truth["duplicate_rows"])
        line = (f"{size:>12,}  spark {spark_s:7.1f}s  duckdb {duck_s:7.1f}s  ratio {spark_s / duck_s:5.2f}x  "
                f"peak RSS spark {spark_rss.peak / 2**30:5.2f} GB  duckdb {duck_rss.peak / 2**30:5.2f} GB  "
                f"findings {'agree' if agree else f'DIFFER spark={counts} duckdb={duck_counts}'}")
        print(line, flush=True)
        results.append(line)
        path.unlink()

    print("\n        size  results (Spark audit excludes session start-up)")
    for line in results:
        print(line)


if __name__ == "__main__":
    main()
