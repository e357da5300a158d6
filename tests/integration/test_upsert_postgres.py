"""The upsert audit of tests/integration/test_upsert_sink.py on a PostgreSQL table (issue 51), in a module of
its own: the suite's PostgreSQL puts a module's tests on its worker (tests/support/workers.py), and this
one's topic
is all it needs of the other module.

The table holds each value in a jsonb column, which reorders and respaces the JSON: compared by content.
"""

from __future__ import annotations

import json

from tests.integration.test_upsert_sink import (  # noqa: F401
    EXPECTED,
    TABLE,
    audit,
    config,
    engine,
    found,
    source,
)


def test_upsert_table_in_postgres_with_a_jsonb_value_column(source, bootstrap, postgres, pg_db,  # noqa: F811
                                                            tmp_path, engine):  # noqa: F811
    import psycopg

    with psycopg.connect(pg_db, autocommit=True) as con:
        con.execute("CREATE TABLE state (id text PRIMARY KEY, doc jsonb)")
        for k, v in TABLE.items():
            # jsonb reorders and respaces the JSON: compared by content
            con.execute("INSERT INTO state VALUES (%s, %s::jsonb)", (k, json.dumps(v, indent=2)))
    uri = pg_db.replace(postgres.password, "${EOSCTL_SINK_PASSWORD}")
    path = config(tmp_path, bootstrap, source, f'postgres = "{uri}"\ntable = "state"\nkey_column = "id"\n'
                                               'value_column = "doc"\n')
    code, report = audit(path, env={"EOSCTL_SINK_PASSWORD": postgres.password}, engine=engine)
    assert code == 1
    assert found(report) == EXPECTED
    assert report["sink_read_point"]["kind"] == "postgres"
    assert postgres.password not in json.dumps(report)
