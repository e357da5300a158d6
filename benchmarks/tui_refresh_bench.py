"""UI-thread cost of the TUI at scale, on the synthetic data source (every row changes on every refresh).

    python benchmarks/tui_refresh_bench.py [--partitions 10,1000,10000] [--rounds 5] [--size 200x60]
                                           [--findings 100,100000]

Times are CPU seconds of the UI thread (time.thread_time), so a loaded machine does not inflate them.

1. Refresh, per tab and partition count: the median UI-thread time of `EosApp.apply` and of apply + the
   repaint that follows (until the app is idle again), with the ratio against the same refresh at 10
   partitions measured in the same run. Fetching and formatting (`EosApp.prepare`, every tab) run in the
   fetch worker, not on the UI thread: that time is printed apart.
2. Sort and filter at the largest partition count (Lag view): `s` (sort by a column), typing a filter
   character, Esc (clear the filter), each until idle.
3. The Audit view with N findings (100 is the baseline): the view appearing once the report is ready
   (UI thread; the worker's formatting printed apart), a filter keystroke, clearing the filter, and how
   long a key waits right after the clear (`q` must be answered at once).

Run it under `nice` on a shared machine; the ratios, measured in one run, are what to compare.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "tui")]  # the synthetic source is test support, not shipped

from synthetic import SyntheticSource  # noqa: E402

from tui.app import VIEWS, EosApp  # noqa: E402

BASELINE_PARTITIONS = 10
BASELINE_FINDINGS = 100


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:8.1f} ms"


# UI-thread CPU time, not wall time: on a shared machine the wall clock mostly measures the neighbours.
# Textual draws on the thread that runs the app, so this is the apply + repaint work itself.
clock = time.thread_time


async def _idle(pilot) -> float:
    t0 = clock()
    await pilot.pause()
    return clock() - t0


async def _press(pilot, key: str) -> float:
    """UI-thread time of one key press, until the app is idle again."""
    t0 = clock()
    await pilot.press(key)
    return clock() - t0 + await _idle(pilot)


async def refresh_costs(partitions: int, rounds: int, size: tuple[int, int]) -> dict[str, tuple[float, ...]]:
    """pane -> (worker prepare, UI apply, UI apply + repaint), medians over `rounds` refreshes."""
    source = SyntheticSource(partitions)
    app = EosApp(source, refresh_seconds=3600)
    prepare = getattr(app, "prepare", None)  # absent before the work moved formatting to the worker
    out = {}
    async with app.run_test(size=size) as pilot:
        await pilot.pause(0.5)
        app.paused = True
        for pane, _, _ in VIEWS:
            app.action_show_tab(pane)
            await pilot.pause()
            workers, applies, totals = [], [], []
            for _ in range(rounds):
                dash = source.fetch()  # the fetch worker's job: not on the UI thread
                w0 = clock()
                args = (dash, prepare(dash)) if prepare else (dash,)  # the worker's job, timed apart
                workers.append(clock() - w0 if prepare else 0.0)
                t0 = clock()
                app.apply(*args)
                t1 = clock()
                await pilot.pause()
                t2 = clock()
                applies.append(t1 - t0)
                totals.append(t2 - t0)
            out[pane] = (statistics.median(workers), statistics.median(applies), statistics.median(totals))
    return out


@asynccontextmanager
async def _paused_on(source: SyntheticSource, size: tuple[int, int], tab_key: str):
    """(app, pilot) of the TUI on ``source``, refreshes paused, showing the tab of ``tab_key``."""
    app = EosApp(source, refresh_seconds=3600)
    async with app.run_test(size=size) as pilot:
        await pilot.pause(0.5)
        app.paused = True
        await pilot.press(tab_key)
        await pilot.pause()
        yield app, pilot


async def sort_and_filter(partitions: int, size: tuple[int, int]) -> dict[str, float]:
    async with _paused_on(SyntheticSource(partitions), size, "4") as (_, pilot):  # the Lag view
        out = {}
        out["sort (s)"] = await _press(pilot, "s")  # absent before: then a no-op key
        await pilot.press("slash")
        await pilot.pause()
        out["filter keystroke"] = await _press(pilot, "7")
        out["clear filter (Esc)"] = await _press(pilot, "escape")
    return out


async def audit_costs(findings: int, size: tuple[int, int]) -> dict[str, float]:
    source = SyntheticSource(1000, findings=findings)
    async with _paused_on(source, size, "7") as (app, pilot):  # the Audit view
        view = app.view("audit")
        report = source.run_audit(lambda step: None)
        out = {}
        w0 = clock()
        prepared = view.prepare_source(report) if hasattr(view, "prepare_source") else None
        out["worker: format findings"] = clock() - w0
        t0 = clock()
        if prepared is not None:
            view.present(prepared)
        else:
            view.set_report(report)
        out["view appears (UI)"] = clock() - t0 + await _idle(pilot)
        await pilot.press("slash")
        await pilot.pause()
        out["filter keystroke"] = await _press(pilot, "9")
        out["clear filter (Esc)"] = await _press(pilot, "escape")
        out["next key after the clear"] = await _press(pilot, "down")
        t0 = clock()
        await pilot.press("q")
    out["q: app closed"] = clock() - t0
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", default="10,1000,10000")
    parser.add_argument("--findings", default="100,100000")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--size", default="200x60")
    args = parser.parse_args()
    size = tuple(int(x) for x in args.size.split("x"))
    counts = [int(x) for x in args.partitions.split(",")]
    base = asyncio.run(refresh_costs(BASELINE_PARTITIONS, args.rounds, size))
    print(f"refresh, terminal {size[0]}x{size[1]}, median of {args.rounds} (every row changes each refresh);"
          f" ratios against {BASELINE_PARTITIONS} partitions in this run")
    for n in counts:
        result = base if n == BASELINE_PARTITIONS else asyncio.run(refresh_costs(n, args.rounds, size))
        worker = statistics.median(w for w, _, _ in result.values())
        print(f"{n} partitions: fetch worker formats every tab in {_ms(worker).strip()} (off the UI thread)")
        for pane, (_, apply, total) in result.items():
            _, b_apply, b_total = base[pane]
            print(f"  {pane:<13} UI apply {_ms(apply)} ({apply / b_apply:5.1f}x)"
                  f"   UI apply+repaint {_ms(total)} ({total / b_total:5.1f}x)")
    n = max(counts)
    print(f"sort and filter, Lag view, {n} partitions:")
    for what, seconds in asyncio.run(sort_and_filter(n, size)).items():
        print(f"  {what:<26} {_ms(seconds)}")
    sizes = [int(x) for x in args.findings.split(",")]
    results = {f: asyncio.run(audit_costs(f, size)) for f in sizes}
    base_audit = results.get(BASELINE_FINDINGS) or results[sizes[0]]
    print(f"audit view (ratios against {BASELINE_FINDINGS if BASELINE_FINDINGS in results else sizes[0]} "
          "findings in this run):")
    for f, result in results.items():
        print(f"{f} findings:")
        for what, seconds in result.items():
            print(f"  {what:<26} {_ms(seconds)} ({seconds / max(base_audit[what], 1e-9):6.1f}x)")


if __name__ == "__main__":
    main()
