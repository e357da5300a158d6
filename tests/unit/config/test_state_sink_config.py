"""A state sink's keys in the config (mode, key_fields, value_fields, delete_values, aggregate): each
problem one ConfigError line naming the key (eosctl.config.file)."""

from __future__ import annotations

from pathlib import Path

import pytest

from eosctl.base.errors import ConfigError
from eosctl.config.file import parse_config
from eosctl.config.model import Aggregate
from tests.support.helpers import eosctl


def sink_of(tmp_path: Path, **sink: object):
    raw = {"clusters": {"c": {"bootstrap_servers": "h:1"}},
           "pipelines": {"p": {"source_topics": ["t"], "sink": {"duckdb": "/abs/s.duckdb", **sink}}}}
    return parse_config(raw, tmp_path / "c.toml", {}).pipelines["p"].sink


def test_an_upsert_sink_reads_its_keys_in_file_order(tmp_path):
    s = sink_of(tmp_path, mode="upsert", key_fields={"region": "key.r", "id": "value.order.id"},
                value_fields={"status": "value.status"}, delete_values=["value.__deleted=true"])
    assert (s.mode, s.key_fields, s.value_fields, s.delete_values) == (
        "upsert", (("region", "key.r"), ("id", "value.order.id")), (("status", "value.status"),),
        ("value.__deleted=true",))
    a = sink_of(tmp_path, mode="aggregate", key_column="k", aggregate={"fn": "count", "column": "n"})
    assert a.aggregate == Aggregate("count", "n", None)
    assert sink_of(tmp_path).mode == "offsets"
    w = sink_of(tmp_path, mode="aggregate", key_column="k", aggregate={
        "fn": "count", "column": "n", "window_column": "ws", "window": "1m"})
    assert w.aggregate == Aggregate("count", "n", None, "ws", 60_000, 60_000)  # tumbling: advance = size
    h = sink_of(tmp_path, mode="aggregate", key_column="k", aggregate={
        "fn": "count", "column": "n", "window_column": "ws", "window": "1m", "advance": "15s"})
    assert (h.aggregate.window_ms, h.aggregate.advance_ms) == (60_000, 15_000)


@pytest.mark.parametrize(("sink", "says"), [
    ({"mode": "merge"}, r"pipelines\.p\.sink\.mode must be one of aggregate, offsets, upsert, got 'merge'"),
    ({"mode": "upsert"}, r"mode = 'upsert' needs the table's key: key_column .* or key_fields"),
    ({"key_fields": {"id": "key"}}, r"pipelines\.p\.sink\.key_fields is for a state sink; set "
                                    r"pipelines\.p\.sink\.mode"),
    ({"mode": "upsert", "key_fields": {"id": "keys.x"}}, r"key_fields\.id is 'keys\.x'; name 'key' or "
                                                         r"'value'"),
    ({"mode": "upsert", "key_column": "k", "value_fields": {"v": "key"}}, r"value_fields\.v is 'key'; name "
                                                                          r"'value'"),
    ({"mode": "upsert", "key_column": "k", "key_fields": {}}, r"key_fields is empty"),
    ({"mode": "aggregate", "key_column": "k"}, r"mode = \"aggregate\" needs .*aggregate = \{fn"),
    ({"mode": "aggregate", "key_column": "k", "aggregate": {"fn": "sum", "column": "t"}},
     r"aggregate\.field must name the value's JSON field the sum folds"),
    ({"mode": "aggregate", "key_column": "k", "aggregate": {"fn": "avg", "column": "t"}},
     r"aggregate\.fn must be one of count, max, min, sum"),
    ({"mode": "upsert", "key_column": "k", "aggregate": {"fn": "count", "column": "t"}},
     r"aggregate is for mode = \"aggregate\""),
    ({"mode": "aggregate", "key_column": "k", "aggregate": {"fn": "count", "column": "t", "window": "1m"}},
     r"aggregate: a windowed table names both window_column .* and window"),
    ({"mode": "aggregate", "key_column": "k", "aggregate": {"fn": "count", "column": "t",
                                                             "window_column": "w", "window": "soon"}},
     r"aggregate\.window = 'soon': expected a duration such as 500ms"),
    ({"mode": "aggregate", "key_column": "k", "aggregate": {"fn": "count", "column": "t",
                                                             "window_column": "w", "window": "1m",
                                                             "advance": "2m"}},
     r"aggregate\.advance \(2m\) is longer than window \(1m\)"),
])
def test_each_problem_is_one_line_naming_the_key(tmp_path, sink, says):
    with pytest.raises(ConfigError, match=says):
        sink_of(tmp_path, **sink)


HEAD = '[clusters.c]\nbootstrap_servers = "127.0.0.1:1"\n[pipelines.p]\nsource_topics = ["t"]\n'


def test_the_audit_says_it_in_one_line_with_exit_2(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text(HEAD +
                      '[pipelines.p.sink]\nduckdb = "s.duckdb"\nmode = "upsert"\n')
    r = eosctl("audit", "-c", str(config), "--engine", "local")
    assert r.exit_code == 2
    assert r.stderr.strip().count("\n") == 0
    assert "needs the table's key" in r.stderr


def test_a_command_that_reads_rows_at_offsets_refuses_a_state_sink_in_one_line(tmp_path):
    import duckdb

    db = tmp_path / "s.duckdb"
    duckdb.connect(str(db)).execute("CREATE TABLE sink (k VARCHAR, v VARCHAR)").close()
    config = tmp_path / "c.toml"
    config.write_text(HEAD + f'[pipelines.p.sink]\nduckdb = "{db}"\nmode = "upsert"\nkey_column = "k"\n')
    r = eosctl("ledger", "-c", str(config))
    assert (r.exit_code, r.stderr.strip()) == (
        2, "eosctl: error: [pipelines.p.sink] keeps state per key (mode = 'upsert'), not rows at offsets: "
           "`eosctl audit` and `eosctl explain --offset` read it, this command does not")


def test_what_judges_offsets_is_refused_for_a_state_sink(tmp_path):
    import duckdb

    db = tmp_path / "s.duckdb"
    duckdb.connect(str(db)).execute("CREATE TABLE sink (k VARCHAR, v VARCHAR)").close()
    config = tmp_path / "c.toml"
    config.write_text(HEAD + f'[pipelines.p.sink]\nduckdb = "{db}"\nmode = "upsert"\nkey_column = "k"\n'
                      'retention = "7d"\n')
    r = eosctl("audit", "-c", str(config), "--engine", "local")
    assert (r.exit_code, r.stderr.strip()) == (
        2, "eosctl: error: retention judges a sink of offsets; a state sink (mode = 'upsert') has none: "
           "remove it")
