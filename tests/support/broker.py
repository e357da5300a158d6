"""Helpers for tests that set up state on a live broker (imported by test modules)."""

from __future__ import annotations

import csv
import uuid
from pathlib import Path

from tests.support.markers import markers_written


def committed_group(bootstrap: str, prefix: str = "out", records: int = 5) -> tuple[str, str]:
    """(topic, group): a new 1-partition topic with ``records`` records and a group that committed all of
    them, so its lag status is OK."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, group = f"{prefix}-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: a destroyed client fails its futures
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(records):
        producer.produce(topic, key=str(i), value=b"v")
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, records)], asynchronous=False)
    finally:
        consumer.close()
    return topic, group


def commit_offset(bootstrap: str, group: str, topic: str, offset: int, partition: int = 0) -> None:
    """Commit ``group``'s offset on the partition, as a sink consumer would (no records read)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, partition, offset)], asynchronous=False)
    finally:
        c.close()


def keyed_sink(bootstrap: str, topic: str, group: str, sink: Path, partitions: int, records: int, txn: int,
               transactional_id: str, replication: int = 1) -> dict[int, int]:
    """A clean keyed pipeline's end state: ``topic`` with ``records`` keyed records per partition (key
    f"{p}-{i}") in committed transactions of ``txn`` per partition, a DuckDB ``sink`` holding each once
    (`orders_sink`, with `order_id`) and its offsets table (`sink_offsets`), and ``group`` committed at the
    high watermark. Returns the high watermark per partition (a commit marker after each transaction)."""
    import duckdb
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, replication)])[topic].result(60)
    rows: list[tuple[int, int, str]] = []
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5})
    p.init_transactions(60)
    for first in range(0, records, txn):
        p.begin_transaction()
        for part in range(partitions):
            for i in range(first, first + txn):
                key = f"{part}-{i}"
                p.produce(topic, key=key.encode(), value=b"v", partition=part,
                          on_delivery=lambda err, m, key=key: rows.append((m.partition(), m.offset(), key)))
        p.commit_transaction(60)
    p.flush(30)
    # The HW below counts the last commit's markers: the group's offsets and the caller's readings after them
    markers_written(bootstrap, transactional_id)
    assert len(rows) == partitions * records
    hw = {part: records + records // txn for part in range(partitions)}
    con = duckdb.connect(str(sink))
    con.execute("CREATE TABLE orders_sink (src_topic VARCHAR, src_partition INTEGER, src_offset BIGINT, "
                "order_id VARCHAR)")
    # One statement from a CSV file: executemany inserts row by row (20,000 rows took over a minute).
    rows_csv = sink.with_suffix(".rows.csv")
    with open(rows_csv, "w", newline="") as f:
        csv.writer(f).writerows((topic, *r) for r in rows)
    con.execute("INSERT INTO orders_sink SELECT * FROM read_csv(?, header = false, columns = "
                "{'t': 'VARCHAR', 'p': 'INTEGER', 'o': 'BIGINT', 'k': 'VARCHAR'})", [str(rows_csv)])
    rows_csv.unlink()
    con.execute('CREATE TABLE sink_offsets (topic VARCHAR, "partition" INTEGER, next_offset BIGINT)')
    con.executemany("INSERT INTO sink_offsets VALUES (?, ?, ?)", [(topic, q, n) for q, n in hw.items()])
    con.close()
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, q, n) for q, n in hw.items()], asynchronous=False)
    finally:
        c.close()
    return hw


def audit_offsets(bootstrap: str, topic: str, workdir: Path, rows: list[tuple], code: int = 1) -> dict:
    """`eosctl audit --engine local --format json` of a DuckDB sink holding ``rows`` (topic, partition,
    offset) in table `out`, through a config file in ``workdir``; the exit code must be ``code``."""
    import duckdb

    from tests.support.helpers import eosctl_json

    workdir.mkdir(parents=True, exist_ok=True)
    sink = workdir / "sink.duckdb"
    con = duckdb.connect(str(sink))
    con.execute("CREATE TABLE out (src_topic VARCHAR, src_partition INTEGER, src_offset BIGINT)")
    con.executemany("INSERT INTO out VALUES (?, ?, ?)", rows)
    con.close()
    cfg = workdir / "eosctl.toml"
    cfg.write_text(f'[clusters.k]\nbootstrap_servers = "{bootstrap}"\n\n[pipelines.p]\ncluster = "k"\n'
                   f'source_topics = ["{topic}"]\n\n[pipelines.p.sink]\nduckdb = "{sink}"\ntable = "out"\n')
    return eosctl_json("audit", "-c", str(cfg), "-p", "p", "--engine", "local", codes=(code,))


def epoch_timeline(text: str, wrapped: bool = False) -> list[tuple[str, str, str]]:
    """Rows of `eosctl log`'s "Epoch timeline and anomalies" table as (offset, pid, event); a wrapped
    row's further lines (empty offset) only with ``wrapped``."""
    rows, inside = [], False
    for line in text.splitlines():
        if "Epoch timeline" in line:
            inside = True
        elif inside and line.count("│") == 4:
            cells = tuple(c.strip() for c in line.split("│")[1:4])
            if cells[0] != "offset" and (wrapped or cells[0] != ""):
                rows.append(cells)
    return rows
