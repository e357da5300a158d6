"""`eosctl producers`: producer ids, epochs and sequences per partition of a topic.

JSON shape (`--format json`, stable): see docs/json.md.

Exit status: 0 ok; 2 usage, config or connection error.
"""

from __future__ import annotations

import click

from eosctl.commands.options import TIMEOUT_MS, target_options
from eosctl.output.emit import emit
from eosctl.output.producers import render_producers
from eosctl.output.terminal import console as out_console


@click.command("producers")
@target_options
@click.option("--topic", "-t", help="Topic (default: the pipeline's topics; a pipeline with hops: every "
                                    "topic its hops read, one table each).")
@click.option("--partition", "-P", "partitions", type=int, multiple=True,
              help="Only these partitions (repeatable; default: all).")
@click.option("--scan-last", type=click.IntRange(min=1), default=100_000, show_default=True,
              help="Offsets per partition to read from the log's end: epochs, fencing, and the producers "
                   "the broker no longer reports (all of them where it reports none).")
def producers(config: str | None, pipeline: str | None, bootstrap: str | None, fmt: str, topic: str | None,
              partitions: tuple[int, ...], scan_last: int) -> None:
    """Producers writing to a topic (or each of a pipeline's): id, epoch, last sequence, last timestamp,
    open transaction start.

    All partitions in one DescribeProducers call per leader, with what the log's last --scan-last
    offsets add (epochs, fencing, producers whose broker state expired) and each id's transactional id;
    when the broker returns no producers (or lacks the API) they are read from the log alone, and the
    output says which source it used.
    """
    # lazy: see docs/imports.md
    from eosctl.config.target import resolve
    from eosctl.txn.producers import describe

    target = resolve(config, pipeline, bootstrap, (topic,) if topic else (), need_topics=True)
    if partitions and len(target.topics) > 1:
        raise click.UsageError(f"--partition names partitions of one topic; the pipeline has several "
                               f"({', '.join(target.topics)}): add --topic")
    # lazy: see docs/imports.md
    from eosctl.cluster.clients import kafka_admin
    from eosctl.cluster.wire import WireClient

    with WireClient(target.cluster, timeout_ms=TIMEOUT_MS) as client:
        admin = kafka_admin(target.cluster, timeout=TIMEOUT_MS / 1000)
        try:
            reports = [describe(client, admin, t, partitions, scan_last) for t in target.topics]
        finally:
            admin.close()

    def render() -> None:
        for report in reports:
            render_producers(out_console(), report)

    # One topic: its object (the shape scripts have always read); several (a pipeline's): a list of them.
    emit(fmt, lambda: reports[0].to_dict() if len(reports) == 1 else [r.to_dict() for r in reports], render)
