"""A Kafka Streams `count()` (tests/stages/CountStage.java: groupByKey().count() to a topic of 8-byte longs,
compiled by the test against Kafka 4.4.0's jars) audited as an aggregate state sink (issue 51): its output
topic is the table, the fold is a count, the application id's committed offsets the read point.

The input (tests/support/stage.write_input) has unique keys, committed transactions with aborted ones among
them. Under `exactly_once_v2`, SIGKILLed mid-transaction and restarted, the counts audit clean. Under
`at_least_once` (Streams then reads read_uncommitted and commits its offsets apart from its output), killed
after it counted records past its committed offsets and restarted: every key counted twice is an
`aggregate_mismatch` "counted offsets P twice" at its one record, every aborted input counted in one
"counted the aborted or open offsets P", exactly as the test's own reads of the output find them (what
Kafka's EosTestDriver checks on its cnt output).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from tests.support.helpers import eosctl
from tests.support.jvm import die_with_test, java_cmd
from tests.support.stage import (
    Stage,
    Topics,
    compiled_stage,
    ends,
    group_offsets,
    kill_when,
    read_records,
    wait_until,
    write_input,
)

pytestmark = [pytest.mark.integration]

PARTITIONS = 3
BATCH, BATCHES = 30, 9  # every third batch aborted: 180 committed inputs, 90 aborted
# Per record: long enough that the kill's probe (a group offset fetch and two ListOffsets, the stage frozen
# meanwhile) meets the stage mid-input. At 10 ms the 180 records took under 2 s, and a loaded run's probe
# once found the input done and nothing open ever again (ci6 of stop 58).
DELAY_MS = "50"


stage_classes = compiled_stage("CountStage", "kafka")


class Counting:
    def __init__(self, bootstrap: str, classes: tuple[Path, Path], workdir: Path, guarantee: str) -> None:
        self.bootstrap, self.classes, self.workdir, self.guarantee = bootstrap, classes, workdir, guarantee
        self.topics = Topics.create(bootstrap, "count", PARTITIONS)
        self.app = f"{self.topics.input}.app"
        self.committed, self.aborted = write_input(bootstrap, self.topics.input, BATCHES, BATCH)
        self.runs: list[Stage] = []

    def start(self, commit_ms: str) -> Stage:
        args = [self.bootstrap, self.app, self.topics.input, self.topics.output, self.guarantee, DELAY_MS,
                commit_ms, str(self.workdir / "state")]
        stage = Stage(f"count-{len(self.runs)}", [*java_cmd(self.classes[0], "CountStage", self.classes[1],
                                                            heap="256m"), *args],
                      self.workdir / "count.log", preexec=die_with_test)
        self.runs.append(stage)
        return stage

    def offsets(self) -> dict[int, int]:
        return group_offsets(self.bootstrap, self.app, self.topics.input)

    def caught_up(self) -> bool:
        done = self.offsets()
        return all(done[p] > o for p, o in self.committed)

    def open_with_outputs(self) -> bool:
        out = self.topics.output
        return ends(self.bootstrap, out, "read_uncommitted") != ends(self.bootstrap, out, "read_committed")

    def counts(self, isolation: str = "read_committed") -> dict[bytes, int]:
        """The test's own read of the output: each key's latest count."""
        records = read_records(self.bootstrap, self.topics.output, isolation)
        return {k: struct.unpack(">q", v)[0] for _, _, k, v in records}

    def audit(self) -> tuple[int, dict, str]:
        config = self.workdir / "eosctl.toml"
        config.write_text(f'[clusters.c]\nbootstrap_servers = "{self.bootstrap}"\n\n[pipelines.stage]\n'
                          f'source_topics = ["{self.topics.input}"]\ngroup = "{self.app}"\n\n'
                          f'[pipelines.stage.sink]\nkafka_topic = "{self.topics.output}"\n'
                          'mode = "aggregate"\nkey_column = "key"\n'
                          'aggregate = {fn = "count", column = "value:long"}\n')
        r = eosctl("audit", "-c", str(config), "--engine", "local", "--format", "json", columns=None)
        return r.exit_code, json.loads(r.stdout), r.stderr

    def stop_all(self) -> None:
        for run in self.runs:
            run.kill()


@pytest.fixture
def counting(bootstrap, stage_classes, tmp_path):
    made: list[Counting] = []

    def make(guarantee: str) -> Counting:
        made.append(Counting(bootstrap, stage_classes, tmp_path, guarantee))
        return made[-1]

    yield make
    for c in made:
        c.stop_all()



def test_streams_count_exactly_once_v2_killed_and_restarted_audits_clean(counting):
    c = counting("exactly_once_v2")
    # A commit each second: Streams' producer holds its sends for linger.ms (100 ms, Streams' default), so at
    # a 100 ms commit interval the outputs reached the log only at the commit's flush, just before its
    # markers, and the probe's window was that moment (ci26, load 6-9: never met within 90 s). Now a
    # transaction is open with outputs for most of each second.
    first = c.start("1000")
    kill_when(first, "offsets committed and a transaction open with outputs", c.open_with_outputs,
              before=lambda: any(o > 0 for o in c.offsets().values()))
    assert not c.caught_up()
    second = c.start("100")
    wait_until("input offsets committed past the input", c.caught_up, 90, second)
    second.stop()
    wait_until("no transaction open on the output", lambda: not c.open_with_outputs(), 60)

    counts = c.counts()
    assert counts == {k: 1 for k in c.committed.values()}  # the test's own read: each committed key once
    code, report, err = c.audit()
    assert (code, report["findings"]) == (0, []), err
    assert report["summary"]["expected_records"] == len(c.committed)


def test_streams_count_at_least_once_names_each_double_count_and_aborted_count(counting):
    c = counting("at_least_once")
    first = c.start("2000")
    first_aborted = {p: min(o for q, o in c.aborted if q == p) for p in range(PARTITIONS)}

    def counted_past_the_commit() -> bool:
        done = c.offsets()
        if not any(o > first_aborted[p] for p, o in done.items()):
            return False
        keys = set(c.counts("read_uncommitted"))
        return any(po[1] >= done[po[0]] and k in keys for po, k in c.committed.items())

    kill_when(first, "records counted past the committed offsets", counted_past_the_commit)
    second = c.start("1000")
    wait_until("input offsets committed past the input", c.caught_up, 90, second)
    second.stop()

    counts = c.counts()
    at = {k: po for po, k in {**c.committed, **c.aborted}.items()}
    twice = {k for k in c.committed.values() if counts.get(k) == 2}
    aborted_once = {k for k in c.aborted.values() if counts.get(k) == 1}
    assert twice and aborted_once  # the restart replayed counted records; the stage counted aborted ones
    assert all(counts.get(k, 0) >= 1 for k in c.committed.values())  # at least once
    code, report, err = c.audit()
    assert code == 1, err
    rules = {f["key"]: f["cause"]["rule"] for f in report["findings"]}
    assert {k for k, r in rules.items() if r == "counted_twice"} == {k.decode() for k in twice}
    assert {k for k, r in rules.items() if r == "counted_aborted"} == {k.decode() for k in aborted_once}
    for f in report["findings"]:
        if f["cause"]["rule"] in ("counted_twice", "counted_aborted"):
            p, o = at[f["key"].encode()]
            assert (f["partition"], f["first_offset"], f["offsets"]) == (p, o, [o])
    # committed keys counted three times or more, aborted ones twice or more: no one run explains them
    others = ({k for k in c.committed.values() if counts.get(k, 0) >= 3}
              | {k for k in c.aborted.values() if counts.get(k, 0) >= 2})
    assert {k for k, r in rules.items() if r == "unexplained_difference"} == {k.decode() for k in others}
    assert {f["kind"] for f in report["findings"]} == {"aggregate_mismatch"}
