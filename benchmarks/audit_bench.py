"""Benchmark: the audit's two engines vs the same reconciliation as plain DuckDB SQL, in one run.

    python benchmarks/audit_bench.py [SIZES] [--workdir DIR] [--driver-memory 2g]

SIZES are total source offsets, comma separated (default 1M,10M; the issue's full set is 1M,10M,50M).
Synthetic source: 4 partitions of transactions (50-150 records + a commit marker; 5% are short aborted
transactions), i.e. ~1% markers/aborted, given to the job as PartitionLog range models (no broker).
Synthetic sink: every committed offset once, except 0.1% missing and 0.1% stored twice.

Timed, per size, all through auditors.engine.run (what `eosctl audit` runs), and what explaining the
findings (their causes, eosctl.rules.causes) adds to the local audit (explain_cost):
- spark cold: in a fresh process, the audit from its start to its report, Spark's start-up included;
- spark warm: the same audit repeated on that process's session, once its first job has run;
- local: the local engine (process pool, no JVM);
- duckdb: the DuckDB SQL baseline (full outer join of the per-offset expected list with the sink's offset
  counts, then runs) on a fresh connection;
- postgres: the local engine on the same rows in a PostgreSQL table (a local server this script starts,
  or --postgres-uri; an index on topic, partition, offset as a JDBC sink's key has), read at one exported
  snapshot; next to `local` on the DuckDB file. --no-postgres skips it;
- delta: the same on the same rows in a Delta table (one version), written by `deltalake` (--no-delta);
- iceberg: the same in an Iceberg table (one snapshot) in a SQL catalog on a SQLite file, written by
  `pyiceberg` (--no-iceberg).
--sinks-only measures local, postgres, delta and iceberg alone (no Spark, no DuckDB baseline); otherwise the
warm Spark audit runs on each sink kind too, next to the DuckDB file.
All but postgres read the same DuckDB file. Peak RSS is the sum over the process and all of its descendants
(Spark's JVM and Python workers, the local pool, DuckDB in-process), sampled every 0.2 s.
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

_T0 = time.monotonic()  # the "cold" Spark measurement counts from here (the child process's start)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchdata, also when imported by a Spark worker
from benchdata import parse_size  # noqa: E402

TOPIC = "bench"
PARTITIONS = 4


@dataclass(frozen=True)
class SyntheticSource:
    """Deterministic range models, rebuilt inside each Spark task (only the seed and size travel)."""

    total: int
    seed: int = 7

    def survey(self, topics):
        from auditors.sources import Placement

        n = self.total // PARTITIONS
        return {t: {p: Placement(0, 0, n, n) for p in range(PARTITIONS)} for t in topics}

    def scan(self, parts):
        return {tp: self.load(*tp) for tp, _ in parts}

    def existing_topics(self):
        return {TOPIC: list(range(PARTITIONS))}

    def load(self, topic: str, partition: int):
        return synthetic_log(topic, partition, self.total // PARTITIONS, self.seed)


def synthetic_log(topic: str, partition: int, n: int, seed: int):
    from eosctl.cluster.model import Kind, OffsetRange, PartitionLog

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


def build(path: Path, ranges_of: dict[tuple[str, int], list]) -> dict[str, int]:
    """Write the log's ranges per (topic, partition), the per-offset expected list (for the DuckDB
    baseline) and the sink table."""
    import duckdb
    import pyarrow as pa

    if path.exists():
        path.unlink()
    cols: dict[str, list] = {"t": [], "p": [], "first": [], "last": [], "kind": []}
    for (t, p), ranges in ranges_of.items():
        for r in ranges:
            cols["t"].append(t)
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


def measure_duckdb(path: Path, memory_limit: str) -> tuple[float, int, dict[str, int]]:
    """The DuckDB baseline once: (seconds, peak RSS, records per finding kind); prints its line."""
    with PeakRSS() as rss:
        t = time.monotonic()
        rows = duckdb_reconcile(path, memory_limit)
        seconds = time.monotonic() - t
    counts = {"gap": 0, "duplicate": 0}
    for kind, *_, n in rows:
        counts[kind] = counts.get(kind, 0) + n
    print(f"  duckdb      {seconds:7.1f}s  peak {rss.peak / 2**30:.2f} GB", flush=True)
    return seconds, rss.peak, counts


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


def _audit(inp, options, started: float | None = None):
    from auditors import engine

    return engine.run(inp, options, started=started)


def _counts(report) -> dict[str, int]:
    counts = {"gap": 0, "duplicate": 0}
    for f in report.findings:
        counts[f.kind] = counts.get(f.kind, 0) + f.count
    return counts


def _input(path: Path, size: int, task_memory: str, sink=None):
    from auditors.plan import AuditInput, TaskSettings
    from eosctl.config.model import Sink

    return AuditInput(source=SyntheticSource(size), sink=sink or Sink(duckdb=str(path), table="sink"),
                          topics=(TOPIC,), settings=TaskSettings(duckdb_memory=task_memory))


def load_postgres(path: Path, uri: str) -> float:
    """The DuckDB file's sink rows into table bench_sink (COPY through a CSV stream); seconds taken."""
    import duckdb
    import psycopg

    t = time.monotonic()
    csv = path.with_suffix(".csv")
    with duckdb.connect(str(path), read_only=True) as con:
        con.execute(f"COPY sink TO '{csv}' (HEADER false)")
    with psycopg.connect(uri, autocommit=True) as pg:
        pg.execute("DROP TABLE IF EXISTS bench_sink")
        pg.execute("CREATE UNLOGGED TABLE bench_sink (src_topic TEXT, src_partition INT, src_offset BIGINT)")
        with pg.cursor() as cur, cur.copy("COPY bench_sink FROM STDIN (FORMAT csv)") as copy, \
                open(csv, "rb") as f:
            while block := f.read(1 << 20):
                copy.write(block)
        pg.execute("CREATE INDEX ON bench_sink (src_topic, src_partition, src_offset)")
        pg.execute("VACUUM ANALYZE bench_sink")
    csv.unlink()
    return time.monotonic() - t


def load_delta(path: Path, table: Path) -> float:
    """The DuckDB file's sink rows into a new Delta table (one commit); seconds taken."""
    import shutil

    import duckdb
    from deltalake import write_deltalake

    t = time.monotonic()
    shutil.rmtree(table, ignore_errors=True)
    with duckdb.connect(str(path), read_only=True) as con:
        write_deltalake(str(table), con.sql("SELECT * FROM sink").to_arrow_reader(1 << 20))
    return time.monotonic() - t


def cold(args: argparse.Namespace) -> None:
    """The child process of a Spark measurement: one audit from nothing (Spark starts inside it, as in
    `eosctl audit`), then the same audit twice more on the now warm session; prints its numbers."""
    import json

    from auditors import spark as sparks
    from auditors.engine import EngineOptions

    inp = _input(Path(args.cold), parse_size(args.sizes), args.task_memory)
    options = EngineOptions("spark", master="local[*]", driver_memory=args.driver_memory)
    first = _audit(inp, options, _T0)  # starts Spark and stops it again, like the command
    out = {**_counts(first), "startup": first.engine["startup_seconds"], "first": first.elapsed_seconds}
    sparks.session(master="local[*]", driver_memory=args.driver_memory, shuffle_partitions=4)
    _audit(inp, options)  # the session's first job and Python workers: not "warm" yet
    t = time.monotonic()
    again = _audit(inp, options)
    out["warm"] = time.monotonic() - t
    agree = _counts(again) == _counts(first)
    from dataclasses import fields

    from eosctl.config.model import Sink

    names = {f.name for f in fields(Sink)}
    for kind, spec in json.loads(args.cold_sinks or "{}").items():  # the same rows in other sink kinds
        sink = Sink(**{k: v for k, v in spec.items() if k in names})
        kind_input = _input(Path(args.cold), parse_size(args.sizes), args.task_memory, sink)
        # Warm as the DuckDB file's row is: once before, so the Python workers have met this kind (its
        # library imported, e.g. pyiceberg's ~0.7 s) and only the audit itself is timed.
        _audit(kind_input, options)
        t = time.monotonic()
        report = _audit(kind_input, options)
        out[f"warm_{kind}"] = time.monotonic() - t
        agree &= _counts(report) == _counts(first)
    print(json.dumps({**out, "agree_warm": agree}))


def spark_run(path: Path, size: int, args: argparse.Namespace,
              sinks: dict | None = None) -> tuple[float, dict, int]:
    """(seconds from the child's start to its first report, the child's numbers, the tree's peak RSS).
    ``sinks``: kind -> the Sink's fields of the same rows loaded elsewhere, audited warm in the child too."""
    import json
    import subprocess

    cmd = [sys.executable, __file__, str(size), "--cold", str(path), "--driver-memory", args.driver_memory,
           "--task-memory", args.task_memory, "--cold-sinks", json.dumps(sinks or {})]
    t = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, tree_rss(proc.pid))
        time.sleep(0.2)
    total = time.monotonic() - t
    if proc.returncode != 0:
        raise SystemExit(f"the Spark run failed (exit {proc.returncode})")
    out = json.loads(proc.stdout.read().strip().splitlines()[-1])
    return total, out, peak


def _made_dir(text: str) -> Path:
    path = Path(text)
    path.mkdir(parents=True, exist_ok=True)
    return path


def workdir_and_memory_flags(ap: argparse.ArgumentParser) -> None:
    """Where the synthetic logs are kept between runs, and the memory the engines and the baseline get
    (this benchmark and audit_partitions_bench.py)."""
    ap.add_argument("--workdir", type=_made_dir,
                    default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "eosctl-bench"))
    ap.add_argument("--driver-memory", default="2g")
    ap.add_argument("--duckdb-memory", default="4GB", help="memory_limit of the DuckDB baseline")
    ap.add_argument("--task-memory", default="1GB", help="memory_limit of DuckDB inside each task")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sizes", nargs="?", default="1M,10M")
    workdir_and_memory_flags(ap)
    ap.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL sink's row")
    ap.add_argument("--no-delta", action="store_true", help="skip the Delta sink's row")
    ap.add_argument("--no-iceberg", action="store_true", help="skip the Iceberg sink's row")
    ap.add_argument("--sinks-only", action="store_true", help="only the local engine per sink kind")
    ap.add_argument("--postgres-uri", help="a database to load the sink into (default: a local server "
                                           "this script starts and stops)")
    ap.add_argument("--partitions-dimension", action="store_true",
                    help="the partitions dimension instead (benchmarks/audit_partitions_bench.py)")
    ap.add_argument("--cold", help=argparse.SUPPRESS)  # internal: the child process of a cold run
    ap.add_argument("--cold-sinks", help=argparse.SUPPRESS)  # internal: other sink kinds for that child
    if "--partitions-dimension" in sys.argv[1:]:  # a fixed total over 8 to 10,000 partitions
        here = Path(__file__).resolve().parent / "audit_partitions_bench.py"
        os.execv(sys.executable, [sys.executable, str(here), *sys.argv[1:]])
    args = ap.parse_args()
    if args.cold:
        cold(args)
        return

    import pyarrow.compute  # noqa: F401  (imported before timing: the DuckDB baseline's duckdb is, too)

    from eosctl.sandbox import pgserver

    server = None
    if not args.no_postgres and not args.postgres_uri:
        server = pgserver.start()
    try:
        results = _run_sizes(args, args.workdir, server.uri() if server else args.postgres_uri)
    finally:
        if server is not None:
            pgserver.stop(server)
    _print_table(results)


def explain_cost(path: Path, size: int, repeat: int = 3) -> tuple[float, float]:
    """(seconds explaining adds, seconds reconciling) over every partition, best of ``repeat``: the
    reconciliation sweep alone vs the sweep noting the sink's facts plus every finding's cause
    (eosctl.rules.causes), on the same log models and the sink's islands read once beforehand. What the task
    does besides (the scan, reading the sink) is the same with and without causes; the writer runs the
    scan records and the key rows' writers are not in this synthetic audit (no broker, no key column)."""
    from eosctl.config.model import Sink
    from eosctl.rules.causes import explain_partition
    from eosctl.rules.reconcile import SinkFacts, reconcile_partition
    from eosctl.sink import open_reader

    seed = SyntheticSource(size).seed
    logs = [synthetic_log(TOPIC, p, size // PARTITIONS, seed) for p in range(PARTITIONS)]
    with open_reader(Sink(duckdb=str(path), table="sink")) as reader:
        islands = [list(reader.islands(TOPIC, p)) for p in range(PARTITIONS)]

    def best(run) -> float:
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            run()
            times.append(time.perf_counter() - t)
        return min(times)

    def plain() -> None:
        for log, isl in zip(logs, islands, strict=True):
            reconcile_partition(log, isl)

    def explained() -> None:
        for log, isl in zip(logs, islands, strict=True):
            facts = SinkFacts()
            _, findings = reconcile_partition(log, isl, facts)
            explain_partition(log, findings, facts)

    base = best(plain)
    return max(0.0, best(explained) - base), base


def load_iceberg(path: Path, root: Path) -> float:
    """The DuckDB file's sink rows into a new Iceberg table (one snapshot) of a SQL catalog in ``root``."""
    import shutil

    import duckdb
    from pyiceberg.catalog import load_catalog

    t = time.monotonic()
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    catalog = load_catalog("bench", uri=f"sqlite:///{root / 'catalog.db'}", warehouse=f"file://{root}")
    catalog.create_namespace("bench")
    with duckdb.connect(str(path), read_only=True) as con:
        rows = con.sql("SELECT * FROM sink").to_arrow_table()
    catalog.create_table("bench.sink", schema=rows.schema).append(rows)
    return time.monotonic() - t


def _iceberg_sink(root: Path):
    from eosctl.config.model import Sink

    return Sink(iceberg="bench.bench.sink", catalog_uri=f"sqlite:///{root / 'catalog.db'}",
                warehouse=f"file://{root}", table="sink")


def _run_sizes(args: argparse.Namespace, workdir: Path, pg_uri: str | None) -> list[dict]:
    from auditors.engine import EngineOptions
    from auditors.local import _preload
    from eosctl.config.model import Sink

    _preload()
    results = []
    for size in (parse_size(s) for s in args.sizes.split(",")):
        path = workdir / f"bench_{size}.duckdb"
        t = time.monotonic()
        source = SyntheticSource(size)
        truth = build(path, {(TOPIC, p): source.load(TOPIC, p).ranges for p in range(PARTITIONS)})
        print(f"\n{size:,} offsets: built in {time.monotonic() - t:.1f}s ({truth})", flush=True)
        want = {"gap": truth["gap_records"], "duplicate": truth["duplicate_rows"]}
        inp = _input(path, size, args.task_memory)
        row: dict[str, object] = {"size": size}
        agree = True
        kinds = []  # the same rows in the other sink kinds, loaded before any engine runs
        if pg_uri:
            kinds.append(("postgres", load_postgres, pg_uri, Sink(postgres=pg_uri, table="bench_sink"),
                          "the server's not counted; "))
        if not args.no_delta:
            delta = workdir / f"bench_{size}_delta"
            kinds.append(("delta", load_delta, delta, Sink(delta=str(delta), table="sink"), ""))
        if not args.no_iceberg:
            ice = workdir / f"bench_{size}_iceberg"
            kinds.append(("iceberg", load_iceberg, ice, _iceberg_sink(ice), ""))
        loaded = {name: load(path, into) for name, load, into, _, _ in kinds}

        if not args.sinks_only:
            from dataclasses import asdict

            specs = {name: asdict(sink) for name, _, _, sink, _ in kinds}
            secs, out, peak = spark_run(path, size, args, specs)
            # cold: process start to the first report (interpreter, imports, Spark start-up, the audit).
            row.update(cold=out["first"], startup=out["startup"], warm=out["warm"], spark_rss=peak)
            agree &= {k: out[k] for k in want} == want and out["agree_warm"]
            print(f"  spark cold  {row['cold']:7.1f}s (start-up {out['startup']:.1f}s)  warm "
                  f"{out['warm']:.1f}s  peak {peak / 2**30:.2f} GB  (child process total {secs:.1f}s)",
                  flush=True)
            for name, *_ in kinds:
                row[f"spark_{name}"] = out[f"warm_{name}"]
                print(f"  spark warm on {name:<9} {out[f'warm_{name}']:7.1f}s  "
                      f"{out[f'warm_{name}'] / out['warm']:.2f}x the DuckDB file", flush=True)
        with PeakRSS() as rss:
            t = time.monotonic()
            report = _audit(inp, EngineOptions("local"))
            row["local"], row["local_rss"] = time.monotonic() - t, rss.peak
        agree &= _counts(report) == want
        print(f"  local       {row['local']:7.1f}s  peak {rss.peak / 2**30:.2f} GB", flush=True)
        if not args.sinks_only:
            row["explain"], row["reconcile"] = explain_cost(path, size)
            print(f"  explaining  {row['explain']:7.2f}s on top of reconciling ({row['reconcile']:.2f}s): "
                  f"{row['explain'] / row['local']:.1%} of the local audit", flush=True)
            with PeakRSS() as rss:
                t = time.monotonic()
                rows = duckdb_reconcile(path, args.duckdb_memory)
                row["duckdb"], row["duckdb_rss"] = time.monotonic() - t, rss.peak
            duck = {"gap": 0, "duplicate": 0}
            for kind, *_, n in rows:
                duck[kind] = duck.get(kind, 0) + n
            agree &= duck == want
            print(f"  duckdb      {row['duckdb']:7.1f}s  peak {rss.peak / 2**30:.2f} GB", flush=True)
        for name, _, _, sink, note in kinds:
            with PeakRSS() as rss:
                t = time.monotonic()
                report = _audit(_input(path, size, args.task_memory, sink), EngineOptions("local"))
                row[name] = time.monotonic() - t
            agree &= _counts(report) == want
            print(f"  {name:<11} {row[name]:7.1f}s  (local engine; this process tree's peak "
                  f"{rss.peak / 2**30:.2f} GB, {note}loaded in {loaded[name]:.1f}s)  "
                  f"{row[name] / row['local']:.2f}x the DuckDB file", flush=True)
        row["agree"] = agree
        results.append(row)
        path.unlink()
        import shutil

        for kind in ("delta", "iceberg"):
            shutil.rmtree(workdir / f"bench_{size}_{kind}", ignore_errors=True)
    return results


def _print_table(results: list[dict]) -> None:
    if any("cold" in r for r in results):
        _print_engines([r for r in results if "cold" in r])
    kinds = [k for k in ("postgres", "delta", "iceberg") if any(k in r for r in results)]
    if kinds:
        print("\n        size  local (DuckDB file)" + "".join(f"  local ({k})" for k in kinds) + "  "
              + "  ".join(f"{k}/duckdb-file" for k in kinds) + "  findings")
        for r in results:
            times = "".join(f"  {r.get(k, float('nan')):>{len(k) + 8}.1f}s" for k in kinds)
            ratios = "  ".join(f"{r.get(k, float('nan')) / r['local']:>{len(k) + 11}.2f}x" for k in kinds)
            print(f"{r['size']:>12,}  {r['local']:18.1f}s{times}  {ratios}  "
                  f"{'agree' if r['agree'] else 'DIFFER'}")
        if any("warm" in r for r in results):
            print("\n        size  spark warm (DuckDB file)" + "".join(f"  spark ({k})" for k in kinds)
                  + "  " + "  ".join(f"{k}/duckdb-file" for k in kinds))
            for r in (r for r in results if "warm" in r):
                times = "".join(f"  {r.get('spark_' + k, float('nan')):>{len(k) + 8}.1f}s" for k in kinds)
                ratios = "  ".join(f"{r.get('spark_' + k, float('nan')) / r['warm']:>{len(k) + 11}.2f}x"
                                   for k in kinds)
                print(f"{r['size']:>12,}  {r['warm']:23.1f}s{times}  {ratios}")


def _print_engines(results: list[dict]) -> None:
    print("\n        size  spark cold  spark warm   local  duckdb | warm/local local/duckdb cold/local "
          "| peak GB: spark local duckdb | findings")
    for r in results:
        gb = " ".join(f"{r[k] / 2**30:5.2f}" for k in ("spark_rss", "local_rss", "duckdb_rss"))
        print(f"{r['size']:>12,}  {r['cold']:9.1f}s  {r['warm']:9.1f}s  {r['local']:6.1f}s  "
              f"{r['duckdb']:6.1f}s | {r['warm'] / r['local']:9.2f}x {r['local'] / r['duckdb']:11.2f}x "
              f"{r['cold'] / r['local']:9.1f}x |       {gb} | {'agree' if r['agree'] else 'DIFFER'}")
    print("cold: a fresh process's start to its report, Spark's start-up included; warm: a repeat audit on a "
          "used session;\nlocal: the local engine; peak RSS: the process tree of each measurement")
    print("\n        size  local  explaining adds  explaining/local (target <= 10%)")
    for r in results:
        share = r["explain"] / r["local"]
        print(f"{r['size']:>12,}  {r['local']:5.1f}s  {r['explain']:14.2f}s  {share:16.1%}")


if __name__ == "__main__":
    main()
