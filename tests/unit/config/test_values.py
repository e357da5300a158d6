"""One setting's problem in a few words (eosctl.config.values); bootstrap servers are checked in
tests/unit/config/test_config.py."""

from __future__ import annotations

import pytest

from eosctl.config.values import check_lineage, memory_problem, normalize_bootstrap, spark_master_problem

LINEAGE = "expected one of headers, value:PATH, key, value (e.g. value:source)"
MASTER = "expected local[N] (N at least 1), local[*], spark://HOST:PORT, yarn or k8s://URL"


@pytest.mark.parametrize(("value", "problem"), [
    ("headers", None), ("key", None), ("value", None), ("value:source", None), ("value:a.b", None),
    ("value:", LINEAGE), ("value:a..b", LINEAGE), ("Key", LINEAGE), ("", LINEAGE)])
def test_lineage(value, problem):
    assert check_lineage(value) == problem


@pytest.mark.parametrize(("master", "problem"), [
    ("local", None), ("local[*]", None), ("local[4]", None), ("local[2,3]", None),
    ("local-cluster[2,1,1024]", None), ("spark://h:7077", None), ("yarn", None), ("k8s://https://h", None),
    ("local[0]", MASTER), ("local[x]", MASTER), ("spark://", MASTER), ("mesos", MASTER)])
def test_spark_master(master, problem):
    assert spark_master_problem(master) == problem


@pytest.mark.parametrize(("size", "ok"), [("512m", True), ("2g", True), ("2GB", True), ("1024", True),
                                          ("0g", False), ("2 g", False), ("2x", False), ("", False)])
def test_memory_size(size, ok):
    assert memory_problem(size) == (None if ok else "expected a size such as 512m or 2g")


def test_bootstrap_entries_lose_their_spaces():
    assert normalize_bootstrap(" b1:9092 , b2:9093") == "b1:9092,b2:9093"
