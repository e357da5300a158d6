"""Java members of the newer group types (tests/stages/ShareReader.java, StreamsPassthrough.java) for
tests on Apache Kafka 4.4 (kafka-clients and kafka-streams from the project's kafka pom), compiled once per
directory:

    apps = GroupJava(tmp_path)
    proc = apps.share(bootstrap, topic, "g", records=4)            # a KafkaShareConsumer: READ n, n >= 4
    proc = apps.streams(bootstrap, topic, topic + ".out", "app")   # Kafka Streams, group.protocol=streams

Each prints a line the caller waits for and then stays a member of its group until stopped
(jvm.stop)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from tests.support import jvm

STAGES = Path(__file__).resolve().parents[1] / "stages"


class GroupJava:
    def __init__(self, workdir: Path) -> None:
        from eosctl.sandbox import maven

        self.jars = maven.jars("kafka")
        self.workdir = workdir
        self.share_classes, self.streams_classes = (
            jvm.compile_java(workdir / main, main, (STAGES / f"{main}.java").read_text(), self.jars)
            for main in ("ShareReader", "StreamsPassthrough"))

    def _start(self, classes: Path, main: str, args: list[str], wait_for: str, deadline_s: float,
               heap: str) -> subprocess.Popen:
        log = self.workdir / f"{main}-{time.monotonic_ns()}.log"
        proc = jvm.start_java(classes, main, [self.jars], args, log=log, heap=heap)
        deadline = time.monotonic() + deadline_s
        while wait_for not in (log.read_text() if log.exists() else ""):
            if proc.poll() is not None or time.monotonic() > deadline:
                jvm.stop(proc)
                raise AssertionError(f"{main} never printed {wait_for!r}: {log.read_text()[-3000:]}")
            time.sleep(0.2)
        return proc

    def share(self, bootstrap: str, topic: str, group: str, records: int, isolation: str = "",
              deadline_s: float = 90.0) -> subprocess.Popen:
        """A share consumer that read and acknowledged at least ``records`` records (``isolation``: the
        group's share.isolation.level to set first; "" leaves its default, read_uncommitted)."""
        return self._start(self.share_classes, "ShareReader",
                           [bootstrap, topic, group, str(records), isolation], "READ ", deadline_s, "128m")

    def streams(self, bootstrap: str, topic: str, output: str, app_id: str,
                deadline_s: float = 120.0) -> subprocess.Popen:
        """A Kafka Streams app on group.protocol=streams, returned once it is RUNNING."""
        state = self.workdir / f"state-{app_id}"
        return self._start(self.streams_classes, "StreamsPassthrough",
                           [bootstrap, topic, output, app_id, str(state)], "state RUNNING", deadline_s,
                           "192m")
