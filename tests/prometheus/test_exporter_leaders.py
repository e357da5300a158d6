"""`eosctl exporter` while the partitions' leaders move on the three-node cluster (issue 31 item 2): every
scrape keeps the right high watermarks and no lag, and the exporter never prints a traceback."""

from __future__ import annotations

import time

import pytest

from tests.integration.test_leaders_move import PARTITIONS, RECORDS, TXN, Churn, moving  # noqa: F401
from tests.support.prometheus import Exporter, poll

pytestmark = pytest.mark.integration


def values(scrape: dict, name: str, **labels: str) -> list[float]:
    return [v for ls, v in scrape.get(name, []) if all(ls.get(k) == w for k, w in labels.items())]


@pytest.mark.timeout(400)
def test_exporter_answers_right_while_leaders_move(moving, tmp_path):  # noqa: F811
    cluster, topic, group, _ = moving
    hw = RECORDS + RECORDS // TXN
    exporter = Exporter("--bootstrap", cluster.bootstrap, "-t", topic, "-g", group, "--listen", "127.0.0.1:0",
                        "--interval", "0.5", "--audit-every", "0")
    try:
        address = exporter.wait_for(r"serving http://(127\.0\.0\.1:\d+)/metrics")[1]
        scrapes = []
        with Churn(cluster, topic, tmp_path) as churn:
            deadline = time.monotonic() + 180
            while churn.rounds < 2 and time.monotonic() < deadline:
                scrapes.append(exporter.metrics(address))
                time.sleep(0.5)
        assert churn.rounds >= 2, churn.errors
        for s in scrapes:  # what is served is right, whatever moved meanwhile
            for q in range(PARTITIONS):
                got = values(s, "eosctl_partition_high_watermark", topic=topic, partition=str(q))
                assert got in ([], [hw])
            assert set(values(s, "eosctl_consumer_lag_records", group=group, topic=topic)) <= {0}
        back = poll(lambda: exporter.metrics(address), lambda s: values(s, "eosctl_up") == [1], "eosctl_up 1")
        assert [values(back, "eosctl_partition_high_watermark", topic=topic, partition=str(q))
                for q in range(PARTITIONS)] == [[hw]] * PARTITIONS
    finally:
        exporter.stop()
    assert not any("Traceback" in line for line in exporter.seen + exporter.rest_of_stderr())
