"""Findings carried as columns with their causes' JSON text (auditors.findingrows, eosctl.report.causejson)
and
the report's compact JSON written by hand (eosctl.report.compactjson): byte for byte what the dicts gave, for
every
kind of finding and cause, hostile text included, and the same findings once decoded."""

from __future__ import annotations

import copy
import json
import pickle
from dataclasses import replace

import pyarrow as pa

from auditors.findingrows import finding_columns, findings_from_arrow, findings_from_rows
from eosctl.report.causejson import EncodedCause
from eosctl.report.compactjson import report_json
from eosctl.report.findings import AuditReport, Cause, Finding, PartitionSummary, TxnCause
from eosctl.report.rootcauses import root_causes, root_rule
from eosctl.rules.causes import Writer, explain_finding, key_cause, with_write_order
from tests.unit.rules.test_causes import explained

HOSTILE = "[/x]\x1b[2J\u202eé\x00\"\\</script>\U0001f600"


def corpus() -> list[Finding]:
    """Findings of every kind with their causes, some over a hostile topic, a key and offsets."""
    found = list(explained().values()) + list(explained(stored=None, committed=9).values())
    dup = next(f for f in found if f.kind == "duplicate")
    found.append(with_write_order(dup, "ingested_at", ("2024-01-01 00:00:00", "2024-01-01 00:00:01", 7, 9.5)))
    found += [replace(f, topic=HOSTILE, detail=HOSTILE) for f in found]
    found.append(explain_finding(Finding("invalid_row", None, None, None, None, 3, detail="NULL topic")))
    kd = Finding("key_duplicate", "orders", 0, 1, 9, 2, key=HOSTILE, offsets=(1, 9), detail="in a, b")
    writers = [Writer("orders", 0, 1, 5, 0, 4), Writer("orders", 0, 9, 6, 1, None)]
    found.append(replace(kd, cause=key_cause(kd, writers)))
    found.append(Finding("gap", "orders", 3, 10, 12, 3))  # no cause (a report from before causes)
    many = Cause("gap", HOSTILE, (TxnCause(7, 2, 20, 20, "open", None, False, HOSTILE, 3),), omitted=150,
                 sink_before=None, sink_after=21, passed_by="stored_offsets")
    found.append(Finding("gap", "orders", 3, 20, 320, 300, cause=many))
    return found


def tasks_findings() -> list[Finding]:
    """What an audit task finds: no key duplicates (the driver finds those, grouping keys)."""
    return [f for f in corpus() if f.key is None]


def carried(findings: list[Finding]) -> list[Finding]:
    """The findings as an audit task sends them and the driver makes them again (the local engine)."""
    cols = finding_columns(findings)
    return findings_from_arrow(pa.table({k: v for k, v in cols.items() if k != "rec"}))


def test_the_compact_json_is_what_json_dumps_gives() -> None:
    part = PartitionSummary(HOSTILE, 0, 0, 10, 10, 8, 9)
    report = AuditReport.build([part], corpus(), engine={"x": 1.5})
    assert report_json(report) == json.dumps(report.to_dict())
    findings = tasks_findings()
    report = AuditReport.build([part], findings, engine={"x": 1.5})
    again = AuditReport.build(report.partitions, carried(findings), engine={"x": 1.5})
    assert report_json(again) == json.dumps(report.to_dict())
    assert again.to_json() == report.to_json()  # indented: decoded, as before


def test_carried_findings_equal_the_originals_and_decode_the_same() -> None:
    findings = tasks_findings()
    back = carried(findings)
    assert back == findings
    assert [f.to_dict() for f in back] == [f.to_dict() for f in findings]
    assert [f.cause for f in back] == [f.cause for f in findings]
    assert [root_rule(f) for f in back] == [root_rule(f) for f in findings]
    assert [r.to_dict() for r in root_causes(back)] == [r.to_dict() for r in root_causes(findings)]
    rows = [dict(zip(finding_columns(findings), r, strict=True))
            for r in zip(*finding_columns(findings).values(), strict=True)]
    assert findings_from_rows(rows) == findings  # Spark's collected rows


def test_what_a_snapshot_reads_of_a_cause_needs_no_decoding() -> None:
    findings = tasks_findings()
    back = carried(findings)
    assert [f.cause.summary for f in back if f.cause] == [f.cause.summary for f in findings if f.cause]
    assert [root_rule(f) for f in back] == [root_rule(f) for f in findings]
    report_json(AuditReport.build([], back))
    # Only the root causes naming transactions read them (phantoms: their transactions are counted).
    decoded = {root_rule(f) for f in back if f.cause and "_decoded" in f.cause.__dict__}
    assert decoded == {"sink_reads_aborted"}
    assert any(f.kind == "gap" for f in back)


def test_an_encoded_cause_pickles_copies_and_replaces_as_a_cause() -> None:
    f = next(f for f in carried(tasks_findings()) if f.kind == "gap" and f.cause is not None)
    c = f.cause
    assert isinstance(c, EncodedCause)
    assert pickle.loads(pickle.dumps(c)) == c and copy.copy(c) == c
    assert "_decoded" not in pickle.loads(pickle.dumps(c)).__dict__  # still the text only
    changed = replace(c, summary="other")
    assert type(changed).__name__ == "Cause" and changed.summary == "other"
    assert changed.transactions == c.transactions and hash(c) == hash(c.decoded())


def test_a_waived_finding_and_a_sinks_finding_keep_their_waiver_and_sink() -> None:
    """A snapshot stores its audit as this JSON: a waiver or a sink left out would lose what the config's
    waivers judged (snapshot --with-audit) and which sink a finding is of."""
    from eosctl.config.policy import Waiver
    from eosctl.report.findings import WaiverMatch

    waiver = Waiver(HOSTILE, "gap", "replayed", 3, 10, 12, "INC-7", "2026-12-31", 1_798_761_600_000)
    found = [replace(Finding("gap", "orders", 3, 10, 12, 3), waiver=WaiverMatch(waiver, False)),
             replace(Finding("misrouted", "orders", 3, 4, 4, 1), sink=HOSTILE),
             replace(Finding("gap", "orders", 3, 20, 20, 1), waiver=WaiverMatch(waiver, True), sink="a")]
    report = AuditReport.build([PartitionSummary("orders", 3, 0, 30, 30, 28, 27)], found)
    assert report_json(report) == json.dumps(report.to_dict())
    back = [Finding.from_dict(d) for d in json.loads(report_json(report))["findings"]]
    assert [(f.first_offset, f.waived, f.sink) for f in back] == [(4, False, HOSTILE), (10, True, None),
                                                                   (20, False, "a")]
