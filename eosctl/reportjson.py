"""A report's compact JSON text (what a snapshot stores), written without a dict per finding.

`json.dumps(report.to_dict())` builds a dict for every finding and its cause, then encodes them: about two
seconds for 100k findings, most of a snapshot's audit. Here each finding is written directly, its cause
spliced in as the text the audit task encoded (eosctl.causejson), and the result is byte for byte what
`json.dumps(report.to_dict())` gives (tests/unit/test_reportjson.py compares them).
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring_ascii as _string  # type: ignore[attr-defined]
from typing import TYPE_CHECKING

from eosctl.causejson import encode, value

if TYPE_CHECKING:
    from eosctl.findings import AuditReport, Finding


def report_json(report: AuditReport) -> str:
    """``json.dumps(report.to_dict())``, findings written by hand."""
    d = report.to_dict(findings=False)
    parts = []
    for k, v in d.items():
        text = "[" + ", ".join(map(finding_json, report.findings)) + "]" if k == "findings" else json.dumps(v)
        parts.append(f"{_string(k)}: {text}")
    return "{" + ", ".join(parts) + "}"


def finding_json(f: Finding) -> str:
    """``json.dumps(f.to_dict())``."""
    out = [f'{{"kind": {value(f.kind)}, "topic": {value(f.topic)}, "partition": {value(f.partition)}, '
           f'"first_offset": {value(f.first_offset)}, "last_offset": {value(f.last_offset)}, '
           f'"count": {value(f.count)}']
    if f.key is not None:
        out.append(f', "key": {value(f.key)}')
    if f.offsets is not None:
        out.append(f', "offsets": {json.dumps(list(f.offsets))}')
    if f.detail is not None:
        out.append(f', "detail": {value(f.detail)}')
    if f.cause is not None:
        out.append(f', "cause": {encode(f.cause)}')
    out.append("}")
    return "".join(out)
