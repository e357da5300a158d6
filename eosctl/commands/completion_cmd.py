"""`eosctl completion SHELL`: the shell's completion script (click's own; nothing generated here)."""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

SHELLS = ("bash", "zsh", "fish")


@click.command("completion")
@click.argument("shell", type=click.Choice(SHELLS))
def completion(shell: str) -> None:
    """Print the completion script for bash, zsh or fish: commands, options and choices complete on TAB.

    \b
    Load it once in the current shell:
      bash:  eval "$(eosctl completion bash)"
      zsh:   eval "$(eosctl completion zsh)"
      fish:  eosctl completion fish | source
    \b
    Or for every new shell:
      bash:  eosctl completion bash > ~/.local/share/bash-completion/completions/eosctl
      zsh:   eosctl completion zsh > "${fpath[1]}/_eosctl"
      fish:  eosctl completion fish > ~/.config/fish/completions/eosctl.fish
    """
    # The same script `_EOSCTL_COMPLETE=bash_source eosctl` prints; it calls eosctl back on each TAB. The
    # root command comes from the context, not from eosctl.cli (which imports this module).
    main = click.get_current_context().find_root().command
    cls = get_completion_class(shell)
    assert cls is not None  # `shell` is a click.Choice of the shells click has a class for
    click.echo(cls(main, {}, "eosctl", "_EOSCTL_COMPLETE").source())
