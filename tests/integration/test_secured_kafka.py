"""Every command as a least-privilege principal over SASL_SSL (issue 40, items 1 and 3): the reference
pipeline (a hanging transaction planted) runs on the secured Apache Kafka node through its super user's
PLAINTEXT listener; `oncall` then gets exactly the ACLs docs/config.md lists, and every command answers as
it does on an open cluster, with no password in any output or file. Removing each ACL in turn gives a line
naming it; a read the principal may not make is never an answer (txns list, txns hanging, lag, the abort
dry run, the exporter).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import uuid
from pathlib import Path

import pytest

from tests.support import helpers, securekafka
from tests.support.markers import markers_written

pytestmark = pytest.mark.integration

PASSWORD_ENV = "EOSCTL_TEST_ONCALL_PASSWORD"


class Setup:
    def __init__(self, secured, prefix: str, workdir: Path, manifest: dict) -> None:
        self.secured, self.prefix, self.workdir, self.manifest = secured, prefix, workdir, manifest
        self.config = str(workdir / "oncall.toml")
        self.password = secured.passwords["oncall"]

    @property
    def acls(self) -> list[tuple[str, str, str, bool]]:
        """(resource type, name, operation, prefixed): what docs/config.md says a pipeline's reader needs."""
        p = self.prefix
        return [("topic", f"{p}.orders", "Read", False), ("topic", f"{p}.enriched", "Read", False),
                ("group", f"{p}.processor", "Describe", False), ("group", f"{p}.sink", "Describe", False),
                ("transactional-id", f"{p}.", "Describe", True)]

    def eosctl(self, *args: str):
        return helpers.eosctl(*args, "-c", self.config, columns=250, env={PASSWORD_ENV: self.password},
                              check=False)


@pytest.fixture(scope="module")
def setup(secured_kafka, tmp_path_factory):
    from eosctl.config.model import Cluster
    from eosctl.sandbox.pipeline import run_pipeline

    prefix = "sec" + uuid.uuid4().hex[:8]
    workdir = tmp_path_factory.mktemp("secured")
    manifest = run_pipeline(Cluster(name="secure", bootstrap_servers=secured_kafka.internal), prefix, workdir,
                            faults=["hanging"], records=60)
    s = Setup(secured_kafka, prefix, workdir, manifest)
    for acl in s.acls:
        securekafka.grant(secured_kafka, "oncall", *acl)
    # The pipeline's own config with only its cluster's address and security settings changed.
    text = (workdir / "eosctl.toml").read_text()
    assert f'bootstrap_servers = "{secured_kafka.internal}"' in text
    Path(s.config).write_text(text.replace(f'bootstrap_servers = "{secured_kafka.internal}"', "\n".join([
        f'bootstrap_servers = "{secured_kafka.sasl_ssl}"', 'security_protocol = "SASL_SSL"',
        'sasl_mechanism = "SCRAM-SHA-512"', 'sasl_username = "oncall"',
        'sasl_password = "${' + PASSWORD_ENV + '}"', f'ssl_ca_location = "{secured_kafka.pki.ca}"'])))
    return s


def _no_password(s: Setup, *texts: str) -> None:
    for text in texts:
        assert s.password not in text


@pytest.mark.spark
@pytest.mark.own_spark
def test_every_command_answers_as_oncall(setup):
    s, p, m = setup, setup.prefix, setup.manifest
    h = m["hanging"][0]
    out = s.workdir
    outputs = []

    def ok(*args: str, code: int = 0) -> str:
        result = s.eosctl(*args)
        assert result.exit_code == code, (args, result.output)
        outputs.append(result.output)
        return result.stdout

    listed = json.loads(ok("txns", "list", "--format", "json"))["transactions"]
    assert {t["transactional_id"]: t["state"] for t in listed}[h["transactional_id"]] == "Ongoing"
    assert {t["transactional_id"] for t in listed} == set(m["transactional_ids"].values())
    assert json.loads(ok("txns", "describe", h["transactional_id"], "--format", "json"))["state"] == "Ongoing"
    (hanging,) = json.loads(ok("txns", "hanging", "--max-age", "0", "--format", "json", code=1))["hanging"]
    assert (hanging["topic"], hanging["partition"], hanging["first_offset"], hanging["transactional_id"]) == (
        h["topic"], h["partition"], h["first_offset"], h["transactional_id"])
    plan = json.loads(ok("txns", "abort", "-p", p, "--topic", h["topic"], "--partition", str(h["partition"]),
                         "--start-offset", str(h["first_offset"]), "--format", "json"))
    assert (plan["dry_run"], plan["producer_id"], plan["coordinator_state"]) == (True, h["producer_id"],
                                                                                 "Ongoing")
    assert plan["safety"]["safe"] == "wait"  # its coordinator runs it, with the broker's 15 min timeout
    producers = json.loads(ok("producers", "--topic", h["topic"], "--format", "json"))
    assert h["producer_id"] in {r["producer_id"] for r in producers["producers"]}
    log = ok("log", "--topic", h["topic"], "--partition", str(h["partition"]))
    assert f"LSO {h['first_offset']}  HW {h['last_offset'] + 1}" in log
    (group,) = json.loads(ok("lag", "-p", p, "--format", "json"))["groups"]
    blocked = {r["partition"]: r["blocked"] for r in group["partitions"]}
    assert group["group"] == f"{p}.sink"
    assert blocked[h["partition"]] == h["last_offset"] - h["first_offset"] + 1
    assert f"{p}.sink" in ok("lag", "-p", p, "--watch", "1", "--count", "1")
    ledger = json.loads(ok("ledger", "-p", p, "--format", "json"))
    assert not any(r["flags"] for r in ledger["partitions"])
    ok("audit", "--engine", "local", "--format", "json", "--out", str(out / "local.json"), "--force")
    assert json.loads((out / "local.json").read_text())["verdict"] == "pass"
    # The Spark engine as an on-call engineer starts it: a process of its own with its own local Spark.
    spark = helpers.eosctl_process("audit", "-c", s.config, "-p", p, "--engine", "spark", "--format", "json",
                                   env={PASSWORD_ENV: s.password}, timeout=300)
    assert spark.returncode == 0, spark.stderr[-3000:]
    outputs.append(spark.stdout + spark.stderr)
    spark_report = json.loads(spark.stdout)
    assert spark_report["verdict"] == "pass" and spark_report["engine"]["name"] == "spark"
    # Where the processor's retried transactions left aborted records depends on the run: the manifest says.
    aborted = [r for r in m["aborted_ranges"] if r["topic"] == f"{p}.enriched"]
    assert aborted, m["aborted_ranges"]
    aborted = aborted[0]
    assert "ABORTED" in ok("explain", "-p", p, "-P", str(aborted["partition"]), "--offset",
                           str(aborted["first_offset"]))
    snap = out / "incident.duckdb"
    sections = ok("snapshot", "-p", p, "--out", str(snap), "--force", "--max-age", "0")
    assert re.findall(r"^  (\w+) +(\S+)", sections, re.M) == [
        ("logs", "ok"), ("transactions", "ok"), ("producers", "ok"), ("lag", "ok"), ("hanging", "ok"),
        ("ledger", "ok")], sections
    prom = out / "eosctl.prom"
    ok("exporter", "-p", p, "--once", "--textfile", str(prom), "--force")
    metrics = prom.read_text()
    assert f'eosctl_transactions{{cluster="secure",pipeline="{p}",state="Ongoing"}} 1.0' in metrics
    assert not re.search(r"eosctl_refresh_errors_total\{[^}]*\} [1-9]", metrics), metrics
    _no_password(s, *outputs, metrics, (out / "local.json").read_text(), snap.read_bytes().decode("latin-1"))
    assert _tui_one_refresh(s) == "Ongoing"


def _tui_one_refresh(s: Setup) -> str:
    """The TUI's live dashboard as oncall: its first refresh shows the pipeline's hanging transaction."""
    from eosctl.config.target import resolve
    from tests.support.tui import running
    from tui.app import EosApp
    from tui.sources import LiveSource

    os.environ[PASSWORD_ENV] = s.password
    try:
        target = resolve(s.config, s.prefix, None)
    finally:
        del os.environ[PASSWORD_ENV]
    txid = s.manifest["hanging"][0]["transactional_id"]

    async def run() -> str:
        app = EosApp(LiveSource(target, max_age_s=900), refresh_seconds=60)
        async with running(app, (120, 30)) as pilot:
            while app.dash is None:
                await pilot.pause(0.1)
            rows = {t.transactional_id: t.state for t in app.dash.capture.transactions or []}
            return rows[txid]

    return asyncio.run(asyncio.wait_for(run(), timeout=120))


# Each ACL of the table in docs/config.md, removed in turn: the command that needs it names it.
NEEDS = {
    ("topic", "enriched"): (("lag", "-p", "{p}"), "TopicAuthorizationFailed on {p}.enriched: grant Read on "
                                                  "topic {p}.enriched"),
    ("topic", "orders"): (("audit", "--engine", "local"), "TopicAuthorizationFailed on {p}.orders: grant "
                                                          "Read on topic {p}.orders"),
    ("group", "processor"): (("lag",), "GroupAuthorizationFailed on {p}.processor: grant Describe on group "
                                       "{p}.processor"),
    ("group", "sink"): (("ledger", "-p", "{p}"), "GroupAuthorizationFailed on {p}.sink: grant Describe on "
                                                 "group {p}.sink"),
    ("transactional-id", ""): (("txns", "list"), "this principal may not Describe the transactional ids "
                                                 "under '{p}.'"),
}


def test_each_acl_removed_is_named(setup):
    s = setup
    for resource, name, operation, prefixed in s.acls:
        args, wanted = NEEDS[(resource, name.removeprefix(f"{s.prefix}.").rstrip("."))]
        securekafka.revoke(s.secured, "oncall", resource, name, operation, prefixed)
        try:
            result = s.eosctl(*(a.format(p=s.prefix) for a in args))
        finally:
            securekafka.grant(s.secured, "oncall", resource, name, operation, prefixed)
        assert result.exit_code == 2, (resource, name, result.output)
        assert wanted.format(p=s.prefix) in result.stderr, (resource, name, result.stderr)
        assert len([ln for ln in result.stderr.splitlines() if ln.startswith("eosctl: error:")]) == 1, \
            result.stderr


def test_describe_without_read_is_no_answer(setup):
    """Describe on the topic but not Read (ListOffsets answers, Fetch and DescribeProducers are refused):
    lag is not 0/OK, txns hanging does not exit 0, the abort dry run names the refusal, not the offset."""
    s, h = setup, setup.manifest["hanging"][0]
    topic = h["topic"]
    securekafka.revoke(s.secured, "oncall", "topic", topic, "Read")
    securekafka.grant(s.secured, "oncall", "topic", topic, "Describe")
    try:
        results = {
            "lag": s.eosctl("lag", "-p", s.prefix),
            "watch": s.eosctl("lag", "-p", s.prefix, "--watch", "1", "--count", "1"),
            "hanging": s.eosctl("txns", "hanging", "-p", s.prefix, "--max-age", "0"),
            "abort": s.eosctl("txns", "abort", "-p", s.prefix, "--topic", topic, "--partition",
                              str(h["partition"]), "--start-offset", str(h["first_offset"])),
        }
    finally:
        securekafka.revoke(s.secured, "oncall", "topic", topic, "Describe")
        securekafka.grant(s.secured, "oncall", "topic", topic, "Read")
    for what, result in results.items():
        # A bounded watch whose every poll failed exits 2 like the others (issue 49): it never saw Kafka.
        assert result.exit_code == 2, (what, result.output)
        assert f"TopicAuthorizationFailed on {topic}: grant Read on topic {topic}" in result.stderr, \
            (what, result.stderr)
        assert "no hanging" not in result.stdout and " OK " not in result.stdout, (what, result.stdout)
    assert "ERR" in results["watch"].stdout, results["watch"].stdout


def test_hidden_transactional_ids_are_never_none(setup, tmp_path):
    """Without Describe on the transactional ids the coordinators list none of them to oncall: txns list
    exits 2 instead of "no transactions", the abort dry run says "unknown", never "safe to abort? yes", and
    the exporter reports a refresh error instead of zero transactions."""
    s, h = setup, setup.manifest["hanging"][0]
    acl = ("transactional-id", f"{s.prefix}.", "Describe", True)
    securekafka.revoke(s.secured, "oncall", *acl)
    try:
        listed = s.eosctl("txns", "list", "-p", s.prefix)
        plan = s.eosctl("txns", "abort", "-p", s.prefix, "--topic", h["topic"], "--partition",
                        str(h["partition"]), "--start-offset", str(h["first_offset"]), "--format", "json")
        prom = tmp_path / "hidden.prom"
        exported = s.eosctl("exporter", "-p", s.prefix, "--once", "--textfile", str(prom))
    finally:
        securekafka.grant(s.secured, "oncall", *acl)
    assert listed.exit_code == 2 and "no transactions" not in listed.output
    assert (f"cannot list transactions: this principal may not Describe the transactional ids under "
            f"'{s.prefix}.'") in listed.stderr
    assert plan.exit_code == 0, plan.output
    safety = json.loads(plan.stdout)["safety"]
    assert safety["safe"] == "unknown" and "may not Describe" in safety["why"], safety
    metrics = prom.read_text()
    section = f'eosctl_refresh_errors_total{{cluster="secure",pipeline="{s.prefix}",section="transactions"}}'
    assert f"{section} 1.0" in metrics, metrics
    assert "eosctl_transactions{" not in metrics
    assert "section transactions not read" in exported.stderr


EXAMPLE = Path(__file__).resolve().parents[2] / "sample_configs" / "production.example.toml"


def test_the_production_example_config_works_with_only_its_addresses_changed(setup, tmp_path):
    """sample_configs/production.example.toml against the secured node: its brokers, CA file, sink file and
    Spark master replaced, nothing else; the user and password from the environment as it says."""
    import duckdb
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    s = setup
    internal = s.secured.internal
    topic, group = "payments.enriched", "payments-sink"
    admin = AdminClient({"bootstrap.servers": internal})
    for f in admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=30).values():
        f.result(timeout=30)
    producer = Producer({"bootstrap.servers": internal, "transactional.id": "payments-processor-0"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, key=f"p{i}", value=b"{}", partition=0)
    producer.commit_transaction(30)  # offsets 0-4, the COMMIT marker at 5
    markers_written(internal, "payments-processor-0")  # the group's offset 6 is the HW only after it
    consumer = Consumer({"bootstrap.servers": internal, "group.id": group})
    consumer.commit(offsets=[TopicPartition(topic, 0, 6)], asynchronous=False)
    consumer.close()
    sink = tmp_path / "sink.duckdb"
    with duckdb.connect(str(sink)) as con:
        con.execute("CREATE TABLE payments (src_topic VARCHAR, src_partition INTEGER, src_offset BIGINT, "
                    "payment_id VARCHAR)")
        con.executemany("INSERT INTO payments VALUES (?, 0, ?, ?)", [(topic, i, f"p{i}") for i in range(5)])
        con.execute('CREATE TABLE sink_offsets (topic VARCHAR, "partition" INTEGER, next_offset BIGINT)')
        con.execute("INSERT INTO sink_offsets VALUES (?, 0, 6)", [topic])
    for acl in (("topic", topic, "Read", False), ("group", group, "Describe", False),
                ("transactional-id", "payments-processor-", "Describe", True)):
        securekafka.grant(s.secured, "oncall", *acl)

    text = EXAMPLE.read_text()
    addresses = {
        '"broker-1.kafka.example.com:9093,broker-2.kafka.example.com:9093"': f'"{s.secured.sasl_ssl}"',
        '"/etc/kafka/ca.pem"': f'"{s.secured.pki.ca}"', '"/var/lib/payments/sink.duckdb"': f'"{sink}"',
        '"spark://spark-master.example.com:7077"': '"local[1]"'}
    for example, here in addresses.items():
        assert text.count(example) == 1, example
        text = text.replace(example, here)
    config = tmp_path / "production.toml"
    config.write_text(text)
    env = {"KAFKA_USERNAME": "oncall", "KAFKA_PASSWORD": s.password}
    audit = helpers.eosctl("audit", "-c", str(config), "-p", "payments", "--engine", "local",
                           "--format", "json", env=env, check=False)
    assert audit.exit_code == 0, audit.output
    report = json.loads(audit.stdout)
    assert (report["verdict"], report["findings"]) == ("pass", [])
    lag = helpers.eosctl("lag", "-c", str(config), "-p", "payments", "--format", "json", env=env, check=False)
    assert lag.exit_code == 0, lag.output
    (row,) = json.loads(lag.stdout)["groups"][0]["partitions"]
    assert (row["committed"], row["lso"], row["hw"], row["records_behind"]) == (6, 6, 6, 0)
    listed = helpers.eosctl("txns", "list", "-c", str(config), "-p", "payments", "--format", "json", env=env,
                            check=False)
    assert listed.exit_code == 0, listed.output
    listed_ids = [t["transactional_id"] for t in json.loads(listed.stdout)["transactions"]]
    assert listed_ids == ["payments-processor-0"]
    _no_password(s, audit.output, lag.output, listed.output)


def test_abort_yes_needs_cluster_action_and_says_so(setup):
    """The one write: without ClusterAction on the cluster the abort is refused naming it; with it, the
    hanging transaction is aborted (the module's last use of it)."""
    s, h = setup, setup.manifest["hanging"][0]
    args = ("txns", "abort", "-p", s.prefix, "--topic", h["topic"], "--partition", str(h["partition"]),
            "--start-offset", str(h["first_offset"]), "--yes")
    refused = s.eosctl(*args)
    assert refused.exit_code == 2, refused.output
    wanted = "ClusterAuthorizationFailed (WriteTxnMarkers): grant ClusterAction on the cluster"
    assert wanted in refused.stderr, refused.stderr
    securekafka.grant(s.secured, "oncall", "cluster", "", "ClusterAction")
    try:
        done = s.eosctl(*args)
    finally:
        securekafka.revoke(s.secured, "oncall", "cluster", "", "ClusterAction")
    assert done.exit_code == 0, done.output
    (group,) = json.loads(s.eosctl("lag", "-p", s.prefix, "--format", "json").stdout)["groups"]
    assert {r["partition"]: r["blocked"] for r in group["partitions"]}[h["partition"]] == 0
