"""What an audit found: plain dataclasses with a stable JSON form (CI pipelines parse it).

Shared by the auditors (which produce reports) and the TUI (which shows them), so nothing here imports
Spark, DuckDB or Kafka clients.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

KINDS = (
    "gap",
    "duplicate",
    "phantom_aborted",
    "phantom_marker",
    "phantom_uncommitted",
    "phantom_beyond_hw",
    "key_duplicate",
    "offset_mismatch",
    "invalid_row",
)

# One line per kind, for tables, JUnit messages and --help.
DESCRIPTIONS = {
    "gap": "committed source records missing from the sink",
    "duplicate": "source offsets stored in more than one sink row (count = extra rows)",
    "phantom_aborted": "sink rows for records of aborted transactions",
    "phantom_marker": "sink rows at offsets of transaction markers",
    "phantom_uncommitted": "sink rows for records of still-open transactions",
    "phantom_beyond_hw": "sink rows at offsets the log never had (>= high watermark, or unknown partition)",
    "key_duplicate": "one business key written from several committed source offsets",
    "offset_mismatch": "offsets stored in the sink disagree with the consumer group's committed offsets",
    "invalid_row": "sink rows no Kafka record can match (NULL topic, partition or offset; offset negative, "
                   "above 2^63-1 or not an integer)",
}

PASS, FAIL = "pass", "fail"


@dataclass(frozen=True)
class Finding:
    kind: str
    # None only for invalid_row: the row's topic/partition/offsets, where those are what is wrong with it.
    topic: str | None
    partition: int | None
    first_offset: int | None
    last_offset: int | None  # inclusive
    count: int
    key: str | None = None
    offsets: tuple[int, ...] | None = None
    # Free text for people (e.g. both sides of an offset_mismatch); not part of the comparison key.
    detail: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown finding kind {self.kind!r}")

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "kind": self.kind,
            "topic": self.topic,
            "partition": self.partition,
            "first_offset": self.first_offset,
            "last_offset": self.last_offset,
            "count": self.count,
        }
        if self.key is not None:
            d["key"] = self.key
        if self.offsets is not None:
            d["offsets"] = list(self.offsets)
        if self.detail is not None:
            d["detail"] = self.detail
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Finding:
        offsets = d.get("offsets")
        return cls(d["kind"], d["topic"], _int(d["partition"]), _int(d["first_offset"]),
                   _int(d["last_offset"]), int(d["count"]), d.get("key"),
                   None if offsets is None else tuple(offsets), d.get("detail"))

    @property
    def sort_key(self) -> tuple:
        # Unknown topic/partition/offset (invalid_row) sort first; a tuple never compares None with an int.
        return ((self.topic is not None, self.topic or ""), _opt(self.partition), _opt(self.first_offset),
                KINDS.index(self.kind), self.key or "", self.detail or "")


def _int(v: Any) -> int | None:
    return None if v is None else int(v)


def _opt(v: int | None) -> tuple[bool, int]:
    return (v is not None, v or 0)


# Log segments a read_committed consumer never delivers, for the HTML gap map (eosctl.gapmap).
SEGMENT_KINDS = ("ABORTED", "MARKER", "OPEN", "HOLE")


@dataclass(frozen=True)
class LogSegment:
    kind: str  # one of SEGMENT_KINDS (eosctl.model.Kind values)
    first: int
    last: int  # inclusive
    # Offsets of this kind inside first..last: less than last - first + 1 once neighbours were coalesced
    # to keep the list bounded (see eosctl.gapmap.log_segments).
    count: int

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "first": self.first, "last": self.last, "count": self.count}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LogSegment:
        return cls(d["kind"], int(d["first"]), int(d["last"]), int(d["count"]))


@dataclass(frozen=True)
class PartitionSummary:
    topic: str
    partition: int
    log_start_offset: int
    last_stable_offset: int
    high_watermark: int
    expected_records: int  # committed data records in [log start, LSO)
    sink_rows: int  # every sink row naming this partition, phantoms and duplicates included
    # Sink rows at offsets that can't be checked: below the log start (deleted by retention) or at offsets
    # compaction removed. Never reported as findings.
    unverifiable_below: int = 0
    # False when the topic/partition doesn't exist in Kafka (all its sink rows are phantom_beyond_hw).
    exists: bool = True
    # Aborted / marker / open / compacted stretches of the log, bounded; None when the audit didn't record
    # them (older reports, partitions Kafka doesn't have). Only the HTML gap map reads them.
    log_segments: tuple[LogSegment, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "topic": self.topic,
            "partition": self.partition,
            "log_start_offset": self.log_start_offset,
            "last_stable_offset": self.last_stable_offset,
            "high_watermark": self.high_watermark,
            "expected_records": self.expected_records,
            "sink_rows": self.sink_rows,
            "unverifiable_below": self.unverifiable_below,
            "exists": self.exists,
        }
        if self.log_segments is not None:
            d["log_segments"] = [s.to_dict() for s in self.log_segments]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PartitionSummary:
        segments = d.get("log_segments")
        return cls(d["topic"], int(d["partition"]), int(d["log_start_offset"]), int(d["last_stable_offset"]),
                   int(d["high_watermark"]), int(d["expected_records"]), int(d["sink_rows"]),
                   int(d.get("unverifiable_below", 0)), bool(d.get("exists", True)),
                   None if segments is None else tuple(LogSegment.from_dict(s) for s in segments))


def parse_kinds(text: str | Iterable[str] | None) -> tuple[str, ...]:
    """`--fail-on gap,duplicate` -> ("gap", "duplicate"); None or "all" -> every kind."""
    if text is None:
        return KINDS
    names = [n.strip() for n in (text.split(",") if isinstance(text, str) else text) if n.strip()]
    if names in ([], ["all"]):
        return KINDS
    unknown = [n for n in names if n not in KINDS]
    if unknown:
        raise ValueError(f"unknown finding kind {unknown[0]!r} (kinds: {', '.join(KINDS)})")
    return tuple(k for k in KINDS if k in names)


@dataclass
class AuditReport:
    verdict: str  # "pass" | "fail"
    partitions: list[PartitionSummary]
    findings: list[Finding]
    fail_on: tuple[str, ...] = KINDS
    sink: str | None = None  # what was audited, for people: file or glob and table
    group: str | None = None  # consumer group checked for offset_mismatch, if any
    engine: dict[str, Any] = field(default_factory=dict)  # Spark master/remote, timings
    elapsed_seconds: float | None = None

    @classmethod
    def build(cls, partitions: Iterable[PartitionSummary], findings: Iterable[Finding],
              fail_on: Iterable[str] = KINDS, **kw: Any) -> AuditReport:
        """Sort everything and derive the verdict from the findings whose kind is in ``fail_on``."""
        fail_on = tuple(fail_on)
        findings = sorted(findings, key=lambda f: f.sort_key)
        partitions = sorted(partitions, key=lambda p: (p.topic, p.partition))
        verdict = FAIL if any(f.kind in fail_on for f in findings) else PASS
        return cls(verdict, partitions, findings, fail_on, **kw)

    @property
    def failing(self) -> list[Finding]:
        return [f for f in self.findings if f.kind in self.fail_on]

    def counts(self) -> dict[str, int]:
        """Findings per kind, every kind listed (zeros included) so consumers need no defaults."""
        out = dict.fromkeys(KINDS, 0)
        for f in self.findings:
            out[f.kind] += 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "fail_on": list(self.fail_on),
            "summary": {
                "partitions": len(self.partitions),
                "expected_records": sum(p.expected_records for p in self.partitions),
                "sink_rows": sum(p.sink_rows for p in self.partitions),
                "unverifiable_rows": sum(p.unverifiable_below for p in self.partitions),
                "findings": self.counts(),
                "failing_findings": len(self.failing),
            },
            "partitions": [p.to_dict() for p in self.partitions],
            "findings": [f.to_dict() for f in self.findings],
            "sink": self.sink,
            "group": self.group,
            "engine": self.engine,
            "elapsed_seconds": None if self.elapsed_seconds is None else round(self.elapsed_seconds, 3),
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AuditReport:
        return cls(
            verdict=d["verdict"],
            partitions=[PartitionSummary.from_dict(p) for p in d.get("partitions", [])],
            findings=[Finding.from_dict(f) for f in d.get("findings", [])],
            fail_on=tuple(d.get("fail_on", KINDS)),
            sink=d.get("sink"),
            group=d.get("group"),
            engine=dict(d.get("engine") or {}),
            elapsed_seconds=d.get("elapsed_seconds"),
        )

    @classmethod
    def from_json(cls, text: str) -> AuditReport:
        return cls.from_dict(json.loads(text))


def read_report(path: str, notes: list[str] | None = None) -> AuditReport:
    """The report `eosctl audit --format json --out FILE` wrote, checked (see `report_from_data`).

    ValueError with the reason ("no 'verdict' field", "findings[3].topic: expected a string or null, got
    int 5") when the file is not one; each command words its own one-line error around it. A byte-order
    mark is fine; NaN, Infinity and nesting deeper than any report are not.
    """
    try:
        with open(path, encoding="utf-8-sig") as f:
            data = json.load(f, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("nested too deeply to be a report") from None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        why = str(e).splitlines()[0] if str(e) else "unreadable"
        raise ValueError(f"{type(e).__name__}: {why}") from None
    return report_from_data(data, notes)


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a number a report holds")


def report_from_data(data: Any, notes: list[str] | None = None) -> AuditReport:
    """An AuditReport from its JSON form, every field's type checked, and its verdict recomputed from its
    findings and fail_on: a file saying "pass" over failing findings is FAIL, and the disagreement is
    appended to ``notes`` in one line. ValueError naming the first wrong field otherwise."""
    from eosctl.typecheck import check

    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    missing = [k for k in ("verdict", "partitions", "findings") if k not in data]
    if missing:
        raise ValueError(f"no {missing[0]!r} field")
    claimed = data["verdict"]
    if claimed not in (PASS, FAIL):
        raise ValueError(f"verdict: expected \"pass\" or \"fail\", got {json.dumps(claimed)[:40]}")
    for name in ("partitions", "findings", "fail_on"):
        if name in data and not isinstance(data[name], list):
            raise ValueError(f"{name}: expected a list, got {type(data[name]).__name__}")
    for name in ("partitions", "findings"):
        for i, item in enumerate(data[name]):
            if not isinstance(item, dict):
                raise ValueError(f"{name}[{i}]: expected an object, got {type(item).__name__}")
    if not isinstance(data.get("engine") or {}, dict):
        raise ValueError(f"engine: expected an object, got {type(data['engine']).__name__}")
    try:
        report = AuditReport.from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as e:
        why = f"no {e} field" if isinstance(e, KeyError) else str(e).splitlines()[0] if str(e) else ""
        raise ValueError(f"{type(e).__name__}: {why}" if not isinstance(e, KeyError) else why) from None
    check(report)
    for i, f in enumerate(report.findings):
        if f.count < 0 or (f.first_offset is not None and f.last_offset is not None
                           and f.first_offset > f.last_offset):
            raise ValueError(f"findings[{i}]: count below 0 or first_offset after last_offset")
    bad_kinds = [k for k in report.fail_on if k not in KINDS]
    if bad_kinds:
        raise ValueError(f"fail_on: unknown finding kind {bad_kinds[0]!r}")
    verdict = FAIL if report.failing else PASS
    if verdict != claimed:
        if notes is not None:
            notes.append(f"the report says {claimed.upper()}, but {len(report.failing)} of its findings are "
                         f"of kinds it fails on: the verdict is {verdict.upper()}" if verdict == FAIL else
                         f"the report says {claimed.upper()}, but none of its findings is of a kind it fails "
                         f"on: the verdict is {verdict.upper()}")
        report.verdict = verdict
    return report
