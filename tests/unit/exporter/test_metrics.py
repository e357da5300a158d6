"""What `eosctl exporter` serves for a known pipeline state (eosctl.exporter.metrics), offline: exact values,
both
formats, --partition-metrics off, an outage, and that a scrape renders the last state without reading."""

from __future__ import annotations

from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families

from eosctl.exporter.metrics import Exposition, Source
from tests.unit.metricsample import GROUP, NOW_MS, TOPIC, source

OPENMETRICS = "application/openmetrics-text; version=1.0.0"
PROMETHEUS_ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
                     "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")


def samples(sources: list[Source], partition_metrics: bool = True) -> dict[str, dict[tuple, float]]:
    """{sample name: {sorted label items without cluster/pipeline: value}} of the text format."""
    body, content_type = Exposition(sources, partition_metrics).render()
    assert content_type.startswith("text/plain; version=0.0.4")
    out: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            assert (s.labels.pop("cluster"), s.labels.pop("pipeline")) == ("prod", "payments")
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def part(partition: int, **extra: str) -> tuple:
    return tuple(sorted({"topic": TOPIC, "partition": str(partition), **extra}.items()))


def lag(partition: int, **extra: str) -> tuple:
    return tuple(sorted({"group": GROUP, "topic": TOPIC, "partition": str(partition), **extra}.items()))


def test_per_partition_and_per_group_values():
    got = samples([source()])
    assert got["eosctl_partition_high_watermark"] == {part(0): 11, part(1): 20}
    assert got["eosctl_partition_last_stable_offset"] == {part(0): 11, part(1): 17}
    assert got["eosctl_partition_log_start_offset"] == {part(0): 0, part(1): 2}
    assert got["eosctl_partition_blocked_offsets"] == {part(0): 0, part(1): 3}
    assert got["eosctl_partition_open_transaction_age_seconds"] == {
        part(1, producer_id="7", transactional_id="app-1"): 1200}
    # The trailing commit marker: nothing left to read, yet HW - committed is 1.
    assert got["eosctl_consumer_lag_records"] == {lag(0): 0, lag(1): 5}
    assert got["eosctl_consumer_lag_offsets"] == {lag(0): 1, lag(1): 8}
    assert got["eosctl_consumer_lag_seconds"] == {lag(0): 0, lag(1): 30}
    # Partition 1's offset commit is pending in app-1's transaction, open 20 minutes; partition 0's is not.
    assert got["eosctl_consumer_offset_commit_pending_seconds"] == {lag(1, transactional_id="app-1"): 1200}
    status = got["eosctl_consumer_group_status"]
    assert {dict(k)["status"]: v for k, v in status.items()} == {
        "OK": 1, "WARN": 0, "STALL": 0, "STOP": 0, "REWIND": 0, "ERR": 0}
    # The group's members by its type and state (ConsumerGroupDescribe), and a share group warned of.
    assert got["eosctl_consumer_group_members"] == {
        (("group", GROUP), ("state", "STABLE"), ("type", "consumer")): 2}
    assert got["eosctl_share_group_read_uncommitted"] == {(("group", "billing-share"),): 1}


def test_transactions_fencing_audit_and_self_metrics():
    got = samples([source()])
    states = {dict(k)["state"]: v for k, v in got["eosctl_transactions"].items()}
    assert (states["Ongoing"], states["CompleteCommit"], states["Dead"]) == (2, 2, 0)
    # app-2pc's open two-phase commit transaction, a day old; app-2pc-done runs none.
    assert got["eosctl_two_phase_transaction_age_seconds"] == {
        (("producer_id", "9"), ("transactional_id", "app-2pc")): 86_400}
    assert got["eosctl_hanging_transactions"] == {(): 1}
    assert got["eosctl_producer_fencing_events_total"] == {part(0): 1, part(1): 0}
    assert got["eosctl_zombie_writes_total"] == {part(0): 2, part(1): 0}
    findings = {dict(k)["kind"]: v for k, v in got["eosctl_audit_findings"].items()}
    assert (findings["gap"], findings["duplicate"], findings["invalid_row"], len(findings)) == (1, 1, 0, 27)
    assert got["eosctl_audit_passed"] == {(): 0}
    assert (got["eosctl_audit_failing_findings"], got["eosctl_audit_waived_findings"]) == ({(): 2}, {(): 0})
    assert got["eosctl_audit_last_run_timestamp_seconds"] == {(): NOW_MS / 1000}
    assert got["eosctl_audit_duration_seconds"] == {(): 2.5}
    assert got["eosctl_audit_errors_total"] == {(): 0}
    assert got["eosctl_sink_rows"] == {part(0): 11, part(1): 9}
    # a replica pipeline's failover readiness (metricsample: 1 record again, none missed)
    assert got["eosctl_replica_failover_records"] == {lag(0, outcome="again"): 1, lag(0, outcome="never"): 0}
    assert got["eosctl_up"] == {(): 1}
    assert got["eosctl_refresh_duration_seconds"] == {(): 0.25}
    assert got["eosctl_refresh_errors_total"][(("section", "lag"),)] == 2
    assert got["eosctl_section_age_seconds"][(("section", "logs"),)] == 1.5


def test_partition_metrics_off_sums_per_topic_and_group():
    got = samples([source()], partition_metrics=False)
    topic = (("topic", TOPIC),)
    assert got["eosctl_partition_high_watermark"] == {topic: 31}
    assert got["eosctl_partition_blocked_offsets"] == {topic: 3}
    assert got["eosctl_partition_open_transaction_age_seconds"] == {
        (("producer_id", "7"), *topic, ("transactional_id", "app-1")): 1200}
    assert got["eosctl_consumer_lag_records"] == {(("group", GROUP), *topic): 5}
    assert got["eosctl_consumer_lag_offsets"] == {(("group", GROUP), *topic): 9}
    assert got["eosctl_consumer_lag_seconds"] == {(("group", GROUP), *topic): 30}  # the maximum
    assert got["eosctl_sink_rows"] == {topic: 20}
    assert not any("partition" in dict(k) for series in got.values() for k in series)


def test_outage_keeps_the_last_values_with_up_0_and_status_err():
    src = source()
    src.model.up = False
    src.model.refresh_errors["logs"] += 1
    src.refreshed(None)
    got = samples([src])
    assert got["eosctl_up"] == {(): 0}
    assert got["eosctl_consumer_lag_records"] == {lag(0): 0, lag(1): 5}
    assert got["eosctl_partition_high_watermark"] == {part(0): 11, part(1): 20}
    status = {dict(k)["status"]: v for k, v in got["eosctl_consumer_group_status"].items()}
    assert (status["ERR"], status["OK"]) == (1, 0)
    assert got["eosctl_refresh_errors_total"][(("section", "logs"),)] == 1


def test_openmetrics_by_content_negotiation():
    exposition = Exposition([source()])
    body, content_type = exposition.render(PROMETHEUS_ACCEPT)
    assert content_type.startswith(OPENMETRICS)
    text = body.decode()
    assert text.endswith("# EOF\n") and text.count("# EOF") == 1
    families = {f.name: f for f in parse_openmetrics(text)}  # raises on anything OpenMetrics forbids
    assert families["eosctl_producer_fencing_events"].type == "counter"
    assert families["eosctl_up"].samples[0].value == 1
    plain, content_type = exposition.render("text/plain")
    assert content_type.startswith("text/plain") and b"# EOF" not in plain


def test_gzip_body_is_two_members_any_gzip_reader_reads_whole():
    import gzip

    exposition = Exposition([source()])
    parts, _ = exposition.parts(PROMETHEUS_ACCEPT, gzipped=True)
    assert len(parts) == 2 and all(p[:2] == b"\x1f\x8b" for p in parts)
    assert gzip.decompress(b"".join(parts)) == exposition.render(PROMETHEUS_ACCEPT)[0]


def test_the_state_is_rendered_once_per_change_and_ages_at_every_scrape():
    src = source()
    exposition = Exposition([src])
    first, _ = exposition.render()
    src.model.current.logs[(TOPIC, 0)].high_watermark = 99  # changed, but no new reading was taken in
    src.model.ages["logs"] = 9.0
    second, _ = exposition.render()
    hw0 = b'eosctl_partition_high_watermark{cluster="prod",partition="0",pipeline="payments",topic="orders"}'
    assert hw0 + b" 11.0" in second  # the state as rendered at the last reading
    assert b'section="logs"} 9.0' in second and b'section="logs"} 1.5' in first  # ages: at every scrape
    src.refreshed(src.model.current)  # a new reading: rendered again
    assert hw0 + b" 99.0" in exposition.render()[0]


def test_a_section_that_fails_keeps_its_last_values_and_its_group_is_err():
    import dataclasses

    from eosctl.inspection.capture import NOT_CAPTURED

    src = source()
    broken = dataclasses.replace(src.model.current, lag=None, logs={},
                                 sections={**src.model.current.sections, "lag": NOT_CAPTURED + "timed out",
                                           "logs": NOT_CAPTURED + "timed out"})
    src.refreshed(broken)
    got = samples([src])
    assert got["eosctl_consumer_lag_records"] == {lag(0): 0, lag(1): 5}
    assert got["eosctl_partition_high_watermark"] == {part(0): 11, part(1): 20}
    status = {dict(k)["status"]: v for k, v in got["eosctl_consumer_group_status"].items()}
    assert (status["ERR"], status["OK"]) == (1, 0)
    assert got["eosctl_up"] == {(): 1}  # the cluster answered; two of its sections did not


def test_label_values_from_the_cluster_are_escaped():
    src = source()
    src.model.current.logs = {('a"b\\c\nd', 0): src.model.current.logs[(TOPIC, 0)]}
    src.refreshed(None)
    body, _ = Exposition([src]).render()
    assert b'topic="a\\"b\\\\c\\nd"' in body
    names = [s.labels["topic"] for f in text_string_to_metric_families(body.decode())
             if f.name == "eosctl_partition_high_watermark" for s in f.samples]
    assert names == ['a"b\\c\nd']
