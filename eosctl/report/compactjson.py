"""A report's compact JSON text (what a snapshot stores), written without a dict per finding.

`json.dumps(report.to_dict())` builds a dict for every finding and its cause, then encodes them: about two
seconds for 100k findings, most of a snapshot's audit. Here each finding is written directly, its cause
spliced in as the text the audit task encoded (eosctl.report.causejson), and the result is byte for byte what
`json.dumps(report.to_dict())` gives (tests/unit/report/test_compactjson.py compares them).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from json.encoder import encode_basestring_ascii as _string
from typing import TYPE_CHECKING

from eosctl.report.causejson import encode, value

if TYPE_CHECKING:
    from eosctl.report.findings import AuditReport, Finding


def report_json(report: AuditReport) -> str:
    """``json.dumps(report.to_dict())``, findings written by hand, joined once (tens of MB at 100k
    findings: each copy of the text is fresh memory to fault in)."""
    return "".join(_pieces(report))


def _pieces(report: AuditReport) -> Iterator[str]:
    for i, (k, v) in enumerate(report.to_dict(findings=False).items()):
        yield f"{', ' if i else '{'}{_string(k)}: "
        if k != "findings":
            yield json.dumps(v)
            continue
        yield "["
        for j, f in enumerate(report.findings):
            if j:
                yield ", "
            yield finding_json(f)
        yield "]"
    yield "}"


def finding_json(f: Finding) -> str:
    """``json.dumps(f.to_dict())``."""
    d = f.__dict__
    topic, partition, first, last, count = (d["topic"], d["partition"], d["first_offset"], d["last_offset"],
                                            d["count"])
    if (type(topic) is str and type(partition) is int and type(first) is int and type(last) is int
            and type(count) is int):  # nearly every finding: plain ints, as json.dumps writes them
        out = [f'{{"kind": {_string(d["kind"])}, "topic": {_string(topic)}, "partition": {partition}, '
               f'"first_offset": {first}, "last_offset": {last}, "count": {count}']
    else:
        out = [f'{{"kind": {value(f.kind)}, "topic": {value(topic)}, "partition": {value(partition)}, '
               f'"first_offset": {value(first)}, "last_offset": {value(last)}, "count": {value(count)}']
    if f.key is not None:
        out.append(f', "key": {value(f.key)}')
    if f.offsets is not None:
        out.append(f', "offsets": {json.dumps(list(f.offsets))}')
    if f.detail is not None:
        out.append(f', "detail": {value(f.detail)}')
    if f.cause is not None:
        out.append(f', "cause": {encode(f.cause)}')
    if f.waiver is not None:  # rare (a waiver file): through to_dict, as json.dumps would write it
        out.append(f', "waiver": {json.dumps({**f.waiver.waiver.to_dict(), "expired": f.waiver.expired})}')
    if f.sink is not None:
        out.append(f', "sink": {value(f.sink)}')
    out.append("}")
    return "".join(out)
