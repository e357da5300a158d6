"""Modal screens: help, and a detail pane for one row (a transaction)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from eosctl.base.safetext import term

# Lines fit the help box at 80 columns (68 characters inside its border): a wrapped line would break a
# phrase in the middle; continuations are indented under their view's text.
HELP = """[b]eosctl tui[/b]: what Kafka holds for an exactly-once pipeline,
live or from a snapshot.

[b]Views[/b] (tabs; click them or press the number)
  1 Overview      health per pipeline: audit verdict, records
                  behind, open/hanging txns, fenced producers
  2 Transactions  transactional ids; hanging ones are red;
                  Enter shows the detail
  3 Producers     producer ids per partition; fencing and
                  zombie writes marked
  4 Lag           per group/partition: lag to the LSO, records
                  behind, blocked by an open txn, status
  5 Log           ranges (or batches, b) of one partition;
                  v its records, decoded through the registry;
                  g, then an offset and Enter, jumps there
  6 Ledger        sink rows per partition vs stored and
                  committed offsets; Enter opens the Log
  7 Audit         a runs the audit in the background; Enter on
                  a finding opens the Log at its offsets

[b]Keys[/b]
  /  filter the table (Esc clears)    r  refresh now
  p  pause auto-refresh               ?  this help
  s  sort by the next column (S reverses; or click a header)
  ctrl+p  command palette             q  quit
  arrows / pgup / pgdn / home / end move; Enter selects;
  the mouse works too.

[b]Colours[/b] (words are shown as well, so NO_COLOR works)
  committed: green   aborted: red   marker: cyan
  open (beyond the LSO): yellow   hole: dim

Press Esc or ? to close."""


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Static(Text.from_markup(HELP))


class DetailScreen(ModalScreen[None]):
    """Label/value pairs of one object, e.g. a transaction."""

    BINDINGS = [Binding("escape,enter,q", "dismiss", "Close")]

    def __init__(
        self, title: str, pairs: Sequence[tuple[str, object]], note: Text | str | None = None
    ) -> None:
        super().__init__()
        self.title_text = title
        self.pairs = pairs
        self.note = note

    def compose(self) -> ComposeResult:
        # Titles and values hold names from the cluster: shown escaped, never as markup.
        t = Text(term(self.title_text) + "\n\n", style="bold")
        # Labels too: some name a partition ("safe to abort? (TOPIC[0])").
        labels = [term(k) for k, _ in self.pairs]
        width = max((len(k) for k in labels), default=0)
        for k, (_, v) in zip(labels, self.pairs, strict=True):
            t.append(f"{k:<{width}}  ", style="bold")
            t.append(f"{'-' if v is None or v == '' else term(str(v))}\n")
        if self.note:
            t.append("\n")
            t.append(self.note if isinstance(self.note, Text) else Text(self.note))
        t.append("\n\nEsc closes", style="dim")
        with VerticalScroll(id="detail"):
            yield Static(t)
