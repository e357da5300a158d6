"""auditors.incstate's checks, which both incremental audits (offsets sinks and state sinks) make of a state
file before going on from it: each refusal is one line naming the file and what to do."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import duckdb
import pytest

from auditors import incstate
from eosctl.base.errors import EosctlError
from eosctl.base.files import shown
from eosctl.config.model import Sink

OPTION = "--incremental"


def target(topics: tuple[str, ...] = ("orders",), group: str = "g") -> SimpleNamespace:
    return SimpleNamespace(pipeline=None, topics=list(topics), group=group)


def write_state(path: Path, **meta: object) -> None:
    with duckdb.connect(str(path)) as con:
        incstate.create(con)
        incstate.save(con, incstate.State(dict(meta)))


def test_no_file_yet_is_no_state_and_a_state_of_the_same_mode_is_read(tmp_path: Path) -> None:
    path = tmp_path / "state.duckdb"
    assert incstate.previous(str(path), (), OPTION, "offsets") is None
    write_state(path, sink_mode="upsert", full_at=1.0)
    assert incstate.previous(str(path), (), OPTION, "upsert").meta["full_at"] == 1.0


def test_a_state_of_another_sink_mode_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.duckdb"
    write_state(path, full_at=1.0)  # an offsets sink's state says no mode
    with pytest.raises(EosctlError) as e:
        incstate.previous(str(path), (), OPTION, "upsert")
    assert str(e.value) == (f"--incremental {shown(str(path))} was written for a sink of mode = 'offsets', "
                            "this sink is mode = 'upsert': name another state file for it "
                            "(a full audit writes it)")


def test_a_file_that_is_no_state_and_an_input_are_refused(tmp_path: Path) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("not a state")
    with pytest.raises(EosctlError, match="is not an eosctl audit state file"):
        incstate.previous(str(other), (), OPTION, "offsets")
    sink = tmp_path / "sink.duckdb"
    duckdb.connect(str(sink)).close()
    with pytest.raises(EosctlError):
        incstate.previous(str(sink), (str(sink),), OPTION, "offsets")


def test_a_state_belongs_to_one_pipeline_cluster_and_topic_incarnation(tmp_path: Path) -> None:
    sink, path = Sink(duckdb="sink.duckdb"), str(tmp_path / "s.duckdb")
    now = incstate.belonging(None, target(), sink, "c1", {"orders": "id1"}, path, OPTION)
    assert now["topics"] == ["orders"] and now["cluster_id"] == "c1" and now["sink"] == "sink.duckdb (sink)"
    prev = incstate.State(now)
    assert incstate.belonging(prev, target(), sink, "c1", {"orders": "id1"}, path, OPTION) == now
    cases = [
        (target(), "c2", {"orders": "id1"}, "was written for cluster c1, this is cluster c2"),
        (target(group="h"), "c1", {"orders": "id1"}, "belongs to another pipeline (orders into sink.duckdb"),
        (target(), "c1", {"orders": "id2"}, "topic orders was deleted and created again since (topic id id1, "
                                            "now id2)"),
    ]
    for tgt, cluster, ids, said in cases:
        with pytest.raises(EosctlError) as e:
            incstate.belonging(prev, tgt, sink, cluster, ids, path, OPTION)
        assert said in str(e.value)


def test_why_a_run_reads_everything_again() -> None:
    fresh = incstate.State({"full_at": time.time(), "content": "keys"})
    old = incstate.State({"full_at": time.time() - 100, "content": "keys"})
    assert incstate.full_reason(None, 60) == "no state yet"
    assert incstate.full_reason(fresh, 60, "keys") == ""
    assert incstate.full_reason(fresh, 60) == ""  # a state sink's audit has no content check
    assert incstate.full_reason(old, 60, "off").startswith("the content check was turned on or off")
    assert incstate.full_reason(old, 60, "keys") == "the last full audit is 60s old or more (--full-every)"
    assert incstate.full_reason(old, 0, "keys") == ""  # --full-every 0: never


def test_a_kept_scan_goes_on_only_over_the_same_log() -> None:
    scan = SimpleNamespace(end=100, offsets=SimpleNamespace(log_start=10))
    assert incstate.still_the_log(scan, SimpleNamespace(high_watermark=150, log_start=10))
    assert not incstate.still_the_log(scan, SimpleNamespace(high_watermark=90, log_start=10))  # truncated
    assert not incstate.still_the_log(scan, SimpleNamespace(high_watermark=150, log_start=20))  # retention
