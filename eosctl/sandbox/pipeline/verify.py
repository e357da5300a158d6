"""Self-checks: the manifest is ground truth only if the pipeline did exactly what the truth says.

These compare the writers' own records (and the sink's table) with what each stage intended, so a broker
quirk that silently drops or adds records fails the run loudly instead of producing a wrong manifest.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from eosctl.base.errors import EosctlError
from eosctl.sandbox.pipeline.faults import SinkTarget
from eosctl.sandbox.pipeline.sink_writer import Place, rows_in
from eosctl.sandbox.pipeline.truth import ABORTED, COMMITTED, GroundTruth


def check_processed(truth: GroundTruth, source_topic: str, output_topic: str, planted: Sequence[dict] = (),
                    read_uncommitted: bool = False) -> None:
    """Every committed source record became exactly one committed output record, but for what the stage
    faults planted on purpose: skipped records none, replayed ones two, aborted ones (read uncommitted) one.
    Compared by input offset, through the outputs' lineage."""
    source = Counter((r.partition, r.offset) for r in truth.of(source_topic, COMMITTED))
    for p in planted:
        for o in p["offsets"]:
            source[(p["partition"], o)] += 1 if p["fault"] == "stage-replay" else -1
    if read_uncommitted:
        source.update((r.partition, r.offset) for r in truth.of(source_topic, ABORTED))
    source = +source
    output = Counter(r.source[1:] for r in truth.of(output_topic, COMMITTED) if r.source is not None)
    if source != output:
        missing = sorted((source - output).elements())[:5]
        extra = sorted((output - source).elements())[:5]
        raise EosctlError(f"pipeline self-check failed: the process stage lost {missing} / duplicated "
                          f"{extra}; the broker delivered records differently than committed")


def check_sink(where: Place, truth: GroundTruth, topic: str,
               targets: Sequence[SinkTarget], aborted_leak: bool) -> None:
    """The sink holds exactly: committed records, minus skipped runs, plus replayed runs once more, plus
    (aborted-leak) every aborted record."""
    expected = Counter((r.partition, r.offset) for r in truth.of(topic, COMMITTED))
    for t in targets:
        run = [(r.partition, r.offset) for r in truth.of(topic, COMMITTED)
               if r.partition == t.partition and t.first_offset <= r.offset <= t.last_offset]
        if t.fault == "skip":
            expected.subtract(run)
        else:
            expected.update(run)
    if aborted_leak:
        expected.update((r.partition, r.offset) for r in truth.of(topic, ABORTED))
    expected = +expected  # drop zero counts
    actual = rows_in(where, topic)
    if actual != expected:
        raise EosctlError(f"pipeline self-check failed: the sink has {sum(actual.values())} rows, expected "
                          f"{sum(expected.values())}; differing (partition, offset): "
                          f"{sorted((actual - expected) + (expected - actual))[:5]}")
