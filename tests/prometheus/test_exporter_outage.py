"""`eosctl exporter` runs for weeks: a broker outage sets eosctl_up 0 and keeps serving the last values with
their ages, the cluster coming back sets it to 1 again, and SIGTERM / Ctrl-C stop it with one line.

The outage needs a broker of its own (the private_broker fixture), never the session's.
"""

from __future__ import annotations

import signal
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.broker import committed_group
from tests.support.prometheus import Exporter, poll

pytestmark = pytest.mark.integration


def value(scrape: dict, name: str, **labels: str) -> float:
    (found,) = [v for ls, v in scrape.get(name, []) if all(ls.get(k) == w for k, w in labels.items())]
    return found


def wait_scrape(exporter: Exporter, address: str, ok: Callable[[dict], bool], what: str) -> dict:
    return poll(lambda: exporter.metrics(address), ok, what)


@pytest.mark.timeout(300)
def test_outage_keeps_the_last_values_and_recovers(private_broker):
    from eosctl.sandbox import noida

    home, state = private_broker
    topic, group = committed_group(state.bootstrap)
    exporter = Exporter("--bootstrap", state.bootstrap, "-t", topic, "-g", group, "--listen", "127.0.0.1:0",
                        "--interval", "0.5", "--audit-every", "0")
    try:
        address = exporter.wait_for(r"serving http://(127\.0\.0\.1:\d+)/metrics")[1]
        before = exporter.metrics(address)
        assert value(before, "eosctl_up") == 1
        assert value(before, "eosctl_partition_high_watermark", topic=topic, partition="0") == 5
        assert value(before, "eosctl_consumer_lag_records", group=group, topic=topic) == 0

        noida.down(home)
        down = wait_scrape(exporter, address, lambda s: value(s, "eosctl_up") == 0, "eosctl_up 0")
        exporter.wait_for(r"refresh failed, serving the last values \(eosctl_up 0\): ")
        assert value(down, "eosctl_partition_high_watermark", topic=topic, partition="0") == 5
        assert value(down, "eosctl_consumer_lag_records", group=group, topic=topic) == 0
        assert value(down, "eosctl_consumer_group_status", group=group, status="ERR") == 1
        aging = lambda s: value(s, "eosctl_section_age_seconds", section="lag") > 2  # noqa: E731
        older = wait_scrape(exporter, address, aging, "an aging section")
        assert value(older, "eosctl_refresh_errors_total", section="logs") >= 1

        noida.up(home, port=state.port)  # back on the same port, same data
        wait_scrape(exporter, address, lambda s: value(s, "eosctl_up") == 1, "eosctl_up 1 after the outage")
        exporter.wait_for("the cluster answers again")
        back = exporter.metrics(address)
        assert value(back, "eosctl_consumer_group_status", group=group, status="ERR") == 0
        assert value(back, "eosctl_section_age_seconds", section="lag") < 2
    finally:
        code = exporter.stop()
    assert code == 143
    assert exporter.rest_of_stderr() == ["eosctl: terminated\n"]


def test_ctrl_c_stops_it_with_one_line(bootstrap):
    topic, group = committed_group(bootstrap)
    exporter = Exporter("--bootstrap", bootstrap, "-t", topic, "-g", group, "--listen", "127.0.0.1:0",
                        "--audit-every", "0")
    address = exporter.wait_for(r"serving http://(127\.0\.0\.1:\d+)/metrics")[1]
    assert value(exporter.metrics(address), "eosctl_up") == 1
    assert exporter.stop(signal.SIGINT) == 130
    assert exporter.rest_of_stderr() == ["eosctl: interrupted\n"]


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


def test_sigterm_during_an_audit_kills_its_workers_and_leaves_nothing(cluster, tmp_path):
    from eosctl.sandbox.pipeline import run_pipeline

    run_pipeline(cluster, "x" + uuid.uuid4().hex[:8], tmp_path / "run", records=30)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    exporter = Exporter("-c", str(tmp_path / "run" / "eosctl.toml"), "--listen", "127.0.0.1:0", "--interval",
                        "1", "--audit-every", "0.1", env={"TMPDIR": str(tmp), "EOSCTL_LOCAL_WORKERS": "2"})
    exporter.wait_for(r"serving http://")
    workers = poll(lambda: _children(exporter.proc.pid), bool, "the audit's worker processes")
    assert exporter.stop() == 143
    assert exporter.rest_of_stderr() == ["eosctl: terminated\n"]  # no traceback from the audit thread
    assert [pid for pid in workers if Path(f"/proc/{pid}").exists()] == []
    assert list(tmp.iterdir()) == []  # the audit's temp directory and the sink's frozen copy are gone
