"""Regenerate the TUI's fixed incident snapshot: data/reference.snap.duckdb and data/reference.manifest.json.

    python tests/tui/make_reference.py [--workdir /tmp/eosctl-tuiref]

Starts a private noida-db sandbox, runs the reference pipeline as prefix `tuiref` (300 records, 3
partitions) with the duplicate-replay, zombie and hanging faults, and captures it with
`eosctl snapshot --max-age 0 --with-audit`: the planted hanging transaction is only seconds old at capture
time, so max-age 0 makes the snapshot's hanging report name it (exactly what `txns hanging --max-age 0`
says live), and the stored audit fills the Audit view. The work directory is fixed because the sink's
path is rendered in the Ledger view.

Afterwards: update CAPTURED in tests/support/tui.py (the new capture time), run
`pytest tests/tui/test_svg.py --snapshot-update` and read the changed SVGs' text before committing.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

DATA = Path(__file__).parent / "data"
FAULTS = ["duplicate-replay", "zombie", "hanging"]


def main() -> None:
    from eosctl.config.model import Cluster
    from eosctl.sandbox import noida
    from eosctl.sandbox.pipeline import run_pipeline

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "eosctl-tuiref")
    args = ap.parse_args()
    workdir: Path = args.workdir
    shutil.rmtree(workdir, ignore_errors=True)
    home = workdir / "sandbox"
    state, _ = noida.up(home)
    try:
        cluster = Cluster(name="sandbox", bootstrap_servers=state.bootstrap)
        run_pipeline(cluster, "tuiref", workdir / "ref", faults=FAULTS, records=300, partitions=3,
                     progress=lambda msg: print(msg, file=sys.stderr))
        out = workdir / "reference.snap.duckdb"
        config = workdir / "ref" / "eosctl.toml"
        # The sink hop, as the reference always was (the config's default is now the whole pipeline).
        subprocess.run([sys.executable, "-m", "eosctl", "snapshot", "-c", str(config), "-p", "tuiref",
                        "--out", str(out),
                        "--max-age", "0", "--with-audit"], check=True)
        shutil.copyfile(out, DATA / "reference.snap.duckdb")
        shutil.copyfile(workdir / "ref" / "manifest.json", DATA / "reference.manifest.json")
    finally:
        noida.down(home)
    print(f"wrote {DATA / 'reference.snap.duckdb'} and {DATA / 'reference.manifest.json'}")


if __name__ == "__main__":
    main()
