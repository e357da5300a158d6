"""`snapshot --with-audit` reads one frozen state of the sink for its ledger and its audit (issue 17):
one copy of a DuckDB file, not one per reader, so the two can't disagree on what the sink held."""

from __future__ import annotations

import duckdb
from click.testing import CliRunner

import eosctl.sink.freeze as freeze
from eosctl.cli import main
from tests.kafkasim import KafkaSim


def test_snapshot_with_audit_freezes_the_sink_once(tmp_path, monkeypatch) -> None:
    copies: list[str] = []
    real = freeze._copy_duckdb

    def counted(path: str, where: str, tmp: str) -> str:
        copies.append(path)
        return real(path, where, tmp)

    monkeypatch.setattr(freeze, "_copy_duckdb", counted)
    sink = tmp_path / "sink.duckdb"
    with KafkaSim(nodes=1) as sim:
        sim.partition("orders", 0).data(6)
        sim.group("sink", {("orders", 0): 6})
        with duckdb.connect(str(sink)) as con:  # offset 2 missing, offset 4 twice
            con.execute("CREATE TABLE sink AS SELECT 'orders' AS src_topic, 0 AS src_partition, "
                        "o AS src_offset FROM (VALUES (0), (1), (3), (4), (4), (5)) v(o)")
        args = ["snapshot", "--bootstrap", sim.bootstrap, "-t", "orders", "-g", "sink", "--sink-duckdb",
                str(sink), "--out", str(tmp_path / "snap.duckdb")]
        result = CliRunner().invoke(main, [*args, "--with-audit", "--format", "json"])
        assert result.exit_code == 0, result.output
        assert copies == [str(sink)]
        with duckdb.connect(str(tmp_path / "snap.duckdb"), read_only=True) as snap:
            kinds = snap.execute("SELECT kind, first_offset FROM audit_findings ORDER BY 2").fetchall()
        assert kinds == [("gap", 2), ("duplicate", 4)]
        copies.clear()
        result = CliRunner().invoke(main, [*args, "--force"])
        assert result.exit_code == 0, result.output
        assert copies == [str(sink)]  # without the audit, the ledger's own freeze
