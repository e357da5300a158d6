"""A stateful Apache Kafka hard-restarted under eosctl's long-running commands (issue 35).

The harness of tests/integration/test_broker_restarts.py (three restarts, in the default suite) and
benchmarks/broker_restart_bench.py (thirty): a broker holding a 1,500-partition topic beside the watched
one, a few hundred transactional ids and groups (what makes its group coordinator take seconds to load
after a restart, the window in which librdkafka's admin client died); `lag --watch`, the exporter and the
TUI (in tmux) running; one-shot `lag --format json` in a loop. It counts what a user would notice:
restarts, polls, stale polls, exits by code, and any watcher that died.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.procs import stop

ROOT = Path(__file__).resolve().parents[2]
WATCHED, BIG, GROUP = "watched", "big", "g-watched"
# A single node restarted on its own data: the controller forgets the old incarnation's registration only
# after broker.session.timeout.ms (9 s by default: "DuplicateBrokerRegistrationException" until then), and
# recovery after a SIGKILL reads every partition from its recovery point (two threads instead of one; the
# setup's few records flushed and checkpointed at once, so the recovery point is the log end). The
# coordinators still load __consumer_offsets and __transaction_state after the logs, as in production.
PROPERTIES = {"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500",
              "num.recovery.threads.per.data.dir": "2", "log.flush.interval.messages": "1",
              "log.flush.offset.checkpoint.interval.ms": "1000"}


def build_state(bootstrap: str, partitions: int = 1500, txn_ids: int = 200, groups: int = 300) -> None:
    """The broker's state: the big topic and the watched one (3 partitions, 300 records, GROUP committed at
    50 each), ``txn_ids`` transactional ids registered with their coordinator (InitProducerId: each one a
    record of __transaction_state to load at restart), ``groups`` groups with committed offsets on the big
    topic. Raw requests, all in flight together: seconds, where producers take a minute."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka.protocol.consumer.group import OffsetCommitRequest
    from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
    from kafka.protocol.producer.transaction import InitProducerIdRequest

    from eosctl.cluster.wire import WireClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(BIG, partitions, 1), NewTopic(WATCHED, 3, 1)]).values():
        f.result(timeout=120)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(300):
        producer.produce(WATCHED, value=b"w", partition=i % 3)
    for i in range(2 * partitions):
        producer.produce(BIG, value=b"b" * 20, partition=i % partitions)
    # The 1,500 partitions' leaders may still be settling on a busy machine: 60 s was not always enough.
    deadline = time.monotonic() + 180
    while producer.flush(5) and time.monotonic() < deadline:
        pass
    left = producer.flush(0)
    assert left == 0, f"{left} records to {BIG} not acknowledged within 180 s"
    with WireClient(bootstrap, timeout_ms=30_000) as client:
        node = client.any_node()
        ids = [f"eosctl-restart-tx-{i}" for i in range(txn_ids)]
        found = _retrying(client, [(node, FindCoordinatorRequest(key=t, key_type=1, max_version=3))
                                   for t in ids])
        init = [InitProducerIdRequest(transactional_id=t, transaction_timeout_ms=60_000, max_version=4)
                for t in ids]
        _retrying(client, [(f.node_id, r) for r, f in zip(init, found, strict=True)])
        names = [GROUP] + [f"eosctl-restart-g-{i}" for i in range(groups)]
        found = _retrying(client, [(node, FindCoordinatorRequest(key=g, key_type=0, max_version=3))
                                   for g in names])
        topic, part = OffsetCommitRequest.OffsetCommitRequestTopic, \
            OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition

        def commit(g: str, i: int) -> OffsetCommitRequest:
            if g == GROUP:
                t = topic(name=WATCHED, partitions=[part(partition_index=p, committed_offset=50,
                                                         committed_metadata="") for p in range(3)])
            else:
                t = topic(name=BIG, partitions=[part(partition_index=(7 * i + k) % partitions,
                                                     committed_offset=1, committed_metadata="")
                                                for k in range(5)])
            return OffsetCommitRequest(group_id=g, generation_id_or_member_epoch=-1, member_id="",
                                       topics=[t], max_version=8)

        _retrying(client, [(f.node_id, commit(g, i))
                           for i, (g, f) in enumerate(zip(names, found, strict=True))])


def _retrying(client, calls: list, attempts: int = 20) -> list:
    """The answers, once none carries an error (a coordinator loading right after the first start)."""
    for _ in range(attempts):
        answers = client.request_all(calls)
        if not any(_errors(a) for a in answers):
            return answers
        time.sleep(0.5)
    raise AssertionError(f"the broker kept answering errors: {[e for a in answers for e in _errors(a)][:3]}")


def _errors(answer) -> list[int]:
    codes = [getattr(answer, "error_code", 0)]
    for t in getattr(answer, "topics", None) or ():
        codes += [p.error_code for p in t.partitions]
    return [c for c in codes if c]


def _eosctl(*args: str) -> list[str]:
    return [sys.executable, "-m", "eosctl", *args]


ENV = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", "PYTHONFAULTHANDLER": "1"}


class _Lines:
    """A process whose stdout (or stderr) lines arrive on a queue, read by a thread."""

    def __init__(self, args: list[str], stream: str = "stdout") -> None:
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     cwd=ROOT, env=ENV)
        self.lines: queue.Queue[str] = queue.Queue()
        self.other: list[str] = []
        mine, other = (self.proc.stdout, self.proc.stderr) if stream == "stdout" else \
            (self.proc.stderr, self.proc.stdout)
        threading.Thread(target=lambda: [self.lines.put(x) for x in mine], daemon=True).start()
        threading.Thread(target=lambda: self.other.extend(other), daemon=True).start()

    def stop(self) -> int | None:
        """Its exit status if it had ended by itself (None: it was still running, now stopped)."""
        code = self.proc.poll()
        stop(self.proc, seconds=30)
        return code


@dataclass
class Counts:
    restarts: int = 0
    polls: int = 0  # `lag --watch` documents
    stale_polls: int = 0  # ... with the last good values marked stale (an error)
    scrapes: int = 0  # exporter /metrics answers
    scrapes_down: int = 0  # ... saying eosctl_up 0
    scrape_failures: int = 0  # no HTTP answer at all
    tui_screens: int = 0
    tui_banners: int = 0  # screens showing the error banner
    exits: Counter = field(default_factory=Counter)  # one-shot `lag --format json` exit statuses
    multi_line: list[str] = field(default_factory=list)  # one-shot failures that were not one line
    reasons: Counter = field(default_factory=Counter)  # one-shot exit-2 lines, addresses left out
    died: dict[str, int | None] = field(default_factory=dict)  # watcher -> its exit status

    def line(self) -> str:
        exits = ", ".join(f"{code}: {n}" for code, n in sorted(self.exits.items()))
        return (f"restarts {self.restarts}; lag --watch polls {self.polls} ({self.stale_polls} stale);"
                " "
                f"exporter scrapes {self.scrapes} ({self.scrapes_down} with eosctl_up 0, "
                f"{self.scrape_failures} unanswered); TUI screens {self.tui_screens} ({self.tui_banners} "
                f"with the banner); one-shot lag exits {{{exits}}}; watchers dead: {self.died or 'none'}")


class Watchers:
    """`lag --watch`, the exporter and the TUI on one cluster, plus a loop of one-shot `lag`."""

    def __init__(self, bootstrap: str, workdir: Path, interval: float = 1.0) -> None:
        self.bootstrap = bootstrap
        self.counts = Counts()
        target = ["--bootstrap", bootstrap, "--topic", WATCHED, "--group", GROUP]
        self.watch = _Lines(_eosctl("lag", *target, "--watch", str(interval), "--format", "json"))
        self.exporter = _Lines(_eosctl("exporter", *target, "--listen", "127.0.0.1:0", "--interval",
                                       f"{interval}s", "--audit-every", "0"), stream="stderr")
        self.url = self._exporter_url()
        self.tmux = f"eosctl-restarts-{uuid.uuid4().hex[:8]}" if shutil.which("tmux") else None
        if self.tmux:
            subprocess.run(["tmux", "-L", self.tmux, "new-session", "-d", "-s", "tui", "-x", "200", "-y",
                            "50", "-e", "TERM=xterm-256color", "-e", f"PYTHONPATH={ROOT}",
                            " ".join([*_eosctl("tui", *target, "--refresh", str(max(0.5, interval))),
                                      "; echo EXITED $?; sleep 600"])], check=True, cwd=ROOT)
        self.last_watch: dict | None = None
        self.last_scrape: str | None = None
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=f, daemon=True) for f in (self._one_shots, self._observe)]
        for t in self._threads:
            t.start()

    def _exporter_url(self, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.exporter.lines.get(timeout=0.5)
            except queue.Empty:
                if self.exporter.proc.poll() is not None:
                    break
                continue
            m = re.search(r"serving (http://\S+/metrics)", line)
            if m:
                return m.group(1)
        raise AssertionError(f"the exporter did not start: {self.exporter.other[-3:]}")

    def _one_shots(self) -> None:
        while not self._stop.is_set():
            done = subprocess.run(_eosctl("lag", "--bootstrap", self.bootstrap, "--topic", WATCHED, "--group",
                                          GROUP, "--format", "json"), capture_output=True, text=True,
                                  cwd=ROOT, env=ENV, timeout=120)
            self.counts.exits[done.returncode] += 1
            if done.returncode != 0 and len(done.stderr.strip().splitlines()) != 1:
                self.counts.multi_line.append(done.stderr[-500:])
            elif done.returncode == 2:
                self.counts.reasons[re.sub(r"\d+\.\d+\.\d+\.\d+:\d+", "HOST:PORT", done.stderr.strip())] += 1
            self._stop.wait(0.5)

    def _observe(self) -> None:
        """Drain the watch's lines, scrape the exporter and look at the TUI, about once a second."""
        while not self._stop.is_set():
            while True:
                try:
                    doc = json.loads(self.watch.lines.get_nowait())
                except queue.Empty:
                    break
                self.counts.polls += 1
                self.counts.stale_polls += doc["error"] is not None
                self.last_watch = doc
            try:
                with urllib.request.urlopen(self.url, timeout=5) as r:
                    self.last_scrape = r.read().decode()
                self.counts.scrapes += 1
                self.counts.scrapes_down += _metric(self.last_scrape, "eosctl_up") == 0
            except OSError:
                self.counts.scrape_failures += 1
            if self.tmux:
                screen = self.screen()
                self.counts.tui_screens += 1
                self.counts.tui_banners += any(ln.lstrip().startswith("! ") for ln in screen.splitlines())
            self._stop.wait(1.0)

    def screen(self) -> str:
        if not self.tmux:
            return ""
        return subprocess.run(["tmux", "-L", self.tmux, "capture-pane", "-p", "-t", "tui"],
                              capture_output=True, text=True).stdout

    def alive(self) -> dict[str, int | None]:
        """Watchers that have ended (name -> exit status); {} when all run."""
        out = {name: p.proc.poll() for name, p in (("lag --watch", self.watch), ("exporter", self.exporter))
               if p.proc.poll() is not None}
        if self.tmux and "EXITED" in self.screen():
            out["tui"] = int(re.search(r"EXITED (\d+)", self.screen()).group(1))
        return out

    def fresh_since(self, since: float, timeout: float = 120.0) -> None:
        """Until every watcher shows values read after ``since`` (time.time()), or a watcher died."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.alive():
                return
            if self.fresh(since):
                return
            time.sleep(0.5)
        raise AssertionError(f"not every watcher recovered within {timeout:.0f}s: {self.state()}")

    def fresh(self, since: float) -> bool:
        watch = self.last_watch is not None and self.last_watch["error"] is None and \
            self.last_watch["taken_ms"] / 1000 >= since
        age = _metric(self.last_scrape or "", "eosctl_section_age_seconds", 'section="lag"')
        scrape = self.last_scrape is not None and _metric(self.last_scrape, "eosctl_up") == 1 and \
            age is not None and age <= time.time() - since
        return watch and scrape and self.tui_fresh(since)

    def tui_fresh(self, since: float) -> bool:
        if not self.tmux:
            return True
        screen = self.screen()
        m = re.search(r"LIVE .* at (\d\d):(\d\d):(\d\d)", screen)
        if m is None or any(ln.lstrip().startswith("! ") for ln in screen.splitlines()):
            return False
        shown = time.strftime("%H:%M:%S", time.gmtime(since))
        return m.group(0)[-8:] >= shown  # the same day: a test runs for minutes

    def state(self) -> str:
        return (f"watch: {self.last_watch and (self.last_watch['taken_at'], self.last_watch['error'])}; "
                f"exporter up: {self.last_scrape and _metric(self.last_scrape, 'eosctl_up')}; "
                f"tui: {self.screen().splitlines()[:1]}")

    def close(self) -> Counts:
        self._stop.set()
        for t in self._threads:
            t.join(150)
        self.counts.died.update(self.alive())
        self.watch.stop()
        self.exporter.stop()
        if self.tmux:
            subprocess.run(["tmux", "-L", self.tmux, "kill-server"], capture_output=True)
        return self.counts


def _metric(text: str, name: str, labels: str = "") -> float | None:
    for line in text.splitlines():
        if line.startswith(name) and (line[len(name)] in " {") and labels in line:
            return float(line.rsplit(" ", 1)[1])
    return None


def hard_restarts(cluster, watchers: Watchers, restarts: int, down_s: float = 2.0,
                  recover_s: float = 120.0, log=print) -> Counts:
    """SIGKILL the node, start it again on its data, wait until every watcher shows fresh values again."""
    from eosctl.sandbox import apache_kafka as ak

    for i in range(restarts):
        started = time.time()
        ak.kill_node(cluster, 1)
        time.sleep(down_s)
        ak.restart_node(cluster, 1, wait=False)
        watchers.counts.restarts += 1
        watchers.fresh_since(time.time(), timeout=recover_s)
        log(f"restart {i + 1}: all fresh again {time.time() - started:.0f}s after the kill; "
            f"{watchers.counts.line()}")
        if watchers.alive():
            break
    return watchers.counts
