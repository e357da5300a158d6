"""The reference in docs/ names exactly what the code emits, so the two cannot drift apart.

Each test builds real output offline (no broker, no Spark): the JSON of every `--format json` command, the
snapshot file's tables and columns, the reference pipeline's manifest and sink schema, and the config keys.
It compares that with the tables of docs/*.md and fails naming every path that differs: emitted but not
documented, documented but never emitted, documented as always present but missing from some output (mark it
"(optional)" in the type column, or fix the code), or marked "(optional)" but present in every output.

A new field the samples below don't produce (say an optional one) shows as "documented but never emitted"
once documented: then extend the sample that builds that output.
"""

from __future__ import annotations

import ast
import json
import re
import tomllib
from collections import defaultdict
from contextlib import nullcontext
from dataclasses import fields, replace
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import duckdb
import pytest

from eosctl.base.errors import ConfigError
from eosctl.cli import main
from eosctl.cluster.groups import GroupDescription, Member, Subtopology, Task
from eosctl.cluster.model import (
    Batch,
    EpochBump,
    Kind,
    OffsetRange,
    PartitionLog,
    ProducerState,
    SequenceAnomaly,
    Transaction,
    ZombieWrite,
)
from eosctl.commands import txns_cmd
from eosctl.config import file as configfile
from eosctl.config import model as config_mod
from eosctl.config.policy import Level, Waiver
from eosctl.config.target import Target
from eosctl.inspection import capture as capture_mod
from eosctl.inspection.capture import Capture
from eosctl.inspection.lag import LagSnapshot, PartitionLag, Watch
from eosctl.inspection.ledger import Ledger, LedgerFlag, PartitionLedger
from eosctl.output.lag import lag_document
from eosctl.output.log import log_document
from eosctl.report.findings import KINDS, STATE_KINDS, AuditReport, Finding, PartitionSummary
from eosctl.report.policy import apply_policy
from eosctl.report.readpoint import ReadPoint
from eosctl.report.window import PartitionWindow, WindowSpec, parse_bound
from eosctl.rules.deadletter import DLQ_KINDS
from eosctl.rules.rule import audit_partition
from eosctl.txn.fence import Fenced, FencedPartition, FencePlan
from eosctl.txn.opentxn import OpenTxn
from eosctl.txn.pendingoffsets import Holder, PendingCommit
from eosctl.txn.producers import DESCRIBE_PRODUCERS, LOG_SCAN, ProducerRow, ProducersReport
from eosctl.txn.transactions import AbortPlan, Hanging, HangingReport, TxnInfo
from tests.support.helpers import eosctl_json

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
OPTIONAL = "(optional)"
NOW_MS = 1_790_000_000_000


# ---- reading the docs ------------------------------------------------------------------------------------


def doc_tables(name: str) -> dict[str, list[list[list[str]]]]:
    """{heading: [table, ...]} of docs/NAME; a table is its rows of cells, header row first."""
    out: dict[str, list[list[list[str]]]] = defaultdict(list)
    heading, current = "", None
    for line in (DOCS / name).read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            heading, current = line.lstrip("#").strip(), None
        elif line.startswith("|"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            if current is None:
                current = []
                out[heading].append(current)
            if not all(set(c) <= set("-: ") for c in cells):  # the |---|---| separator
                current.append(cells)
        else:
            current = None
    return out


def _name(cell: str) -> str:
    m = re.fullmatch(r"`([^`]+)`", cell)
    assert m, f"first column must be one name in backticks, got {cell!r}"
    return m.group(1)


def documented(name: str, heading: str, first: str = "field") -> dict[str, tuple[str, bool]]:
    """{path: (type, optional)} of the one table under ``heading`` whose header starts with ``first``."""
    tables = [t for t in doc_tables(name).get(heading, []) if t[0][0] == first]
    assert len(tables) == 1, f"docs/{name}: expected one '{first}' table under heading {heading!r}"
    out = {}
    for cells in tables[0][1:]:
        path = _name(cells[0])
        assert path not in out, f"docs/{name} § {heading}: {path} listed twice"
        out[path] = (cells[1].replace(OPTIONAL, "").strip(), OPTIONAL in cells[1])
    return out


def optional_flags(table: dict[str, tuple[str, bool]]) -> dict[str, bool]:
    return {path: opt for path, (_, opt) in table.items()}


# ---- comparing JSON documents with a table ------------------------------------------------------------


def key_sets(doc: Any) -> dict[str, list[set[str]]]:
    """For every object in ``doc``: its path (`a.b`, `a[].b`) -> the key sets of the objects found there."""
    out: dict[str, list[set[str]]] = defaultdict(list)

    def walk(obj: Any, path: str) -> None:
        if isinstance(obj, dict):
            out[path].append(set(obj))
            for k, v in obj.items():
                walk(v, f"{path}.{k}" if path else k)
        elif isinstance(obj, list):
            for item in obj:
                walk(item, path + "[]")

    walk(doc, "")
    return out


def _join(parent: str, key: str) -> str:
    return f"{parent}.{key}" if parent else key


def _split(path: str) -> tuple[str, str]:
    parent, _, key = path.rpartition(".")
    return parent, key


def diff_paths(docs: list[Any], table: dict[str, bool]) -> dict[str, list[str]]:
    """What differs between the JSON ``docs`` and a documented table {path: optional}."""
    emitted: set[str] = set()
    missing: set[str] = set()
    absent: set[str] = set()  # optional paths seen missing from some object that could have had them
    for doc in docs:
        sets = key_sets(doc)
        emitted |= {_join(parent, k) for parent, many in sets.items() for keys in many for k in keys}
        for path, optional in table.items():
            parent, key = _split(path)
            if any(key not in keys for keys in sets.get(parent, [])):
                (absent if optional else missing).add(path)
    optional = {path for path, opt in table.items() if opt}
    return {"emitted but not documented": sorted(emitted - set(table)),
            "documented but never emitted": sorted(set(table) - emitted),
            "documented as always present, missing in some output": sorted(missing),
            "documented as optional, present in every output": sorted((optional & emitted) - absent)}


def assert_same(what: str, problems: dict[str, list[str]]) -> None:
    bad = {k: v for k, v in problems.items() if v}
    assert not bad, f"{what} and the code disagree:\n" + "\n".join(
        f"  {k}:\n" + "\n".join(f"    {p}" for p in v) for k, v in bad.items())


def check_json(heading: str, docs: list[Any], extra: dict[str, bool] | None = None) -> None:
    table = {**optional_flags(documented("json.md", heading)), **(extra or {})}
    assert_same(f"docs/json.md § {heading}", diff_paths(docs, table))


def nested(heading: str, under: str) -> dict[str, bool]:
    """Another section's fields placed under ``under`` (each transaction of `txns list`: `transactions[]`)."""
    return {f"{under}.{p}": opt for p, opt in optional_flags(documented("json.md", heading)).items()}


def test_the_comparison_names_added_dropped_and_sometimes_missing_fields() -> None:
    table = {"a": True, "b": True, "c[].x": False, "c": False, "gone": False}
    problems = diff_paths([{"a": 1, "c": [{"x": 1}, {"y": 2}], "new": {"z": 1}}], table)
    assert problems == {"emitted but not documented": ["c[].y", "new", "new.z"],
                        "documented but never emitted": ["b", "gone"],
                        "documented as always present, missing in some output": ["c[].x", "gone"],
                        "documented as optional, present in every output": ["a"]}
    assert not any(diff_paths([{"a": 1, "c": []}, {"c": [{"x": 1}]}], {"a": True, "c": False, "c[].x": False})
                   .values())


# ---- samples of what the code emits -------------------------------------------------------------------


def partition_log(batches: bool = True) -> PartitionLog:
    """0..2 committed, 3 COMMIT, 4..5 aborted, 6 ABORT, 7..8 open; pid 7 fenced once, with a zombie write."""
    ranges = [OffsetRange(0, 2, Kind.DATA, 7, 0), OffsetRange(3, 3, Kind.MARKER, 7, 0),
              OffsetRange(4, 5, Kind.ABORTED, 8, 0), OffsetRange(6, 6, Kind.MARKER, 8, 0),
              OffsetRange(7, 8, Kind.OPEN, 7, 1)]
    txns = [Transaction(7, 0, 0, 2, "COMMIT", 3, 3), Transaction(8, 0, 4, 5, "ABORT", 6, 2),
            Transaction(7, 1, 7, 8, "OPEN", None, 2)]
    producers = {
        7: ProducerState(7, epochs=[0, 1], last_epoch=1, last_sequence=4, last_offset=8,
                         last_timestamp=NOW_MS, batches=3, records=5, open_txn_first_offset=7,
                         epoch_bumps=[EpochBump(7, 0, 1, False)], zombie_writes=[ZombieWrite(8, 0, 1)],
                         sequence_anomalies=[SequenceAnomaly(8, 1, 1, 3, "gap")], zombie_total=1,
                         anomaly_total=1),
        8: ProducerState(8, epochs=[0, 1], last_epoch=1, last_sequence=1, last_offset=6,
                         last_timestamp=NOW_MS, batches=2, records=3,
                         epoch_bumps=[EpochBump(6, 0, 1, True, "ABORT")]),
    }
    batch_list = [Batch(0, 2, 3, 7, 0, 0, 2, True, False, None, NOW_MS, NOW_MS, "none", 120),
                  Batch(3, 3, 1, 7, 0, -1, -1, True, True, "COMMIT", NOW_MS, NOW_MS, "none", 78, (3,))]
    return PartitionLog("orders", 0, 0, 9, 7, 0, 9, ranges, txns, producers,
                        batch_list if batches else None, ["LSO 7 but the log says 7"],
                        leader_epochs=[(0, 0), (2, 3)])


def state_findings() -> list[Finding]:
    """One finding of every state sink kind, made by the upsert rule (eosctl.rules.upsert) over a log
    of one partition: a stale value, an aborted and an open transaction's values, a resurrected, a missing,
    an unknown key and a value no record has."""
    from eosctl.rules.upsert import StateRecord, StateRow, judge

    def rec(offset: int, key: str, value: str | None, status: str = "committed", pid: int = 7,
            marker: int | None = None) -> StateRecord:
        return StateRecord("orders", 0, offset, (key,), None if value is None else (value,), value is None,
                           "null" if value is None else value, status, producer_id=pid, producer_epoch=0,
                           marker_offset=marker)

    records = [rec(0, "k1", "a"), rec(1, "k1", "b"), rec(2, "k2", "x"), rec(3, "k2", "y", "aborted", 8, 4),
               rec(5, "k3", "z"), rec(6, "k4", "v"), rec(7, "k4", None), rec(8, "k5", "m"), rec(9, "k7", "p"),
               rec(10, "k3", "w", "open", 9)]
    rows = [StateRow((k,), (v,), v) for k, v in (("k1", "a"), ("k2", "y"), ("k3", "w"), ("k4", "v"),
                                                 ("k6", "q"), ("k7", "zzz"))]
    out = judge(records, rows, {("orders", 0): 10}, shown_key=lambda k: str(k[0]), topic="orders").findings
    # an aggregate table (sum of value.n) that counted offsets 1-2 twice (eosctl.rules.aggregate)
    from eosctl.rules import aggregate

    amounts = [rec(0, "a", "5"), rec(1, "a", "7"), rec(2, "a", "11"), rec(3, "a", "13")]
    return out + aggregate.judge(amounts, [StateRow(("a",), ("54",), "54")], {("orders", 0): 10}, "sum",
                                 field="value.n", shown_key=lambda k: str(k[0])).findings


def findings_of_every_kind() -> list[Finding]:
    """One finding of every kind over partition_log()'s offsets, each with the cause the audit gives it
    (eosctl.rules.causes), and one cause with more transactions than it lists."""
    from dataclasses import replace

    from eosctl.report.rootcauses import KEY_KINDS
    from eosctl.rules.causes import Writer, explain_finding, explain_partition, key_cause, with_write_order
    from eosctl.rules.reconcile import SinkFacts

    at = {"gap": (0, 0), "duplicate": (1, 1), "phantom_aborted": (4, 5), "phantom_marker": (3, 3),
          "phantom_uncommitted": (7, 8), "phantom_beyond_hw": (9, 9)}
    out = []
    for kind in KINDS:
        if kind == "key_duplicate":
            writers = [Writer("orders", 0, 10, 7, 0, 13), Writer("orders", 1, 12, -1, -1, None)]
            f = Finding(kind, "orders", 0, 10, 12, 2, key="o-1", offsets=(10, 12),
                        detail="in orders[0]@10, orders[1]@12")
            out.append(replace(f, cause=key_cause(f, writers)))
            f = Finding(kind, "orders", 1, 20, 21, 2, key="o-2", offsets=(20, 21))
            out.append(replace(f, cause=key_cause(f, [Writer("orders", 1, 20, 7, 0, 22),
                                                      Writer("orders", 1, 21, 7, 0, 22)])))
        elif kind == "offset_mismatch":
            out.append(Finding(kind, "orders", 0, 30, 31, 2, detail="sink stored next offset 30, group g "
                                                                     "committed 32"))
        elif kind == "invalid_row":
            out.append(explain_finding(Finding(kind, "orders", None, None, None, 1,
                                               detail="src_partition is NULL")))
        elif kind == "ahead_of_commit":  # made where a hop's rows are read (eosctl.sink.kafka_topic)
            from eosctl.report.findings import Cause

            said = "The stage wrote 1 output of 1 input record of orders[0] past its group's commit ..."
            detail = "outputs out[0]@4; group g committed offset 7"
            out.append(Finding(kind, "orders", 0, 8, 8, 1, detail=detail, cause=Cause(kind, said)))
        elif kind in KEY_KINDS:  # key lineage renames what the reconciliation found, cause and all
            out.append(Finding(KEY_KINDS[kind], "orders", 0, *at[KEY_KINDS[kind]], 1, detail=kind))
        elif kind == "out_of_order":  # made where a replica's rows are paired (eosctl.sink.replica)
            from auditors.passes import out_of_order
            from eosctl.config.model import Sink

            frozen = Sink(duckdb="x", frozen_from=Sink(kafka_topic="src.orders", lineage="replica"),
                          at=json.dumps({"replica_of": "orders", "out_of_order": [[0, [2]]]}))
            out.extend(out_of_order(frozen))
        elif kind == "content_mismatch":
            out.extend(content_findings())
        elif kind == "misrouted":  # made by the sweep of a sink with a route (eosctl.config.route)
            from eosctl.rules.reconcile import reconcile_partition

            out.extend(reconcile_partition(partition_log(), [(0, 2, 1)], routed_out=[(1, 1)])[1])
        elif kind in DLQ_KINDS:  # made with the sink's dead-letter queue (eosctl.rules.deadletter)
            log = plog_with_dlq()
            out.extend(f for f in audit_partition("orders", 0, log, iter([(0, 0, 1)]), dead_lettered=[
                (0, 1), (1, 2), (4, 1)], dlq_topic="orders.dlq")[1] if f.kind == kind)
        elif kind in STATE_KINDS:
            out.extend(f for f in state_findings() if f.kind == kind)
        else:
            out.append(Finding(kind, "orders", 0, *at[kind], 1))
    facts = SinkFacts(gaps={0: (None, 1)}, duplicates={1: (2, 3)})
    explained = [f if f.cause is not None else explain_partition(partition_log(), [f], facts, 40, 32, "g")[0]
                 for f in out]
    explained = [replace(f, kind=f.detail, detail="key o-1; outputs out[0]@3") if f.detail in KEY_KINDS else f
                 for f in explained]
    aborted = next(f for f in explained if f.kind == "phantom_aborted")
    assert aborted.cause is not None
    many = replace(aborted.cause, omitted=3)
    duplicate = next(f for f in explained if f.kind == "duplicate")
    ordered = with_write_order(duplicate, "sink_batch", (4, 4, 9, 9))  # with sink.order_column
    return [*explained, replace(aborted, first_offset=6, last_offset=6, cause=many), ordered]


DLQ_SAMPLES = [{"topic": "orders.dlq", "records": 3, "dead_lettered": 1,
                "by_exception": [{"exception": "org.apache.kafka.connect.errors.DataException",
                                  "records": 2}],
                "conventions": {"connect": 2}, "unreadable": 1, "other_partitions": 0},
               {"topic": "orders.dlq", "records": 1, "dead_lettered": 0,
                "by_exception": [{"exception": "java.lang.ArithmeticException", "records": 1}],
                "conventions": {"streams": 1}, "unreadable": 0, "other_partitions": 1}]


def plog_with_dlq() -> PartitionLog:
    """partition_log()'s offsets, for the DLQ's findings: 0..2 committed, 4..5 aborted."""
    return partition_log()


def content_findings() -> list[Finding]:
    """content_mismatch of each rule, from eosctl.rules.content over partition_log()'s offsets with record
    keys:
    rows 1..3 hold the records below them (offset+1), row 4 its own, rows 6 and 7 records a leader change
    rewrote (epoch 1 from offset 5), row 9 another record's key."""
    from dataclasses import replace

    import numpy as np

    from eosctl.cluster.recordkeys import RecordKeys, hash_bytes
    from eosctl.rules.content import check_partition

    keys = hash_bytes(f"k{o}".encode() for o in range(10))
    rk = RecordKeys(np.arange(10, dtype=np.int64), np.array([0] * 5 + [1] * 5, np.int32), np.zeros(10, bool),
                    keys)
    # every offset a committed record's: only rows at those are compared with a record
    log = replace(partition_log(), ranges=[OffsetRange(0, 9, Kind.DATA, 7, 0)], high_watermark=10,
                  last_stable_offset=10, scanned_to=10, record_keys=rk, leader_epochs=[(0, 0), (1, 5)])
    rows = [(1, "k0"), (2, "k1"), (3, "k2"), (4, "k4"), (6, "old6"), (7, "old7"), (8, "k8"), (9, "zz")]
    sink_keys = [k for _, k in rows]
    return check_partition(log, np.array([o for o, _ in rows], np.int64),
                           hash_bytes(k.encode() for k in sink_keys), sink_keys).findings


def audit_report(engine: dict[str, Any], findings: list[Finding],
                 read_point: ReadPoint | None = None, window: WindowSpec | None = None) -> AuditReport:
    from eosctl.report.findings import Hop, LogSegment

    # The log segments only when there are findings: the sample without findings must show them optional.
    segments = (LogSegment("ABORTED", 10, 19, 10), LogSegment("MARKER", 20, 20, 1)) if findings else None
    parts = [PartitionSummary("orders", 0, 0, 40, 41, 35, 36, 1, log_segments=segments,
                              window=PartitionWindow(5, 30, 8) if window else None, outside_window=3,
                              expired=2, dead_lettered=1 if window else None,
                              filtered=4 if window else None),
             PartitionSummary("ghost", 0, 0, 0, 0, 0, 2, exists=False)]
    # The full sample is a pipeline audited hop by hop (stage, then sink); the other one hop.
    hops = [Hop("p.stage", ("raw",), "orders (hop_rows)", "stage", "pass", 0, 0),
            Hop("p", ("orders", "ghost"), "/s/sink.duckdb (orders_sink)", "g", "fail", len(findings), 1)]
    return AuditReport.build(parts, findings, ("gap", "duplicate"), sink="/s/sink.duckdb (orders_sink)",
                             sink_read_point=read_point, group="g", engine=engine, elapsed_seconds=1.2345,
                             hops=hops if findings else [], window=window)


def _function(path: Path, name: str) -> ast.FunctionDef:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise AssertionError(f"no function {name} in {path}: the test reads how the JSON is built there")


def _keys(node: ast.Dict) -> list[str]:
    return [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]


def literal_keys(func: ast.FunctionDef) -> tuple[set[str], set[str]]:
    """String keys a function writes: (always: in dict literals or `d["k"] = ...`; sometimes: such an
    assignment under an if)."""
    always, sometimes = set(), set()

    def walk(node: ast.AST, in_if: bool) -> None:
        if isinstance(node, ast.Dict):
            always.update(_keys(node))
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) \
                and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            (sometimes if in_if else always).add(node.slice.value)
        for child in ast.iter_child_nodes(node):
            walk(child, in_if or isinstance(node, ast.If))

    walk(func, False)
    return always, sometimes - always


class _Conf:
    def __init__(self, values: dict[str, str]):
        self.values = values

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)


class _ConnectSpark:
    """What auditors.spark.describe sees of a Spark Connect session: no SparkContext."""

    version = "4.0.0"
    conf = _Conf({"spark.sql.shuffle.partitions": "4"})

    @property
    def sparkContext(self) -> Any:  # noqa: N802 (PySpark's name)
        raise RuntimeError("not supported in Spark Connect")


class _ClassicSpark(_ConnectSpark):
    sparkContext = SimpleNamespace(getConf=lambda: _Conf({"spark.master": "local[2]",  # noqa: N815
                                                          "spark.driver.memory": "2g"}))


def engines() -> tuple[dict[str, Any], dict[str, Any]]:
    """The `engine` object with every key it can have, and with only the ones it always has.

    Built by the code that builds it for a report (auditors.engine.engine_facts), for Spark on stand-ins
    of a classic and a Spark Connect session, and for the local engine; the timings are the ones
    auditors.outcome.outcome reports for either engine.
    """
    from auditors import engine
    from auditors.outcome import outcome

    timings = outcome([], [], 1.0, 1.0).timings
    from auditors.incremental import Run, engine_info

    variants = [engine.engine_facts(info, 2, 1.0, 1.0, timings, read_by)
                for info, read_by in ((engine.spark_info(_ClassicSpark()), "spark"),
                                      (engine.spark_info(_ConnectSpark()), None),
                                      (engine.local_info(4, 2), None))]
    variants.append(engine_info(Run(False, "", 10, 9, 2, 1.0), 1.0, timings))  # --incremental
    full = {k: v for facts in variants for k, v in facts.items()}
    least = {k: v for k, v in variants[1].items() if all(k in facts for facts in variants)}
    return full, least


def lag_snapshots() -> list[LagSnapshot]:
    rows = [PartitionLag("g", "orders", 0, 5, 0, 7, 9, 2, True, NOW_MS - 3000,
                         OpenTxn(7, 1, 7, NOW_MS - 5000), member_id="app-1-7f3c", client_id="app-1",
                         host="/10.0.0.7", pending=PendingCommit("g", frozenset({("orders", 0)}), 12, (
                             Holder(7, 1, 40, "demo.processor", "Ongoing", NOW_MS - 5000, True),))),
            PartitionLag("g", "orders", 1, None, 0, 4, 4, None, True, pending=PendingCommit(
                "g", frozenset({("orders", 1)}), None, problem="cannot describe __consumer_offsets")),
            PartitionLag("g", "orders", 2, 12, 0, 9, 9, error="committed offset 12 is beyond the high "
                                                               "watermark 9")]
    from eosctl.cluster.shareprogress import ShareOffset

    # A streams group and a share group too (eosctl.cluster.groups): their members, topology, progress.
    more = [PartitionLag("app", "orders", 0, 9, 0, 9, 9, 0, True, member_id="m-s", client_id="app-1-c",
                         host="/10.0.0.8"),
            PartitionLag("s", "orders", 0, 6, 0, 9, 9, 3, True, share=ShareOffset(6, 3))]
    described = {
        "g": GroupDescription("g", "consumer", "STABLE", 3, (Member("app-1-7f3c", "app-1", "/10.0.0.7",
                                                                    (("orders", 0),)),)),
        "app": GroupDescription("app", "streams", "STABLE", 5, (Member(
            "m-s", "app-1-c", "/10.0.0.8", (("orders", 0),), "7cd6", (Task("0", (0,)),), (), ()),), 2,
            (Subtopology("0", ("orders",)),)),
        "s": GroupDescription("s", "share", "STABLE", 2, ())}
    return [LagSnapshot(NOW_MS - 1000, rows, {"g": "STABLE"}),
            LagSnapshot(NOW_MS, rows + more, {"g": "STABLE", "app": "STABLE", "s": "STABLE"},
                        {"g": "consumer", "app": "streams", "s": "share"}, described,
                        {"s": "read_uncommitted"},
                        {"s": "share group s reads transactional topic orders ..."})]


def txn_infos() -> list[TxnInfo]:
    return [TxnInfo("demo.processor", 1001, 2, "Ongoing", 60_000, NOW_MS - 4000, 1, (("orders", 0),)),
            TxnInfo("demo.source", 1000, None, "Empty", None, None, None)]


def hanging_report() -> HangingReport:
    found = [Hanging("orders", 0, 7, 1, 7, 950.0, ("kip664", "lso"), 7, 9, "demo.hanging", "Ongoing"),
             Hanging("orders", 1, 9, 0, 3, None, ("kip664",)),
             Hanging("__consumer_offsets", 12, 13, 0, 40, 960.0, ("kip664", "lso"), 40, 41, None, None,
                     groups=("demo.processor",))]
    young = [Hanging("orders", 2, 11, 0, 5, 30.0, ("lso",), 5, 8, "demo.processor", "Ongoing", "coordinator")]
    return HangingReport(900.0, 3, found, 2, "ok", blocking=young)


def ledger() -> Ledger:
    flags = [LedgerFlag("gap", 4, 5, 2, "offsets 4..5 committed but not in the sink"),
             LedgerFlag("offset_mismatch", None, None, 0, "stored 3, committed 5")]
    parts = [PartitionLedger("orders", 0, 10, 9, 0, 12, 1, 1, 13, 13, 0, 14, 14, 13, 2, flags, True),
             PartitionLedger("orders", 1)]
    held = PendingCommit("g", frozenset({("orders", 0)}), 12, (
        Holder(7, 1, 40, "demo.processor", "Ongoing", NOW_MS - 5000, True),))
    return Ledger("demo", "/s/sink.duckdb (orders_sink)", "g", True, parts,
                  pending_commit=held.to_dict(NOW_MS))


def producer_rows() -> list[ProducerRow]:
    return [ProducerRow("orders", 0, 7, 1, 4, NOW_MS, 7, 3, (0, 1), 1, 1),
            ProducerRow("orders", 1, 8, 0, 2, None, None)]


def capture(full: bool = True) -> Capture:
    """A Capture with a value in every field (``full``), or with nulls wherever a field allows one."""
    cap = Capture(captured_at=datetime.fromtimestamp(NOW_MS / 1000, UTC), bootstrap="h:1", pipeline="demo",
                  group="g", topics=["orders"])
    cap.sections = dict.fromkeys(capture_mod.SECTIONS, "ok")
    if full:
        cap.logs = {("orders", 0): partition_log(batches=False)}
        cap.transactions = txn_infos()[:1]
        cap.producers = producer_rows()[:1]
        cap.lag = LagSnapshot(NOW_MS, [PartitionLag("g", "orders", 0, 5, 0, 7, 9, 2, True, NOW_MS - 3000,
                                                    OpenTxn(7, 1, 7, NOW_MS), "leader not available")],
                              {"g": "STABLE"})
        cap.hanging = hanging_report()
        cap.hanging_candidates = [*cap.hanging.hanging, Hanging("orders", 2, 11, 0, 5, 3.0, ("lso",), 5, 6)]
        cap.hanging_checked_ms = NOW_MS
        cap.ledger = ledger()
    else:
        cap.transactions = txn_infos()[1:]
        cap.producers = producer_rows()[1:]
        cap.lag = LagSnapshot(NOW_MS, [PartitionLag("g", "orders", 1, None, 0, 4, 4)], {})
        cap.sections.update(ledger="not captured: the pipeline has no sink",
                            hanging="not captured: no topics to check (pass --topic or a pipeline)")
    return cap


# ---- the commands' JSON -------------------------------------------------------------------------------


class _Client:
    """Stands in for eosctl.cluster.wire.WireClient: the commands below only open and close it."""

    def __init__(self, *args: Any, **kwargs: Any):
        pass

    def __enter__(self) -> _Client:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """Commands run for real against stand-ins: a fixed target and clients that do nothing; each test
    replaces the one core function its command calls."""
    target = Target(cluster=config_mod.Cluster("t", "h:1"), pipeline=None, config=None, topics=("orders",),
                    group="g")
    monkeypatch.setattr("eosctl.config.target.resolve", lambda *a, **k: target)
    monkeypatch.setattr("eosctl.cluster.wire.WireClient", _Client)
    monkeypatch.setattr("eosctl.cluster.clients.kafka_admin",
                        lambda *a, **k: SimpleNamespace(close=lambda: None))
    monkeypatch.setattr(txns_cmd, "_wire", lambda target: nullcontext(_Client()))
    monkeypatch.setattr(txns_cmd, "_admin", lambda target: SimpleNamespace(close=lambda: None))
    return monkeypatch


def run(*args: str) -> Any:
    """`eosctl ARGS --format json`'s document (exit 0, or 1 for commands that found something)."""
    return eosctl_json(*args, columns=None, check=False)


def test_audit_json_is_documented() -> None:
    from eosctl.output.audit import render

    full, least = engines()
    points = [ReadPoint("postgres", "postgresql://u@h/db", {"snapshot": "00000003-0000001B-1",
                                                            "server_version": "15.18"}),
              ReadPoint("duckdb", "/s/sink.duckdb", {"copied_at": "2026-11-24T10:00:00.000Z"}),
              ReadPoint("duckdb", "/s/sink.duckdb", {"rows_read": 42, "read_at": "2026-11-24T10:00:00Z"}),
              ReadPoint("parquet", "/s/*.parquet", {"files_listed_at": "2026-11-24T10:00:00.000Z"}),
              ReadPoint("parquet", "s3://b/*.parquet"),
              ReadPoint("kafka_topic", "orders.enriched",
                        {"lineage": "headers", "read_at": "2026-11-24T10:00:00Z",
                         "end_offsets": [{"partition": 0, "offset": 42}]}),
              ReadPoint("delta", "/s/orders", {"version": 7, "offsets_version": 3}),
              ReadPoint("iceberg", "cat.ns.orders", {"snapshot_id": "2031503060490796608",
                                                     "offsets_snapshot_id": "1091317149685680103"})]
    windows = [WindowSpec(parse_bound("2026-11-30"), parse_bound("orders:0=30"), "7d", 7 * 86400.0, NOW_MS),
               WindowSpec(parse_bound("orders:0=5"), parse_bound("2026-12-01T00:00Z"))]
    waiver = Waiver("orders", "gap", "accepted", None, None, None, "INC-1", "2026-12-31", NOW_MS + 1)
    policed = apply_policy(audit_report(full, findings_of_every_kind(), points[0]),
                           [waiver, Waiver("ghost", "gap", "none matched", 0, 1, 2)],
                           [Level("duplicate", 1, 5)], NOW_MS)
    from eosctl.report.findings import merge_sinks

    routed = merge_sinks([("a", audit_report(least, findings_of_every_kind()[:1])),
                          ("b", audit_report(least, []))], ("orders",))
    docs = [json.loads(render(audit_report(full, findings_of_every_kind(), points[0]), "json")),
            json.loads(render(routed, "json")),
            json.loads(render(policed, "json")),
            *(json.loads(render(replace(audit_report(least, [], None, w), dlq=dlq), "json"))
              for w, dlq in zip(windows, DLQ_SAMPLES, strict=True)),
            json.loads(render(audit_report(least, []), "json")),
            *(json.loads(render(audit_report(least, [], p), "json")) for p in points[1:])]
    check_json("`eosctl audit`", docs)


def test_root_cause_rules_table_lists_every_rule_in_order() -> None:
    from eosctl.report.rootcauses import ROOT_RULES

    tables = [t for t in doc_tables("json.md")["`eosctl audit`"] if t[0][0] == "rule"]
    assert len(tables) == 1
    assert [_name(cells[0]) for cells in tables[0][1:]] == list(ROOT_RULES)


def test_finding_kinds_table_lists_every_kind_in_order() -> None:
    tables = [t for t in doc_tables("json.md")["`eosctl audit`"] if t[0][0] == "kind"]
    assert len(tables) == 1
    assert [_name(cells[0]) for cells in tables[0][1:]] == list(KINDS)


def test_lag_json_is_documented() -> None:
    first, second = lag_snapshots()
    watch = Watch(window=5)
    watch.add(first)
    watch.add(second)
    from eosctl.inspection.failover import Failover

    replica = lag_document(second)
    for g in replica["groups"]:  # a MirrorMaker 2 replica pipeline (eosctl.inspection.failover.with_failover)
        for i, p in enumerate(g["partitions"]):
            p["replica"] = None if i else Failover(g["group"], p["topic"], p["partition"], "src.orders", 5,
                                                   3, 4, 4, 4, 1, 0).to_dict()
    check_json("`eosctl lag`", [lag_document(second), lag_document(second, watch), replica])


def test_txns_json_is_documented(offline: pytest.MonkeyPatch) -> None:
    import eosctl.txn.transactions as txns

    by_id = {i.transactional_id: i for i in txn_infos()}
    offline.setattr(txns, "list_transactions", lambda *a, **k: txn_infos())
    offline.setattr(txns, "describe_transaction", lambda admin, txid: by_id[txid])
    offline.setattr(txns, "find_hanging", lambda *a, **k: hanging_report())
    offline.setattr(txns, "plan_abort", lambda *a, **k: AbortPlan("orders", 0, 7, 7, 1, 7, 9, NOW_MS - 5000,
                                                                  "demo.hanging", True, 3))
    offline.setattr(txns, "abort", lambda admin, plan: None)
    offline.setattr(txns, "coordinator_unseen", lambda *a, **k: None)  # the stand-in client asks nothing
    offline.setattr("eosctl.txn.pendingoffsets.with_groups", lambda client, report: report)
    from eosctl.txn.abortsafety import assess

    safety = assess(("orders", 0), 1001, 7, 9, by_id["demo.processor"], NOW_MS - 1000, {"demo.sink": 7},
                    NOW_MS)
    offline.setattr(txns_cmd, "_safety", lambda *a, **k: safety)
    offline.setattr(txns_cmd, "_safeties", lambda *a, **k: [safety])
    described = nested("`eosctl txns describe`", "transactions[]")
    check_json("`eosctl txns list`", [run("txns", "list")],
               {k: v for k, v in described.items() if not k.startswith("transactions[].safety")})
    check_json("`eosctl txns describe`", [run("txns", "describe", txid) for txid in by_id])
    check_json("`eosctl txns hanging`", [run("txns", "hanging", "--topic", "orders")])
    abort = ("txns", "abort", "--topic", "orders", "--partition", "0", "--start-offset", "7")
    check_json("`eosctl txns abort`", [run(*abort), run(*abort, "--yes")])

    import eosctl.txn.fence as fence_mod

    running = FencePlan(by_id["demo.processor"], [FencedPartition("orders", 0, 7, 9, 7, 2),
                                                  FencedPartition("orders", 1, 3, 3, None, None)])
    idle = FencePlan(by_id["demo.source"])
    plans = {"demo.processor": running, "demo.source": idle}
    offline.setattr(fence_mod, "plan_fence", lambda client, admin, txid: plans[txid])
    offline.setattr(fence_mod, "fence", lambda *a, **k: Fenced(1001, 3, "CompleteAbort"))
    check_json("`eosctl txns fence`", [run("txns", "fence", "demo.processor"),
                                       run("txns", "fence", "demo.processor", "--yes"),
                                       run("txns", "fence", "demo.source")])


def test_producers_json_is_documented(offline: pytest.MonkeyPatch) -> None:
    reports = [ProducersReport("orders", [0], DESCRIBE_PRODUCERS, "from the brokers' producer state",
                               [ProducerRow("orders", 0, 7, 1, 4, NOW_MS, 7, 3)]),
               ProducersReport("orders", [0, 1], LOG_SCAN, "DescribeProducers returned no producers; read "
                               "from the log", producer_rows(), {0: (0, 9), 1: (0, 4)})]
    docs = []
    for report in reports:
        offline.setattr("eosctl.txn.producers.describe", lambda *a, report=report, **k: report)
        docs.append(run("producers", "--topic", "orders"))
    check_json("`eosctl producers`", docs)


class _Outcomes:
    """A decoder answering each record's key and value from a list (issue 50's outcomes, one of each)."""

    def __init__(self, outcomes: list[Any]) -> None:
        self.outcomes = outcomes

    def decode(self, *args: Any) -> Any:
        return self.outcomes.pop(0)


def log_records() -> list[dict[str, Any]]:
    """`--records` documents: decoded (a scalar value: the table documents `data` as any JSON value),
    unframed, undecodable, null, and raw."""
    from eosctl.cluster.records import Record
    from eosctl.cluster.schemas import Decoded, Undecodable, Unframed
    from eosctl.inspection.records import record_document

    outcomes = _Outcomes([Decoded("AVRO", 3, None, "prefix", "orders-key", 2, "k-1"),
                          Decoded("PROTOBUF", None, "6f1c", "header", None, None, 7, "shop.Line"),
                          Unframed("it starts with byte 0x7b"), Undecodable("JSON", 4, None, "bad"), None])
    return [record_document("orders", 0, Record(0, b"k", b"v", 5, "none",
                                                 (("__value_schema_id", b"\x01"),)), outcomes),
            record_document("orders", 0, Record(1, b"k", b"v", 6, "lz4"), outcomes, "DATA"),
            record_document("orders", 0, Record(2, None, b"v", -1, "none", (("h", None),)), outcomes),
            # no registry: the key and value as text only
            record_document("orders", 0, Record(3, b"\xff", None, 7, "zstd"), None, "ABORTED")]


def test_log_json_is_documented() -> None:
    from eosctl.cluster.records import Record
    from eosctl.inspection.records import record_document

    plain_records = (Record(0, b"o-1", b"v", 1_700_000_000_000, "lz4"),
                     Record(1, None, None, 1_700_000_000_001, "lz4"))
    shown = [record_document("t", 0, r, None, "DATA") for r in plain_records]
    check_json("`eosctl log`", [log_document(partition_log(), (0, 9, True)),
                                log_document(partition_log(), (0, 9, True), shown),
                                log_document(partition_log(batches=False), None),
                                log_document(partition_log(), (0, 9, True), log_records())])


def explain_documents() -> list[Any]:
    """`eosctl explain --offset` documents: an aborted record with everything known about it (batch,
    a fenced transaction, epoch history, group, sink with a key seen elsewhere), a zombie's
    non-transactional write, and an offset beyond the HW with nothing but the log."""
    from eosctl.cluster.wire import Offsets
    from eosctl.inspection.explain import Facts, SinkAt, offset_document
    from tests.unit.cluster.test_model import batch, scan
    from tests.unit.rules.test_causes import LOG

    log, _ = scan(LOG, Offsets(0, 10, 8))
    aborted = Batch(2, 3, 2, 6, 0, 0, 1, True, False, None, NOW_MS, NOW_MS, "none", 90)
    zombie, _ = scan(batch([0], 0, pid=5, epoch=1, seq=0) + batch([0], 1, pid=5, epoch=0, seq=1),
                     Offsets(0, 2, 2))
    return [offset_document(Facts(log, 2, aborted, "g", 8, SinkAt(1, ("o-1",), (("orders", 0, 6),
                                                                              ("orders", 1, 4)), 8, "s",
                                                                   "order_id", "written_at",
                                                                   (datetime.fromtimestamp(NOW_MS / 1000 + 2,
                                                                                           UTC),)))),
            offset_document(Facts(zombie, 1, None, "g", None, SinkAt(0), record=log_records()[0])),
            offset_document(Facts(log, 12)),
            # a MirrorMaker 2 replica pipeline (eosctl.inspection.failover.at_offset)
            offset_document(Facts(log, 4, replica={"topic": "src.orders", "copies": [3], "groups": [
                {"group": "g", "source_committed": 5, "resume": 2, "outcome": "processed again"}]})),
            # a state sink (auditors.state through eosctl.commands.explain_cmd)
            offset_document(Facts(log, 2, state={"sink": "s.duckdb", "mode": "upsert", "findings": [
                {"kind": "stale_value", "key": "k1", "detail": "sink holds 1; expected 2 (offset 8)",
                 "cause": "the row holds the value of committed offset ..."}]}))]


def test_explain_json_is_documented() -> None:
    from eosctl.output.explain import report_document

    batch_fields = {p.replace("batches[].", "batch.", 1): opt
                    for p, opt in optional_flags(documented("json.md", "`eosctl log`")).items()
                    if p.startswith("batches[].")}
    batch_fields |= {p.replace("records[].", "record.", 1): opt
                     for p, opt in optional_flags(documented("json.md", "`eosctl log`")).items()
                     if p.startswith("records[].")}
    check_json("`eosctl explain` (one offset)", explain_documents(), batch_fields)
    audit_fields = {"root_causes[]." + p: opt
                    for p, opt in optional_flags(documented("json.md", "`eosctl audit`")).items()
                    if p.startswith("findings[].")}
    report = audit_report(engines()[0], findings_of_every_kind())
    waived = apply_policy(report, [Waiver("orders", "gap", "accepted")], at_ms=NOW_MS)
    from eosctl.report.findings import merge_sinks

    routed = merge_sinks([("a", report), ("b", audit_report(engines()[1], []))], ("orders",))
    check_json("`eosctl explain` (a report)", [report_document(report, "r.json"),
                                              report_document(audit_report(engines()[1], []), "r.json"),
                                              report_document(waived, "r.json"),
                                              report_document(routed, "r.json")],
               audit_fields)


def test_ledger_json_is_documented(offline: pytest.MonkeyPatch) -> None:
    offline.setattr("eosctl.inspection.ledger.collect", lambda *a, **k: ledger())
    check_json("`eosctl ledger`", [run("ledger", "--sink-duckdb", "sink.duckdb")])


def snapshots(offline: pytest.MonkeyPatch, tmp_path: Path) -> list[tuple[Path, Any]]:
    """`eosctl snapshot` run twice: a full capture with a stored audit, and one with nulls and no audit."""
    report = tmp_path / "audit.json"
    report.write_text(audit_report(engines()[0], findings_of_every_kind()).to_json(), encoding="utf-8")
    out = []
    for name, full in (("full", True), ("least", False)):
        offline.setattr(capture_mod, "capture", lambda *a, full=full, **k: capture(full))
        path = tmp_path / f"{name}.duckdb"
        audit = ("--audit-report", str(report)) if full else ()
        out.append((path, run("snapshot", "--out", str(path), *audit)))
    return out


def test_snapshot_json_is_documented(offline: pytest.MonkeyPatch, tmp_path: Path) -> None:
    docs = [doc for _, doc in snapshots(offline, tmp_path)]
    check_json("`eosctl snapshot`", docs, nested("`eosctl txns hanging`", "hanging"))


# ---- tables of DuckDB files ---------------------------------------------------------------------------


def documented_tables(name: str) -> dict[str, tuple[bool, list[tuple[str, str, bool]]]]:
    """{table: (optional, [(column, type, optional), ...])} of the '`table`' headings of docs/NAME."""
    out = {}
    for heading, tables in doc_tables(name).items():
        m = re.fullmatch(r"`(\w+)`( \(optional\))?", heading)
        cols = [t for t in tables if t[0][0] == "column"]
        if m and cols:
            out[m.group(1)] = (bool(m.group(2)), [
                (_name(c[0]), c[1].replace(OPTIONAL, "").strip(), OPTIONAL in c[1]) for c in cols[0][1:]])
    return out


def file_tables(path: Path) -> dict[str, list[tuple[str, str]]]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        rows = con.execute("SELECT table_name, column_name, data_type FROM information_schema.columns "
                           "ORDER BY table_name, ordinal_position").fetchall()
    finally:
        con.close()
    out: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for table, column, kind in rows:
        out[table].append((column, kind))
    return dict(out)


def table_problems(docs: dict[str, tuple[bool, list[tuple[str, str, bool]]]],
                   files: list[dict[str, list[tuple[str, str]]]]) -> dict[str, list[str]]:
    """What differs between documented tables and the tables of some files (names, columns, types, order)."""
    seen = {t for f in files for t in f}
    p: dict[str, list[str]] = {
        "tables not documented": sorted(seen - set(docs)),
        "documented tables never written": sorted(set(docs) - seen),
        "documented as always present, missing in some file": sorted(
            {t for f in files for t, (opt, _) in docs.items() if not opt and t not in f}),
        "columns not documented": [], "documented columns never written": [], "wrong types": [],
        "documented as always present, missing in some file (columns)": [],
        "documented as optional, present in every file": [], "columns in another order": []}
    for table, (_, cols) in sorted(docs.items()):
        want = {c: t for c, t, _ in cols}
        written = [f[table] for f in files if table in f]
        got = {c: t for w in written for c, t in w}
        p["columns not documented"] += [f"{table}.{c}" for c in got if c not in want]
        p["documented columns never written"] += [f"{table}.{c}" for c in want if c not in got]
        p["wrong types"] += [f"{table}.{c}: documented {want[c]}, written {t}" for c, t in got.items()
                             if c in want and want[c] != t]
        p["documented as always present, missing in some file (columns)"] += sorted(
            {f"{table}.{c}" for c, _, opt in cols for w in written if not opt and c not in dict(w)})
        p["documented as optional, present in every file"] += [
            f"{table}.{c}" for c, _, opt in cols if opt and written and all(c in dict(w) for w in written)]
        order = [c for c, _, _ in cols]
        p["columns in another order"] += [f"{table}: documented {[c for c in order if c in dict(w)]}, "
                                          f"written {[c for c, _ in w]}" for w in written
                                          if [c for c, _ in w] != [c for c in order if c in dict(w)]
                                          and set(dict(w)) <= set(order)]
    return p


def test_snapshot_tables_are_documented(offline: pytest.MonkeyPatch, tmp_path: Path) -> None:
    files = [file_tables(path) for path, _ in snapshots(offline, tmp_path)]
    assert "audit" in files[0] and "audit" not in files[1]  # both the optional tables and their absence
    assert_same("docs/snapshot.md", table_problems(documented_tables("snapshot.md"), files))


def test_reference_sink_schema_is_documented(tmp_path: Path) -> None:
    from eosctl.sandbox.pipeline.sink_writer import DuckSink

    sink = DuckSink(tmp_path / "sink.duckdb", "demo.enriched")
    sink.con.close()
    assert_same("docs/manifest.md (sink schema)",
                table_problems(documented_tables("manifest.md"), [file_tables(tmp_path / "sink.duckdb")]))


# ---- the reference pipeline's manifest ----------------------------------------------------------------


def _assigned_dict(func: ast.FunctionDef, name: str) -> ast.Dict:
    """The dict literal assigned to ``name`` in ``func`` (or, for a list comprehension, its element)."""
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name
                                                for t in node.targets):
            value = node.value.elt if isinstance(node.value, ast.ListComp) else node.value
            if isinstance(value, ast.Dict):
                return value
    raise AssertionError(f"no dict literal assigned to {name} in {func.name}: update the manifest test")


def _build_call(func: ast.FunctionDef) -> ast.Call:
    for node in ast.walk(func):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "build":
            return node
    raise AssertionError("run_pipeline no longer calls manifest.build(...): update the manifest test")


def manifests() -> list[dict[str, Any]]:
    """The manifest with every field it can have, and with only those it always has.

    Top-level keys, `sink`, `groups` and `transactional_ids` and the fault dicts are read from the source of
    eosctl.sandbox.pipeline.run / faults (writing them needs a broker); `expected_findings`, `aborted_ranges`
    and `markers` come from the real functions over a hand-built ground-truth ledger.
    """
    from eosctl.sandbox.pipeline import faults, manifest, run
    from eosctl.sandbox.pipeline import truth as pl
    from eosctl.sandbox.pipeline.expected import expected_findings
    from eosctl.sandbox.pipeline.faults import SinkTarget

    run_pipeline = _function(Path(run.__file__), "run_pipeline")
    call = _build_call(run_pipeline)
    kwargs = {k.arg: k.value for k in call.keywords}
    topic = "demo.enriched"
    truth = pl.GroundTruth()
    # Committed 0..9 (key o-3 again at 8: an upstream retry), aborted 10..11 with its ABORT marker at 12.
    truth.add(pl.Record(topic, 0, o, f"o-{3 if o == 8 else o}", pl.COMMITTED, 1001) for o in range(10))
    truth.add(pl.Record(topic, 0, o, f"a-{o}", pl.ABORTED, 1001) for o in (10, 11))
    truth.markers.append(pl.Marker(topic, 0, 12, "ABORT", 1001))
    targets = [SinkTarget("duplicate-replay", topic, 0, 1, 2), SinkTarget("skip", topic, 0, 4, 5)]
    fence = _function(Path(faults.__file__), "fence")
    hanging = next(n.value for n in ast.walk(_function(Path(faults.__file__), "hanging"))
                   if isinstance(n, ast.Return) and isinstance(n.value, ast.Dict))
    txids = set(_keys(_assigned_dict(run_pipeline, "txids")))
    sometimes = literal_keys(run_pipeline)[1] - txids  # txids["hanging"] = ... with that fault only
    assert isinstance(kwargs.get("groups"), ast.Dict), "manifest groups are no longer a dict literal"
    sample: dict[str, Any] = {
        "sink": dict.fromkeys(_keys(_assigned_dict(run_pipeline, "sink")), "x"),
        "groups": dict.fromkeys(_keys(kwargs["groups"]), "x"),
        "transactional_ids": dict.fromkeys(txids | sometimes, "x"),
        "expected_findings": expected_findings(truth, topic, targets, aborted_leak=True),
        "aborted_ranges": truth.aborted_ranges(),
        "markers": truth.marker_dicts(),
        "hanging": [dict.fromkeys(_keys(hanging), 1)],
        "fencing": [dict.fromkeys(_keys(_assigned_dict(fence, "fencing")), 1)],
        "zombie_writes": [dict.fromkeys(_keys(_assigned_dict(fence, "writes")), 1)],
        # One object per hop, each a dict literal in run_pipeline's hops=[...] (their keys differ).
        "hops": [{**dict.fromkeys(_keys(hop), "x"), "expected_findings": []} for hop in kwargs["hops"].elts],
    }
    full = manifest.build(**{k: sample.get(k, 1) for k in kwargs})
    least = {**full, "transactional_ids": dict.fromkeys(txids, "x")}
    return [json.loads(json.dumps(m)) for m in (full, least)]


def test_manifest_is_documented() -> None:
    docs = manifests()
    kinds = {f["kind"] for f in docs[0]["expected_findings"]}
    assert kinds == {"gap", "duplicate", "phantom_aborted", "key_duplicate"}  # the sample covers every kind
    table = optional_flags(documented("manifest.md", "`manifest.json`"))
    assert_same("docs/manifest.md § manifest.json", diff_paths(docs, table))


# ---- config -----------------------------------------------------------------------------------------------

# sinks: the [pipelines.NAME.sinks.LABEL] tables (docs/config.md says they take the sink's keys); label: a
# sink's LABEL there.
SECTIONS = {"clusters.NAME": (config_mod.Cluster, {"name"}), "pipelines.NAME": (config_mod.Pipeline,
                                                                                 {"name", "sink", "sinks"}),
            # frozen_from, at, files and offsets_files are set by eosctl.sink.frozen(), never by a config
            # kafka_cluster is the resolved [clusters.NAME] of a kafka_topic sink's `cluster`
            # (eosctl.config.target)
            "pipelines.NAME.sink": (config_mod.Sink, {"frozen_from", "at", "files", "offsets_files",
                                                      "kafka_cluster", "stage_group", "stage_cluster",
                                                      "stage_topics", "label"}),
            "spark": (config_mod.Spark, set())}


def config_keys() -> dict[str, dict[str, list[str]]]:
    """{section: {key: [type, default, meaning]}} of docs/config.md."""
    out: dict[str, dict[str, list[str]]] = defaultdict(dict)
    for tables in doc_tables("config.md").values():
        for table in tables:
            if table[0][0] != "key":
                continue
            for cells in table[1:]:
                section, _, key = _name(cells[0]).rpartition(".")
                out[section][key] = cells[1:]
    return dict(out)


def test_config_keys_are_the_dataclass_fields() -> None:
    docs = config_keys()
    assert set(docs) == set(SECTIONS)
    for section, (cls, skip) in SECTIONS.items():
        code = {f.name for f in fields(cls)} - skip
        assert_same(f"docs/config.md [{section}]", {"keys not documented": sorted(code - set(docs[section])),
                                                     "documented keys the code lacks":
                                                         sorted(set(docs[section]) - code)})


VALID = {"bootstrap_servers": "h:1", "security_protocol": "SASL_SSL", "cluster": "c",
         "duckdb": "/abs/s.duckdb", "spark_checkpoint": "/abs/checkpoint", "lineage": "value:src",
         "lineage_headers": ["a", "b", "c"], "hops": ["q"],
         # Paths as given only when absolute (a relative one resolves against the config's directory).
         "ssl_ca_location": "/abs/ca.pem", "ssl_certificate_location": "/abs/cert.pem",
         "ssl_key_location": "/abs/key.pem", "master": "local[2]", "driver_memory": "1g",
         "sandbox_home": "/abs/.eosctl", "retention": "7d", "route": "header:type=A", "timeout": "2m",
         # A state sink's keys, all in one config: an aggregate sink (eosctl.rules.upsert).
         "mode": "aggregate", "key_fields": {"k": "key"}, "value_fields": {"v": "value.amount"},
         "aggregate": {"fn": "sum", "column": "total", "field": "value.amount"}, "version_column": "ver",
         # issue 50: the registry's URL is checked; its PEM paths like the cluster's
         "schema_registry_url": "https://sr:8081", "schema_registry_ssl_ca_location": "/abs/sr-ca.pem",
         "schema_registry_ssl_certificate_location": "/abs/sr-cert.pem",
         "schema_registry_ssl_key_location": "/abs/sr-key.pem",
         "fields": {"amount": "value.amount"}, "float_tolerance": 0.001, "timestamp_precision": "ms"}
# What a value of VALID is read into, where that is not the value itself.
READ_AS = {"key_fields": (("k", "key"),), "value_fields": (("v", "value.amount"),),
           "aggregate": config_mod.Aggregate("sum", "total", "value.amount")}
# Sink kinds: a config names exactly one, so the all-keys config keeps duckdb and each other kind is
# checked in a config of its own.
OTHER_KINDS = {"parquet": "/x/*.parquet", "postgres": "postgresql://u@h/db", "delta": "/x/delta",
               "iceberg": "cat.ns.t", "kafka_topic": "out-topic"}


# Keys that exclude another documented key (value_column): each read in a config of its own.
ALONE = {"value_hash_column": "v_md5"}


def _value(key: str, kind: str) -> Any:
    if key in VALID:
        return VALID[key]
    return {"string": f"v-{key}", "integer": 7, "list of strings": ["t1", "t2"]}[kind]


def _config(docs: dict[str, dict[str, list[str]]], drop: str | None = None, **extra: Any) -> dict[str, Any]:
    """A raw config with every documented key (the sink with duckdb, no other kind), minus ``drop``."""
    values = {s: {k: _value(k, c[0]) for k, c in keys.items()
                  if f"{s}.{k}" != drop and k not in OTHER_KINDS and k not in ALONE}
              for s, keys in docs.items()}
    pipeline = {**values["pipelines.NAME"], "sink": values["pipelines.NAME.sink"]}
    # q: the hop p names (a pipeline's hops are other pipelines).
    raw = {"clusters": {"c": values["clusters.NAME"]},
           "pipelines": {"p": pipeline, "q": {"source_topics": ["t"]}}, "spark": values["spark"]}
    for dotted, value in extra.items():
        *path, key = dotted.split("__")
        table = raw
        for part in path:
            table = table[part]
        table[key] = value
    return raw


def _objects(cfg: config_mod.Config) -> dict[str, Any]:
    pipe = cfg.pipelines["p"]
    return {"clusters.NAME": cfg.clusters["c"], "pipelines.NAME": pipe, "pipelines.NAME.sink": pipe.sink,
            "spark": cfg.spark}


def test_every_documented_config_key_is_read_into_its_field(tmp_path: Path) -> None:
    docs = config_keys()
    raw = _config(docs)
    objects = _objects(configfile.parse_config(raw, tmp_path / "c.toml", {}))
    other = {kind: _objects(configfile.parse_config(
        _config(docs, drop="pipelines.NAME.sink.duckdb", **{f"pipelines__p__sink__{kind}": value}),
        tmp_path / "c.toml", {})) for kind, value in OTHER_KINDS.items()}
    alone = {key: _objects(configfile.parse_config(
        _config(docs, drop="pipelines.NAME.sink.value_column", **{f"pipelines__p__sink__{key}": value}),
        tmp_path / "c.toml", {})) for key, value in ALONE.items()}
    for section, keys in docs.items():
        for key, (kind, _, _) in keys.items():
            got = getattr((other.get(key) or alone.get(key) or objects)[section], key)
            if key == "fields":  # a TOML table, kept as (column, path) pairs on the frozen Sink
                got = dict(got)
            want = OTHER_KINDS.get(key) or ALONE.get(key) or READ_AS.get(key) or _value(key, kind)
            assert got == (tuple(want) if isinstance(want, list) else want), f"{section}.{key}"


def test_documented_config_defaults_and_required_keys(tmp_path: Path) -> None:
    docs = config_keys()
    minimal = {"clusters": {"c": {"bootstrap_servers": "h:1"}},
               "pipelines": {"p": {"source_topics": ["t"], "sink": {"duckdb": "/abs/s.duckdb"}}}, "spark": {}}
    objects = _objects(configfile.parse_config(minimal, tmp_path / "c.toml", {}))
    checked = 0
    for section, keys in docs.items():
        for key, (_, default, _) in keys.items():
            literal = re.fullmatch(r"`(.+)`", default)
            if default == "required":
                raw = _config(docs, drop=f"{section}.{key}")
                with pytest.raises(ConfigError, match=rf"missing key {section.replace('NAME', '.*')}\.{key}"):
                    configfile.parse_config(raw, tmp_path / "c.toml", {})
            elif default == "none":
                if key not in ("duckdb", *OTHER_KINDS):  # the minimal config needs one of them
                    assert getattr(objects[section], key) is None, f"{section}.{key}"
            elif literal:
                want = tomllib.loads(f"v = {literal.group(1)}")["v"]
                assert getattr(objects[section], key) == want, f"{section}.{key}: default"
            else:
                continue
            checked += 1
    assert checked >= 20


@pytest.mark.parametrize("section", ["clusters__c", "pipelines__p", "pipelines__p__sink", "spark"])
def test_an_undocumented_config_key_is_an_error(section: str, tmp_path: Path) -> None:
    raw = _config(config_keys(), **{f"{section}__colour": "blue"})
    with pytest.raises(ConfigError, match=r"unknown key .*colour"):
        configfile.parse_config(raw, tmp_path / "c.toml", {})


def test_every_command_with_json_output_has_a_section() -> None:
    import click

    def walk(cmd: click.Command, name: str) -> list[str]:
        if isinstance(cmd, click.Group):
            return [n for sub, c in cmd.commands.items() for n in walk(c, f"{name} {sub}")]
        fmt = [p for p in cmd.params if "--format" in getattr(p, "opts", [])]
        return [name] if fmt and "json" in getattr(fmt[0].type, "choices", ()) else []

    # A command with several documents has one heading per document: "`eosctl explain` (a report)".
    headings = {h.split("`")[1] for h in doc_tables("json.md") if h.startswith("`eosctl ")}
    assert headings == set(walk(main, "eosctl"))


# ---- docs/metrics.md: every metric `eosctl exporter` emits ----------------------------------------------


def documented_metrics() -> dict[str, tuple[str, frozenset[str]]]:
    """{name: (type, labels beyond cluster and pipeline)} of every `metric` table in docs/metrics.md."""
    out: dict[str, tuple[str, frozenset[str]]] = {}
    for heading, tables in doc_tables("metrics.md").items():
        for table in (t for t in tables if t[0][0] == "metric"):
            for name, kind, labels, _meaning in table[1:]:
                name = _name(name)
                assert name not in out, f"docs/metrics.md § {heading}: {name} listed twice"
                names = (_name(label.strip()) for label in labels.split(",") if label.strip())
                out[name] = (kind, frozenset(names))
    return out


def emitted_metrics(partition_metrics: bool = True) -> dict[str, tuple[str, frozenset[str]]]:
    """The same, read from what the exporter serves for a pipeline state that has every family."""
    from metricsample import source
    from prometheus_client.parser import text_string_to_metric_families

    from eosctl.exporter.metrics import Exposition

    down = source()  # a second pipeline whose last refresh failed: eosctl_down_reason
    down.pipeline = "down"
    down.refreshed(None, "cannot reach Kafka at h:1: connection refused")
    body, _ = Exposition([source(), down], partition_metrics).render()
    out: dict[str, tuple[str, frozenset[str]]] = {}
    for family in text_string_to_metric_families(body.decode()):
        name = family.name + ("_total" if family.type == "counter" else "")
        labels = {k for s in family.samples for k in s.labels}
        assert {"cluster", "pipeline"} <= labels, name
        out[name] = (family.type, frozenset(labels - {"cluster", "pipeline"}))
    return out


def test_metrics_doc_matches_what_the_exporter_emits() -> None:
    from eosctl.exporter.metrics import METRICS

    docs, emitted = documented_metrics(), emitted_metrics()
    assert sorted(set(emitted) - set(docs)) == [], "emitted but not documented in docs/metrics.md"
    assert sorted(set(docs) - set(emitted)) == [], "documented in docs/metrics.md but never emitted"
    wrong = {n: (docs[n], emitted[n]) for n in docs if docs[n] != emitted[n]}
    assert wrong == {}, "docs/metrics.md: (documented, emitted) type and labels differ"
    assert {s.name for s in METRICS} == set(docs)


def test_partition_metrics_off_drops_only_the_partition_label() -> None:
    on, off = emitted_metrics(), emitted_metrics(partition_metrics=False)
    assert set(on) == set(off)
    assert {n: (t, labels - {"partition"}) for n, (t, labels) in on.items()} == off
