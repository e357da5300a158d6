"""Benchmark: `eosctl audit` of a demo-sized pipeline, process start to exit, against `eosctl audit --help`.

    python benchmarks/small_audit_bench.py [--records 600] [--partitions 6] [--runs 5] [--broker noida|kafka]
                                           [--engines local[,spark]]

Starts its own broker (in a temporary EOSCTL_HOME), runs the reference pipeline once (6 partitions, 600
source orders, two faults: skip and duplicate-replay, a DuckDB sink with its key column), then times, as a
user runs them, a new process each time from its start to its exit, alternating: `eosctl audit --help` (the
CLI's own start-up: the baseline) and `eosctl audit -c CONFIG -p bench --engine E --format json` (the sink
hop). Prints the medians, the ratio audit / help and the CPU time of each (the children's user + system
time: what a loaded machine does not inflate). Issue 49's bar: the local audit <= 2x `audit --help`.
With several engines, their reports must agree.

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


def timed(args: list[str], env: dict[str, str], ok: tuple[int, ...] = (0,)) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the child, its stdout) of `python -m eosctl ARGS`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    # In ROOT: `-m` puts the working directory first on sys.path, so the tree this script is in is timed.
    proc = subprocess.run([sys.executable, "-m", "eosctl", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=600)
    wall = time.monotonic() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in ok:
        raise SystemExit(f"eosctl {' '.join(args)} failed (exit {proc.returncode}): {proc.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=600)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--broker", choices=("noida", "kafka"), default="noida")
    ap.add_argument("--engines", default="local", help="comma-separated: local, spark")
    args = ap.parse_args()
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]

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
        env.update(EOSCTL_HOME=home,
                   PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        commands = {"help": (["audit", "--help"], (0,))}
        for engine in engines:
            commands[engine] = (["audit", "-c", str(config), "-p", PREFIX, "--engine", engine, "--format",
                                 "json"], (0, 1))
        for argv, ok in commands.values():  # bytecode written, files in the page cache
            timed(argv, env, ok)
        walls: dict[str, list[float]] = {name: [] for name in commands}
        cpus: dict[str, list[float]] = {name: [] for name in commands}
        reports: dict[str, dict] = {}
        for run in range(args.runs):
            for name, (argv, ok) in commands.items():
                wall, cpu, out = timed(argv, env, ok)
                walls[name].append(wall)
                cpus[name].append(cpu)
                line = f"  run {run + 1} {name:<5} {wall:5.2f}s wall, {cpu:5.2f}s CPU"
                if name != "help":
                    reports[name] = report = json.loads(out)
                    e = report["engine"]
                    line += (f"  (report: elapsed {report['elapsed_seconds']:.2f}s, workers "
                             f"{e.get('workers', '-')}, start-up {e['startup_seconds']:.2f}s, tasks "
                             f"{e['partitions_seconds']:.2f}s, keys {e['keys_seconds']:.2f}s)")
                print(line, flush=True)
        load = os.getloadavg()[0]
    help_wall, help_cpu = statistics.median(walls["help"]), statistics.median(cpus["help"])
    print(f"\nmedian of {args.runs}, process start to exit ({b.name}; load average {load:.1f}):")
    print(f"  eosctl audit --help   {help_wall:5.2f}s wall  {help_cpu:5.2f}s CPU")
    for engine in engines:
        wall, cpu = statistics.median(walls[engine]), statistics.median(cpus[engine])
        print(f"  audit --engine {engine:<6} {wall:5.2f}s wall  {cpu:5.2f}s CPU   "
              f"ratio to --help: {wall / help_wall:.2f}x wall, {cpu / help_cpu:.2f}x CPU")
    if "local" in engines:
        ratio = statistics.median(walls["local"]) / help_wall
        print(f"target local <= 2x `eosctl audit --help`: {'met' if ratio <= 2 else 'missed'} ({ratio:.2f}x)")
    if len(engines) > 1:
        first = reports[engines[0]]
        same = all(reports[e][k] == first[k] for e in engines[1:]
                   for k in ("findings", "partitions", "summary"))
        print(f"reports {'identical' if same else 'DIFFER'} across {', '.join(engines)}")


if __name__ == "__main__":
    main()
