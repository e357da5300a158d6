"""Benchmark: 100k and 250k findings next to 100 (issue 20): the audit's table output, the HTML report
(size, gap-map SVG size, Chromium load) and `snapshot --with-audit` end to end.

    python benchmarks/findings_bench.py [--sizes 100,100000,250000] [--no-snapshot]

Each size N is a partition pattern with every other offset missing, so an audit finds N gap findings:
- table: `eosctl audit`'s table renderer writing to a file (what `audit > file` does), in-process;
- html: render_html to a file, its size and its SVG's, then headless Chromium loading it (--dump-dom,
  process start to exit; the 100-finding run is the browser's own start-up);
- snapshot: `python -m eosctl snapshot --with-audit` (local engine) against the scripted Kafka broker
  (tests/kafkasim) and a DuckDB sink, process start to exit, next to the same snapshot without the audit;
- tui: the TUI's Audit view with N findings at 200x60 (benchmarks/tui_refresh_bench.py's audit_costs: the
  worker formatting the findings, the view appearing on the UI thread, a filter keystroke, clearing it).
Ratios are against the 100-finding run measured in the same process; the load average is printed with
each row (the machine may be shared).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PARTITIONS = 4


def report(n: int):
    from eosctl.report.findings import AuditReport, Finding, PartitionSummary

    per = max(n // PARTITIONS, 1)
    parts = [PartitionSummary("orders", p, 0, 2 * per, 2 * per, 2 * per, per) for p in range(PARTITIONS)]
    findings = [Finding("gap", "orders", p, o, o, 1) for p in range(PARTITIONS) for o in range(0, 2 * per, 2)]
    return AuditReport.build(parts, findings[:n])


def table_seconds(rep, path: Path) -> float:
    from rich.console import Console

    from eosctl.commands.audit_cmd import _print_parts
    from eosctl.output.audit import render

    t = time.monotonic()
    with open(path, "w", encoding="utf-8") as f:
        _print_parts(Console(file=f, width=200, highlight=False, color_system=None), render(rep, "table"))
    return time.monotonic() - t


def html_figures(rep, path: Path) -> tuple[float, int, int, float]:
    from eosctl.output.html import AuditContext, render_html

    t = time.monotonic()
    page = render_html(rep, AuditContext(origin="findings_bench"))
    path.write_text(page, encoding="utf-8")
    render_s = time.monotonic() - t
    svg = sum(len(m) for m in re.findall(r'<svg class="gap".*?</svg>', page, re.S))
    chromium = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    t = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="eosctl-bench-chromium-") as profile:
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
                        "--dump-dom", path.resolve().as_uri()], capture_output=True, timeout=600, check=True)
    return render_s, len(page), svg, time.monotonic() - t


def snapshot_seconds(n: int, work: Path) -> tuple[float, float, int]:
    """(snapshot without the audit, with it, findings stored) against a scripted broker."""
    import duckdb

    from tests.kafkasim import KafkaSim

    per = max(n // PARTITIONS, 1)
    sink = work / f"sink-{n}.duckdb"
    with KafkaSim(nodes=1) as sim:
        for p in range(PARTITIONS):
            part = sim.partition("orders", p)
            for start in range(0, 2 * per, 1000):
                part.data(min(1000, 2 * per - start))
        offsets = {("orders", p): sim.topics["orders"][p].high_watermark for p in range(PARTITIONS)}
        sim.group("sink", offsets)
        with duckdb.connect(str(sink)) as con:
            con.execute("CREATE TABLE sink AS SELECT 'orders' AS src_topic, p AS src_partition, "
                        f"o AS src_offset FROM range({PARTITIONS}) a(p), range(1, {2 * per}, 2) b(o)")
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        base = [sys.executable, "-m", "eosctl", "snapshot", "--bootstrap", sim.bootstrap, "-t", "orders",
                "-g", "sink", "--sink-duckdb", str(sink), "--force", "--format", "json"]
        times = []
        for extra in ([], ["--with-audit"]):
            out = work / f"snap-{n}{'-audit' if extra else ''}.duckdb"
            t = time.monotonic()
            done = subprocess.run([*base, *extra, "--out", str(out)], capture_output=True, text=True, env=env,
                                  timeout=1800)
            times.append(time.monotonic() - t)
            if done.returncode != 0:
                raise SystemExit(f"snapshot failed ({done.returncode}): {done.stderr.strip()[-500:]}")
        with duckdb.connect(str(work / f"snap-{n}-audit.duckdb"), read_only=True) as con:
            stored = con.execute("SELECT count(*) FROM audit_findings").fetchone()[0]
    return times[0], times[1], stored


def tui_figures(n: int) -> dict[str, float]:
    import asyncio

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from tui_refresh_bench import audit_costs

    return asyncio.run(audit_costs(n, (200, 60)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,100000,250000")
    ap.add_argument("--no-snapshot", action="store_true")
    ap.add_argument("--no-tui", action="store_true")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="eosctl-findings-bench-") as tmp:
        work = Path(tmp)
        for n in sizes:
            rep = report(n)
            table_s = table_seconds(rep, work / f"table-{n}.txt")
            render_s, html_b, svg_b, load_s = html_figures(rep, work / f"report-{n}.html")
            snap = snapshot_seconds(n, work) if not args.no_snapshot else (None, None, None)
            tui = tui_figures(n) if not args.no_tui else None
            rows.append((n, table_s, render_s, html_b, svg_b, load_s, *snap, tui, os.getloadavg()[0]))
            print(f"{n:>8} findings: table {table_s:6.2f}s  html {render_s:5.2f}s {html_b / 1e6:6.1f} MB "
                  f"(svg {svg_b / 1e3:6.1f} kB)  chromium load {load_s:5.2f}s"
                  + ("" if snap[0] is None else
                     f"  snapshot {snap[0]:5.1f}s, --with-audit {snap[1]:5.1f}s ({snap[2]} findings stored)")
                  + f"  (load {os.getloadavg()[0]:.1f})", flush=True)
            if tui is not None:
                shown = ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in tui.items())
                print(f"          tui audit view: {shown}", flush=True)
    print_table(rows)
    base = rows[0]
    print(f"\nratios against {base[0]} findings (same run):")
    for r in rows[1:]:
        line = (f"{r[0]:>8}: table x{r[1] / base[1]:.1f}, html size x{r[3] / base[3]:.1f}, "
                f"svg x{r[4] / base[4]:.1f}, chromium load x{r[5] / base[5]:.1f}")
        if r[6] is not None:
            line += f", snapshot --with-audit x{r[7] / base[7]:.1f} (without the audit x{r[6] / base[6]:.1f})"
        if r[9] is not None:
            appears, keystroke = "view appears (UI)", "filter keystroke"
            line += (f", tui audit view appears x{r[9][appears] / base[9][appears]:.1f}"
                     f", filter keystroke x{r[9][keystroke] / base[9][keystroke]:.1f}")
        print(line)


def print_table(rows: list[tuple]) -> None:
    """Every figure side by side, one column per size: each row of the benchmark at every size."""
    figures: list[tuple[str, Callable[[tuple], str]]] = [
        ("table output (s)", lambda r: f"{r[1]:.2f}"),
        ("html render (s)", lambda r: f"{r[2]:.2f}"),
        ("html size (MB)", lambda r: f"{r[3] / 1e6:.1f}"),
        ("gap-map svg (kB)", lambda r: f"{r[4] / 1e3:.1f}"),
        ("chromium load (s)", lambda r: f"{r[5]:.2f}"),
        ("snapshot (s)", lambda r: "-" if r[6] is None else f"{r[6]:.1f}"),
        ("snapshot --with-audit (s)", lambda r: "-" if r[7] is None else f"{r[7]:.1f}"),
    ]
    if rows[0][9] is not None:
        figures += [(f"tui: {name} (ms)", lambda r, name=name: f"{r[9][name] * 1000:.0f}")
                    for name in rows[0][9]]
    figures.append(("load average", lambda r: f"{r[10]:.1f}"))
    print(f"\n{'findings':<44}" + "".join(f"{r[0]:>12}" for r in rows))
    for name, cell in figures:
        print(f"{name:<44}" + "".join(f"{cell(r):>12}" for r in rows))


if __name__ == "__main__":
    main()
