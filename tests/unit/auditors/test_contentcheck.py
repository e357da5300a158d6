"""auditors.contentcheck.sink_keys: a task's small partitions read in one query (row_keys_in) give each
partition exactly the rows, keys and values its own query (row_keys) gives, and none for a partition
without keyed rows."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pytest

from auditors.contentcheck import sink_keys
from eosctl.config.model import Sink
from eosctl.sink import open_reader

TPS = [("orders", 0), ("orders", 1), ("orders", 2), ("other", 0), ("orders", 3)]


@pytest.fixture
def sink(tmp_path: Path) -> Sink:
    """orders-0: offsets 0-4 and 2 again (a replay), integer keys; orders-1: a row without a key, one
    with; orders-2: only rows without a key; other-0: one row; orders-3: no rows at all."""
    path = tmp_path / "sink.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE s (src_topic VARCHAR, src_partition INT, src_offset BIGINT, k BIGINT, "
                    "v BLOB)")
        rows = [("orders", 0, o, 100 + o, f"v{o}".encode()) for o in (0, 1, 2, 3, 4, 2)]
        rows += [("orders", 1, 7, None, b"x"), ("orders", 1, 8, 9, None), ("orders", 2, 0, None, b"y"),
                 ("other", 0, 5, 55, b"z"), ("orders", 0, -1, 1, b"bad offset")]
        con.executemany("INSERT INTO s VALUES (?, ?, ?, ?, ?)", rows)
    return Sink(duckdb=str(path), table="s", key_column="k", value_column="v")


def as_lists(got: dict) -> dict:
    return {tp: (offsets.tolist(), keys.to_pylist(), None if values is None else values.to_pylist())
            for tp, (offsets, keys, values) in got.items()}


def test_one_query_for_the_small_partitions_gives_what_a_query_each_gives(sink: Sink) -> None:
    with open_reader(sink) as reader:
        each = sink_keys(reader, TPS)
        calls: list[tuple[str, int]] = []
        own = reader.row_keys

        def counted(topic: str, partition: int):  # type: ignore[no-untyped-def]
            calls.append((topic, partition))
            return own(topic, partition)

        reader.row_keys = counted  # type: ignore[method-assign]
        together = sink_keys(reader, TPS, together={("orders", 0), ("orders", 1), ("orders", 2),
                                                    ("orders", 3)})
    assert calls == [("other", 0)]  # the one partition not named together: a query of its own
    assert as_lists(together) == as_lists(each)
    assert set(each) == {("orders", 0), ("orders", 1), ("other", 0)}
    offsets, keys, values = each[("orders", 0)]
    order = np.argsort(offsets, kind="stable")
    assert offsets[order].tolist() == [0, 1, 2, 2, 3, 4]
    assert sorted(keys.to_pylist()) == ["100", "101", "102", "102", "103", "104"]
    assert as_lists(each)[("orders", 1)] == ([8], ["9"], [None])
