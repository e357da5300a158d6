from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from eosctl.cli import main

pytestmark = pytest.mark.integration


def test_fenced_producer_counts_one_fencing_event(cluster, unique, tmp_path):
    from eosctl.pipeline import run_pipeline

    manifest = run_pipeline(cluster, unique, tmp_path, faults=["zombie"], records=40)
    (fence,) = manifest["fencing"]
    result = CliRunner().invoke(main, ["producers", "--bootstrap", cluster.bootstrap_servers,
                                       "--topic", manifest["output_topic"], "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["source"] == "log-scan"  # the sandbox's DescribeProducers returns nobody
    fenced = [p for p in doc["producers"] if p["producer_id"] == fence["producer_id"]]
    # Every partition the fenced transaction touched got the coordinator's ABORT at the new epoch:
    # one fencing event there; partitions it had left alone show the old epoch and no event.
    touched = [p for p in fenced if fence["new_epoch"] in p["epochs"]]
    assert touched
    for p in fenced:
        if p in touched:
            assert (p["fencing_events"], p["epochs"]) == (1, [fence["old_epoch"], fence["new_epoch"]]), p
        else:
            assert (p["fencing_events"], p["epochs"]) == (0, [fence["old_epoch"]]), p
