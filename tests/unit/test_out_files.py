"""A report or snapshot interrupted while it is written leaves nothing beside --out (issue 20, defect 4)."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from eosctl.base.files import write_replacing
from eosctl.inspection import snapshot
from eosctl.inspection.capture import Capture


def test_ctrl_c_while_a_snapshot_is_written_leaves_no_tmp_and_no_wal(tmp_path: Path, monkeypatch) -> None:
    real = snapshot._insert
    calls = []

    def interrupted(con, table, rows):
        real(con, table, rows)
        calls.append(table)
        if len(calls) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(snapshot, "_insert", interrupted)
    cap = Capture(captured_at=datetime.now(UTC), bootstrap="b:9092", pipeline=None, group=None, topics=[])
    with pytest.raises(KeyboardInterrupt):
        snapshot.write_snapshot(cap, tmp_path / "out.duckdb")
    assert os.listdir(tmp_path) == []


def test_an_interrupted_write_keeps_the_old_file_and_leaves_no_tmp(tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "report.html"
    out.write_text("old")

    def interrupted(src: str, dst: str) -> None:
        assert Path(src).read_text() == "<html>"  # written in full beside it, not yet in place
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_replacing(str(out), "<html>")
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["report.html"] and out.read_text() == "old"
    write_replacing(str(out), "new")
    assert os.listdir(tmp_path) == ["report.html"] and out.read_text() == "new"


def test_a_device_is_written_directly(tmp_path: Path) -> None:
    write_replacing("/dev/null", "x")
    assert os.listdir(tmp_path) == []


def test_a_snapshot_path_with_a_quote_is_a_literal(tmp_path: Path) -> None:
    out = tmp_path / "it's'; COPY (SELECT 1) TO 'pwned.csv'; --.duckdb"
    cap = Capture(captured_at=datetime.now(UTC), bootstrap="b:9092", pipeline=None, group=None, topics=[])
    snapshot.write_snapshot(cap, out)
    assert os.listdir(tmp_path) == [out.name] and not os.path.exists("pwned.csv")
    assert snapshot.load_snapshot(out).bootstrap == "b:9092"


def test_no_output_is_put_in_place_after_a_swallowed_stop_signal(tmp_path: Path) -> None:
    """Stop 62's CI: SIGTERM during a snapshot's audit; its exception was swallowed on the way up (a
    library's `except BaseException`), the command ran on and wrote --out before it said its line."""
    import signal

    from eosctl.base import stopsignals

    out = tmp_path / "snap.duckdb"
    cap = Capture(captured_at=datetime.now(UTC), bootstrap="b:9092", pipeline=None, group=None, topics=[])
    stopsignals.take(signal.SIGTERM)
    try:
        with pytest.raises(stopsignals.StoppedBefore):
            snapshot.write_snapshot(cap, out)
        with pytest.raises(stopsignals.StoppedBefore):
            write_replacing(str(tmp_path / "report.html"), "<html>")
    finally:
        stopsignals.forget_taken()
    assert os.listdir(tmp_path) == []
    snapshot.write_snapshot(cap, out)  # once the command has unwound, the next one writes
    assert os.listdir(tmp_path) == ["snap.duckdb"]
