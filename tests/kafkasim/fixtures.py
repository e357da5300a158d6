"""pytest fixtures for the scripted broker (imported by tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.kafkasim.server import KafkaSim


@pytest.fixture
def kafka_sim() -> Iterator[KafkaSim]:
    """A started two-node scripted broker; fails the test if it could not answer a request."""
    sim = KafkaSim(nodes=2)
    try:
        yield sim
    finally:
        sim.close()
    assert not sim.errors, "the scripted broker failed to answer:\n" + "\n".join(sim.errors)
