"""A Kafka stage's outputs of input past its group's committed offsets (eosctl.rules.hop): which are
`ahead_of_commit`, from a frozen hop built by hand (no broker), its rows read by the driver's pass
(auditors.passes) and handed to the rule."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from auditors import passes
from eosctl.config.model import Cluster, Sink
from eosctl.output.finding import short_cause
from eosctl.report.findings import Finding
from eosctl.report.rootcauses import root_causes
from eosctl.sink import kafka_topic

STAGE = Sink(kafka_topic="out", lineage="key", stage_group="g", stage_topics=("in",))
# (src partition, src offset, out partition, out offset): input 0..4 of in[0], input 3 written twice.
ROWS = [(0, 0, 0, 0), (0, 1, 0, 1), (0, 2, 1, 0), (0, 3, 1, 1), (0, 3, 1, 2), (0, 4, 0, 2), (1, 0, 2, 0)]


@pytest.fixture
def freeze(tmp_path: Path, monkeypatch):
    """freeze(committed read before the output, committed read after it) -> the frozen hop."""

    def run(before: dict, after: dict, stage: Sink = STAGE) -> Sink:
        reads = iter([before, after])
        monkeypatch.setattr(kafka_topic, "_committed", lambda sink: next(reads))
        monkeypatch.setattr(kafka_topic, "end_offsets", lambda cluster, topic: {("out", 0): 3})
        cols = {n: [] for n in kafka_topic.COLUMNS}
        for p, o, op, oo in ROWS:
            for name, value in zip(kafka_topic.COLUMNS, ("in", p, o, f"k{p}-{o}", op, oo), strict=True):
                cols[name].append(value)
        monkeypatch.setattr(kafka_topic, "_key_lineage", lambda *a, **kw: cols)
        directory = tmp_path / f"hop{len(list(tmp_path.iterdir()))}"
        directory.mkdir()
        return kafka_topic.freeze(stage, Cluster(name="c", bootstrap_servers="127.0.0.1:1"), str(directory))

    return run


def test_outputs_past_the_offsets_committed_after_the_read_are_ahead_of_commit_counting_inputs(freeze):
    frozen = freeze({("in", 0): 3, ("in", 1): 1}, {("in", 0): 3, ("in", 1): 1})
    found = passes.ahead_of_commit(frozen, [])
    assert [(f.kind, f.topic, f.partition, f.first_offset, f.last_offset, f.count) for f in found] == [
        ("ahead_of_commit", "in", 0, 3, 4, 2)]  # two input records, three outputs
    assert found[0].detail == "outputs out[1]@1, [1]@2, [0]@2; group g committed offset 3"
    assert found[0].cause is not None and "writes before it commits" in found[0].cause.summary
    assert [r.rule for r in root_causes(found)] == ["written_before_commit"]
    assert short_cause(found[0]) == "written before the stage's commit: a restart writes them again"


def test_a_commit_between_the_two_reads_is_lag_not_ahead_of_commit(freeze):
    """An exactly-once stage committing while the hop is read: its outputs are past the offsets read first,
    but not past those read after the output."""
    frozen = freeze({("in", 0): 3, ("in", 1): 1}, {("in", 0): 5, ("in", 1): 1})
    assert passes.ahead_of_commit(frozen, []) == []
    assert kafka_topic.committed_before(frozen) == {("in", 0): 3, ("in", 1): 1}  # expected ends there


def test_no_committed_offset_at_all_makes_every_output_ahead(freeze):
    frozen = freeze({}, {})
    found = passes.ahead_of_commit(frozen, [])
    shown = [(f.partition, f.first_offset, f.last_offset, f.count) for f in found]
    assert shown == [(0, 0, 4, 5), (1, 0, 0, 1)]
    assert found[0].detail is not None and found[0].detail.endswith("group g no committed offset")


def test_outputs_inside_another_finding_are_that_findings_and_a_hop_without_group_has_none(freeze):
    frozen = freeze({("in", 0): 3}, {("in", 0): 3})
    phantom = Finding("phantom_aborted", "in", 0, 4, 4, 1)
    found = passes.ahead_of_commit(frozen, [phantom])
    assert [(f.first_offset, f.last_offset, f.count) for f in found if f.partition == 0] == [(3, 3, 1)]
    ungrouped = freeze({}, {}, replace(STAGE, stage_group=None))
    assert passes.ahead_of_commit(ungrouped, []) == []
