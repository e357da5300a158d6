"""`eosctl sandbox pipeline`: run the reference exactly-once pipeline, optionally with planted defects."""

from __future__ import annotations

import time
from pathlib import Path

import click

from eosctl.pipeline import FAULTS


@click.command("pipeline")
@click.option("--bootstrap", default=None, metavar="HOST:PORT",
              help="Kafka bootstrap servers (default: the running sandbox).")
@click.option("--prefix", default="demo", show_default=True,
              help="Names topics, groups and transactional ids; an earlier run's topics are recreated.")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the DuckDB sink, manifest.json and eosctl.toml go (default: $EOSCTL_HOME/PREFIX).")
@click.option("--fault", "faults", multiple=True, type=click.Choice(FAULTS),
              help="Plant a defect (repeatable): " + ", ".join(FAULTS) + ".")
@click.option("--records", default=300, show_default=True, type=click.IntRange(min=1),
              help="Orders the source writes.")
@click.option("--partitions", default=3, show_default=True, type=click.IntRange(min=1),
              help="Partitions of each topic.")
def pipeline(bootstrap: str | None, prefix: str, workdir: Path | None, faults: tuple[str, ...], records: int,
             partitions: int) -> None:
    """Run source -> read-process-write -> DuckDB sink once, with the given faults.

    \b
    Writes the sink (sink.duckdb), the ground truth of what was planted where (manifest.json) and a
    config for the other eosctl commands (eosctl.toml) into the work directory.
    """
    from rich.console import Console

    from eosctl import sandbox
    from eosctl.config import Cluster
    from eosctl.pipeline import run_pipeline

    # soft_wrap: long paths stay on one line (copy-pasteable) whatever the terminal width.
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    out = Console(highlight=False, soft_wrap=True)
    if bootstrap is None:
        bootstrap = sandbox.bootstrap_or_error(None)
        cluster = Cluster(name="sandbox", bootstrap_servers=bootstrap)
    else:
        cluster = Cluster(name="cluster", bootstrap_servers=bootstrap)
    workdir = workdir if workdir is not None else sandbox.state_dir() / prefix
    t0 = time.monotonic()

    def progress(msg: str) -> None:
        err.print(f"[dim]{time.monotonic() - t0:5.1f}s[/] {msg}")

    manifest = run_pipeline(cluster, prefix, workdir, faults=faults, records=records, partitions=partitions,
                            progress=progress)
    out.print(f"\nsink      {manifest['sink']['duckdb']}  (table {manifest['sink']['table']}, "
              f"{manifest['sink_rows']} rows)")
    out.print(f"manifest  {Path(workdir).resolve() / 'manifest.json'}")
    out.print(f"config    {Path(workdir).resolve() / 'eosctl.toml'}  "
              f"(eosctl ... --config it --pipeline {prefix})")
    if not faults:
        out.print("\nno faults planted: the sink must match the committed output exactly")
        return
    out.print(f"\nplanted defects ({', '.join(manifest['faults'])}):")
    for f in manifest["expected_findings"]:
        where = f"{f['topic']}[{f['partition']}] offsets {f['first_offset']}..{f['last_offset']}"
        key = f" key {f['key']}" if f.get("key") else ""
        out.print(f"  {f['kind']:<16} {where} (count {f['count']}){key}  <- {f['fault']}")
    for h in manifest["hanging"]:
        out.print(f"  {'hanging txn':<16} {h['topic']}[{h['partition']}] offsets {h['first_offset']}.."
                  f"{h['last_offset']}: LSO stuck at {h['first_offset']}  <- hanging")
    for z in manifest["fencing"]:
        out.print(f"  {'fenced producer':<16} {z['transactional_id']} epoch {z['old_epoch']} -> "
                  f"{z['new_epoch']} (zombie got {z['zombie_error'] or 'through!'})  <- zombie")
