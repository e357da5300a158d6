"""The live model at production scale: what one refresh costs against what changed, not all of history.

    python benchmarks/scale_bench.py [--quick] [--partitions 100,1000,10000] [--records 1e6,1e7,1e8]
                                     [--traffic 0,5000] [--refreshes 3] [--interval 1.0]

Per cell (partitions x records x new traffic in records/s), in one run, over loopback:

- a scripted Kafka-protocol broker (tests/kafkasim) serving the topic's log: the records are batches of a
  template generated on the fly when a Fetch reads them (only the base offset differs, which Kafka's batch
  CRC does not cover), so 100M records need no memory; new traffic is appended as real 10-record batches
  spread over the partitions, ``traffic`` records per second of the interval;
- a DuckDB sink holding one row per record (with a ~60-byte payload, so 100M rows are ~5-10 GB on disk),
  its offsets table, and a writer process appending a row every 20 ms the whole time, recording how long
  each of its connections waited for the file;
- the group committed at the high watermark.

Measured: the model's first complete state (refreshes until the ledger is complete: the sink's first read
is spread over refreshes) and its steady-state refresh (median of ``--refreshes`` refreshes, each
after ``--interval`` seconds of traffic), the record bytes each read from Kafka, the writer's longest wait,
a fresh full ``capture()`` (the one-shot reading), and two plain readers as baselines: the same partitions'
records from their starts (what the first refresh must read) and just the new records of an interval
(what a steady-state refresh must read), both read_committed raw Fetches without classification.

Printed per cell: the first refresh's Kafka part and its ratio to the plain reader, the first complete
state (the sink's first read included: at 100M rows it spans many refreshes), steady refresh, its ratio
to reading the new records and to a full capture, bytes per refresh, the writer's longest wait, the load
average. The machine is shared in our runs: figures are noisy, ratios less so.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import shutil
import statistics
import struct
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eosctl.cluster.wire import READ_COMMITTED, WireClient  # noqa: E402
from eosctl.config.model import Cluster, Pipeline, Sink  # noqa: E402
from eosctl.config.target import Target  # noqa: E402
from eosctl.inspection.capture import capture  # noqa: E402
from eosctl.inspection.live import LiveModel  # noqa: E402
from tests.kafkasim.log import SimPartition  # noqa: E402
from tests.kafkasim.records import build_batch  # noqa: E402
from tests.kafkasim.server import KafkaSim  # noqa: E402

TOPIC, GROUP = "bench.orders", "bench.sink"
TEMPLATE_RECORDS = 2000  # records per generated batch (a producer's linger-sized batch)
TRAFFIC_BATCH = 10
FIRST_DEADLINE_S = 600.0  # a cell whose sink is not read by then reports what it has


class SyntheticPartition(SimPartition):
    """``base`` records as template batches of ``size`` records (generated when read), then real batches."""

    def __init__(self, topic: str, partition: int, base: int, size: int, template: bytes) -> None:
        super().__init__(topic, partition)
        self.base, self.size, self.template = base, size, template
        self.next_offset = base

    def template_at(self, index: int) -> bytes:
        data = bytearray(self.template)
        struct.pack_into(">q", data, 0, index * self.size)  # baseOffset: outside the batch CRC
        return bytes(data)

    def log_bytes(self) -> int:
        return (self.base // self.size) * len(self.template) + sum(b.size for b in self.batches)


class SyntheticSim(KafkaSim):
    """kafkasim whose partitions may be synthetic: Fetch reads generate their template batches."""

    def _read(self, node, topic, fp, isolation, fault, limit, first):
        p, _ = self._partition_error(node, topic, fp.partition)
        offset = fp.fetch_offset
        if not isinstance(p, SyntheticPartition) or offset >= p.base or offset < p.log_start:
            return super()._read(node, topic, fp, isolation, fault, limit, first)
        chunks, size = [], 0
        index = offset // p.size
        while index * p.size < p.base and (size + len(p.template) <= limit or size == 0):
            chunks.append(p.template_at(index))
            size += len(p.template)
            index += 1
        for b in p.batches:  # the appended tail, while the answer has room
            if size + b.size > limit:
                break
            chunks.append(b.data)
            size += b.size
        return {"partition_index": fp.partition, "error_code": 0, "high_watermark": p.high_watermark,
                "last_stable_offset": p.last_stable, "log_start_offset": p.log_start,
                "aborted_transactions": [], "records": b"".join(chunks)}, size

    def _describelogdirs(self, node, request, version):
        answer = super()._describelogdirs(node, request, version)
        for result in answer["results"]:
            for t in result.topics:
                for part in t.partitions:
                    p = self.topics[t.name][part.partition_index]
                    if isinstance(p, SyntheticPartition):
                        part.partition_size = p.log_bytes()
        return answer


@dataclass
class Cell:
    partitions: int
    records: int
    traffic: int
    first_s: float = 0.0
    first_baseline_s: float = 0.0
    steady_s: float = 0.0
    new_baseline_s: float = 0.0
    capture_s: float = 0.0
    bytes_first: int = 0
    bytes_steady: int = 0
    writer_wait_s: float = 0.0
    sink_bytes: int = 0
    payload: int = 2
    first_kafka_s: float = 0.0  # the first refresh's Kafka part (offsets, logs, sections, ledger)
    note: str = ""


def make_sink(path: Path, partitions: int, per_partition: int, payload: int = 2) -> None:
    """One row per record; ``payload`` md5 strings of text each (2: ~35 bytes a row on disk, compressed;
    8: ~100 bytes, so 100M rows make a ~10 GB file)."""
    import duckdb

    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE sink (src_topic VARCHAR, src_partition INTEGER, src_offset BIGINT, "
                    "payload VARCHAR)")
        con.execute("CREATE TABLE offsets (topic VARCHAR, partition INTEGER, next_offset BIGINT)")
        text = " || ".join(f"md5((i + {k})::VARCHAR)" for k in range(payload))
        con.execute(f"INSERT INTO sink SELECT '{TOPIC}', (i % {partitions})::INTEGER, i // {partitions}, "
                    f"{text} FROM range({partitions * per_partition}) t(i)")
        con.execute(f"INSERT INTO offsets SELECT '{TOPIC}', p::INTEGER, {per_partition} "
                    f"FROM range({partitions}) t(p)")


def writer(path: str, stop: mp.Event, waits: mp.Queue) -> None:
    """The pipeline's sink writer: a row every 20 ms, each in its own connection; reports the longest time
    it was kept out (from its first refused connection to the one that got in; its own open time aside)."""
    import duckdb

    longest, rows = 0.0, 0
    while not stop.is_set():
        started = time.monotonic()
        while True:
            attempt = time.monotonic()
            try:
                con = duckdb.connect(path)
                break
            except duckdb.Error:  # a reader holds the file: the wait a reader causes
                time.sleep(0.001)
        longest = max(longest, attempt - started)
        con.execute(f"INSERT INTO sink VALUES ('bench.other', 0, {rows}, 'w')")  # a row the ledger flags
        con.close()
        rows += 1
        time.sleep(0.02)
    waits.put(longest)


def plain_read(bootstrap: str, starts: dict, ends: dict) -> float:
    """A plain read_committed reader: raw Fetches of every partition from ``starts`` to ``ends``, no
    classification (what any consumer must at least transfer)."""
    t0 = time.monotonic()
    with WireClient(bootstrap, timeout_ms=60_000) as client:
        client.metadata([TOPIC])
        pos = {tp: o for tp, o in starts.items() if o < ends[tp]}
        while pos:
            results = client.fetch_many(pos, 1 << 20, READ_COMMITTED)
            for tp, r in results.items():
                last = _last_offset(r.records)
                pos[tp] = max(pos[tp], last + 1) if last is not None else ends[tp]
            pos = {tp: o for tp, o in pos.items() if o < ends[tp]}
    return time.monotonic() - t0


def _last_offset(records: bytes) -> int | None:
    """The last offset of the last whole batch in a Fetch answer (batch headers only)."""
    at, last = 0, None
    while at + 12 <= len(records):
        base, length = struct.unpack_from(">qi", records, at)
        if at + 12 + length > len(records):
            break
        last = base + struct.unpack_from(">i", records, at + 23)[0]  # lastOffsetDelta
        at += 12 + length
    return last


def broker(conn, partitions: int, per_partition: int, size: int, template: bytes) -> None:
    """The scripted broker in a process of its own (it is Python: in the benchmark's process it would
    share the interpreter lock with the client being measured). Commands: traffic, hws, stop."""
    rng = random.Random(7)
    with SyntheticSim(nodes=1) as sim:
        parts = []
        for p in range(partitions):
            sp = SyntheticPartition(TOPIC, p, per_partition, size, template)
            sim.topics.setdefault(TOPIC, {})[p] = sp
            parts.append(sp)
        sim.topic_ids[TOPIC] = uuid.uuid4()
        sim.group(GROUP, {(TOPIC, p): per_partition for p in range(partitions)}, state="Stable")
        conn.send(sim.bootstrap)
        while True:
            cmd, arg = conn.recv()
            if cmd == "stop":
                break
            if cmd == "traffic":
                with sim.lock:
                    for _ in range(arg):
                        rng.choice(parts).data(TRAFFIC_BATCH)
            conn.send({(TOPIC, p.partition): p.high_watermark for p in parts})


def run_cell(cell: Cell, refreshes: int, interval: float, workdir: Path) -> Cell:
    per_partition = cell.records // cell.partitions
    size = min(TEMPLATE_RECORDS, per_partition)
    per_partition -= per_partition % size
    template = build_batch(0, list(range(size)), value_size=8).data
    sink_path = workdir / f"sink-{cell.partitions}-{cell.records}.duckdb"
    # Made once per size and copied for each traffic cell (the writer adds rows to the copy): at 100M rows
    # the making takes minutes, the copy seconds.
    pristine = workdir / f"pristine-{cell.partitions}-{cell.records}-{cell.payload}.duckdb"
    t0 = time.monotonic()
    made = not pristine.exists()
    if made:
        for old in workdir.glob("pristine-*.duckdb"):  # another size's: the disk holds one at a time
            old.unlink()
        make_sink(pristine, cell.partitions, per_partition, cell.payload)
    shutil.copyfile(pristine, sink_path)
    cell.sink_bytes = sink_path.stat().st_size
    print(f"  sink {cell.sink_bytes / 1e9:.2f} GB {'made' if made else 'copied'} in "
          f"{time.monotonic() - t0:.0f}s", flush=True)
    conn, child = mp.Pipe()
    b = mp.Process(target=broker, args=(child, cell.partitions, per_partition, size, template), daemon=True)
    b.start()
    stop, waits = mp.Event(), mp.Queue()
    w = mp.Process(target=writer, args=(str(sink_path), stop, waits), daemon=True)
    try:
        bootstrap = conn.recv()
        sink = Sink(duckdb=str(sink_path), offsets_table="offsets")
        pipe = Pipeline("bench", "c", (TOPIC,), GROUP, sink=sink)
        target = Target(Cluster("c", bootstrap), pipe, None, (TOPIC,), GROUP)
        w.start()
        conn.send(("hws", None))
        ends = conn.recv()
        cell.first_baseline_s = plain_read(bootstrap, dict.fromkeys(ends, 0), ends)
        # The sink at its own cadence (30 s); long-lived as in the TUI and the exporter (eosctl.base.gcpause).
        with LiveModel(target, timeout_ms=60_000, long_lived=True) as model:
            # The first state: refreshes until the ledger is complete (the sink's first read is spread over
            # refreshes, SINK_BUDGET_S each, so the Kafka sections never wait for a huge sink).
            t, rounds = time.monotonic(), 0
            while True:
                rounds += 1
                cap = model.refresh()
                if rounds == 1:
                    cell.bytes_first = model.bytes_read
                    cell.first_kafka_s = sum(v for k, v in model.timings.items() if k != "sink")
                    first = ", ".join(f"{k} {v:.2f}s" for k, v in model.timings.items())
                if cap.sections.get("ledger") == "ok" or time.monotonic() - t > FIRST_DEADLINE_S:
                    break
            cell.first_s = time.monotonic() - t
            first += f"; ledger complete after {rounds} refreshes"
            steady, cpus, news, sizes = [], [], [], []
            for _ in range(refreshes):
                conn.send(("hws", None))
                before = conn.recv()
                conn.send(("traffic", int(cell.traffic * interval) // TRAFFIC_BATCH))
                after = conn.recv()
                if not cell.traffic:
                    time.sleep(interval)
                news.append(plain_read(bootstrap, before, after))
                t, cpu = time.monotonic(), time.process_time()
                model.refresh()
                steady.append(time.monotonic() - t)
                cpus.append(time.process_time() - cpu)
                sizes.append(model.bytes_read)
            cell.steady_s, cell.new_baseline_s = statistics.median(steady), statistics.median(news)
            cell.bytes_steady = int(statistics.median(sizes))
            tail = model._tail
            hold = f"{tail.longest_hold_s:.3f}s in {tail.slices} slices" if tail else "-"
            cell.note = (f"first refresh: {first}; sink read holding the file at most {hold}\n"
                         f"    steady refresh CPU in this process {statistics.median(cpus):.3f}s; last: "
                         + ", ".join(f"{k} {v:.3f}s" for k, v in model.timings.items()))
            cell.writer_wait_s = _stop(w, stop, waits)  # before the capture, which copies the file
        t = time.monotonic()
        capture(target, timeout_ms=60_000)
        cell.capture_s = time.monotonic() - t
    finally:
        if w.is_alive():
            _stop(w, stop, waits)
        conn.send(("stop", None))
        b.join(30)
        if b.is_alive():
            b.kill()
    sink_path.unlink(missing_ok=True)
    Path(str(sink_path) + ".wal").unlink(missing_ok=True)
    return cell


def _stop(w: mp.Process, stop: mp.Event, waits: mp.Queue) -> float:
    stop.set()
    try:
        return waits.get(timeout=30)
    except Exception:
        return float("nan")
    finally:
        w.join(5)
        if w.is_alive():
            w.kill()


def report(cell: Cell) -> str:
    def ratio(a: float, b: float) -> str:
        return f"{a / b:5.2f}x" if b > 0 else "  -  "

    return (f"{cell.partitions:>6} {cell.records:>11,} {cell.traffic:>5} | first refresh's Kafka part "
            f"{cell.first_kafka_s:6.2f}s ({ratio(cell.first_kafka_s, cell.first_baseline_s)} plain "
            f"{cell.first_baseline_s:6.2f}s), first complete state incl. the sink {cell.first_s:7.2f}s "
            "| steady "
            f"{cell.steady_s:6.3f}s ({ratio(cell.steady_s, cell.new_baseline_s)} new-records read "
            f"{cell.new_baseline_s:.3f}s; {ratio(cell.steady_s, cell.capture_s)} of a capture "
            f"{cell.capture_s:6.1f}s) | bytes first {cell.bytes_first / 1e6:8.1f} MB steady "
            f"{cell.bytes_steady / 1e3:8.1f} KB | writer waited <= {cell.writer_wait_s * 1000:5.0f} ms "
            f"| sink {cell.sink_bytes / 1e9:.2f} GB\n    {cell.note}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes: 100 / 1000 partitions x 100k records")
    ap.add_argument("--partitions", default="100,1000,10000")
    ap.add_argument("--records", default="1e6,1e7,1e8")
    ap.add_argument("--traffic", default="0,5000")
    ap.add_argument("--refreshes", type=int, default=3)
    ap.add_argument("--interval", type=float, default=1.0, help="seconds of traffic before each refresh")
    ap.add_argument("--payload", type=int, default=2,
                    help="md5 strings per sink row: 2 makes 100M rows ~3.5 GB, 8 ~10 GB")
    args = ap.parse_args()
    if args.quick:
        args.partitions, args.records, args.refreshes = "100,1000", "1e5", 2
    grid = [(int(p), int(float(r)), int(t)) for r in args.records.split(",")
            for p in args.partitions.split(",") for t in args.traffic.split(",")]  # the small cells first
    print(f"scale_bench: {len(grid)} cells, {args.refreshes} steady refreshes each, {os.cpu_count()} cores "
          "(shared machines give noisy figures; ratios are measured in the same run)", flush=True)
    with tempfile.TemporaryDirectory(prefix="eosctl-scale-") as tmp:
        for p, r, t in grid:
            if r < p:
                continue
            print(f"cell: {p} partitions, {r:,} records, {t} records/s", flush=True)
            cell = run_cell(Cell(p, r, t, payload=args.payload), args.refreshes, args.interval, Path(tmp))
            print(report(cell) + f"\n    load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}",
                  flush=True)


if __name__ == "__main__":
    main()
