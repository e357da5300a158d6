"""The alert rules users load (sample_configs/eosctl.rules.yml) pass `promtool check rules` and their unit
tests (tests/prometheus/eosctl.rules.test.yml: each alert firing, and quiet where it must stay quiet, e.g. a
consumer whose only "lag" is the trailing commit marker)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.prometheus import RULES, tool

HERE = Path(__file__).resolve().parent


def test_rules_file_is_valid():
    done = subprocess.run([tool("promtool"), "check", "rules", str(RULES)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 10 rules found" in done.stdout


def test_rules_unit_tests_pass():
    done = subprocess.run([tool("promtool"), "test", "rules", "eosctl.rules.test.yml"], cwd=HERE,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout
