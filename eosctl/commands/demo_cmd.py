"""`eosctl demo`: the whole tool on the embedded default, from nothing, in about a minute."""

from __future__ import annotations

import shlex
import time
from pathlib import Path

import click

from eosctl.base.exits import Exit
from eosctl.commands.sandbox_cmd import start_broker
from eosctl.output.terminal import console
from eosctl.sandbox.pipeline import FAULTS
from eosctl.sandbox.pipeline.manifest import planted as planted_findings
from eosctl.sandbox.pipeline.manifest import planted_lines

# A mix that shows every kind of defect the tool finds; `hanging` last so the sink has already run.
DEMO_FAULTS = ("duplicate-replay", "skip", "aborted-leak", "upstream-retry", "zombie", "hanging")


@click.command("demo")
# Validated while parsing (ranges, fault names), before the sandbox broker is started.
@click.option("--records", default=300, show_default=True, type=click.IntRange(min=1),
              help="Source records the demo pipeline writes.")
@click.option("--fault", "faults", multiple=True, type=click.Choice(FAULTS),
              help="Faults to plant (default: a mix of all of them).")
@click.option("--no-audit", is_flag=True, help="Stop after the pipeline; don't run the Spark audit.")
@click.option("--broker", type=click.Choice(["noida", "kafka"]), default="noida", show_default=True,
              help="The sandbox broker: the embedded noida-db, or Apache Kafka from Maven Central jars.")
@click.pass_context
def demo(ctx: click.Context, records: int, faults: tuple[str, ...], no_audit: bool, broker: str) -> None:
    """Start the sandbox broker, run the demo pipeline with planted defects, and audit it.

    \b
    1. `eosctl sandbox up`: a Kafka-protocol broker (noida-db; --broker kafka: Apache Kafka) on a free
       loopback port
    2. the reference exactly-once pipeline (source -> read-process-write -> DuckDB sink),
       with duplicate-replay, skip, aborted-leak, upstream-retry, zombie and hanging faults
    3. `eosctl audit` of the sink against Kafka, which must find exactly the planted defects
    """
    # lazy: see docs/imports.md
    from eosctl.config.model import Cluster
    from eosctl.sandbox import noida
    from eosctl.sandbox.pipeline import run_pipeline
    from eosctl.sandbox.pipeline.configfile import point_at_sandbox

    err = console(stderr=True)
    out = console()
    t0 = time.monotonic()
    home = noida.state_dir()
    with err.status("starting the sandbox broker...") as status:
        state, started = start_broker(broker, progress=status.update)
    err.print(f"[green]✓[/] sandbox ({state.describe}) {'started' if started else 'already running'} at "
              f"{state.bootstrap}")

    workdir = home / "demo"
    cluster = Cluster(name="sandbox", bootstrap_servers=state.bootstrap)
    with err.status("running the demo pipeline...") as status:
        manifest = run_pipeline(cluster, "demo", workdir, faults=faults or DEMO_FAULTS, records=records,
                                progress=lambda msg: status.update(f"pipeline: {msg}"))
    err.print(f"[green]✓[/] pipeline done: {manifest['sink_rows']} sink rows from "
              f"{manifest['committed_output_records']} committed records "
              f"({time.monotonic() - t0:.0f}s)")
    config = point_at_sandbox(workdir / "eosctl.toml", state.bootstrap, home)
    out.print(f"\nsink      {manifest['sink']['duckdb']}", soft_wrap=True)
    out.print(f"manifest  {workdir / 'manifest.json'}  (the planted defects: ground truth)", soft_wrap=True)
    out.print(f"config    {config}", soft_wrap=True)
    out.print("\nplanted defects:")
    for line in planted_lines(manifest):
        out.print(line, highlight=False)

    audit_ran = agrees = False
    if not no_audit:
        report = _run_audit(config, err, out)
        audit_ran = report is not None
        agrees = not audit_ran or _agrees(report, manifest, err)
    out.print("\nnext, try:")
    for cmd in next_steps(config, workdir, audit_ran):
        out.print(f"  {cmd}", soft_wrap=True, highlight=False, markup=False)  # to copy: never wrapped
    err.print(f"\ndemo finished in {time.monotonic() - t0:.0f}s")
    if audit_ran and not agrees:
        ctx.exit(Exit.FOUND)


def next_steps(config: Path, workdir: Path, audit_ran: bool) -> list[str]:
    """The commands the demo suggests, each to be copied and run as printed (a note after it is a shell
    comment): the paths quoted for a shell; the TUI opens the config's default, the whole pipeline, whose
    Audit tab audits both hops as the demo did; the sign-off page replaces the demo's own earlier one."""
    c, page = shlex.quote(str(config)), shlex.quote(str(workdir / "report.html"))
    return [
        f"eosctl txns hanging -c {c} --max-age 10s",
        f"eosctl lag -c {c}",
        f"eosctl log -c {c} --topic demo.enriched --partition 0",
        f"eosctl ledger -c {c} -p demo",
        f"eosctl audit -c {c}" + ("" if audit_ran else "   # the audit the demo skipped"),
        f"eosctl audit -c {c} --format html --out {page} --force   # the sign-off page",
        f"eosctl tui -c {c}   # then 7 (Audit) and a",
        "eosctl sandbox down",
    ]


def _key(f: dict) -> tuple:
    return (f["kind"], f["topic"], f["partition"], f["first_offset"], f["last_offset"], f["count"],
            f.get("key"))


def _agrees(report, manifest: dict, err) -> bool:
    """The audit against the manifest's ground truth: the demo is only convincing if they match."""
    if report is None:
        return True
    found = {_key(f.to_dict()) for f in report.findings}
    # Both hops: the process stage (orders -> enriched) and the sink (enriched -> DuckDB).
    planted = {_key(f) for f in planted_findings(manifest)}
    if found == planted:
        err.print(f"[green]✓[/] the audit found exactly the {len(planted)} planted defects, and nothing else")
        return True
    for what, keys in (("planted but not found", planted - found),
                       ("found but not planted", found - planted)):
        for k in sorted(keys):
            err.print(f"[red]✗[/] {what}: {k[0]} {k[1]}[{k[2]}] offsets {k[3]}..{k[4]} ({k[5]})")
    err.print("[red]the audit and the manifest disagree: please report this as an eosctl bug[/]")
    return False


def _run_audit(config, err, out):
    """The audit `eosctl audit -c CONFIG` runs (its default pipeline, both hops; the same engine, the same
    passes), its table printed: None if not in this build."""
    try:
        from auditors import EngineOptions, audit_pipeline  # lazy: see docs/imports.md
    except ModuleNotFoundError:
        err.print("[yellow]the audit is not part of this build yet; skipping it[/]")
        return None
    # lazy: see docs/imports.md
    from eosctl.config.target import resolve
    from eosctl.output.audit import table

    target = resolve(str(config), None, None)
    options = EngineOptions.resolve(target.config)
    err.print(f"\nauditing both hops, the process stage and the sink, against Kafka ({options.where()})...")
    report = audit_pipeline(target, options=options, started=time.monotonic())
    out.print(table(report))
    return report
