"""An audit report read back from a file (`audit --format json --out`, a snapshot's stored audit): every
field's type checked, the verdict recomputed from the findings, one reason when it is not a report."""

from __future__ import annotations

import json
from typing import Any

from eosctl.base.filevalidation import check, value_name
from eosctl.report.findings import FAIL, KINDS, PASS, AuditReport


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
    point = data.get("sink_read_point")
    if point is not None and not isinstance(point, dict):  # parsed into a ReadPoint: only an object is one
        raise ValueError(f"sink_read_point: expected an object or null, got {value_name(point)}")
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
