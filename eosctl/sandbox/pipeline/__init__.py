"""The reference exactly-once pipeline with fault injection: ground truth for audits and inspections.

source (transactional producer) -> ``{prefix}.orders`` -> process (read-process-write, offsets in the
transaction) -> ``{prefix}.enriched`` -> sink (DuckDB rows + offsets in one DuckDB transaction).
``run_pipeline`` runs it once and returns the manifest (format: eosctl/sandbox/pipeline/manifest.py); the
fault modes are described in eosctl/sandbox/pipeline/faults.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from eosctl.sandbox.pipeline.modes import FAULTS

if TYPE_CHECKING:
    from eosctl.sandbox.pipeline.run import run_pipeline

__all__ = ["FAULTS", "run_pipeline"]


def __getattr__(name: str) -> Any:
    if name == "run_pipeline":
        # lazy: see docs/imports.md
        from eosctl.sandbox.pipeline.run import run_pipeline

        return run_pipeline
    raise AttributeError(f"module 'eosctl.sandbox.pipeline' has no attribute {name!r}")
