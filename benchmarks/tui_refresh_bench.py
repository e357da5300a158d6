"""UI-thread cost of one refresh with N partitions (default 1,000), on the synthetic data source.

    python benchmarks/tui_refresh_bench.py [PARTITIONS] [ROUNDS]

Prints, per active tab, the median time of `EosApp.apply` (handing a fresh Dashboard to all seven views,
on the UI thread) and of apply + the repaint that follows (until the app is idle again), and the ratio
against the same refresh with 10 partitions measured in the same run. Fetching runs in a worker thread
and is not counted: it never blocks the UI.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "tui")]  # the synthetic source is test support, not shipped

from synthetic import SyntheticSource  # noqa: E402

from tui.app import VIEWS, EosApp  # noqa: E402

BASELINE_PARTITIONS = 10


async def measure(partitions: int, rounds: int, size: tuple[int, int]) -> dict[str, tuple[float, float]]:
    source = SyntheticSource(partitions)
    app = EosApp(source, refresh_seconds=3600)
    out = {}
    async with app.run_test(size=size) as pilot:
        await pilot.pause(0.5)
        app.paused = True
        for pane, _, _ in VIEWS:
            app.action_show_tab(pane)
            await pilot.pause()
            applies, totals = [], []
            for _ in range(rounds):
                dash = source.fetch()  # a worker thread's job in the app; not on the UI thread
                t0 = time.perf_counter()
                app.apply(dash)
                t1 = time.perf_counter()
                await pilot.pause()
                t2 = time.perf_counter()
                applies.append(t1 - t0)
                totals.append(t2 - t0)
            out[pane] = (statistics.median(applies), statistics.median(totals))
    return out


def main() -> None:
    partitions = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    for size in ((80, 24), (200, 60)):
        base = asyncio.run(measure(BASELINE_PARTITIONS, rounds, size))
        result = asyncio.run(measure(partitions, rounds, size))
        print(f"{partitions} partitions (baseline {BASELINE_PARTITIONS}), terminal {size[0]}x{size[1]}, "
              f"median of {rounds} refreshes:")
        for pane, (apply, total) in result.items():
            b_apply, b_total = base[pane]
            print(f"  {pane:<13} apply {apply * 1000:7.1f} ms ({apply / b_apply:5.1f}x baseline)   "
                  f"apply+repaint {total * 1000:7.1f} ms ({total / b_total:5.1f}x)")


if __name__ == "__main__":
    main()
