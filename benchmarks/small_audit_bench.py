"""Benchmark: `eosctl audit` of a demo-sized pipeline, process start to exit, --engine local vs spark.

    python benchmarks/small_audit_bench.py [--records 2000] [--runs 3]

Starts its own sandbox broker (in a temporary EOSCTL_HOME), runs the reference pipeline once (3
partitions, --records source orders, the demo's faults except hanging, with the sink's key column), then
times `python -m eosctl audit -c CONFIG --format json --engine E` as a user runs it: a new process each
time, from its start to its exit. Both engines must report the same findings. Target: local under 2 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchbroker import broker  # noqa: E402  benchmarks/ is on the path: run as python benchmarks/NAME.py

FAULTS = ("duplicate-replay", "skip", "aborted-leak", "upstream-retry", "zombie")


def audit(config: Path, engine: str, env: dict[str, str]) -> tuple[float, dict]:
    t = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "eosctl", "audit", "-c", str(config), "--format", "json",
                           "--engine", engine], capture_output=True, text=True, env=env, timeout=600)
    seconds = time.monotonic() - t
    if proc.returncode not in (0, 1):
        raise SystemExit(f"audit --engine {engine} failed (exit {proc.returncode}): {proc.stderr.strip()}")
    return seconds, json.loads(proc.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()

    from eosctl.config.model import Cluster
    from eosctl.sandbox.pipeline import run_pipeline

    with tempfile.TemporaryDirectory(prefix="eosctl-small-bench-") as home, broker("noida") as b:
        print(f"broker: {b.name}", flush=True)
        t = time.monotonic()
        manifest = run_pipeline(Cluster(name="sandbox", bootstrap_servers=b.bootstrap), "bench",
                                Path(home) / "bench", faults=FAULTS, records=args.records)
        config = Path(home) / "bench" / "eosctl.toml"
        print(f"pipeline: {manifest['sink_rows']} sink rows, {manifest['partitions']} partitions, "
              f"{len(manifest['expected_findings'])} planted findings ({time.monotonic() - t:.1f}s)",
              flush=True)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        results: dict[str, list[float]] = {}
        reports: dict[str, dict] = {}
        for engine in ("local", "spark"):
            for _ in range(args.runs):
                seconds, reports[engine] = audit(config, engine, env)
                results.setdefault(engine, []).append(seconds)
                e, elapsed = reports[engine]["engine"], reports[engine]["elapsed_seconds"]
                print(f"  {engine:<5} {seconds:5.1f}s  (report: elapsed {elapsed:.1f}s,"
                      f" start-up {e['startup_seconds']:.1f}s, tasks {e['partitions_seconds']:.1f}s, "
                      f"keys {e['keys_seconds']:.1f}s)", flush=True)
    same = all(reports["local"][k] == reports["spark"][k] for k in ("findings", "partitions", "summary"))
    local, spark = statistics.median(results["local"]), statistics.median(results["spark"])
    print(f"\nmedian of {args.runs}, process start to exit: local {local:.2f}s, spark {spark:.2f}s "
          f"(spark/local {spark / local:.1f}x); reports {'identical' if same else 'DIFFER'}; "
          f"target local < 2 s: {'met' if local < 2 else 'missed'}")


if __name__ == "__main__":
    main()
