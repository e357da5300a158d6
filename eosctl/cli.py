"""The eosctl command line: the one place that wires core, auditors and TUI together.

Spark, Textual and the Kafka clients are imported inside the commands that need them, so that
`eosctl --help` answers instantly.
"""

from __future__ import annotations

import sys

import click

from eosctl import __version__
from eosctl.errors import EosctlError

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class EosctlGroup(click.Group):
    """Turns every EosctlError into one line on stderr and exit 2: no tracebacks for user mistakes."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except EosctlError as e:
            click.echo(f"eosctl: error: {e}", err=True)
            sys.exit(e.exit_code)
        except KeyboardInterrupt:
            click.echo("eosctl: interrupted", err=True)
            sys.exit(130)


@click.group(cls=EosctlGroup, context_settings=CONTEXT)
@click.version_option(__version__, prog_name="eosctl")
def main() -> None:
    """See, inspect and audit Kafka exactly-once pipelines.

    \b
    Start here:
      eosctl demo                      local broker + demo pipeline with planted defects + audit
      eosctl sandbox up|down|status    the embedded Kafka-protocol broker
    \b
    Point it at your own cluster with --config FILE --pipeline NAME (see sample_configs/),
    or with --bootstrap HOST:PORT --topic T --group G.
    """


# Command modules import their heavy libraries (Kafka clients, DuckDB, Spark, Textual) inside the
# commands, so mounting them here costs nothing at start-up.
from eosctl.commands import (  # noqa: E402
    audit_cmd,
    completion_cmd,
    demo_cmd,
    lag_cmd,
    ledger_cmd,
    log_cmd,
    producers_cmd,
    report_cmd,
    sandbox_cmd,
    snapshot_cmd,
    tui_cmd,
    txns_cmd,
)

for _command in (demo_cmd.demo, sandbox_cmd.sandbox, *txns_cmd.COMMANDS, producers_cmd.producers,
                 *lag_cmd.COMMANDS, *log_cmd.COMMANDS, *ledger_cmd.COMMANDS, snapshot_cmd.snapshot,
                 audit_cmd.audit, report_cmd.report, tui_cmd.tui, completion_cmd.completion):
    main.add_command(_command)
