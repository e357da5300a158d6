"""`eosctl completion bash|zsh|fish`: click's completion scripts, and completions that answer."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from eosctl.cli import main


@pytest.mark.parametrize(("shell", "marker"), [
    ("bash", "complete -o nosort -F _eosctl_completion eosctl"),
    ("zsh", "compdef _eosctl_completion eosctl"),
    ("fish", "complete --no-files --command eosctl"),
])
def test_completion_prints_the_shell_script(shell, marker):
    result = CliRunner().invoke(main, ["completion", shell])
    assert result.exit_code == 0
    assert marker in result.output and "_EOSCTL_COMPLETE" in result.output


def test_completion_answers_for_eosctl_commands():
    from click.shell_completion import ShellComplete

    names = [c.value for c in ShellComplete(main, {}, "eosctl", "_EOSCTL_COMPLETE").get_completions([], "au")]
    assert names == ["audit"]
    formats = [c.value for c in ShellComplete(main, {}, "eosctl", "_EOSCTL_COMPLETE").get_completions(
        ["audit", "--format"], "")]
    assert formats == ["table", "json", "junit", "html"]
