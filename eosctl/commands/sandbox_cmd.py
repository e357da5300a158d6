"""`eosctl sandbox up|down|status|pipeline`: the embedded Kafka-protocol broker and the reference pipeline."""

from __future__ import annotations

import sys

import click

from eosctl.base.errors import EosctlError
from eosctl.base.exits import Exit
from eosctl.commands import pipeline_cmd
from eosctl.config import sandboxstate


@click.group("sandbox")
def sandbox() -> None:
    """The sandbox broker on a free loopback port: the embedded noida-db (Kafka protocol, the default) or
    Apache Kafka from Maven Central jars (`up --broker kafka`, needs Java 17+).

    Its state (pid, port, data) lives in $EOSCTL_HOME, default ./.eosctl. Configs whose cluster says
    bootstrap_servers = "sandbox" connect to it.
    """


@sandbox.command("up")
@click.option("--port", type=click.IntRange(1, 65535), default=None,
              help="Loopback port (default: a free one).")
@click.option("--broker", type=click.Choice(["noida", "kafka"]), default="noida", show_default=True,
              help="noida: the embedded broker; kafka: Apache Kafka (one KRaft node) from Maven Central "
              "jars.")
def sandbox_up(port: int | None, broker: str) -> None:
    """Start the sandbox broker (does nothing if it already runs)."""
    state, started = start_broker(broker, port)
    verb = "started" if started else "already running"
    click.echo(f"sandbox {verb}: {_kind(state)}bootstrap {state.bootstrap} (pid {state.pid}, "
               f"data {state.data_dir})")


def _kind(state: sandboxstate.SandboxState) -> str:
    """Apache Kafka says so; the embedded default's lines stay as they were."""
    return f"{state.describe}, " if state.broker == "kafka" else ""


def start_broker(broker: str, port: int | None = None,
                 progress=None) -> tuple[sandboxstate.SandboxState, bool]:
    """The sandbox of the kind asked for, started unless one of that kind already runs."""
    from eosctl.sandbox import noida as sb  # lazy: see docs/imports.md

    if broker == "kafka":
        from eosctl.sandbox import kafka_sandbox  # lazy: see docs/imports.md

        return kafka_sandbox.up(sb.state_dir(), port=port, progress=progress)
    running = sandboxstate.status(sb.state_dir())
    if running is not None and running.broker != "noida":
        raise EosctlError(f"the {running.describe} sandbox already runs at {running.bootstrap}; "
                          "run `eosctl sandbox down` first to start noida-db instead")
    return sb.up(sb.state_dir(), port=port)


@sandbox.command("down")
def sandbox_down() -> None:
    """Stop the sandbox broker by its recorded pid (data is kept), and its PostgreSQL if one runs."""
    # lazy: see docs/imports.md
    from eosctl.sandbox import noida as sb
    from eosctl.sandbox import pgserver

    home = sb.state_dir()
    state = sb.down(home)
    click.echo(f"sandbox stopped (pid {state.pid})" if state else "sandbox was not running")
    pg = pgserver.running(home)
    if pg is not None:
        pgserver.stop(pg, home)
        click.echo(f"sandbox PostgreSQL stopped (pid {pg.pid})")


@sandbox.command("status")
def sandbox_status() -> None:
    """Say whether the sandbox runs and where; exit 1 if it doesn't."""
    from eosctl.sandbox import noida as sb  # lazy: see docs/imports.md

    state = sandboxstate.status(sb.state_dir())
    if state is None:
        click.echo("sandbox not running (start it with `eosctl sandbox up`)")
        sys.exit(Exit.FOUND)
    click.echo(f"sandbox running: {_kind(state)}bootstrap {state.bootstrap} (pid {state.pid}, "
               f"data {state.data_dir})")


sandbox.add_command(pipeline_cmd.pipeline)
