"""The run manifest: ground truth for audits and inspections, written as ``manifest.json`` next to the sink.

Nothing in it comes from reading the log back (that is what the audits under test do): record offsets
come from delivery reports, marker offsets from the high watermark right after each commit/abort (nothing
else writes concurrently, so it is the offset after the transaction's last record in each partition it
touched), producer ids and epochs from DescribeTransactions (``-1`` where the broker doesn't support it).
Offsets are inclusive except ``next_offset``-style values.

Its fields, the sink schema and the run rules: docs/manifest.md (checked against this code by
tests/unit/test_docs.py).

Notes: with ``aborted-leak`` every aborted record of the output topic (the processor's simulated errors
and, with ``zombie``, the fenced transaction) is a sink row, so the phantom_aborted findings are the
output topic's aborted ranges merged by the run rule. ``zombie`` and ``hanging`` leave no sink defect:
they show in ``fencing`` and ``hanging``. On noida-db the coordinator's ABORT marker for a fenced
transaction carries the new epoch; real Kafka writes it at epoch+1 and hands the successor epoch+2.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

VERSION = 1
FILE = "manifest.json"


def build(**fields: Any) -> dict:
    return {"version": VERSION, "created_at": datetime.now(UTC).isoformat(timespec="seconds"), **fields}


def write(manifest: dict, workdir: Path) -> Path:
    path = workdir / FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)  # readers never see half a manifest
    return path


def read(workdir: Path) -> dict:
    return json.loads((workdir / FILE).read_text(encoding="utf-8"))


def planted(manifest: dict) -> list[dict]:
    """Every finding a correct audit of the whole pipeline reports: each hop's, in hop order (a manifest
    from before hops: the sink's)."""
    hops = manifest.get("hops") or [{"expected_findings": manifest["expected_findings"]}]
    return [f for hop in hops for f in hop["expected_findings"]]


def planted_lines(manifest: dict) -> list[str]:
    """The planted defects, one line each, per hop: what `sandbox pipeline` and `demo` print."""
    lines = []
    for hop in manifest.get("hops") or [{"name": "sink", "expected_findings": manifest["expected_findings"]}]:
        for f in hop["expected_findings"]:
            where = f"{f['topic']}[{f['partition']}] offsets {f['first_offset']}..{f['last_offset']}"
            key = f" key {f['key']}" if f.get("key") else ""
            what = f"{f['kind']:<16} {where} (count {f['count']}){key}"
            lines.append(f"  {hop['name']:<8} {what}  <- {f['fault']}")
    for h in manifest.get("hanging", []):
        lines.append(f"  {'':<8} {'hanging txn':<16} {h['topic']}[{h['partition']}] offsets "
                     f"{h['first_offset']}..{h['last_offset']}: LSO stuck at {h['first_offset']}  <- hanging")
    for z in manifest.get("fencing", []):
        lines.append(f"  {'':<8} {'fenced producer':<16} {z['transactional_id']} epoch {z['old_epoch']} -> "
                     f"{z['new_epoch']} (zombie got {z['zombie_error'] or 'through!'})  <- zombie")
    return lines
