"""One real Prometheus per test session (Debian's package; `make test` installs it where missing).

It starts on a free loopback port with a 1 s scrape and evaluation interval, the repository's alert rules
(sample_configs/eosctl.rules.yml) with every `for:` shortened to 1 s, and a file-based target list that a
test points at its exporter with ``prometheus.scrape("127.0.0.1:PORT")``. Every wait has a deadline.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator

import pytest

from eosctl.base import procs
from tests.support.procs import stop
from tests.support.prometheus import JOB, RULES, Prometheus, free_port, get_status, tool


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    binary = tool("prometheus")
    home = tmp_path_factory.mktemp("prometheus")
    rules = home / "eosctl.rules.yml"
    rules.write_text(re.sub(r"(?m)^(\s+)for: \S+$", r"\1for: 1s", RULES.read_text()))
    targets = home / "targets.json"
    targets.write_text("[]")
    (home / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s, scrape_timeout: 1s}\n"
        f"rule_files: [{json.dumps(str(rules))}]\n"
        "scrape_configs:\n"
        f"  - job_name: {JOB}\n"
        f"    file_sd_configs: [{{files: [{json.dumps(str(targets))}], refresh_interval: 1s}}]\n")
    port = free_port()
    log_file = home / "prometheus.log"
    log = log_file.open("wb")
    proc = subprocess.Popen(
        [binary, f"--config.file={home / 'prometheus.yml'}", f"--storage.tsdb.path={home / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--web.enable-lifecycle"],
        stdout=log, stderr=subprocess.STDOUT, cwd=home, preexec_fn=procs.die_with_parent)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while get_status(f"{url}/-/ready") != 200:
            assert proc.poll() is None, f"prometheus exited {proc.returncode}: {log_file.read_text()}"
            assert time.monotonic() < deadline, "prometheus not ready within 60s"
            time.sleep(0.2)
        yield Prometheus(url, targets)
    finally:
        stop(proc)
        log.close()
