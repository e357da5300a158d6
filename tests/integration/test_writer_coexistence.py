"""A live pipeline's writer next to `eosctl audit`, `ledger` and `snapshot` (issue 10.1, issue 9.10).

A separate process plays the pipeline: it produces one record, and once Kafka has acknowledged it, writes
its sink row (connect, insert, close), in a loop. DuckDB lets one process write or several read, never
both: the writer retries its connect while eosctl holds the read lock, and records how long it waited.
eosctl holds the lock only to copy the file (eosctl.sink.frozen), so the writer never fails, every
command finishes, and rows written mid-audit never become phantoms.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import textwrap
import uuid
from pathlib import Path

import duckdb
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.helpers import eosctl

pytestmark = [pytest.mark.integration, pytest.mark.spark]

WRITER = textwrap.dedent('''
    import json, os, sys, time
    import duckdb
    from confluent_kafka import Producer

    path, bootstrap, topic, stop = sys.argv[1:5]
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": False})
    waits, errors, written = [], [], 0
    while not os.path.exists(stop):
        acked = []
        producer.produce(topic, b"v", partition=0, on_delivery=lambda err, msg: acked.append((err, msg)))
        producer.flush(10)
        err, msg = acked[0]
        if err is not None:
            errors.append(f"produce: {err}")
            break
        # The record is committed (acks=all, no transaction): now its row, as a sink consumer would.
        # Kept out = from the first refused connect to the one that works (connecting itself is not
        # waiting: it takes ~100 ms on a busy machine with nobody else around).
        refused = None
        while True:
            try:
                con = duckdb.connect(path)
                break
            except duckdb.Error as e:
                now = time.monotonic()
                refused = refused or now
                if "lock" not in str(e).lower() or now - refused > 60:  # the wait's deadline
                    errors.append(f"connect: {str(e).splitlines()[0]}")
                    con = None
                    break
                time.sleep(0.001)
        if con is None:
            break
        waits.append(0.0 if refused is None else time.monotonic() - refused)
        try:
            con.execute("INSERT INTO orders_sink VALUES (?, 0, ?)", [topic, msg.offset()])
        except duckdb.Error as e:
            errors.append(f"insert: {str(e).splitlines()[0]}")
            break
        finally:
            con.close()
        written += 1
        if written == 1:
            print("ready", flush=True)
        time.sleep(0.02)  # the pipeline polls Kafka between its transactions
    print(json.dumps({"written": written, "longest_wait_s": max(waits or [0]), "errors": errors,
                      "refused": sum(1 for w in waits if w)}), flush=True)
''')


@pytest.fixture
def live(bootstrap: str, tmp_path: Path):
    topic = "live" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)
    sink = tmp_path / "live.duckdb"
    con = duckdb.connect(str(sink))
    con.execute("CREATE TABLE orders_sink (src_topic VARCHAR, src_partition INTEGER, src_offset BIGINT)")
    con.close()
    stop = tmp_path / "stop"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(sink), bootstrap, topic, str(stop)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "ready", writer.stderr.read()
        yield topic, sink, writer, stop
    finally:
        stop.touch()
        try:
            writer.wait(timeout=60)
        finally:
            if writer.poll() is None:
                writer.kill()


cli = eosctl  # 200 columns: no cell wraps


PHANTOMS = {"phantom_aborted", "phantom_marker", "phantom_uncommitted", "phantom_beyond_hw"}


def test_a_live_writer_is_never_locked_out_and_gives_no_phantoms(live, bootstrap, spark, tmp_path,
                                                                 record_property, monkeypatch):
    topic, sink, writer, stop = live
    # The commands run in this process: their frozen copies go to a temp dir of this test's own (the
    # system's is shared with the other workers' audits, whose copies come and go meanwhile).
    own_tmp = tmp_path / "tmp"
    own_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(own_tmp))
    common = ["--bootstrap", bootstrap, "--topic", topic, "--sink-duckdb", str(sink), "--sink-table",
              "orders_sink"]

    audit = cli("audit", *common, "--format", "json")
    assert audit.exit_code in (0, 1), audit.stderr
    report = json.loads(audit.stdout)
    (part,) = report["partitions"]
    assert not [f for f in report["findings"] if f["kind"] in PHANTOMS | {"duplicate", "invalid_row"}]
    # Records committed after the sink was frozen are the only ones it may lack: a tail gap (the lag).
    for f in report["findings"]:
        assert (f["kind"], f["last_offset"]) == ("gap", part["high_watermark"] - 1)

    ledger = cli("ledger", *common, "--format", "json")
    assert ledger.exit_code == 0, ledger.stdout + ledger.stderr  # checked up to its last row: no flags
    (row,) = json.loads(ledger.stdout)["partitions"]
    assert row["flags"] == [] and row["rows"] == row["distinct_offsets"] == row["max_offset"] + 1

    out = tmp_path / "live.snap.duckdb"
    snap = cli("snapshot", *common, "--out", str(out), "--format", "json")
    assert snap.exit_code == 0, snap.stderr
    assert json.loads(snap.stdout)["sections"]["ledger"] == "ok"
    con = duckdb.connect(str(out), read_only=True)
    try:
        assert con.execute("SELECT kind, count FROM ledger_flags").fetchall() == []
    finally:
        con.close()

    stop.touch()
    stdout, stderr = writer.communicate(timeout=60)
    assert writer.returncode == 0, stderr
    result = json.loads(stdout.strip().splitlines()[-1])
    assert result["errors"] == []
    # it kept writing while the commands read: more rows than the audit's frozen copy held
    assert result["written"] > part["sink_rows"] > 0
    # The number the README quotes: how long the pipeline's writer was kept out at worst.
    record_property("writer_longest_wait_ms", round(result["longest_wait_s"] * 1000, 1))
    print(f"\nwriter: {result['written']} batches, {result['refused']} refused at first, longest wait "
          f"for the lock {result['longest_wait_s'] * 1000:.1f} ms")
    # every frozen copy was deleted
    assert sorted(own_tmp.glob("eosctl-frozen-*")) == []
