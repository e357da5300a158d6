"""A sink's route (eosctl.config.route) and what the sweep makes of the records it leaves out: filtered,
never gaps; held by the sink, misrouted."""

from __future__ import annotations

import json

import pytest

from eosctl.cluster.model import Kind, OffsetRange, PartitionLog
from eosctl.config.route import Route, parse_route
from eosctl.rules.reconcile import reconcile_partition


def test_routes_as_written_and_what_they_select() -> None:
    assert parse_route("header:type=A|B") == Route("header", "type", ("A", "B"))
    assert parse_route("value:order.kind=A") == Route("value", "order.kind", ("A",))
    assert parse_route("key=k1") == Route("key", "", ("k1",))
    for bad in ("header:type", "header:=A", "value:a..b=A", "key=", "type=A", "header:t=A|"):
        with pytest.raises(ValueError, match="expected header:NAME=VALUE"):
            parse_route(bad)
    by_header = parse_route("header:type=A")
    assert by_header.matches(None, None, [("type", b"A")])
    assert not by_header.matches(None, None, [("type", b"B"), ("other", b"A")])
    by_value = parse_route("value:order.kind=A|7|true")
    for value, selected in (({"order": {"kind": "A"}}, True), ({"order": {"kind": 7}}, True),
                            ({"order": {"kind": True}}, True), ({"order": {"kind": "B"}}, False),
                            ({"order": {}}, False), ({"order": {"kind": ["A"]}}, False)):
        assert by_value.matches(None, json.dumps(value).encode(), []) is selected, value
    assert not by_value.matches(None, b"not json", []) and not by_value.matches(None, None, [])
    assert parse_route("key=k1").matches(b"k1", None, []) and not parse_route("key=k1").matches(None, b"", [])


def plog(*ranges: tuple[int, int, str]) -> PartitionLog:
    rs = [OffsetRange(a, b, Kind[k]) for a, b, k in ranges]
    hw = rs[-1].last + 1
    return PartitionLog("orders", 0, 0, hw, hw, 0, hw, rs)


def test_filtered_records_are_never_gaps_and_held_ones_are_misrouted() -> None:
    log = plog((0, 9, "DATA"), (10, 10, "MARKER"), (11, 19, "DATA"))
    # the route leaves out 2-3, 6 and 15-16; the sink misses 2-3 and 6 (right), 8 (lost), holds 15-16
    out = [(2, 3), (6, 6), (15, 16)]
    islands = [(0, 1, 1), (4, 5, 1), (7, 7, 1), (9, 9, 1), (11, 19, 1)]
    summary, findings = reconcile_partition(log, islands, routed_out=out)
    assert [(f.kind, f.first_offset, f.last_offset, f.count) for f in findings] == [
        ("gap", 8, 8, 1), ("misrouted", 15, 16, 2)]
    assert (summary.filtered, summary.expected_records) == (5, 14)
    # without the route: the filtered records are gaps
    _, whole = reconcile_partition(log, islands)
    assert [(f.kind, f.first_offset, f.last_offset) for f in whole] == [
        ("gap", 2, 3), ("gap", 6, 6), ("gap", 8, 8)]
    assert summary.to_dict()["filtered"] == 5
    assert "filtered" not in reconcile_partition(log, islands)[0].to_dict()


def test_a_gap_runs_across_filtered_records_as_across_markers() -> None:
    log = plog((0, 9, "DATA"))
    _, findings = reconcile_partition(log, [(0, 1, 1), (8, 9, 1)], routed_out=[(4, 5)])
    assert [(f.kind, f.first_offset, f.last_offset, f.count) for f in findings] == [("gap", 2, 7, 4)]


def test_several_sinks_as_written(tmp_path) -> None:
    from eosctl.base.errors import ConfigError
    from eosctl.config.file import parse_config

    raw = {"clusters": {"c": {"bootstrap_servers": "h:1"}},
           "pipelines": {"p": {"source_topics": ["t"], "sinks": {
               "a": {"duckdb": "/w.duckdb", "table": "a", "route": "header:type=A"},
               "b": {"duckdb": "/w.duckdb", "table": "b", "route": "key=x"}}}}}
    pipe = parse_config(raw, tmp_path / "c.toml", {}).pipelines["p"]
    assert [(s.label, s.table, s.route) for s in pipe.sinks] == [("a", "a", "header:type=A"),
                                                                 ("b", "b", "key=x")]
    assert pipe.sink == pipe.sinks[0]  # what the other commands read
    one = parse_config({**raw, "pipelines": {"p": {"source_topics": ["t"], "sink": {"duckdb": "/w.duckdb"}}}},
                       tmp_path / "c.toml", {}).pipelines["p"]
    assert [s.label for s in one.sinks] == ["sink"] and one.sink == one.sinks[0]
    for bad, said in (({"sink": {"duckdb": "/w"}}, "keep one"),
                      ({"sinks": {"a": {"kafka_topic": "out"}}}, "sinks.a is a kafka_topic"),
                      ({"sinks": {"a": {"duckdb": "/w", "route": "x"}}}, "sinks.a.route is 'x'"),
                      ({"sinks": {"a": {"table": "a"}}}, "sinks.a needs exactly one of")):
        pipes = {"p": {"source_topics": ["t"], "sinks": raw["pipelines"]["p"]["sinks"], **bad}} \
            if "sink" in bad else {"p": {"source_topics": ["t"], **bad}}
        with pytest.raises(ConfigError, match=said):
            parse_config({**raw, "pipelines": pipes}, tmp_path / "c.toml", {})
