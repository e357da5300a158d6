"""Every relative path a config names resolves against the config file, a Parquet glob too, and `~` is
the user's home (issue 34, item 3 and a smaller item). Through the CLI, no broker: the sink is read before
Kafka, so the path the sink was looked for is in the one error line."""

from __future__ import annotations

import duckdb

from tests.support.helpers import eosctl

HEAD = ('[clusters.c]\nbootstrap_servers = "127.0.0.1:1"\n[pipelines.p]\nsource_topics = ["t"]\n'
        '[pipelines.p.sink]\n')


def error(*args: str, env: dict[str, str] | None = None) -> str:
    result = eosctl(*args, env=env, columns=None, check=False)
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_a_relative_parquet_glob_is_relative_to_the_config(tmp_path, monkeypatch):
    here, elsewhere = tmp_path / "configs", tmp_path / "cwd"
    (here / "data").mkdir(parents=True)
    (elsewhere / "data").mkdir(parents=True)
    # Another folder of the same name where eosctl runs: before the fix the audit read this one.
    con = duckdb.connect()
    con.execute(f"COPY (SELECT 't' AS src_topic, 0 AS src_partition, 0::BIGINT AS src_offset) TO "
                f"'{elsewhere / 'data' / 'x.parquet'}' (FORMAT parquet)")
    config = here / "c.toml"
    config.write_text(HEAD + 'parquet = "data/*.parquet"\n')
    monkeypatch.chdir(elsewhere)
    line = error("audit", "-c", str(config), "--engine", "local")
    assert line == (f"eosctl: error: no Parquet files match {here}/data/*.parquet; check [sink].parquet or "
                    "--sink-parquet")


def test_a_tilde_in_a_sink_path_is_the_home_directory(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    config = tmp_path / "c.toml"
    config.write_text(HEAD + 'duckdb = "~/sink.duckdb"\n')
    line = error("audit", "-c", str(config), "--engine", "local", env={"HOME": str(home)})
    assert line == (f"eosctl: error: sink file {home}/sink.duckdb not found; check [sink].duckdb or "
                    "--sink-duckdb")
