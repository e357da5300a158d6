"""`eosctl log`: the remote dump-log of one partition, read over the Kafka protocol.

JSON shape (`--format json`, stable; CI parses it): docs/json.md. `batches` is null with --no-batches;
otherwise it covers `batches_window`, at most --limit offsets from the scan start (so memory stays bounded
whatever the range): page on with --from.
"""

from __future__ import annotations

from typing import Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from eosctl.base.progress import Step
from eosctl.base.safetext import term
from eosctl.commands.options import target_options
from eosctl.output.emit import emit
from eosctl.output.terminal import console


@click.command("log")
@target_options
@click.option("--topic", "-t", help="Topic to read (default: the pipeline's only source topic).")
@click.option("--partition", "-P", type=int, required=True, help="Partition to read.")
@click.option("--from", "start", type=int, default=None, help="First offset (default: log start).")
@click.option("--to", "end", type=int, default=None, help="Last offset, inclusive (default: HW - 1).")
@click.option("--batches/--no-batches", default=True, show_default=True, help="Show the batch table.")
@click.option("--limit", type=click.IntRange(min=1), default=5000, show_default=True,
              help="Offsets the batch table covers, from the scan start (page with --from).")
@click.option("--records", "records", is_flag=True,
              help="Also show each data record of the batch table's offsets: key, value, timestamp, codec; "
                   "keys and values decoded through the cluster's schema_registry_url where framed.")
@click.option("--raw", is_flag=True, help="With --records: keys and values as bytes, never decoded.")
def log(config: str | None, pipeline: str | None, bootstrap: str | None, topic: str | None, partition: int,
        start: int | None, end: int | None, batches: bool, limit: int, records: bool, raw: bool,
        fmt: str) -> None:
    """Dump one partition's log remotely: batches, transactions, aborted ranges, producer epochs.

    \b
    What kafka-dump-log.sh shows from the broker's disk, over the Kafka protocol: batches (offsets,
    producer id/epoch, sequences, transactional/control flags, marker type, timestamps), transactions
    with their outcome (COMMIT / ABORT / OPEN) and marker offset, aborted ranges, each producer's epoch
    timeline and zombie writes (an older epoch after a newer one), and sequence gaps or duplicates
    (gaps over offsets the cleaner removed excepted). An epoch bump is FENCED only where the producer's
    markers show transactions v1; under transactions v2 (Kafka 4) every commit and abort bumps the epoch.

    \b
    --records reads the batch table's records whole. Keys and values in the Schema Registry wire format
    (Avro, Protobuf, JSON Schema; the id in the prefix or a __key_schema_id / __value_schema_id header)
    are decoded through [clusters.NAME] schema_registry_url, with subject, version and schema id; a record
    not framed where the registry is set says so. --raw shows bytes only.
    """
    if records and not batches:
        raise click.BadParameter("--records shows the records of the batch table's offsets: "
                                 "drop --no-batches", param_hint="--records")
    if raw and not records:
        raise click.UsageError("--raw goes with --records (it says how the records are shown)")
    # lazy: see docs/imports.md
    from eosctl.cluster.logscan import scan_partition
    from eosctl.cluster.wire import WireClient
    from eosctl.config.target import one_topic, resolve
    from eosctl.output.log import log_document, render_log

    target = resolve(config, pipeline, bootstrap, (topic,) if topic else (), need_topics=True)
    topic = one_topic(target)
    if start is not None and end is not None and end < start:
        raise click.BadParameter(f"--to {end} is before --from {start}", param_hint="--to")
    stop = None if end is None else end + 1
    with WireClient(target.cluster) as client, _progress(f"{topic}-{partition}") as progress:
        client.leader(topic, partition)  # a missing topic or partition is one clear line, before scanning
        window = None
        if batches:
            offsets = client.offsets([(topic, partition)])[(topic, partition)]
            lo = offsets.log_start if start is None else max(start, offsets.log_start)
            hi = offsets.high_watermark if stop is None else min(stop, offsets.high_watermark)
            window = (lo, min(hi, lo + limit), hi <= lo + limit)
        if window is not None and window[2]:
            plog = scan_partition(client, topic, partition, start, stop, keep_batches=True, progress=progress)
        else:
            plog = scan_partition(client, topic, partition, start, stop, progress=progress)
            if window is not None:
                # The batch table only for its window: a second, bounded scan keeps memory flat.
                plog.batches = scan_partition(client, topic, partition, window[0], window[1],
                                              keep_batches=True).batches
        from eosctl.txn.producerids import read_one  # lazy: see docs/imports.md

        read_one(client, plog)
        shown = None
        if records and window is not None:
            shown = _records(client, target.cluster, plog, topic, partition, window[0], window[1], raw)
    doc = log_document(plog, window, shown)

    emit(fmt, lambda: doc, lambda: render_log(console(), doc))


def _records(client: Any, cluster: Any, plog: Any, topic: str, partition: int, first: int, end: int,
             raw: bool) -> list[dict[str, Any]]:
    """The data records at offsets [first, end), as eosctl.inspection.records documents them: keys and
    values decoded where the cluster names a registry (not with --raw)."""
    # lazy: only with --records; see docs/imports.md
    from eosctl.inspection.records import decoder_for, read_documents

    return read_documents(client, topic, partition, first, end, decoder_for(cluster, raw), plog.kind_at)


class _progress:
    """A rich progress bar on stderr for long scans; silent when stderr is not a terminal."""

    def __init__(self, what: str):
        self.what = what
        self.bar: Any = None

    def __enter__(self) -> Any:
        err = console(stderr=True)

        # The topic is text, not markup, and its control characters are shown, not sent.
        self.bar = Progress(TextColumn(f"scanning {term(self.what)}", markup=False), BarColumn(),
                            MofNCompleteColumn(), TextColumn("offsets"), TimeRemainingColumn(), console=err,
                            transient=True, disable=not err.is_terminal)
        self.bar.__enter__()
        self.task = self.bar.add_task("scan", total=None)
        return self.update

    def update(self, step: Step) -> None:
        self.bar.update(self.task, completed=step.done, total=step.total)

    def __exit__(self, *exc: object) -> None:
        self.bar.__exit__(*exc)


COMMANDS = [log]
