"""`eosctl exporter` at 100 / 1k / 10k partitions: scrape latency and RSS, next to one refresh.

    python benchmarks/exporter_bench.py [--sizes 100,1000,10000] [--bootstrap HOST:PORT]
    python benchmarks/exporter_bench.py --soak 30 [--sizes 1000]     # RSS over 30 minutes

On a private sandbox broker (or --bootstrap), each size gets topics of 100 partitions, every partition with
one committed transaction (so each ends with a commit marker) and a group committed at that marker. Then the
real exporter runs as a subprocess (`--interval 1h`: its state stays put while it is scraped), with
`--partition-metrics on` and `off`, and the script measures over HTTP the median of 20 scrapes and the
exporter's RSS (/proc/PID/status). Next to it, in this process: one LiveModel refresh from cold, one more
right after (the incremental one), and one rendering of that state without the exporter's cache (what each
scrape would cost if it rendered the state: the exporter does it once per refresh). Ratios are against the
smallest size measured in the same run; the scrape's against the refresh it serves.

--soak MINUTES: one exporter (refresh every 5s, partition metrics on) while a writer commits a transaction
every second and a scraper scrapes every second; RSS is printed each minute and at the end the growth from
the second minute (warm) to the last.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchbroker import broker  # noqa: E402  benchmarks/ is on the path: run as python benchmarks/NAME.py
from benchdata import create_topics  # noqa: E402

PER_TOPIC = 100
SCRAPES = 20
OPENMETRICS = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"


def populate(bootstrap: str, partitions: int) -> tuple[list[str], str]:
    """Topics of PER_TOPIC partitions, each partition one committed transaction; a group at the markers."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    prefix = "xb" + uuid.uuid4().hex[:6]
    topics = [f"{prefix}.t{i}" for i in range(max(1, partitions // PER_TOPIC))]
    per = min(partitions, PER_TOPIC)
    create_topics(bootstrap, dict.fromkeys(topics, per))
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": prefix + ".w", "linger.ms": 5})
    producer.init_transactions(60)
    for t in topics:
        producer.begin_transaction()
        for p in range(per):
            producer.produce(t, key=str(p), value=b"x" * 100, partition=p)
        producer.commit_transaction(120)
    group = prefix + ".g"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:  # one record at offset 0, its marker at 1: committed 1 = HW - 1, nothing left to read
        consumer.commit(offsets=[TopicPartition(t, p, 1) for t in topics for p in range(per)],
                        asynchronous=False)
    finally:
        consumer.close()
    return topics, group


def config(path: Path, bootstrap: str, topics: list[str], group: str) -> None:
    path.write_text(f'[clusters.bench]\nbootstrap_servers = {json.dumps(bootstrap)}\n\n[pipelines.bench]\n'
                    f'cluster = "bench"\nsource_topics = {json.dumps(topics)}\ngroup = {json.dumps(group)}\n')


def in_process(cfg: Path) -> tuple[float, float, dict[str, float]]:
    """(cold, incremental) seconds of LiveModel.refresh() in this process, and the seconds of rendering
    that state for a scrape without the exporter's cache (OpenMetrics), per --partition-metrics."""
    from eosctl.config.target import resolve
    from eosctl.exporter.metrics import Exposition, Source
    from eosctl.inspection.live import LiveModel

    with LiveModel(resolve(str(cfg), "bench", None)) as model:
        t0 = time.perf_counter()
        model.refresh()
        t1 = time.perf_counter()
        cap = model.refresh()
        incremental = time.perf_counter() - t1
        source = Source("bench", "bench", model)
        source.refreshed(cap)
        render = {}
        for mode in ("on", "off"):
            exposition = Exposition([source], mode == "on")
            t = time.perf_counter()
            exposition.render(OPENMETRICS)
            render[mode] = time.perf_counter() - t
        return t1 - t0, incremental, render


class Running:
    """The exporter as a subprocess, until stop()."""

    def __init__(self, cfg: Path, *args: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "eosctl", "exporter", "-c", str(cfg), "--listen",
                                      "127.0.0.1:0", "--audit-every", "0", *args], cwd=ROOT,
                                     stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()  # blocks until the first refresh is done (or it failed)
        m = re.search(r"http://(\S+)/metrics", line)
        if not m:
            self.stop()
            raise SystemExit(f"the exporter did not start: {line}")
        self.url = f"http://{m[1]}/metrics"

    def scrape(self, accept: str = OPENMETRICS) -> tuple[float, int]:
        t0 = time.perf_counter()
        req = urllib.request.Request(self.url, headers={"Accept": accept, "Accept-Encoding": "gzip"})
        with urllib.request.urlopen(req, timeout=120) as r:
            size = len(r.read())
        return time.perf_counter() - t0, size

    def rss_mb(self) -> float:
        text = Path(f"/proc/{self.proc.pid}/status").read_text()
        return int(re.search(r"VmRSS:\s+(\d+)", text)[1]) / 1024

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


def measure(cfg: Path, partition_metrics: str) -> dict[str, float]:
    exporter = Running(cfg, "--interval", "1h", "--partition-metrics", partition_metrics)
    try:
        _, size = exporter.scrape()
        later = statistics.median(exporter.scrape()[0] for _ in range(SCRAPES))
        return {"scrape": later, "bytes": size, "rss": exporter.rss_mb()}
    finally:
        exporter.stop()


def bench(bootstrap: str, sizes: list[int]) -> None:
    rows = []
    with tempfile.TemporaryDirectory(prefix="eosctl-exporter-bench-") as tmp:
        for n in sizes:
            topics, group = populate(bootstrap, n)
            cfg = Path(tmp) / f"bench-{n}.toml"
            config(cfg, bootstrap, topics, group)
            cold, incremental, render = in_process(cfg)
            rows.append((n, cold, incremental, render, measure(cfg, "on"), measure(cfg, "off")))
    base = rows[0]
    print(f"eosctl exporter, scrape = median of {SCRAPES} gzip OpenMetrics scrapes over HTTP (Prometheus' "
          "headers; bytes on the wire); render = the same "
          f"state rendered without the cache; ratios against {base[0]} partitions measured in the same run")
    print(f"{'partitions':>10} {'refresh cold':>13} {'incremental':>12} | {'metrics':>7} {'render':>9} "
          f"{'scrape':>9} {'x base':>7} {'scrape/refresh':>14} {'bytes':>9} {'RSS MB':>7} {'x base':>7}")
    for n, cold, incremental, render, on, off in rows:
        for label, m, b in (("on", on, base[4]), ("off", off, base[5])):
            print(f"{n:>10} {cold * 1000:>10.0f} ms {incremental * 1000:>9.0f} ms | {label:>7} "
                  f"{render[label] * 1000:>6.0f} ms {m['scrape'] * 1000:>6.1f} ms "
                  f"{m['scrape'] / b['scrape']:>6.1f}x "
                  f"{m['scrape'] / incremental:>13.4f}x {m['bytes']:>9.0f} {m['rss']:>7.1f} "
                  f"{m['rss'] / b['rss']:>6.2f}x")


def soak(bootstrap: str, partitions: int, minutes: float) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    topics, group = populate(bootstrap, partitions)
    with tempfile.TemporaryDirectory(prefix="eosctl-exporter-soak-") as tmp:
        cfg = Path(tmp) / "soak.toml"
        config(cfg, bootstrap, topics, group)
        exporter = Running(cfg, "--interval", "5s")
        stop = threading.Event()
        scrapes = [0]

        def write() -> None:  # a live pipeline: a transaction a second, the group following behind
            producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": group + ".soak"})
            producer.init_transactions(60)
            consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                 "enable.auto.commit": False})
            i = 0
            written: dict[tuple[str, int], int] = {}
            while not stop.wait(1.0):
                t, p = topics[i % len(topics)], (i // len(topics)) % min(partitions, PER_TOPIC)
                producer.begin_transaction()
                producer.produce(t, key=str(i), value=b"y" * 100, partition=p)
                producer.commit_transaction(60)
                written[(t, p)] = written.get((t, p), 0) + 1  # a record and its marker each time
                consumer.commit(offsets=[TopicPartition(t, p, 1 + 2 * written[(t, p)])], asynchronous=False)
                i += 1
            consumer.close()

        def scrape() -> None:
            while not stop.wait(1.0):
                exporter.scrape()
                scrapes[0] += 1

        threads = [threading.Thread(target=write, daemon=True), threading.Thread(target=scrape, daemon=True)]
        for t in threads:
            t.start()
        samples = []
        try:
            start = time.monotonic()
            for minute in range(1, int(minutes) + 1):
                time.sleep(max(0.0, start + 60 * minute - time.monotonic()))
                samples.append(exporter.rss_mb())
                print(f"  minute {minute:>3}: RSS {samples[-1]:.1f} MB, {scrapes[0]} scrapes", flush=True)
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=30)
            exporter.stop()
    warm = samples[1] if len(samples) > 1 else samples[0]
    print(f"soak {minutes:g} min at {partitions} partitions, refresh every 5s, a scrape and a transaction "
          f"every second: RSS {samples[0]:.1f} MB after 1 min, {warm:.1f} after 2, {samples[-1]:.1f} at the "
          "end "
          f"({samples[-1] / warm:.3f}x the warm figure; max {max(samples):.1f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,1000,10000")
    ap.add_argument("--bootstrap", help="a cluster to use instead of a private sandbox")
    ap.add_argument("--soak", type=float, metavar="MINUTES", help="run the soak instead")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: the exporter and the broker stop too
    sizes = [int(s) for s in args.sizes.split(",")]
    with broker("noida", args.bootstrap) as b:
        print(f"broker: {b.name}", flush=True)
        run(b.bootstrap, sizes, args.soak)


def run(bootstrap: str, sizes: list[int], soak_minutes: float | None) -> None:
    if soak_minutes:
        soak(bootstrap, sizes[0] if len(sizes) == 1 else 1000, soak_minutes)
    else:
        bench(bootstrap, sizes)


if __name__ == "__main__":
    main()
