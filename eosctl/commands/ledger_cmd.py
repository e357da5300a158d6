"""`eosctl ledger`: the sink next to Kafka, per source partition.

JSON shapes (`--format json`, stable): docs/json.md.

Exit codes: 0 no flags, 1 flags found, 2 usage/config/connection/sink error.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from eosctl.base.errors import BrokerError
from eosctl.base.exits import Exit
from eosctl.commands.options import check_one_sink, sink_of, sink_options, target_options
from eosctl.output.emit import emit
from eosctl.output.terminal import console, scan_progress


def ledger_options(f: Any) -> Any:
    """The ledger's options (target, sink, --scan); `eosctl snapshot` takes the same."""
    f = click.option("--scan/--no-scan", default=True, show_default=True,
                     help="Check the sink's offsets against a scan of the log (markers and aborted "
                          "offsets are not holes).")(f)
    return target_options(sink_options(f))


@click.command("ledger")
@ledger_options
def ledger(config: str | None, pipeline: str | None, bootstrap: str | None, topics: tuple[str, ...],
           group: str | None, sink_duckdb: str | None, sink_parquet: str | None, sink_table: str | None,
           scan: bool, fmt: str) -> None:
    """Per source partition: what the sink holds next to what Kafka says; exit 1 on any flag.

    \b
    From the sink (a copy taken under a brief read lock; the writer waits only for the copy): rows,
    distinct offsets, min/max offset, duplicate rows, and the offsets it stored with its rows. From
    Kafka: the group's committed offset, log start, LSO and HW. Flags: stored != committed (only when
    committed data lies between them), duplicates, missing committed records, rows at aborted/marker/open
    offsets, rows no Kafka record can match (invalid_row).
    """
    # lazy: see docs/imports.md
    from eosctl.config.target import resolve
    from eosctl.inspection import ledger as ledger_mod
    from eosctl.output.ledger import render_ledger

    check_one_sink(sink_duckdb, sink_parquet)
    target = resolve(config, pipeline, bootstrap, topics, group)
    sink, where = sink_of(target, sink_duckdb, sink_parquet, sink_table)
    with scan_progress() as progress:
        result = ledger_mod.collect(target.cluster, sink, target.topics, target.group,
                                    pipeline=target.pipeline.name if target.pipeline else None, where=where,
                                    scan=scan, progress=progress)
    emit(fmt, result.to_dict, lambda: render_ledger(console(), result))
    if result.flags:
        sys.exit(Exit.FOUND)
    if result.offsets_disagreements:
        raise BrokerError(f"cannot vouch for the ledger: {result.offsets_disagreements[0]}")


COMMANDS = [ledger]
