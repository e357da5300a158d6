"""Root causes: what explains each finding of an audit, and the findings grouped by it (a report's
``root_causes``, listed before the findings in every format).

A rule reads only a finding's kind, detail and cause (eosctl.rules.causes), so this module needs nothing of
eosctl.report.findings: the report's JSON form there uses it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

# The reconciliation's kind each key-lineage kind renames: causes and root causes are that kind's.
KEY_KINDS = {"lost_key": "gap", "duplicate_key": "duplicate", "phantom_key": "phantom_aborted"}

# The fix of a sink that reads aborted or open transactions, as each framework spells it: Spark's Kafka source
# and Kafka Connect's sink tasks read with the Java consumer's default, read_uncommitted, unless told.
READ_COMMITTED_FIX = ("consume with isolation.level=read_committed (a Spark Structured Streaming job: "
                      "option kafka.isolation.level=read_committed, which Spark's Kafka source does not set; "
                      "Kafka Connect: consumer.override.isolation.level=read_committed)")

# A phantom_beyond_hw of a topic-partition Kafka doesn't have: its detail (for people) and its cause's rule
# (the fact, for the root causes and for JSON).
NOT_IN_KAFKA = "partition does not exist in Kafka"
PARTITION_NOT_IN_KAFKA = "partition_not_in_kafka"


class Explained(Protocol):
    """What a rule reads of a finding (an eosctl.report.findings.Finding)."""

    @property
    def kind(self) -> str: ...
    @property
    def topic(self) -> str | None: ...
    @property
    def partition(self) -> int | None: ...
    @property
    def detail(self) -> str | None: ...
    @property
    def cause(self) -> Any: ...  # an eosctl.report.findings.Cause or None


# Root causes (report.root_causes[].rule), in the order a report lists them, with what explains them.
ROOT_RULES = {
    "sink_reads_aborted": "the sink holds records of aborted or still-open transactions (or their markers): "
                          f"it consumes read_uncommitted, or writes before the commit; {READ_COMMITTED_FIX}",
    "sink_skipped": "the sink passed over committed records: its offsets were stored or committed apart "
                    "from its results (a crash between the two, or a seek past them)",
    "replay": "the sink wrote records again: results committed before their offsets were stored, then "
              "replayed after a crash or a rebalance",
    "upstream_retry": "one business key was written twice where idempotence cannot catch it (a producer "
                      "without idempotence, or a retry across producer sessions)",
    "application_resend": "the application sent one business key twice within one producer session",
    "offsets_disagree": "the offsets stored with the sink's rows and the group's committed offsets "
                        "disagree: offsets kept in two places drift apart",
    "invalid_rows": "the sink wrote rows without valid source coordinates",
    "unknown_partitions": "the sink holds rows for topic-partitions Kafka does not have (a deleted or "
                          "recreated topic, or rows from another cluster)",
    "beyond_high_watermark": "the sink holds rows at offsets the log never had (a recreated topic, or "
                             "records lost to an unclean leader election)",
    "coordinates_shifted": "the sink stores each row with a source offset shifted from its record's (an "
                           "off-by-one offset mapping in its writer)",
    "log_rewritten": "the sink holds records that are no longer in the log: the log was truncated and "
                     "rewritten at their offsets after a leader change (an unclean leader election)",
    "content_differs": "the sink holds rows whose key is not the key of the record at their offset",
    "value_differs": "the sink holds rows with the key of the record at their offset but another value (its "
                     "value column, or the value's md5, differs)",
    "field_differs": "the sink holds rows with their record's decoded fields but one column not (a transform "
                     "or a column mapping that mangles a field, a decimal written at another scale)",
    "unframed_records": "records not in the Schema Registry wire format where their partition's others are "
                        "(a producer that wrote without the serializer)",
    "not_yet_consumed": "committed records the sink's consumer had not reached when the sink was read "
                        "(its lag)",
    "written_before_commit": "a stage wrote outputs of input it has not committed to have processed: it "
                             "writes before it commits (at-least-once), and a restart writes them again",
    "reordered": "a replica holds records in another order than its source: its producer reordered retried "
                 "batches (neither idempotent nor limited to one request in flight)",
    "dead_lettered_and_written": "committed records are in the sink and in its dead-letter queue: the writer "
                                 "dead-lettered records it had written, or wrote them again on a retry",
    "dead_lettered_twice": "records were dead-lettered more than once: the DLQ's producer is not "
                           "transactional (Kafka Connect's), and a restarted task sent them again",
    "routed_wrong": "the sink holds records its route does not select: the stage routed them to the wrong "
                    "sink, or the route in the config is not the stage's",
    "lost_update": "a state sink holds older committed values over newer ones: a replay from an older offset "
                   "or a reordered retry overwrote the latest state (upserts without a version check)",
    "delete_not_applied": "a state sink holds keys their latest committed record deletes: deletes are not "
                          "applied (tombstones dropped), or a replay wrote the rows again",
    "state_not_written": "a state sink lacks keys whose latest committed record is a value: writes lost "
                         "(offsets committed before the upsert), or rows deleted without a record",
    "unknown_keys": "a state sink holds keys no source record has: rows from elsewhere, records gone to "
                    "retention, or a key mapping other than the writer's",
    "state_differs": "a state sink holds values no record of their key has, or folds no run of records "
                     "explains: the writer transforms values otherwise than the config says",
    "unexplained": "findings without a recorded cause (a report from before causes existed)",
}


@dataclass(frozen=True)
class RootCause:
    rule: str  # a key of ROOT_RULES
    summary: str
    findings: tuple[int, ...]  # indexes into the report's findings
    partitions: tuple[tuple[str, int], ...]

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "summary": self.summary, "findings": list(self.findings),
                "partitions": [{"topic": t, "partition": p} for t, p in self.partitions]}


def root_rule(f: Explained) -> str:
    """Which root cause explains a finding."""
    c = f.cause
    kind = KEY_KINDS.get(f.kind, f.kind)
    if kind in ("phantom_aborted", "phantom_uncommitted", "phantom_marker", "dlq_aborted", "aborted_value",
                "uncommitted_value"):
        return "sink_reads_aborted"
    if kind == "gap":
        if c is None:
            return "unexplained"
        return "sink_skipped" if c.passed_by or c.sink_after is not None else "not_yet_consumed"
    if f.kind == "key_duplicate":
        if c is None or c.rule is None:
            return "unexplained"
        return "upstream_retry" if c.rule in ("non_idempotent", "producer_sessions") else "application_resend"
    if f.kind == "content_mismatch":
        return _CONTENT_ROOT.get(c.rule if c is not None else None, "unexplained")
    if f.kind == "aggregate_mismatch":
        return _AGGREGATE_ROOT.get(c.rule if c is not None else None, "unexplained")
    if f.kind == "phantom_beyond_hw":
        return "unknown_partitions" if c is not None and c.rule == PARTITION_NOT_IN_KAFKA else \
            "beyond_high_watermark"
    return _BY_KIND[kind]


_CONTENT_ROOT: dict[str | None, str] = {"shifted_coordinates": "coordinates_shifted",
                 "rewritten_after_leader_change": "log_rewritten",
                 "different_record": "content_differs",
                 "different_value": "value_differs",
                 # the decoded content check (eosctl.rules.fields)
                 "different_field": "field_differs",
                 "unframed_record": "unframed_records"}
_AGGREGATE_ROOT: dict[str | None, str] = {"counted_aborted": "sink_reads_aborted", "counted_twice": "replay",
                   "missing_records": "sink_skipped", "unexplained_difference": "state_differs"}
_BY_KIND = {"duplicate": "replay", "offset_mismatch": "offsets_disagree", "invalid_row": "invalid_rows",
            "ahead_of_commit": "written_before_commit", "out_of_order": "reordered",
            "sink_and_dlq": "dead_lettered_and_written", "dlq_duplicate": "dead_lettered_twice",
            "misrouted": "routed_wrong", "stale_value": "lost_update",
            "resurrected_key": "delete_not_applied", "missing_key": "state_not_written",
            "unknown_key": "unknown_keys", "value_mismatch": "state_differs"}


def root_causes(findings: Sequence[Explained]) -> list[RootCause]:
    """The findings grouped by what explains them, in ROOT_RULES order."""
    groups: dict[str, list[int]] = {}
    for i, f in enumerate(findings):
        groups.setdefault(root_rule(f), []).append(i)
    out = []
    for rule in ROOT_RULES:
        if rule not in groups:
            continue
        members = [findings[i] for i in groups[rule]]
        parts = tuple(dict.fromkeys((f.topic, f.partition) for f in members
                                    if f.topic is not None and f.partition is not None))
        out.append(RootCause(rule, _root_summary(rule, members, len(parts)), tuple(groups[rule]), parts))
    return out


def _root_summary(rule: str, members: list[Explained], partitions: int) -> str:
    n = len(members)
    where = f" in {partitions} partition{'s' * (partitions != 1)}" if partitions else ""
    text = f"{n} finding{'s' * (n != 1)}{where}: {ROOT_RULES[rule]}"
    if rule not in ("sink_reads_aborted", "upstream_retry"):
        return text + "."
    # Only these two name transactions: reading them for 100k gaps decoded every cause
    # (eosctl.report.causejson).
    txns = {(t.topic or f.topic, t.partition if t.topic else f.partition, t.producer_id, t.first_offset)
            for f in members if f.cause for t in f.cause.transactions}
    if rule == "sink_reads_aborted" and txns:
        fenced = sum(1 for f in members if f.cause for t in f.cause.transactions if t.fenced)
        text += (f"; {len(txns)} transaction{'s' * (len(txns) != 1)}"
                 + (f", {fenced} of them aborted by fencing (a zombie producer)" if fenced else ""))
    elif rule == "upstream_retry" and txns:
        producers = sorted({t[2] for t in txns})
        text += f"; written by producer{'s' * (len(producers) != 1)} " + ", ".join(map(str, producers))
    return text + "."
