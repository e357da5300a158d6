"""How `make test` splits the suite between xdist workers (tests/support/workers.py): each shared session
server
starts on one worker only, so every test that needs it must land in one group."""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.support import workers


@dataclass
class Def:
    scope: str
    baseid: str

    def func(self) -> None: ...


@dataclass
class Info:
    name2fixturedefs: dict[str, tuple[Def, ...]]


@dataclass
class Item:
    """What tests/support/workers.py and tests/support/nojvm.py read of a pytest item."""

    nodeid: str
    # fixture name -> scope; a module-scoped one is the module's own
    fixtures: dict[str, str] = field(default_factory=dict)
    markers: tuple[str, ...] = ()
    callspec: object = None

    @property
    def fixturenames(self) -> list[str]:
        return list(self.fixtures)

    @property
    def _fixtureinfo(self) -> Info:
        module = self.nodeid.split("::")[0]
        return Info({n: (Def(scope, module if scope == "module" else ""),)
                     for n, scope in self.fixtures.items()})

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.markers else None


def groups_of(items: list[Item]) -> dict[str, str]:
    return {i.nodeid: name for name, members in workers.group(items).items() for i in members}  # type: ignore


def test_a_test_needing_two_servers_joins_their_groups_into_one() -> None:
    items = [Item("tests/a.py::spark_only", {"spark": "session"}),
             Item("tests/b.py::old_only", {"kafka39": "session"}),
             Item("tests/c.py::both", {"spark": "session", "kafka39": "session"}),
             Item("tests/d.py::cluster", {"kafka_cluster3": "session"}),
             Item("tests/e.py::plain", {"bootstrap": "session"})]
    g = groups_of(items)
    assert g["tests/a.py::spark_only"] == g["tests/b.py::old_only"] == g["tests/c.py::both"]
    assert g["tests/d.py::cluster"] != g["tests/a.py::spark_only"]
    assert g["tests/e.py::plain"] == "tests/e.py"  # no shared server: its module's group


def test_postgresql_is_each_workers_own_so_its_tests_stay_in_their_modules_groups() -> None:
    items = [Item("tests/a.py::spark_only", {"spark": "session"}),
             Item("tests/b.py::pg_only", {"postgres": "session"}),
             Item("tests/c.py::both", {"spark": "session", "postgres": "session"})]
    g = groups_of(items)
    assert g["tests/b.py::pg_only"] == "tests/b.py"
    assert g["tests/c.py::both"] == g["tests/a.py::spark_only"] != g["tests/b.py::pg_only"]


def test_a_test_whose_spark_is_its_own_child_process_leaves_the_session_sparks_group() -> None:
    items = [Item("tests/a.py::uses_session", {"spark": "session"}),
             Item("tests/s.py::child", {"config": "module"}, markers=("spark", "own_spark")),
             Item("tests/s.py::child_marker_only", {}, markers=("spark", "own_spark"))]
    g = groups_of(items)
    assert g["tests/s.py::child"] == g["tests/s.py::child_marker_only"] == "tests/s.py"
    # without own_spark the marker alone means the session's Spark: one group with it
    items[1].markers = ("spark",)
    assert groups_of(items)["tests/s.py::child"] == groups_of(items)["tests/a.py::uses_session"]


def test_a_module_whose_module_fixture_serves_a_server_group_stays_whole_in_it() -> None:
    items = [Item("tests/m.py::reads_with_spark", {"job": "module", "spark": "session"}),
             Item("tests/m.py::reads_without", {"job": "module"}),
             Item("tests/n.py::no_module_fixture", {"tmp_path": "function"}),
             Item("tests/n.py::with_spark", {"spark": "session"})]
    g = groups_of(items)
    assert g["tests/m.py::reads_without"] == g["tests/m.py::reads_with_spark"]  # the job is set up once
    assert g["tests/n.py::no_module_fixture"] == "tests/n.py"  # nothing of its module to share: free to move
