"""eosctl.output.finding: each finding kind's cause in a few words (a table cell, a JUnit message)."""

from __future__ import annotations

import pytest

from eosctl.output.finding import short_cause
from eosctl.report.findings import Cause, Finding


@pytest.mark.parametrize("kind, words", [
    ("misrouted", "routed here, though the sink's route does not select it"),
    ("sink_and_dlq", "written to the sink and dead-lettered too"),
    ("dlq_duplicate", "dead-lettered more than once"),
    ("dlq_aborted", "dead-lettered from an aborted or open transaction"),
    ("invalid_row", "rows without valid source coordinates"),
])
def test_a_pipeline_shapes_kinds_are_not_called_invalid_rows(kind, words):
    f = Finding(kind, "t", 0, 3, 3, 1, cause=Cause(kind=kind, summary="."))
    assert short_cause(f) == words
