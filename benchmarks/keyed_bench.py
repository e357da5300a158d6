"""The keyed audit against what its data costs (issue 39), measured in one run on one topic and sink:

- offsets only: the audit with no key column (no key read at all);
- DuckDB's own GROUP BY of the sink's keys: `GROUP BY key HAVING count(DISTINCT place) > 1` over the same
  sink file, nothing else (what grouping 10M keys costs on this machine);
- keyed: the audit with the key column, `--no-content-check` (offsets + the key-duplicate rule);
- content: the audit with the key column and the content check (+ every record's key decoded and compared).

Printed: keyed / (offsets only + GROUP BY) and content / keyed; the issue's bar is 1.5x for both. The
records come from a broker over real I/O (benchdata.produce_keyed writes them: keyed records in committed
transactions, 8 partitions); by default a private Apache Kafka (one KRaft node, 768 MB heap), or --bootstrap.
Each audit runs --repeat times (local engine), best time kept.

    python benchmarks/keyed_bench.py [--records 10.01M] [--partitions 8] [--repeat 1] [--bootstrap HOST:PORT]

Spark at scale (issue 39 item 4), no broker: --synthetic SIZES (e.g. 10M,30M,100M) audits the synthetic
ranges audit_bench.py builds (4 partitions of transactions, ~1% markers/aborted, 0.1% of the sink missing,
0.1% stored twice) with a key column added to its sink (order_id; 0.01% of the rows carry the key of the
offset before theirs: key duplicates), on the Spark engine, per size and per master (--masters:
local[*] and/or a loopback standalone cluster this script starts: a master and two workers of one core and
--executor-memory each): the offsets-only audit, the keyed audit (no content check: no records to read),
and DuckDB's own GROUP BY of the same sink keys, with keyed / offsets only and keyed / (offsets only +
GROUP BY). Each master's session is started once per size (not timed) and warmed by a 100k audit.

    python benchmarks/keyed_bench.py --synthetic 10M,30M,100M [--masters local,standalone]
        [--sink-kinds duckdb,parquet,delta]

With --sink-kinds parquet or delta the same rows are exported (a directory of Parquet files, a Delta
table), which Spark reads itself for the key rule (issue 54, auditors/spark_sink.py); each such row also
times the keyed audit with the keys read by the tasks as before (its 'before' figure, in the same run).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from audit_bench import workdir_and_memory_flags
from benchbroker import broker  # benchmarks/ is on the path: run as python benchmarks/NAME.py
from benchdata import keyed_flags, parse_size, write_keyed
from content_bench import build_sink, run


def group_by(sink: Path, duplicates: int = 0) -> float:
    """DuckDB's own GROUP BY of the sink's keys (by place), on a connection of its own: seconds; it must
    find ``duplicates`` keys."""
    import duckdb

    t0 = time.monotonic()
    with duckdb.connect(str(sink), read_only=True) as con:
        con.execute("SET preserve_insertion_order = false")
        found = con.execute("""
            SELECT order_id FROM sink WHERE order_id IS NOT NULL GROUP BY order_id
            HAVING count(DISTINCT (src_topic, src_partition, src_offset)) > 1""").fetchall()
    assert len(found) == duplicates, (len(found), duplicates, found[:3])
    return time.monotonic() - t0


def synthetic_sink(path: Path, size: int) -> dict[str, int]:
    """audit_bench's synthetic sink at ``size`` offsets with a key column, order_id: the offset's own key,
    except that 0.01% of the rows (a fixed hash) carry the key of the offset before theirs. Returns the
    build's truth plus key_duplicates: the keys at two distinct places (DuckDB's count, which the audits
    must match; committed places only, as the sink holds no other)."""
    import duckdb
    from audit_bench import PARTITIONS, TOPIC, SyntheticSource, build

    source = SyntheticSource(size)
    truth = build(path, {(TOPIC, p): source.load(TOPIC, p).ranges for p in range(PARTITIONS)})
    with duckdb.connect(str(path)) as con:
        con.execute("DROP TABLE src")  # the offsets baseline's per-offset list: not needed here
        con.execute("""CREATE OR REPLACE TABLE sink AS SELECT *, 'k' || src_partition || '-' ||
            (src_offset - (hash(src_offset * 13 + src_partition) % 10000 = 2)::BIGINT) AS order_id
            FROM sink""")
        con.execute("CHECKPOINT")
        truth["key_duplicates"] = con.execute("""SELECT count(*) FROM (SELECT order_id FROM sink GROUP BY 1
            HAVING count(DISTINCT (src_topic, src_partition, src_offset)) > 1)""").fetchone()[0]
    return truth


@contextmanager
def standalone(workdir: Path, executor_memory: str) -> Iterator[str]:
    """A Spark standalone master and two workers (one core, ``executor_memory`` each) on loopback, from
    pyspark's own scripts; yields the master URL; stopped (by their pids) on every exit path."""
    import importlib.util
    import json
    import subprocess
    import urllib.request

    from eosctl.sandbox.noida import free_port

    home = Path(importlib.util.find_spec("pyspark").origin).parent
    env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               SPARK_DAEMON_MEMORY="256m")
    port, ui = free_port(), free_port()
    master = f"spark://127.0.0.1:{port}"
    daemons = [["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                "--webui-port", str(ui)]]
    daemons += [["org.apache.spark.deploy.worker.Worker", master, "--host", "127.0.0.1", "--cores", "1",
                 "--memory", executor_memory, "--webui-port", str(free_port()), "--work-dir",
                 str(workdir / f"worker{n}")] for n in (1, 2)]
    procs = []
    try:
        for n, args in enumerate(daemons):
            log = open(workdir / f"daemon{n}.log", "w")  # noqa: SIM115 (closed with the process)
            procs.append((subprocess.Popen([str(home / "bin" / "spark-class"), *args], env=env, stdout=log,
                                           stderr=subprocess.STDOUT, cwd=workdir), log))
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as r:
                    if json.load(r).get("aliveworkers", 0) >= 2:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"the standalone cluster did not come up in 180 s (logs in {workdir})")
            time.sleep(0.5)
        yield master
    finally:
        for proc, log in procs:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()


def exported(path: Path, kind: str) -> Path:
    """The DuckDB sink at ``path`` as ``kind`` ("parquet": a directory of Parquet files, "delta": a Delta
    table), beside it; ``path`` itself for "duckdb"."""
    import duckdb

    if kind == "duckdb":
        return path
    out = path.with_suffix("." + kind)
    if out.exists():
        return out
    with duckdb.connect(str(path), read_only=True) as con:
        if kind == "parquet":
            out.mkdir()
            con.execute(f"COPY sink TO '{out}' (FORMAT parquet, PER_THREAD_OUTPUT true)")
        else:
            from deltalake import write_deltalake

            write_deltalake(str(out), con.sql("SELECT * FROM sink").to_arrow_reader(1 << 20))
    return out


def _sink(kind: str, file: Path, key: str | None) -> Any:
    from eosctl.config.model import Sink

    where = {"duckdb": {"duckdb": str(file), "table": "sink"}, "parquet": {"parquet": f"{file}/*.parquet"},
             "delta": {"delta": str(file)}}[kind]
    return Sink(**where, key_column=key)  # type: ignore[arg-type]


@contextmanager
def keys_in_tasks(on: bool) -> Iterator[None]:
    """With ``on``: the Spark engine as before issue 54, the sink's keys read by the tasks (Python) for
    any sink kind: the 'before' figure of a Parquet or Delta sink, measured in the same run."""
    import auditors.spark_job as job

    saved = job.key_frame
    if on:
        job.key_frame = lambda spark, sink: None  # type: ignore[assignment]
    try:
        yield
    finally:
        job.key_frame = saved


def spark_audits(path: Path, size: int, master: str, args: argparse.Namespace, warm: Path,
                 kind: str = "duckdb") -> dict:
    """The offsets-only and the keyed Spark audit of the synthetic sink at ``path`` (exported as ``kind``)
    on ``master``, in a session of their own (started and warmed by a 100k audit of ``warm`` first, not
    timed): seconds and finding counts; for a Parquet or Delta sink also "keyed (keys in tasks)", the
    keyed audit with the sink's keys read by the tasks as before issue 54."""
    import audit_bench
    from audit_bench import _counts, _input
    from pyspark import cloudpickle

    from auditors import spark as sparks
    from auditors.engine import EngineOptions
    from auditors.engine import run as audit
    from auditors.guard import Owned

    # The synthetic source travels to the executors by value: their Python has no benchmarks/ on its path.
    cloudpickle.register_pickle_by_value(audit_bench)
    extra = {"spark.executor.memory": args.executor_memory, "spark.executor.cores": "1"}
    # The JVM outlives SparkSession.stop(): the guard kills what this session started (not the cluster).
    with Owned():
        spark = sparks.session(master=master, driver_memory=args.driver_memory, extra=extra)
        try:
            options = EngineOptions("spark", master=master, driver_memory=args.driver_memory)
            out: dict = {}
            runs = [("warm-up", exported(warm, kind), 100_000, "order_id"),
                    ("offsets only", exported(path, kind), size, None)]
            if kind != "duckdb":
                runs.append(("keyed (keys in tasks)", exported(path, kind), size, "order_id"))
            runs.append(("keyed", exported(path, kind), size, "order_id"))
            for name, file, n, key in runs:
                inp = _input(file, n, args.task_memory, _sink(kind, file, key))
                t = time.monotonic()
                with keys_in_tasks(name == "keyed (keys in tasks)"):
                    report = audit(inp, options)
                seconds = time.monotonic() - t
                if name != "warm-up":
                    out[name] = seconds
                    # key_duplicate: findings (keys), not their count (places)
                    out[name + " findings"] = {**_counts(report), "key_duplicate": sum(
                        f.kind == "key_duplicate" for f in report.findings)}
                    out[name + " keys step"] = report.engine.get("keys_seconds")
            return out
        finally:
            spark.stop()
            sparks.forget(spark)


def synthetic_main(args: argparse.Namespace) -> None:
    """--synthetic: the Spark engine at scale on audit_bench's synthetic ranges, no broker."""
    masters = [m.strip() for m in args.masters.split(",")]
    kinds = [k.strip() for k in args.sink_kinds.split(",")]
    with tempfile.TemporaryDirectory(prefix="keyed-spark-bench-", dir=args.workdir) as tmp:
        work = Path(tmp)
        warm = work / "warm.duckdb"
        synthetic_sink(warm, 100_000)
        for size in (parse_size(s) for s in args.synthetic.split(",")):
            path = work / f"sink_{size}.duckdb"
            t = time.monotonic()
            truth = synthetic_sink(path, size)
            print(f"\n{size:,} offsets: sink built in {time.monotonic() - t:.1f}s ({truth})", flush=True)
            grouped = group_by(path, truth["key_duplicates"])
            print(f"  DuckDB GROUP BY of the sink's keys: {grouped:.2f}s (load {os.getloadavg()[0]:.1f})",
                  flush=True)
            for kind, sink_kind in ((m, k) for m in masters for k in kinds):
                with (standalone(work, args.executor_memory) if kind == "standalone"
                      else nullcontext("local[*]")) as master:
                    out = spark_audits(path, size, master, args, warm, sink_kind)
                keyed, offsets = out["keyed"], out["offsets only"]
                before = ""
                if "keyed (keys in tasks)" in out:
                    was = out["keyed (keys in tasks)"]
                    before = (f"; before (keys read in the tasks) {was:.2f}s: keyed / offsets only "
                              f"{was / offsets:.2f}x, keyed / (offsets only + GROUP BY) "
                              f"{was / (offsets + grouped):.2f}x")
                found = out["keyed findings"]
                agree = (found.get("key_duplicate", 0) == truth["key_duplicates"]
                         and found.get("gap") == truth["gap_records"]
                         and found.get("duplicate") == truth["duplicate_rows"]
                         and out["offsets only findings"].get("gap") == truth["gap_records"])
                print(f"  spark {master}, {sink_kind} sink (executors {args.executor_memory}, driver "
                      f"{args.driver_memory}), "
                      "broker "
                      f"none (synthetic), load {os.getloadavg()[0]:.1f}: offsets only {offsets:.2f}s, keyed "
                      f"{keyed:.2f}s (keys step {out['keyed keys step']}s), DuckDB GROUP BY {grouped:.2f}s: "
                      f"keyed / offsets only {keyed / offsets:.2f}x, keyed / (offsets only + GROUP BY) "
                      f"{keyed / (offsets + grouped):.2f}x{before}; "
                      f"findings {'agree' if agree else 'DIFFER'} "
                      f"({found})", flush=True)
            path.unlink()
            for kind in kinds:
                if kind != "duckdb":
                    shutil.rmtree(path.with_suffix("." + kind), ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    keyed_flags(ap, records="10.01M", repeat=1)
    ap.add_argument("--topic", help="audit this topic (written before by this script's producer) instead of "
                                    "writing one; needs --bootstrap and --sink")
    ap.add_argument("--sink", help="with --topic: its DuckDB sink (content_bench.build_sink)")
    ap.add_argument("--synthetic", metavar="SIZES", help="Spark on audit_bench's synthetic ranges, no broker")
    ap.add_argument("--masters", default="local,standalone", help="with --synthetic: local and/or standalone")
    ap.add_argument("--sink-kinds", default="duckdb", help="with --synthetic: duckdb, parquet and/or delta "
                                                           "(the same rows exported)")
    ap.add_argument("--executor-memory", default="2g", help="each standalone worker's and executor's")
    workdir_and_memory_flags(ap)  # --workdir (where the synthetic sinks go), --driver-memory, --task-memory
    args = ap.parse_args()
    if args.synthetic:
        synthetic_main(args)
        return
    if args.topic and not (args.bootstrap and args.sink):
        ap.error("--topic needs --bootstrap and --sink")
    records = parse_size(args.records)
    with tempfile.TemporaryDirectory(prefix="keyed-bench-") as tmp, \
            broker("kafka", args.bootstrap) as kafka:
        work, bootstrap = Path(tmp), kafka.bootstrap
        if args.topic:
            topic, sink = args.topic, Path(args.sink)
        else:
            topic, per = write_keyed(bootstrap, kafka.name, "keyed", records, args.partitions, args.txn)
            sink = work / "sink.duckdb"
            build_sink(sink, topic, records, args.partitions, per)
        # Warm-up (imports, the page cache of the sink and the log segments): not counted.
        run(bootstrap, topic, sink, "local", False, False)
        best: dict[str, float] = {}
        offsets = 0
        for _ in range(args.repeat):
            for name, key, content in (("offsets only", False, False), ("keyed", True, False),
                                       ("content", True, True)):
                seconds, report = run(bootstrap, topic, sink, "local", content, key)
                assert not report.findings, [f.to_dict() for f in report.findings[:3]]
                offsets = sum(p.high_watermark - p.log_start_offset for p in report.partitions)
                best[name] = min(best.get(name, seconds), seconds)
                print(f"  {name}: {seconds:.2f}s ({report.engine})", flush=True)
            seconds = group_by(sink)
            best["group by"] = min(best.get("group by", seconds), seconds)
            print(f"  DuckDB GROUP BY of the sink's keys: {seconds:.2f}s", flush=True)
        base = best["offsets only"] + best["group by"]
        print(f"local engine, {offsets:,} offsets, {args.partitions} partitions, broker {kafka.name}, load "
              f"{os.getloadavg()[0]:.1f}: offsets only {best['offsets only']:.2f}s, GROUP BY "
              f"{best['group by']:.2f}s, keyed {best['keyed']:.2f}s, content {best['content']:.2f}s: "
              f"keyed / (offsets only + GROUP BY) {best['keyed'] / base:.2f}x, content / keyed "
              f"{best['content'] / best['keyed']:.2f}x (bar: 1.5x each)", flush=True)


if __name__ == "__main__":
    main()
