"""eosctl.cluster.sharedwire: inside sharing(), one wire client per cluster for the block, closed at its end;
outside it, in another thread, after a phase that raised and after release(), a client of its own."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from eosctl.cluster import sharedwire
from eosctl.config.model import Cluster

CLUSTER = Cluster(name="c", bootstrap_servers="127.0.0.1:9")


class FakeClient:
    made: list[FakeClient] = []

    def __init__(self, target: Any, *, timeout_ms: int) -> None:
        self.target, self.timeout_ms, self.closed = target, timeout_ms, False
        FakeClient.made.append(self)

    def __enter__(self) -> FakeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.closed = True


@pytest.fixture(autouse=True)
def fake_wire(monkeypatch: pytest.MonkeyPatch) -> None:
    import eosctl.cluster.wire

    FakeClient.made = []
    monkeypatch.setattr(eosctl.cluster.wire, "WireClient", FakeClient)


def test_outside_sharing_each_block_has_its_own_client_closed_at_its_end() -> None:
    with sharedwire.client(CLUSTER) as a:
        assert not a.closed
    with sharedwire.client(CLUSTER) as b:
        pass
    assert a is not b and a.closed and b.closed


def test_inside_sharing_the_phases_get_one_client_closed_when_the_block_ends() -> None:
    with sharedwire.sharing():
        with sharedwire.client(CLUSTER) as a:
            pass
        with sharedwire.sharing():  # nested: the outer block's clients
            with sharedwire.client(CLUSTER, timeout_ms=10_000) as b:
                pass
        assert a is b and not a.closed
        with sharedwire.client(CLUSTER, timeout_ms=5_000) as other:  # another timeout: another client
            pass
        assert other is not a
    assert a.closed and other.closed and len(FakeClient.made) == 2


def test_a_phase_that_raises_closes_the_shared_client_and_the_next_starts_anew() -> None:
    with sharedwire.sharing():
        with pytest.raises(RuntimeError), sharedwire.client(CLUSTER) as a:
            raise RuntimeError("broker went away")
        assert a.closed
        with sharedwire.client(CLUSTER) as b:
            pass
        assert b is not a and not b.closed
    assert b.closed


def test_another_thread_and_release_get_clients_of_their_own() -> None:
    seen: list[FakeClient] = []

    def phase() -> None:
        with sharedwire.client(CLUSTER) as c:
            seen.append(c)

    with sharedwire.sharing():
        with sharedwire.client(CLUSTER) as a:
            pass
        thread = threading.Thread(target=phase)
        thread.start()
        thread.join()
        assert seen[0] is not a and seen[0].closed and not a.closed
        sharedwire.release()  # before forking workers
        assert a.closed
        with sharedwire.client(CLUSTER) as b:
            pass
        assert b is not a and not b.closed
    assert b.closed
