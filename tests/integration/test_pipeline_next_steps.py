"""What `eosctl sandbox pipeline` prints is what a new user does next (issue 32): its config's default is
the whole pipeline (both hops), and every "next, try" command works copied as printed: the TUI too, headless
through Textual's pilot, whose Audit tab audits both hops (issue 49)."""

from __future__ import annotations

import asyncio
import json
import shlex
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from eosctl.cli import main
from tests.support.tui import tui_audit

pytestmark = [pytest.mark.integration]


def test_the_printed_next_commands_work_on_the_whole_pipeline(cluster, tmp_path: Path) -> None:
    prefix = f"n{uuid.uuid4().hex[:8]}"
    workdir = tmp_path / "run"
    made = CliRunner().invoke(main, ["sandbox", "pipeline", "--bootstrap", cluster.bootstrap_servers, "--yes",
                                     "--prefix", prefix, "--workdir", str(workdir), "--records", "60",
                                     "--fault", "hanging", "--fault", "duplicate-replay"])
    assert made.exit_code == 0, made.output
    config = workdir.resolve() / "eosctl.toml"
    assert (f"config    {config}  (the whole pipeline by default; one hop: -p {prefix}.process or "
            f"-p {prefix})" in made.stdout)
    printed = made.stdout.split("next, try:\n", 1)[1].splitlines()
    assert printed == [f"  eosctl {cmd} -c {config}" for cmd in ("lag", "txns hanging", "audit", "tui")]
    codes = {}
    for line in printed[:-1]:  # the TUI is a terminal program: run headless below
        args = shlex.split(line)[1:]
        result = CliRunner().invoke(main, [*args, "--format", "json"])
        assert result.exit_code in (0, 1), (line, result.output)
        codes[args[0] if args[0] != "txns" else "hanging"] = (result.exit_code, json.loads(result.stdout))
    # The whole pipeline: both hops' groups, both hops' topics, both hops audited.
    assert [g["group"] for g in codes["lag"][1]["groups"]] == [f"{prefix}.processor", f"{prefix}.sink"]
    assert codes["hanging"][1]["partitions_checked"] == 6  # 3 partitions each of orders and enriched
    code, report = codes["audit"]
    assert code == 1 and [h["name"] for h in report["hops"]] == [f"{prefix}.process", prefix]
    assert {f["kind"] for f in report["findings"]} >= {"duplicate"}
    # The TUI as printed opens the whole pipeline, and `a` on its Audit tab audits both hops as `audit` did
    # (issue 49: it answered "no sink to audit").
    overview, tui_report = asyncio.run(tui_audit(shlex.split(printed[-1])[1:]))
    assert [row[0] for row in overview] == [f"{prefix}.pipeline"]
    assert [h.name for h in tui_report.hops] == [f"{prefix}.process", prefix]
    named = ("kind", "topic", "partition", "first_offset", "last_offset")
    assert sorted(tuple(f.to_dict()[k] for k in named) for f in tui_report.findings) == \
        sorted(tuple(f[k] for k in named) for f in report["findings"])
    # The investigator's next step: the duplicate's offset explained on the whole pipeline (--topic picks
    # the hop that reads it: its sink and group), with when the sink wrote each copy.
    dup = next(f for f in report["findings"] if f["kind"] == "duplicate")
    args = ["explain", "-c", str(config), "--topic", dup["topic"], "-P", str(dup["partition"]), "--offset",
            str(dup["first_offset"])]
    explained = CliRunner().invoke(main, [*args, "--format", "json"])
    assert explained.exit_code == 0, (explained.exit_code, explained.stderr, explained.stdout[-2000:])
    doc = json.loads(explained.stdout)
    assert (doc["group"]["group"], doc["sink"]["rows"]) == (f"{prefix}.sink", 2)
    assert doc["sink"]["write_time_column"] == "written_at" and len(doc["sink"]["written_at"]) == 2
    shown = CliRunner().invoke(main, args, env={"COLUMNS": "250"}).stdout
    wrote = next(line for line in shown.splitlines() if "sink wrote" in line)
    assert wrote.count("after the record") == 2 and "(written_at)" in wrote

    # A command that reads one topic names each choice as the option that picks it; the choice works.
    refused = CliRunner().invoke(main, ["log", "-c", str(config), "-P", "0"])
    assert refused.exit_code == 2
    assert refused.output.strip().endswith(
        f"its hops read several topics ({prefix}.orders, {prefix}.enriched); choose one: "
        f"--topic {prefix}.orders or --topic {prefix}.enriched"), refused.output
    chosen = CliRunner().invoke(main, ["log", "-c", str(config), "-P", "0", "--topic", f"{prefix}.enriched"])
    assert chosen.exit_code == 0, chosen.output
