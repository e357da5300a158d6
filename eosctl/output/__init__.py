"""Everything eosctl prints or writes for people and machines, in one place.

The models keep their own JSON form (``to_dict``, next to the data); everything shaped for output lives
here, one module per subject:

    terminal    the console, the table primitive, JSON to stdout, the scan progress bar, ages and times
    emit        where a command's result goes in its chosen --format, once
    records     records' keys and values, one line each, decoded where the registry could
    txns        `txns list | describe | hanging | abort` tables
    producers   the `producers` table
    lag         the `lag` JSON document (also one line per --watch poll) and its table
    log         the `log` JSON document (a remote dump-log) and its tables
    ledger      the `ledger` tables
    snapshot    what `snapshot` says it captured
    explain     `explain`: one offset's facts, or a report's root causes with their findings
    audit       an audit report as a table; ``render`` picks the format
    finding     one finding as text, shared by the table and JUnit renderers
    junit       an audit report as JUnit XML
    html        an audit report as one self-contained HTML page (`audit --format html`, `report`)
    htmltext    text on that page, escaped as on a terminal
    gapmap      the page's gap map: one SVG bar per partition over its offsets
"""

from __future__ import annotations

# Every output format. The inspection commands print the first two; `audit` writes all of them.
FORMATS = ("table", "json", "junit", "html")
# ...and "plain": each table as tab-separated lines, nothing cut or wrapped (eosctl.output.terminal).
INSPECT_FORMATS = ("table", "json", "plain")
