"""`eosctl snapshot` names config keys with their section (issue 10, item 10): a section's failure reason
such as "check [pipelines.p.sink].table" used to lose its "[...]" to Rich markup and read "check .table"."""

from __future__ import annotations

import uuid

import duckdb
import pytest
from click.testing import CliRunner

from eosctl.cli import main

pytestmark = pytest.mark.integration


def test_a_section_reason_keeps_its_config_section(bootstrap, tmp_path):
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"snapmsg-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: a destroyed client fails its futures
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    sink = tmp_path / "sink.duckdb"
    with duckdb.connect(str(sink)) as con:
        con.execute("CREATE TABLE orders (src_topic VARCHAR, src_partition INT, src_offset BIGINT)")
    config = tmp_path / "eosctl.toml"
    config.write_text(f'[clusters.c]\nbootstrap_servers = "{bootstrap}"\n\n[pipelines.p]\n'
                      f'source_topics = ["{topic}"]\n\n[pipelines.p.sink]\nduckdb = "{sink}"\n'
                      'table = "nope"\n')
    result = CliRunner().invoke(main, ["snapshot", "-c", str(config), "--out", str(tmp_path / "s.duckdb")])
    assert result.exit_code == 0, result.output
    said = " ".join(result.stdout.split())  # a long reason wraps at the console's width
    assert (f"ledger not captured: {sink} has no table 'nope' (tables: orders); check "
            '[pipelines.p.sink].table (schema.table, and double quotes for a name with dots: "my.table")'
            ) in said
