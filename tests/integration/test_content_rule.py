"""The content check over every fault the reference pipeline plants (issue 49 item 7): with it on, an audit
finds what it finds with it off, plus content findings only where content was planted.

One pipeline run with all nine fault modes (eosctl/sandbox/pipeline/modes.py: the sink's duplicate replay,
skip and aborted leak, the zombie, the hanging transaction, the upstream retry, the stage's replay, skip
and read_uncommitted), audited hop by hop on the local engine with the content check on and off: the same
findings, causes and all. Then content is planted in copies of its DuckDB sink (the rows' keys are the
records' keys, order_id): a writer that stored a committed transaction at offset+1 (its last row on the
COMMIT marker), two keys swapped between rows far apart, a row holding a key no record has (an offset
re-used after an unclean election), and a row at a marker's offset: each is its content finding and
nothing else, the row at the marker a phantom_marker only, with the check on or off; the same sink as
Parquet gives the same findings, and so does Spark (a child process: `own_spark`).
"""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import duckdb
import pytest

from eosctl.sandbox.pipeline import run_pipeline
from eosctl.sandbox.pipeline.modes import FAULTS
from tests.support.helpers import eosctl_json, eosctl_process

pytestmark = [pytest.mark.integration]


@pytest.fixture(scope="module")
def run(cluster, tmp_path_factory) -> tuple[Path, dict]:
    """(workdir, the run's config as TOML)."""
    workdir = tmp_path_factory.mktemp("contentrule")
    run_pipeline(cluster, "cr" + workdir.name[-8:].replace("-", ""), workdir, faults=list(FAULTS),
                 records=150)
    return workdir, tomllib.loads((workdir / "eosctl.toml").read_text())


def hops(config: dict) -> tuple[str, str]:
    """(the stage hop, the sink hop): the pipeline's hops."""
    stage, sink = config["pipelines"][config["default_pipeline"]]["hops"]
    return stage, sink


def audit(workdir: Path, pipeline: str, check: bool, *extra: str) -> dict:
    flag = "--content-check" if check else "--no-content-check"
    return eosctl_json("audit", "--engine", "local", "-c", str(workdir / "eosctl.toml"), "-p", pipeline,
                       flag, *extra, codes=(0, 1), columns=None)


def audit_sink(config: dict, check: bool, *sink: str) -> dict:
    """The sink hop's audit by the command line's flags (``sink``: --sink-duckdb or --sink-parquet FILE):
    without the config, the stage writing its topic is not read for the key duplicates' causes (a read of
    its output, held by the hanging transaction, takes the command's 30 s)."""
    pipe = config["pipelines"][hops(config)[1]]
    bootstrap = next(iter(config["clusters"].values()))["bootstrap_servers"]
    flag = "--content-check" if check else "--no-content-check"
    return eosctl_json("audit", "--engine", "local", "--bootstrap", bootstrap, "--topic",
                       pipe["source_topics"][0], "--group", pipe["group"], *sink, "--sink-table",
                       pipe["sink"]["table"], "--key-column", pipe["sink"]["key_column"], flag,
                       codes=(0, 1), columns=None)


def said(report: dict) -> list[tuple]:
    """Every finding as the report says it, cause and all."""
    return sorted((f["kind"], f["topic"], f["partition"], f["first_offset"], f["last_offset"], f["count"],
                   f.get("detail"), json.dumps(f.get("cause"), sort_keys=True)) for f in report["findings"])


def where(report: dict) -> list[tuple]:
    return sorted((f["kind"], f["partition"], f["first_offset"], f["last_offset"], f["count"],
                   (f.get("cause") or {}).get("rule") if f["kind"] == "content_mismatch" else None)
                  for f in report["findings"])


def test_every_planted_fault_is_found_alike_with_the_content_check_on_and_off(run) -> None:
    workdir, config = run
    stage = hops(config)[0]
    sink = ["--sink-duckdb", config["pipelines"][hops(config)[1]]["sink"]["duckdb"]]
    for what, on, off in ((stage, audit(workdir, stage, True), audit(workdir, stage, False)),
                          ("sink", audit_sink(config, True, *sink), audit_sink(config, False, *sink))):
        assert on["findings"], what  # the faults were planted, and found
        assert said(on) == said(off), what
        assert "content_mismatch" not in {f["kind"] for f in on["findings"]}, what


def _rows(sink: Path) -> dict[int, list[tuple[int, str]]]:
    """The sink's rows per partition: (offset, key), in offset order."""
    with duckdb.connect(str(sink), read_only=True) as con:
        got = con.execute("SELECT src_partition, src_offset, order_id FROM orders_sink "
                          "ORDER BY src_partition, src_offset").fetchall()
    out: dict[int, list[tuple[int, str]]] = {}
    for p, o, k in got:
        out.setdefault(p, []).append((o, k))
    return out


def _named(report: dict) -> dict[int, set[int]]:
    """Per partition, the offsets a finding names (rows, gaps, a key's places), a few beyond each run's end
    (a planted shift must not touch them)."""
    from eosctl.report.findings import Finding
    from eosctl.rules.precedence import key_places

    out: dict[int, set[int]] = {}
    for f in report["findings"]:
        if f["kind"] == "key_duplicate":
            for _, p, o in key_places(Finding.from_dict(f)):
                out.setdefault(p, set()).add(o)
        elif f["first_offset"] is not None and f["kind"] != "offset_mismatch":
            out.setdefault(f["partition"], set()).update(range(f["first_offset"], f["last_offset"] + 4))
    return out


def _plan(sink: Path, base: dict) -> dict[str, tuple]:
    """Where to plant each content fault, away from every finding of ``base``: a shift's rows (the end of a
    committed run held once, just before a lone offset no row holds and no finding names: a COMMIT marker),
    two rows to swap (held once, 4 offsets apart or more: not neighbours), a row to re-use and a marker to
    put a row at."""
    named, shift, single, markers = _named(base), [], [], []
    for p, held in sorted(_rows(sink).items()):
        offsets = [o for o, _ in held]
        once = {o for o in offsets if offsets.count(o) == 1} - named.get(p, set())
        for o in sorted(once):
            if o + 1 not in offsets and o + 2 in once and o + 1 not in named.get(p, set()):
                markers.append((p, o + 1))
                if o - 1 in once:
                    shift.append((p, o - 1, o))
        single += [(p, o) for o in sorted(once)]
    assert shift and markers, f"no place to plant: findings {where(base)}"
    s = shift[0]
    free = [(p, o) for p, o in single if (p, o) not in ((s[0], s[1]), (s[0], s[2]))
            and not (p == s[0] and s[1] - 3 <= o <= s[2] + 3)]
    a = free[0]
    b = next(x for x in free if x[0] == a[0] and x[1] - a[1] >= 4)
    c = next(x for x in free if x not in (a, b) and abs(x[1] - a[1]) > 3 and abs(x[1] - b[1]) > 3)
    m = next(x for x in markers if x[0] != s[0] or x[1] != s[2] + 1)
    return {"shift": s, "swap": (a[0], a[1], b[1]), "reused": c, "marker": m}


def _planted(base_sink: Path, to: Path, plan: dict[str, tuple], keys: dict[int, dict[int, str]]) -> Path:
    shutil.copy(base_sink, to)
    sp, s_first, s_last = plan["shift"]
    wp, w_first, w_last = plan["swap"]
    rp, r_offset = plan["reused"]
    mp, m_offset = plan["marker"]
    with duckdb.connect(str(to)) as con:
        con.execute("UPDATE orders_sink SET src_offset = src_offset + 1 WHERE src_partition = ? AND "
                    "src_offset BETWEEN ? AND ?", [sp, s_first, s_last])
        for a, b in ((w_first, w_last), (w_last, w_first)):
            con.execute("UPDATE orders_sink SET order_id = ? WHERE src_partition = ? AND src_offset = ?",
                        [keys[wp][b], wp, a])
        con.execute("UPDATE orders_sink SET order_id = 'gone-after-an-unclean-election' "
                    "WHERE src_partition = ? AND src_offset = ?", [rp, r_offset])
        con.execute("INSERT INTO orders_sink (src_topic, src_partition, src_offset, order_id) "
                    "SELECT src_topic, src_partition, ?, 'no-record-here' FROM orders_sink "
                    "WHERE src_partition = ? LIMIT 1", [m_offset, mp])
    return to


def test_content_findings_only_where_content_was_planted(run, tmp_path) -> None:
    _, config = run
    base_sink = Path(config["pipelines"][hops(config)[1]]["sink"]["duckdb"])
    base = audit_sink(config, True, "--sink-duckdb", str(base_sink))
    plan = _plan(base_sink, base)
    keys = {p: dict(held) for p, held in _rows(base_sink).items()}
    sink = _planted(base_sink, tmp_path / "planted.duckdb", plan, keys)
    sp, s_first, s_last = plan["shift"]
    wp, w_first, w_last = plan["swap"]
    rp, r_offset = plan["reused"]
    mp, m_offset = plan["marker"]
    content = sorted([
        ("content_mismatch", sp, s_first + 1, s_last + 1, s_last - s_first + 1, "shifted_coordinates"),
        ("content_mismatch", wp, w_first, w_first, 1, "different_record"),
        ("content_mismatch", wp, w_last, w_last, 1, "different_record"),
        ("content_mismatch", rp, r_offset, r_offset, 1, "different_record")])
    marker = [("phantom_marker", mp, m_offset, m_offset, 1, None)]
    on = audit_sink(config, True, "--sink-duckdb", str(sink))
    assert where(on) == sorted(where(base) + content + marker)
    # offsets only: the swap and the re-used offset pass; the shift shows as a gap below it and a phantom at
    # the marker its last row stands on
    off = audit_sink(config, False, "--sink-duckdb", str(sink))
    made_up = [("gap", sp, s_first, s_first, 1, None),
               ("phantom_marker", sp, s_last + 1, s_last + 1, 1, None)]
    assert where(off) == sorted(where(base) + made_up + marker)
    assert on["summary"]["findings"]["content_mismatch"] == 4
    # the same rows as Parquet files
    parquet = tmp_path / "planted.parquet"
    with duckdb.connect(str(sink), read_only=True) as con:
        con.execute(f"COPY orders_sink TO '{parquet}' (FORMAT parquet)")
    assert where(audit_sink(config, True, "--sink-parquet", str(parquet))) == where(on)


@pytest.mark.spark
@pytest.mark.own_spark
def test_spark_gives_the_same_findings_of_the_planted_sink(run, tmp_path) -> None:
    _, config = run
    base_sink = Path(config["pipelines"][hops(config)[1]]["sink"]["duckdb"])
    base = audit_sink(config, True, "--sink-duckdb", str(base_sink))
    keys = {p: dict(held) for p, held in _rows(base_sink).items()}
    sink = _planted(base_sink, tmp_path / "planted.duckdb", _plan(base_sink, base), keys)
    local = audit_sink(config, True, "--sink-duckdb", str(sink))
    pipe = config["pipelines"][hops(config)[1]]
    bootstrap = next(iter(config["clusters"].values()))["bootstrap_servers"]
    r = eosctl_process("audit", "--engine", "spark", "--bootstrap", bootstrap, "--topic",
                       pipe["source_topics"][0], "--group", pipe["group"], "--sink-duckdb", str(sink),
                       "--sink-table", pipe["sink"]["table"], "--key-column", pipe["sink"]["key_column"],
                       "--format", "json", timeout=300)
    assert r.returncode == 1, r.stderr[-2000:]
    assert said(json.loads(r.stdout)) == said(local)
