"""The HTML sign-off page, read the way a browser and a machine would: its SVG, legend, tables and JSON."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from datetime import UTC, datetime
from html.parser import HTMLParser

import pytest
from click.testing import CliRunner

from eosctl.base.files import shown
from eosctl.cli import main
from eosctl.cluster.model import Kind, OffsetRange, PartitionLog
from eosctl.output.gapmap import MIN_FINDING_W
from eosctl.output.html import AuditContext, render_html
from eosctl.report.findings import KINDS, AuditReport, Finding, LogSegment, PartitionSummary
from eosctl.report.segments import log_segments
from tests.support.samplereports import TOPIC, demo_report, many_partitions_report, txn_log

SVG = "{http://www.w3.org/2000/svg}"


class Page(HTMLParser):
    """Script bodies by id, legend entries, and the text of the verdict section."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.scripts: dict[str, str] = {}
        self.legend: list[dict[str, str]] = []
        self.tags: list[tuple[str, dict[str, str]]] = []
        self._script: str | None = None
        self._verdict_depth = 0
        self.verdict_text = ""
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        self.tags.append((tag, a))
        if tag == "script":
            self._script = a.get("id", "")
            self.scripts[self._script] = ""
        if tag == "li" and ("data-kind" in a or "data-layer" in a):
            self.legend.append(a)
        if tag == "section" and a.get("id") == "verdict":
            self._verdict_depth = 1
        elif self._verdict_depth and tag in ("section", "div", "p", "span"):
            self._verdict_depth += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._script = None
        if self._verdict_depth and tag in ("section", "div", "p", "span"):
            self._verdict_depth -= 1

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            self.scripts[self._script] += data
        if self._verdict_depth:
            self.verdict_text += data


def svgs(html: str) -> dict[str, ET.Element]:
    """Each gap-map bar, by its row's topic[partition], parsed as XML (it must be well-formed SVG)."""
    out = {}
    row = r'<div class="row[^"]*" data-tp="([^"]+)">.*?(<svg class="gap".*?</svg>)'
    for m in re.finditer(row, html, re.S):
        out[m.group(1)] = ET.fromstring(m.group(2))
    return out


def marks(svg: ET.Element) -> list[ET.Element]:
    """The finding marks, each a link to its row (<a href="#finding-N">) or bare."""
    return [e for e in svg.iter() if e.get("class") == "f"]


def test_every_finding_is_one_mark_titled_with_its_offsets():
    report = demo_report()
    bars = svgs(render_html(report))
    assert sorted(bars) == ["demo.enriched[0]", "demo.enriched[1]", "demo.enriched[2]"]
    for tp, svg in bars.items():
        found = [f for f in report.findings if f"{f.topic}[{f.partition}]" == tp]
        drawn = marks(svg)
        assert [(m.get("data-kind"), int(m.get("data-first")), int(m.get("data-last"))) for m in drawn] == [
            (f.kind, f.first_offset, f.last_offset) for f in found]
        for m, f in zip(drawn, found, strict=True):
            title = m.find(f"{SVG}title").text
            where = str(f.first_offset) if f.first_offset == f.last_offset else (
                f"{f.first_offset}..{f.last_offset}")
            assert f"{f.kind} {tp} offset" in title and where in title and f"count {f.count}" in title
    gap = marks(bars["demo.enriched[1]"])[0]
    assert gap.find(f"{SVG}title").text == "gap demo.enriched[1] offsets 22..24, count 3"
    key = next(m for m in marks(bars["demo.enriched[0]"]) if m.get("data-kind") == "key_duplicate")
    assert key.tag == f"{SVG}path" and key.get("d").count("M") == 2  # one mark per offset, one element
    assert "key o-000300, at 101, 117" in key.find(f"{SVG}title").text


def test_log_segments_are_drawn_under_the_findings_with_their_offsets():
    svg = svgs(render_html(demo_report()))["demo.enriched[0]"]
    layers = [(e.get("data-layer"), e.find(f"{SVG}title").text) for e in svg if e.get("class") == "seg"]
    assert ("ABORTED", "offsets 44..53: 10 aborted records") in layers
    assert ("MARKER", "offset 54: 1 transaction marker") in layers
    assert ("OPEN", "offsets 119..121: 3 open-transaction records") in layers
    first_mark = next(i for i, e in enumerate(svg) if e.get("class") == "f" or e.tag == f"{SVG}a")
    assert all(i < first_mark for i, e in enumerate(svg) if e.get("class") in ("seg", "layer"))
    texts = [t.text for t in svg.iter(f"{SVG}text")]
    assert texts[:3] == ["log start 0", "HW 122", "LSO 119"]


def test_a_one_offset_defect_in_a_ten_million_offset_partition_stays_visible():
    report = many_partitions_report()
    bars = svgs(render_html(report))
    (gap,) = marks(bars["orders[3]"])
    assert (gap.get("data-first"), gap.get("data-last")) == ("5000000", "5000000")
    assert float(gap.get("width")) >= MIN_FINDING_W
    assert 440 < float(gap.get("x")) < 450  # the middle of the bar: it keeps its place, only its width grows
    (big,) = marks(bars["orders[150]"])
    assert float(big.get("width")) == pytest.approx(900 * 2_999_000 / 10_000_000, abs=0.5)


def test_rows_beyond_the_high_watermark_sit_in_their_own_stub_after_it():
    bars = svgs(render_html(many_partitions_report()))
    svg = bars["orders[42]"]
    (mark,) = marks(svg)
    stub = next(e for e in svg if e.get("class") == "beyond")
    assert float(stub.get("x")) <= float(mark.get("x")) < float(stub.get("x")) + float(stub.get("width"))
    assert "HW 10,000,000" in [t.text for t in svg.iter(f"{SVG}text")]


def test_legend_names_every_finding_kind_with_its_count_and_every_log_layer():
    page = Page(render_html(demo_report()))
    kinds = {e["data-kind"]: e for e in page.legend
             if "data-kind" in e and e.get("class", "").startswith("finding")}
    assert list(kinds) == list(KINDS)
    layers = [e["data-layer"] for e in page.legend if "data-layer" in e]
    assert layers == ["COMMITTED", "PENDING", "ABORTED", "MARKER", "OPEN", "HOLE"]
    assert "absent" in [e for e in page.legend if e.get("data-layer") == "HOLE"][0]["class"]
    html = render_html(demo_report())
    entry = (r'data-kind="phantom_aborted" class="finding" title="sink rows for records of aborted '
             r'transactions"><i [^>]*></i>phantom_aborted <b>4</b>')
    assert re.search(entry, html)


def test_verdict_comes_first_with_its_counts():
    page = Page(render_html(demo_report()))
    first_section = next(a for t, a in page.tags if t == "section")
    assert first_section["id"] == "verdict" and "fail" in first_section["class"]
    text = " ".join(page.verdict_text.split())
    assert text.startswith("FAIL 11 failing findings in 3 of 3 partitions")
    assert "3 partitions · 352 expected records · 427 sink rows" in text
    assert "gap 1" in text and "phantom_aborted 4" in text


def test_a_pass_and_ignored_findings_say_so():
    base = demo_report()
    passing = AuditReport.build(base.partitions, [], sink=base.sink)
    assert " ".join(Page(render_html(passing)).verdict_text.split()).startswith(
        "PASS every committed record is in the sink exactly once")
    assert "None: every committed record is in the sink exactly once" in render_html(passing)
    only_gaps = AuditReport.build(base.partitions, base.findings, fail_on=("gap",))
    text = " ".join(Page(render_html(only_gaps)).verdict_text.split())
    assert text.startswith("FAIL 1 failing finding in 3 of 3 partitions, 10 ignored")
    assert "duplicate 1 (ignored)" in text


def test_what_was_audited_lists_cluster_topics_group_sink_engine_versions_time_and_fail_on():
    when = datetime(2026, 11, 23, 15, 0, 5, tzinfo=UTC)
    engine = {"spark_version": "4.0.1", "master": "local[2]", "partitions_seconds": 5.06}
    html = render_html(AuditReport.build(demo_report().partitions, demo_report().findings,
                                         fail_on=("gap", "duplicate"), sink="/x/sink.duckdb (orders_sink)",
                                         group="demo.sink", engine=engine, elapsed_seconds=14.24),
                       AuditContext(bootstrap="127.0.0.1:39092", pipeline="demo", topics=("demo.enriched",),
                                    audited_at=when, origin="eosctl audit"))
    facts = dict(re.findall(r"<dt>([^<]+)</dt><dd>([^<]*)</dd>", html))
    assert facts["cluster"] == "127.0.0.1:39092" and facts["pipeline"] == "demo"
    assert facts["topics"] == "demo.enriched" and facts["consumer group"] == "demo.sink"
    assert facts["sink"] == "/x/sink.duckdb (orders_sink)"
    assert facts["engine"] == "master local[2] · partitions 5.1 s"
    assert facts["versions"].startswith("eosctl ") and "Spark 4.0.1" in facts["versions"]
    assert facts["audited at"] == "2026-11-23 15:00:05 UTC" and facts["audit took"] == "14.2 s"
    assert facts["--fail-on"] == "gap, duplicate"


def test_embedded_json_is_the_report_and_survives_hostile_text():
    evil = "</script><script>alert(1)</script><!--"
    base = demo_report()
    report = AuditReport.build(base.partitions, [*base.findings, Finding(
        "key_duplicate", "demo.enriched", 2, 5, 6, 2, key=evil, offsets=(5, 6), detail="a & b <c>")])
    html = render_html(report)
    assert evil not in html and "<script>alert" not in html
    page = Page(html)
    assert json.loads(page.scripts["eosctl-report"]) == json.loads(report.to_json())
    assert AuditReport.from_dict(json.loads(page.scripts["eosctl-report"])) == report
    assert json.loads(page.scripts["eosctl-context"])["eosctl_version"]
    assert "&lt;/script&gt;&lt;script&gt;alert(1)" in html  # shown as text in the table and the title


def test_self_contained_no_network_no_scripts_to_run():
    html = render_html(many_partitions_report())
    page = Page(html)
    assert not [a for t, a in page.tags if t in ("link", "img", "iframe", "object", "embed")]
    # Links only inside the page (a gap-map mark to its finding's row), never to a resource.
    assert not [a for t, a in page.tags if "src" in a or not (a.get("href") or "#").startswith("#")]
    assert all(a.get("type") == "application/json" for t, a in page.tags if t == "script")
    assert re.findall(r"https?://[^\s\"']+", html) == ["http://www.w3.org/2000/svg"] * html.count("<svg")
    assert "@import" not in html and "url(" not in html


def test_two_hundred_partitions_read_like_three():
    report = many_partitions_report()
    html = render_html(report)
    bars = svgs(html)
    full = [tp for tp in bars if 'class="row compact"' not in html.split(f'data-tp="{tp}"')[0][-40:]]
    assert full == ["orders[3]", "orders[17]", "orders[42]", "orders[150]", "orders[199]"]
    assert "195 partitions without findings (thin bars)" in html
    assert len(bars) == 200 and sum(len(marks(s)) for s in bars.values()) == len(report.findings)
    quiet = html.split("195 partitions without findings (thin bars)")[1]
    assert quiet.count('class="row compact"') == 195
    assert len(html) < 3_000_000  # ~100 marker segments per partition, merged per pixel


def test_a_key_duplicate_across_partitions_marks_only_its_own_partitions_offsets():
    f = Finding("key_duplicate", TOPIC, 0, 7, 101, 2, key="k1", offsets=(7, 101),
                detail=f"in {TOPIC}[0]@101, {TOPIC}[2]@7")
    report = AuditReport.build(demo_report().partitions, [f])
    (mark,) = marks(svgs(render_html(report))["demo.enriched[0]"])
    # one mark, at offset 101 of 0..122: x = 900 * 101 / 122
    assert mark.get("d").count("M") == 1 and mark.get("d").startswith("M745.08 ")
    assert f"in {TOPIC}[0]@101, {TOPIC}[2]@7" in mark.find(f"{SVG}title").text


def test_a_partition_kafka_does_not_have_is_all_phantom():
    part = PartitionSummary("ghost", 0, 0, 0, 0, 0, 7, exists=False)
    report = AuditReport.build([part], [Finding("phantom_beyond_hw", "ghost", 0, 3, 9, 7,
                                                detail="partition does not exist in Kafka")])
    svg = svgs(render_html(report))["ghost[0]"]
    (mark,) = marks(svg)
    assert float(mark.get("x")) == 0 and float(mark.get("width")) == 900
    assert "not in Kafka" in "".join(t.text for t in svg.iter(f"{SVG}text"))


# ---- log segments (eosctl.report) -------------------------------------------------------------------


def test_log_segments_keep_every_aborted_marker_and_open_stretch_of_a_small_log():
    log = txn_log("t", 0, 40, every=10, aborted=(10,), open_from=36)
    assert log_segments(log) == (
        LogSegment("MARKER", 9, 9, 1), LogSegment("ABORTED", 10, 18, 9), LogSegment("MARKER", 19, 19, 1),
        LogSegment("MARKER", 29, 29, 1), LogSegment("OPEN", 36, 39, 4))


def test_log_segments_stay_bounded_and_count_exactly_when_coalesced():
    log = txn_log("t", 0, 1_000_000, every=100, aborted=tuple(range(0, 1_000_000, 700)))
    segs = log_segments(log, per_kind=50)
    for kind in ("MARKER", "ABORTED"):
        mine = [s for s in segs if s.kind == kind]
        assert len(mine) == 50
        assert sum(s.count for s in mine) == log.count(Kind(kind))
        assert all(a.last < b.first for a, b in zip(mine, mine[1:], strict=False))


def test_log_segments_clip_to_log_start_and_merge_neighbours_of_other_producers():
    log = PartitionLog("t", 0, 5, 30, 30, 0, 30, [
        OffsetRange(0, 9, Kind.ABORTED, 1, 0), OffsetRange(10, 14, Kind.ABORTED, 2, 0),
        OffsetRange(15, 29, Kind.DATA)])
    assert log_segments(log) == (LogSegment("ABORTED", 5, 14, 10),)


def test_summary_json_round_trips_log_segments_and_omits_them_when_absent():
    part = demo_report().partitions[0]
    assert PartitionSummary.from_dict(json.loads(json.dumps(part.to_dict()))) == part
    bare = replace(part, log_segments=None)
    assert "log_segments" not in bare.to_dict()
    assert PartitionSummary.from_dict(bare.to_dict()) == bare


# ---- eosctl report -----------------------------------------------------------------------------------


def test_report_verb_renders_a_json_report(tmp_path):
    src = tmp_path / "audit.json"
    src.write_text(demo_report().to_json())
    out = tmp_path / "audit.html"
    result = CliRunner().invoke(main, ["report", str(src), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert f"wrote {shown(str(out))}: FAIL, 11 findings in 3 partitions" in result.stderr
    page = Page(out.read_text())
    assert json.loads(page.scripts["eosctl-report"]) == json.loads(demo_report().to_json())
    assert f"{src} (JSON report, file written" in out.read_text()


def test_report_verb_renders_a_snapshot_and_draws_its_logs(tmp_path):
    from eosctl.inspection.capture import Capture
    from eosctl.inspection.snapshot import write_snapshot

    logs = {("demo.enriched", p): txn_log("demo.enriched", p, 60, aborted=(11,)) for p in range(2)}
    old = AuditReport.build([replace(s, log_segments=None) for s in demo_report().partitions[:2]],
                            [Finding("gap", "demo.enriched", 1, 22, 24, 3)])
    snap = Capture(captured_at=datetime(2026, 11, 23, 9, 30, tzinfo=UTC), bootstrap="10.0.0.5:9092",
                    pipeline="demo", group="demo.sink", topics=["demo.enriched"], logs=logs, audit=old)
    snap.sections = {"logs": "ok", "audit": "ok"}
    write_snapshot(snap, tmp_path / "incident.duckdb")
    out = tmp_path / "incident.html"
    result = CliRunner().invoke(main, ["report", str(tmp_path / "incident.duckdb"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    html = out.read_text()
    facts = dict(re.findall(r"<dt>([^<]+)</dt><dd>([^<]*)</dd>", html))
    assert facts["cluster"] == "10.0.0.5:9092" and facts["audited at"] == "2026-11-23 09:30:00 UTC"
    svg = svgs(html)["demo.enriched[0]"]
    assert ("ABORTED", "offsets 11..20: 10 aborted records") in [
        (e.get("data-layer"), e.find(f"{SVG}title").text) for e in svg if e.get("class") == "seg"]


@pytest.mark.parametrize(("content", "message"), [
    (None, "no such file"),
    ("{not json", "is neither an eosctl snapshot nor a JSON audit report"),
    ('{"verdict": "pass"}', "is neither an eosctl snapshot nor a JSON audit report"),
])
def test_report_verb_bad_input_is_one_line_and_exit_2(tmp_path, content, message):
    src = tmp_path / "x.json"
    if content is not None:
        src.write_text(content)
    result = CliRunner().invoke(main, ["report", str(src), "--out", str(tmp_path / "x.html")])
    assert result.exit_code == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x.html").exists()


def test_report_verb_refuses_a_snapshot_without_an_audit(tmp_path):
    from eosctl.inspection.capture import Capture
    from eosctl.inspection.snapshot import write_snapshot

    snap = Capture(captured_at=datetime.now(UTC), bootstrap="b:1", pipeline=None, group=None, topics=[])
    snap.sections = {"logs": "ok"}
    write_snapshot(snap, tmp_path / "s.duckdb")
    out = str(tmp_path / "s.html")
    result = CliRunner().invoke(main, ["report", str(tmp_path / "s.duckdb"), "--out", out])
    assert result.exit_code == 2 and "holds no audit" in result.stderr


def test_report_help_teaches_both_sources():
    result = CliRunner().invoke(main, ["report", "--help"])
    assert "eosctl snapshot -c eosctl.toml --with-audit --out incident.duckdb" in result.output
    assert "eosctl audit -c eosctl.toml --format json --out audit.json" in result.output
    assert "eosctl audit --format html --out FILE" in result.output


def test_a_pipeline_audited_hop_by_hop_has_a_hops_section_and_a_gap_map_per_hop():
    from eosctl.report.findings import Hop, merge_hops

    sink_hop = demo_report()
    stage = AuditReport.build([PartitionSummary("demo.orders", 0, 0, 50, 50, 40, 40)],
                              [Finding("gap", "demo.orders", 0, 7, 9, 3)], sink="demo.enriched (hop_rows)",
                              group="demo.processor")
    report = merge_hops([("demo.process", stage), ("demo", sink_hop)], [("demo.orders",), (TOPIC,)])
    assert [h.name for h in report.hops] == ["demo.process", "demo"]
    assert report.hops[0] == Hop("demo.process", ("demo.orders",), "demo.enriched (hop_rows)",
                                 "demo.processor", "fail", 1, 1)
    page = render_html(report)
    hops = page[page.index('<section id="hops">'):page.index("</section>", page.index('<section id="hops">'))]
    assert hops.index("demo.process") < hops.index("demo.enriched (hop_rows)") < hops.index(">demo<")
    gap_map = page[page.index('<section id="gapmap">'):]
    first, second = gap_map.index("hop demo.process: demo.orders"), gap_map.index(f"hop demo: {TOPIC}")
    assert first < gap_map.index('data-tp="demo.orders[0]"') < second  # each hop's bars under its heading
