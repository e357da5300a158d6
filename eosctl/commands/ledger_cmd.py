"""`eosctl ledger`: the sink next to Kafka, per source partition.

JSON shapes (`--format json`, stable): docs/json.md.

Exit codes: 0 no flags, 1 flags found, 2 usage/config/connection/sink error.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from eosctl.commands.options import check_one_sink, sink_of, sink_options, target_options


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
    from eosctl import ledger as ledger_mod
    from eosctl.render import console, scan_progress
    from eosctl.target import resolve

    check_one_sink(sink_duckdb, sink_parquet)
    target = resolve(config, pipeline, bootstrap, topics, group)
    sink, where = sink_of(target, sink_duckdb, sink_parquet, sink_table)
    with scan_progress() as progress:
        result = ledger_mod.collect(target.cluster, sink, target.topics, target.group,
                                    pipeline=target.pipeline.name if target.pipeline else None, where=where,
                                    scan=scan, progress=progress)
    if fmt == "json":
        from eosctl.render import emit_json

        emit_json(result.to_dict())
    else:
        render_ledger(console(), result)
    if result.flags:
        sys.exit(1)


def render_ledger(out: Any, result: Any) -> None:
    from eosctl.render import table

    out.print(f"sink {result.sink}   group {result.group or '-'}   "
              f"{'checked against the log' if result.scanned else 'not checked against the log (--no-scan)'}")
    out.print(table("Ledger", ["topic", "partition", "rows", "distinct", "min", "max", "dup rows", "stored",
                               "committed", "log start", "lso", "hw", "missing", "flags"],
                    [(p.topic, p.partition, p.rows, p.distinct_offsets, p.min_offset, p.max_offset,
                      p.duplicate_rows, p.stored_offset, p.committed_offset, p.log_start_offset,
                      p.last_stable_offset, p.high_watermark, p.missing_offsets, len(p.flags) or "")
                     for p in result.partitions]))
    flagged = result.flags
    if not flagged:
        out.print("[green]no flags[/]: the sink agrees with Kafka")
        return
    out.print(table(f"Flags ({len(flagged)})", ["topic", "partition", "kind", "offsets", "count", "what"],
                    [(p.topic, p.partition, f.kind, _span(f.first_offset, f.last_offset), f.count, f.message)
                     for p, f in flagged]))


def _span(first: int | None, last: int | None) -> str:
    return "-" if first is None else str(first) if first == last else f"{first}..{last}"


COMMANDS = [ledger]
