"""Benchmark: `eosctl audit` of a demo-sized pipeline, process start to exit, against `eosctl audit --help`.

    python benchmarks/small_audit_bench.py [--records 600] [--partitions 6] [--runs 5] [--broker noida|kafka]
                                           [--engines local[,spark]] [--compare DIR]

Starts its own broker (in a temporary EOSCTL_HOME), runs the reference pipeline once (6 partitions, 600
source orders, two faults: skip and duplicate-replay, a DuckDB sink with its key column), then times, as a
user runs them, a new process each time from its start to its exit, alternating: `eosctl audit --help` (the
CLI's own start-up: the baseline) and `eosctl audit -c CONFIG -p bench --engine E --format json` (the sink
hop). Prints the medians, the ratio audit / help and the CPU time of each (the children's user + system
time: what a loaded machine does not inflate). Issue 49's bar: the local audit <= 2x `audit --help`.
Two floors are timed beside them: `import eosctl.cli, duckdb` and a read-only connection to the sink (what
any audit of a DuckDB sink pays before its first query), and the same with numpy, pyarrow and kafka.net
(the other libraries on the audit's path).
With several engines, their reports must agree.

--compare DIR also times both commands from another checkout of eosctl (e.g. `git worktree add DIR main`:
"before"), alternating with this tree's in the same run, on the same broker and pipeline: each tree's
audit is divided by its own `--help`, and the two trees' reports must agree.

The children run without PYTHONDONTWRITEBYTECODE (an installed eosctl has its bytecode cached); one
uncounted run of each command first writes it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchbroker import broker  # noqa: E402  benchmarks/ is on the path: run as python benchmarks/NAME.py

FAULTS = ("skip", "duplicate-replay")
PREFIX = "bench"


def timed(args: list[str], env: dict[str, str], ok: tuple[int, ...] = (0,),
          tree: Path = ROOT) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the child, its stdout) of `python ARGS` run from ``tree``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    # In the tree: `-m` puts the working directory first on sys.path, so that tree's eosctl is timed.
    env = {**env, "PYTHONPATH": os.pathsep.join([str(tree), env.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          cwd=tree, timeout=600)
    wall = time.monotonic() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in ok:
        raise SystemExit(f"python {' '.join(args)} failed (exit {proc.returncode}): {proc.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=600)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--broker", choices=("noida", "kafka"), default="noida")
    ap.add_argument("--engines", default="local", help="comma-separated: local, spark")
    ap.add_argument("--compare", type=Path, help="another eosctl checkout to time in the same run")
    args = ap.parse_args()
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    trees = {"": ROOT}
    if args.compare is not None:
        if not (args.compare / "eosctl" / "__main__.py").is_file():
            raise SystemExit(f"--compare {args.compare}: not an eosctl checkout (no eosctl/__main__.py)")
        trees["@cmp"] = args.compare.resolve()

    from eosctl.config.model import Cluster
    from eosctl.sandbox.pipeline import run_pipeline

    with tempfile.TemporaryDirectory(prefix="eosctl-small-bench-") as home, broker(args.broker) as b:
        print(f"broker: {b.name}", flush=True)
        t = time.monotonic()
        manifest = run_pipeline(Cluster(name="sandbox", bootstrap_servers=b.bootstrap), PREFIX,
                                Path(home) / PREFIX, faults=FAULTS, records=args.records,
                                partitions=args.partitions)
        config = Path(home) / PREFIX / "eosctl.toml"
        print(f"pipeline: {manifest['sink_rows']} sink rows, {manifest['partitions']} partitions, "
              f"{len(manifest['expected_findings'])} planted findings ({time.monotonic() - t:.1f}s)",
              flush=True)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["EOSCTL_HOME"] = home
        commands: dict[str, tuple[list[str], tuple[int, ...], Path]] = {}
        # The floor under any audit of a DuckDB sink: the command line's start-up, DuckDB's import and a
        # read-only connection to the sink; no Kafka, no eosctl audit module.
        sink = Path(home) / PREFIX / "sink.duckdb"
        connect = f"duckdb.connect({str(sink)!r}, read_only=True).close()"
        commands["floor"] = (["-c", f"import eosctl.cli, duckdb; {connect}"], (0,), ROOT)
        # And the other libraries the audit's path uses today (numpy, pyarrow, kafka-python's connection).
        commands["floor-libs"] = (["-c", f"import eosctl.cli, duckdb, numpy, pyarrow, kafka.net; {connect}"],
                                  (0,), ROOT)
        for suffix, tree in trees.items():
            commands["help" + suffix] = (["-m", "eosctl", "audit", "--help"], (0,), tree)
            for engine in engines:
                commands[engine + suffix] = (["-m", "eosctl", "audit", "-c", str(config), "-p", PREFIX,
                                              "--engine", engine, "--format", "json"], (0, 1), tree)
        for argv, ok, tree in commands.values():  # bytecode written, files in the page cache
            timed(argv, env, ok, tree)
        walls: dict[str, list[float]] = {name: [] for name in commands}
        cpus: dict[str, list[float]] = {name: [] for name in commands}
        reports: dict[str, dict] = {}
        for run in range(args.runs):
            for name, (argv, ok, tree) in commands.items():
                wall, cpu, out = timed(argv, env, ok, tree)
                walls[name].append(wall)
                cpus[name].append(cpu)
                line = f"  run {run + 1} {name:<10} {wall:5.2f}s wall, {cpu:5.2f}s CPU"
                if not name.startswith(("help", "floor")):
                    reports[name] = report = json.loads(out)
                    e = report["engine"]
                    line += (f"  (report: elapsed {report['elapsed_seconds']:.2f}s, workers "
                             f"{e.get('workers', '-')}, start-up {e['startup_seconds']:.2f}s, tasks "
                             f"{e['partitions_seconds']:.2f}s, keys {e['keys_seconds']:.2f}s)")
                print(line, flush=True)
        load = os.getloadavg()[0]
    print(f"\nmedian of {args.runs}, process start to exit ({b.name}; load average {load:.1f}):")
    for suffix, tree in trees.items():
        help_wall = statistics.median(walls["help" + suffix])
        help_cpu = statistics.median(cpus["help" + suffix])
        if len(trees) > 1:
            print(f" {tree}:")
        print(f"  eosctl audit --help   {help_wall:5.2f}s wall  {help_cpu:5.2f}s CPU")
        for engine in engines:
            wall, cpu = statistics.median(walls[engine + suffix]), statistics.median(cpus[engine + suffix])
            print(f"  audit --engine {engine:<6} {wall:5.2f}s wall  {cpu:5.2f}s CPU   "
                  f"ratio to --help: {wall / help_wall:.2f}x wall, {cpu / help_cpu:.2f}x CPU")
        floors = (("floor", "--help + duckdb", "import eosctl.cli and duckdb, open the sink read-only"),
                  ("floor-libs", "+ numpy pyarrow kafka", "and import numpy, pyarrow, kafka.net"))
        for name, label, what in floors:
            if suffix:  # the floors hold no eosctl audit module: timed once, beside this tree's --help
                break
            wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
            print(f"  {label:<21} {wall:5.2f}s wall  {cpu:5.2f}s CPU   ratio to --help: "
                  f"{wall / help_wall:.2f}x wall, {cpu / help_cpu:.2f}x CPU  ({what})")
        if "local" in engines:
            ratio = statistics.median(walls["local" + suffix]) / help_wall
            print(f"  target local <= 2x `eosctl audit --help`: {'met' if ratio <= 2 else 'missed'} "
                  f"({ratio:.2f}x)")
    names = [engine + suffix for suffix in trees for engine in engines]
    if len(names) > 1:
        first = reports[names[0]]
        same = all(reports[n][k] == first[k] for n in names[1:]
                   for k in ("findings", "partitions", "summary"))
        print(f"reports {'identical' if same else 'DIFFER'} across {', '.join(names)}")


if __name__ == "__main__":
    main()
