"""A Kafka Streams stage (tests/stages/MapStage.java: map each value, keep its key; compiled by the test
against Kafka 4.4.0's jars) audited by key on Apache Kafka, SIGKILLed mid-transaction and restarted.

The input has aborted transactions among the committed ones, with unique keys (an output of an aborted
input's key is derived from aborted input). With `exactly_once_v2` the hop audits clean. With
`at_least_once` (Streams then reads its input read_uncommitted and writes before it commits): audited right
after the kill, the outputs of input past the group's committed offsets are `ahead_of_commit` (never
`invalid_row`), the aborted input it read `phantom_key`; after the restart caught up, the replayed inputs
are `duplicate_key`s whose cause says the stage processed them again, and `phantom_key` counts the aborted
input records (their outputs, some written twice, in detail). Every expectation comes from the test's own
raw reads of both topics.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.support.jvm import die_with_test, java_cmd
from tests.support.stage import (
    Stage,
    Topics,
    audit_hop,
    compiled_stage,
    covered,
    ends,
    group_offsets,
    kill_when,
    no_fencing,
    read_records,
    wait_until,
    write_input,
)

pytestmark = [pytest.mark.integration]

PARTITIONS = 3
BATCH, BATCHES = 40, 12  # every third batch aborted: 320 committed inputs, 160 aborted
DELAY_MS = "30"  # per record: ten seconds for the input, so a kill lands mid-stream


stage_classes = compiled_stage("MapStage", "kafka")


class Streams:
    """The stage's topics, its application (= group) id, and runs of it."""

    def __init__(self, bootstrap: str, classes: tuple[Path, Path], workdir: Path, guarantee: str) -> None:
        self.bootstrap, self.classes, self.workdir, self.guarantee = bootstrap, classes, workdir, guarantee
        self.topics = Topics.create(bootstrap, "streams", PARTITIONS)
        self.app = f"{self.topics.input}.app"
        self.committed, self.aborted = write_input(bootstrap, self.topics.input, BATCHES, BATCH)
        self.runs: list[Stage] = []

    def start(self, commit_ms: str) -> Stage:
        args = [self.bootstrap, self.app, self.topics.input, self.topics.output, self.guarantee, DELAY_MS,
                commit_ms, str(self.workdir / "state")]
        stage = Stage(f"streams-{len(self.runs)}", [*java_cmd(self.classes[0], "MapStage", self.classes[1],
                                                              heap="256m"), *args],
                      self.workdir / "streams.log", preexec=die_with_test)
        self.runs.append(stage)
        return stage

    def offsets(self) -> dict[int, int]:
        return group_offsets(self.bootstrap, self.app, self.topics.input)

    def caught_up(self) -> bool:
        """Input offsets committed past every committed input record."""
        done = self.offsets()
        return all(done[p] > o for p, o in self.committed)

    def open_with_outputs(self) -> bool:
        out = self.topics.output
        return ends(self.bootstrap, out, "read_uncommitted") != ends(self.bootstrap, out, "read_committed")

    def stable(self) -> bool:
        """No transaction open on the output (a killed instance's expires after its timeout)."""
        return not self.open_with_outputs()

    def audit(self, name: str) -> tuple[int, dict, str]:
        return audit_hop(self.workdir / f"{name}.toml", self.bootstrap, self.topics, self.app, "key")

    def stop_all(self) -> None:
        for run in self.runs:
            run.kill()


@pytest.fixture
def streams(bootstrap, stage_classes, tmp_path):
    made: list[Streams] = []

    def make(guarantee: str) -> Streams:
        made.append(Streams(bootstrap, stage_classes, tmp_path, guarantee))
        return made[-1]

    yield make
    for s in made:
        s.stop_all()



def test_streams_exactly_once_v2_killed_mid_transaction_and_restarted_audits_clean(streams):
    s = streams("exactly_once_v2")
    n = len(s.committed)
    first = s.start("100")
    kill_when(first, "offsets committed and a transaction open with outputs", s.open_with_outputs,
              before=lambda: any(o > 0 for o in s.offsets().values()))
    assert not s.caught_up()

    second = s.start("100")
    wait_until("input offsets committed past the input", s.caught_up, 90, second)
    second.stop()
    wait_until("no transaction open on the output", s.stable, 60)

    outputs = read_records(s.bootstrap, s.topics.output, "read_committed")
    keys = Counter(k for _, _, k, _ in outputs)
    assert keys == Counter(s.committed.values())  # the test's own read: every committed input once
    assert all(v.startswith(b"V") for _, _, _, v in outputs)
    # The killed run's open transaction had outputs: they are in the log, aborted.
    assert sum(ends(s.bootstrap, s.topics.output, "read_uncommitted").values()) > n

    code, report, err = s.audit("eos")
    assert (code, report["findings"]) == (0, []), err
    assert report["summary"]["expected_records"] == n
    assert report["summary"]["sink_rows"] == n
    assert no_fencing(report)


def test_streams_at_least_once_killed_then_restarted_names_ahead_of_commit_then_exact_replays(streams):
    s = streams("at_least_once")
    n = len(s.committed)
    first = s.start("2000")  # a wide replay: aborted input past the commit too

    first_aborted = {p: min(o for q, o in s.aborted if q == p) for p in range(PARTITIONS)}

    def past_and_leaked() -> tuple[set, set, set]:
        """From the test's own reads: committed inputs past the group's offsets that have an output, aborted
        inputs that have one, and those of them past the group's offsets (the restart writes them again)."""
        done = s.offsets()
        keys = {k for _, _, k, _ in read_records(s.bootstrap, s.topics.output, "read_uncommitted")}
        leaked = {po for po, k in s.aborted.items() if k in keys}
        return ({po for po, k in s.committed.items() if po[1] >= done[po[0]] and k in keys}, leaked,
                {po for po in leaked if po[1] >= done[po[0]]})

    def ahead() -> bool:
        """Input committed past an aborted input transaction (the stage read it), and outputs of committed
        and of aborted input past the committed offsets."""
        if not any(o > first_aborted[p] for p, o in s.offsets().items()):
            return False
        return all(past_and_leaked())

    kill_when(first, "outputs past the committed offsets", ahead)

    # Right after the kill, from the test's own reads: which inputs are past the commit and have an output.
    past, leaked, _ = past_and_leaked()
    out_keys = Counter(k for _, _, k, _ in read_records(s.bootstrap, s.topics.output, "read_uncommitted"))
    assert past and leaked and all(c == 1 for c in out_keys.values())
    code, report, err = s.audit("killed")
    assert code == 1, err
    kinds = Counter(f["kind"] for f in report["findings"])
    assert set(kinds) == {"ahead_of_commit", "phantom_key"}, report["findings"]
    assert covered(report["findings"], "ahead_of_commit", set(s.committed)) == past
    assert sum(f["count"] for f in report["findings"] if f["kind"] == "ahead_of_commit") == len(past)
    assert kinds["ahead_of_commit"] <= PARTITIONS
    assert all(f["cause"]["summary"].startswith("The stage wrote") for f in report["findings"]
               if f["kind"] == "ahead_of_commit")
    assert covered(report["findings"], "phantom_key", set(s.aborted)) == leaked
    assert sum(f["count"] for f in report["findings"] if f["kind"] == "phantom_key") == len(leaked)
    assert {r["rule"] for r in report["root_causes"]} == {"written_before_commit", "sink_reads_aborted"}
    assert no_fencing(report)

    second = s.start("1000")
    wait_until("input offsets committed past the input", s.caught_up, 90, second)
    second.stop()

    out_keys = Counter(k for _, _, k, _ in read_records(s.bootstrap, s.topics.output, "read_uncommitted"))
    replayed = {po: out_keys[k] - 1 for po, k in s.committed.items() if out_keys[k] > 1}
    leaked = {po for po, k in s.aborted.items() if k in out_keys}
    assert all(out_keys[k] >= 1 for k in s.committed.values())  # at least once
    assert replayed and leaked
    code, report, err = s.audit("restarted")
    assert code == 1, err
    assert {f["kind"] for f in report["findings"]} == {"duplicate_key", "phantom_key"}, report["findings"]
    dups = [f for f in report["findings"] if f["kind"] == "duplicate_key"]
    assert covered(dups, "duplicate_key", set(s.committed)) == set(replayed)
    assert sum(f["count"] for f in dups) == sum(replayed.values())
    assert all("processed them again" in f["cause"]["summary"] for f in dups)
    phantoms = [f for f in report["findings"] if f["kind"] == "phantom_key"]
    assert covered(phantoms, "phantom_key", set(s.aborted)) == leaked
    assert sum(f["count"] for f in phantoms) == len(leaked)  # input records, not outputs
    assert sum(out_keys[s.aborted[po]] for po in leaked) > len(leaked)  # some written twice: in detail
    assert all("; outputs " in f["detail"] for f in phantoms)
    assert report["summary"]["expected_records"] == n
    assert no_fencing(report)
