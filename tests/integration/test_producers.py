from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from eosctl.cli import main

pytestmark = pytest.mark.integration


def test_fenced_producer_counts_one_fencing_event(cluster, unique, tmp_path):
    from eosctl.sandbox.pipeline import run_pipeline

    manifest = run_pipeline(cluster, unique, tmp_path, faults=["zombie"], records=40)
    (fence,) = manifest["fencing"]
    result = CliRunner().invoke(main, ["producers", "--bootstrap", cluster.bootstrap_servers,
                                       "--topic", manifest["output_topic"], "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    # Apache Kafka reports its producer state (the log adds epochs and fencing); the sandbox's
    # DescribeProducers returns nobody, so it is read from the log.
    assert doc["source"] in ("describe-producers", "log-scan")
    fenced = [p for p in doc["producers"] if p["producer_id"] == fence["producer_id"]]
    # A partition the id wrote at both epochs shows the take-over once: on Kafka the coordinator's ABORT
    # at old+1 and the new instance at old+2 (one event), on noida-db one bump to the new epoch. A
    # partition written at only one epoch shows no event: which partitions each instance reached depends on
    # how the polls fell (fewer under load).
    old, new = fence["old_epoch"], fence["new_epoch"]
    both = [p for p in fenced if p["epochs"][0] == old and p["epochs"][-1] == new]
    assert both, fenced  # the zombie flushed its batch before the fence: at least one partition has both
    for p in fenced:
        expected = 1 if p in both else 0
        assert p["epochs"] in ([old, new], [old, old + 1, new], [old], [new]), p
        assert p["fencing_events"] == expected, p
        assert p["transactional_id"] == fence["transactional_id"]
