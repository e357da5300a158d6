"""The CLI's tables in a real terminal (tmux, 80 columns): names are never cut (issue 32, item 4). A table
too wide wraps between words, then leaves out its least important columns and says which; `--format plain`
prints tab-separated lines for scripts."""

from __future__ import annotations

import os
import shutil
import sys
import time

import pytest
from click.testing import CliRunner

from eosctl.cli import main
from tests.kafkasim import KafkaSim

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

IDS = ["ux1.processor-with-a-long-name", "ux1.hanging-transactional-id-0", "ux1.source"]


def transactions(sim: KafkaSim) -> None:
    now = int(time.time() * 1000)
    for i, txid in enumerate(IDS):
        sim.transaction(txid, 1000 + i, state="Ongoing" if i != 2 else "CompleteCommit", timeout_ms=900_000,
                        start_ms=now - 60_000, partitions=[("ux1.enriched-orders-topic", i)])


def test_txns_list_fits_80_columns_without_cutting_a_name(tmux, kafka_sim: KafkaSim) -> None:
    transactions(kafka_sim)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    command = (f"PYTHONPATH={root} {sys.executable} -m eosctl txns list --bootstrap {kafka_sim.bootstrap}; "
               "echo EXITED $?; sleep 30")
    tmux.run("new-session", "-d", "-s", tmux.session, "-x", "80", "-y", "40", "-e", "TERM=xterm-256color",
             command)
    screen = tmux.wait_for("EXITED")
    assert "EXITED 0" in screen
    assert "…" not in screen  # nothing cut
    assert all(len(line) <= 80 for line in screen.splitlines())
    for txid in IDS:  # each identifier whole on one line
        assert txid in screen, screen
    assert "Ongoing" in screen and "CompleteCommit" in screen
    assert "(left out to fit 80 columns: started (UTC), timeout, epoch, age, partitions" in screen


def test_plain_format_is_tab_separated_and_whole(kafka_sim: KafkaSim) -> None:
    transactions(kafka_sim)
    args = ["txns", "list", "--bootstrap", kafka_sim.bootstrap, "--format", "plain"]
    result = CliRunner().invoke(main, args, env={"COLUMNS": "40"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "# Transactions (3)"
    assert lines[1].split("\t") == ["transactional id", "producer id", "epoch", "state", "timeout",
                                    "started (UTC)", "age", "partitions"]
    rows = [line.split("\t") for line in lines[2:]]
    assert [(r[0], r[3], r[4], r[7]) for r in rows] == [
        (IDS[1], "Ongoing", "15m00s", "ux1.enriched-orders-topic[1]"),
        (IDS[0], "Ongoing", "15m00s", "ux1.enriched-orders-topic[0]"),
        (IDS[2], "CompleteCommit", "15m00s", "ux1.enriched-orders-topic[2]")]
