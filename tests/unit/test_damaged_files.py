"""Every file eosctl reads is checked before use (issue 20, defects 5 and 7): a damaged snapshot, a crafted
JSON report or a pathological TOML is one line and exit 2, never a traceback; `report` recomputes the
verdict from the findings instead of trusting the file."""

from __future__ import annotations

import copy
import json
import shutil
from functools import partial
from pathlib import Path

import duckdb
import pytest

from eosctl.base.errors import EosctlError
from eosctl.base.files import shown
from tests.support.helpers import eosctl
from tests.support.samplereports import demo_report

REFERENCE = Path(__file__).resolve().parents[1] / "tui" / "data" / "reference.snap.duckdb"


cli = partial(eosctl, columns=None, check=False)


def assert_one_line(result, code: int = 2) -> str:
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("eosctl: error: "), lines
    return lines[0]


# --- snapshots ----------------------------------------------------------------------------------------

# Every table of a snapshot (the `hanging` view rests on hanging_candidates).
TABLES = ["meta", "sections", "partition_logs", "log_ranges", "log_transactions", "log_producers", "ledger",
          "ledger_flags", "transactions", "producers", "lag", "lag_groups", "hanging_candidates",
          "hanging_check", "audit", "audit_findings"]
# Tables nothing reads back (they are for DuckDB users): a snapshot without them still opens.
NOT_READ = {"log_ranges", "log_transactions", "log_producers", "audit_findings"}

DAMAGE = {
    "meta empty": "DELETE FROM meta",
    "meta captured_at NULL": "UPDATE meta SET captured_at = NULL",
    "meta format_version NULL": "UPDATE meta SET format_version = NULL",
    "meta format from the future": "UPDATE meta SET format_version = 99",
    "meta topics of another type": "ALTER TABLE meta ALTER topics TYPE VARCHAR USING 'x'",
    "meta without a column": "ALTER TABLE meta DROP COLUMN bootstrap",
    "sections status NULL": "UPDATE sections SET status = NULL",
    "partition log not JSON": "UPDATE partition_logs SET data = 'not json'",
    "partition log a list": "UPDATE partition_logs SET data = '[]'",
    "partition log topic a number": "UPDATE partition_logs SET data = json_object('topic', 5)",
    "partition log nested 50k deep": f"UPDATE partition_logs SET data = '{'[' * 50000}{']' * 50000}'",
    "transactions not JSON": "UPDATE transactions SET data = '{'",
    "producers missing fields": "UPDATE producers SET data = '{}'",
    "lag of the wrong type": "UPDATE lag SET data = json_object('topic', [1])",
    "lag_groups without a column": "ALTER TABLE lag_groups DROP COLUMN taken_ms",
    "ledger flags of the wrong type": "ALTER TABLE ledger_flags ALTER count TYPE VARCHAR USING 'many'",
    "audit not JSON": "UPDATE audit SET data = 'x'",
    "audit empty": "DELETE FROM audit",
    "audit finding topic a number": "UPDATE audit SET data = json_object('verdict', 'fail', 'partitions', "
                                    "json('[]'), 'findings', json('[{\"kind\": \"gap\", \"topic\": 7, "
                                    "\"partition\": 0, \"first_offset\": 1, \"last_offset\": 1, "
                                    "\"count\": 1}]'))",
    "hanging candidates of the wrong type": "ALTER TABLE hanging_candidates ALTER rules TYPE VARCHAR "
                                            "USING 'r'",
}


def damaged(tmp_path: Path, sql: list[str]) -> str:
    path = tmp_path / "snap.duckdb"
    shutil.copy(REFERENCE, path)
    with duckdb.connect(str(path)) as con:
        for statement in sql:
            con.execute(statement)
    return str(path)


def opens_or_one_line(path: str, tmp_path: Path) -> int:
    """`report` and `tui --snapshot` (its SnapshotSource.fetch, which the command runs before the screen
    switches) either work or say one line; `report`'s exit code."""
    from tui.sources import SnapshotSource

    result = cli("report", path, "--out", str(tmp_path / "r.html"))
    if result.exit_code != 0:
        line = assert_one_line(result)
        assert "snap.duckdb" in line
        with pytest.raises(EosctlError):
            SnapshotSource(path).fetch()
    else:
        SnapshotSource(path).fetch()
    return result.exit_code


@pytest.mark.parametrize("table", TABLES)
def test_a_snapshot_missing_a_table(tmp_path: Path, table: str) -> None:
    drop = ["DROP VIEW hanging"] if table == "hanging_candidates" else []
    path = damaged(tmp_path, [*drop, f'DROP TABLE "{table}"'])
    code = opens_or_one_line(path, tmp_path)
    if table not in NOT_READ | {"hanging_candidates", "hanging_check"}:  # (older files lack those two)
        assert code == 2


@pytest.mark.parametrize("sql", DAMAGE.values(), ids=DAMAGE.keys())
def test_a_snapshot_with_damaged_values(tmp_path: Path, sql: str) -> None:
    path = damaged(tmp_path, [sql])
    assert opens_or_one_line(path, tmp_path) == 2


# --- JSON reports -------------------------------------------------------------------------------------


def report_dict() -> dict:
    return json.loads(demo_report().to_json())


def mutated(change) -> dict:
    d = copy.deepcopy(report_dict())
    change(d)
    return d


CRAFTED = {
    "top level a list": [],
    "top level a string": "pass",
    "no verdict": mutated(lambda d: d.pop("verdict")),
    "verdict a number": mutated(lambda d: d.update(verdict=1)),
    "verdict unknown": mutated(lambda d: d.update(verdict="maybe")),
    "partitions an object": mutated(lambda d: d.update(partitions={})),
    "partition a number": mutated(lambda d: d.update(partitions=[5])),
    "partition topic a list": mutated(lambda d: d["partitions"][0].update(topic=["t"])),
    "partition hw a string": mutated(lambda d: d["partitions"][0].update(high_watermark="lots")),
    "partition without a field": mutated(lambda d: d["partitions"][0].pop("sink_rows")),
    "log segments a number": mutated(lambda d: d["partitions"][0].update(log_segments=5)),
    "log segment without count": mutated(lambda d: d["partitions"][0]["log_segments"][0].pop("count")),
    "findings a string": mutated(lambda d: d.update(findings="none")),
    "finding a list": mutated(lambda d: d.update(findings=[[]])),
    "finding kind unknown": mutated(lambda d: d["findings"][0].update(kind="meh")),
    "finding topic a number": mutated(lambda d: d["findings"][0].update(topic=5)),
    "finding partition a string": mutated(lambda d: d["findings"][0].update(partition="zero")),
    "finding count infinite": mutated(lambda d: d["findings"][0].update(count=1e400)),
    "finding count negative": mutated(lambda d: d["findings"][0].update(count=-3)),
    "finding offsets a string": mutated(lambda d: d["findings"][0].update(offsets="1,2")),
    "finding key a number": mutated(lambda d: d["findings"][0].update(key=5)),
    "finding detail an object": mutated(lambda d: d["findings"][0].update(detail={})),
    "fail_on a string": mutated(lambda d: d.update(fail_on="gap")),
    "fail_on unknown kind": mutated(lambda d: d.update(fail_on=["nope"])),
    "engine a string": mutated(lambda d: d.update(engine="spark")),
    "elapsed a string": mutated(lambda d: d.update(elapsed_seconds="slow")),
}


@pytest.mark.parametrize("data", CRAFTED.values(), ids=CRAFTED.keys())
def test_a_crafted_json_report_is_one_line(tmp_path: Path, data) -> None:
    path = tmp_path / "audit.json"
    path.write_text(json.dumps(data))
    line = assert_one_line(cli("report", str(path), "--out", str(tmp_path / "r.html")))
    assert "audit.json" in line
    assert_one_line(cli("snapshot", "--bootstrap", "127.0.0.1:1", "--audit-report", str(path),
                        "--out", str(tmp_path / "s.duckdb")))


@pytest.mark.parametrize("text", ["[" * 50000 + "]" * 50000, '{"verdict": NaN}', "\xff\xfe"],
                         ids=["nested 50k deep", "NaN", "not UTF-8"])
def test_an_unparseable_json_report_is_one_line(tmp_path: Path, text: str) -> None:
    path = tmp_path / "audit.json"
    path.write_bytes(text.encode("latin-1"))
    assert_one_line(cli("report", str(path), "--out", str(tmp_path / "r.html")))


def test_a_report_with_a_byte_order_mark_renders(tmp_path: Path) -> None:
    path = tmp_path / "audit.json"
    path.write_text("\ufeff" + demo_report().to_json(), encoding="utf-8")
    result = cli("report", str(path), "--out", str(tmp_path / "r.html"))
    assert result.exit_code == 0, result.output


def test_report_recomputes_a_verdict_that_says_pass_over_failing_findings(tmp_path: Path) -> None:
    data = report_dict()
    failing = len(data["findings"])
    data["verdict"] = "pass"
    path = tmp_path / "audit.json"
    path.write_text(json.dumps(data))
    result = cli("report", str(path), "--out", str(tmp_path / "r.html"))
    assert result.exit_code == 0, result.output
    warning, wrote = result.stderr.splitlines()
    assert warning == (f"eosctl: warning: {shown(str(path))}: the report says PASS, but {failing} of its "
                       "findings are of kinds it fails on: the verdict is FAIL")
    assert wrote.startswith("wrote ") and ": FAIL," in wrote
    page = (tmp_path / "r.html").read_text()
    assert '<section class="verdict fail"' in page and "PASS — no failing findings" not in page
    assert "the report says PASS" in page


def test_a_snapshots_stored_verdict_is_recomputed_too(tmp_path: Path) -> None:
    path = damaged(tmp_path, ["UPDATE audit SET data = replace(data, '\"verdict\": \"fail\"', "
                              "'\"verdict\": \"pass\"')"])
    result = cli("report", path, "--out", str(tmp_path / "r.html"))
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[0].endswith("the verdict is FAIL")


# --- TOML ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["x = " + "[" * 50000 + "]" * 50000,
                                  "x = " + "{a=" * 30000 + "1" + "}" * 30000],
                         ids=["arrays 50k deep", "inline tables 30k deep"])
def test_a_deeply_nested_toml_is_one_line(tmp_path: Path, text: str) -> None:
    path = tmp_path / "deep.toml"
    path.write_text(text)
    line = assert_one_line(cli("lag", "-c", str(path), "-t", "t"))
    assert line == f"eosctl: error: {shown(str(path))}: not valid TOML: arrays or tables nested too deeply"


def test_a_toml_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    from eosctl.config.file import load_config

    path = tmp_path / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbf[clusters.a]\nbootstrap_servers = \"localhost:9092\"\n")
    assert load_config(path).clusters["a"].bootstrap_servers == "localhost:9092"
