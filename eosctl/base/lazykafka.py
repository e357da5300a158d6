"""kafka-python's package `__init__`s run only when a name they define is asked for.

Importing any `kafka.*` module runs `kafka/__init__.py`, which imports the admin client, the consumer and
the producer (coordinators, assignors, partitioners: ~60 modules), and `kafka.protocol.admin` (or `.consumer`,
`.metadata`, `.producer`) star-imports every schema module of its package, each class of which reads its
JSON schema at import. eosctl's raw client needs a few of them: a demo-size audit spent more on that import
than on its work (issue 49, docs/benchmarks.md). Here those packages' modules are made without running their
`__init__`; the first look-up of a name the `__init__` would have defined imports the one submodule that
defines it (or, for a name not found that way, runs the real `__init__` in the module), so every
`from kafka... import NAME` gets the same object as before, only later.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable, Sequence
from importlib.machinery import ModuleSpec, PathFinder
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from importlib.abc import Loader

# The packages whose __init__ imports far more than a name's own submodule.
LAZY = frozenset({"kafka", "kafka.protocol.admin", "kafka.protocol.consumer", "kafka.protocol.metadata",
                  "kafka.protocol.producer"})

_FROM = re.compile(r"^from\s+(\.?[\w.]*)\s+import\s+(?:\(([^)]*)\)|([^\n#]*))", re.M)
_DEFINED = re.compile(r"^(?:class\s+(\w+)|(\w+)\s*=)", re.M)


def _read(path: str | None) -> str:
    if path is None:
        return ""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError:
        return ""


def names_of(package: str, init_source: str, locate: Callable[[str], str | None]) -> dict[str, str]:
    """Each name the package's __init__ imports -> the module it comes from. ``locate(module)`` is the path
    of a module's source (for a star import: the names it defines at its top level)."""
    where: dict[str, str] = {}
    for source, parens, plain in _FROM.findall(init_source):
        module = package + source if source.startswith(".") else source
        listed = (parens or plain).replace("\\", " ")
        for item in listed.split(","):
            words = item.split()
            if not words:
                continue
            if words[0] == "*":
                for cls, var in _DEFINED.findall(_read(locate(module))):
                    if not (cls or var).startswith("__"):  # its __all__ is not the package's
                        where.setdefault(cls or var, module)
            elif words[0] != "__all__":
                where.setdefault(words[-1], module)  # `A as B` binds B
    return where


class _LazyInit:
    """The path finder's loader of a LAZY package, its __init__ held back (importlib.abc's base classes
    are not imported for this: 3 ms at start-up)."""

    def __init__(self, real: Any, origin: str | None) -> None:
        self.real = real
        self.origin = origin

    def __getattr__(self, name: str) -> Any:  # get_source, resource readers...: the real loader's
        return getattr(self.real, name)

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        package = module.__name__
        where = names_of(package, _read(self.origin), _source_of)
        ran: list[bool] = []

        def __getattr__(name: str) -> object:
            home = where.get(name)
            if home is not None and home != package:
                value = getattr(importlib.import_module(home), name)
                setattr(module, name, value)
                return value
            if not ran:  # a name the scan did not see (or __all__): the real __init__, once
                ran.append(True)
                self.real.exec_module(module)
                if name in module.__dict__:
                    return module.__dict__[name]
            raise AttributeError(f"module {package!r} has no attribute {name!r}")

        module.__getattr__ = __getattr__  # type: ignore[method-assign]
        if package == "kafka":
            # What kafka/__init__ does besides importing: no "No handler found" warnings from its loggers.
            import logging  # lazy: see docs/imports.md

            logging.getLogger("kafka").addHandler(logging.NullHandler())


def _source_of(module: str) -> str | None:
    parent, _, leaf = module.rpartition(".")
    path = getattr(sys.modules.get(parent), "__path__", None)
    spec = PathFinder.find_spec(module, path) if parent else PathFinder.find_spec(module)
    return spec.origin if spec is not None else None


class LazyKafkaFinder:
    """Finds LAZY's packages where the path finder does, loaded by _LazyInit."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
                  ) -> ModuleSpec | None:
        if fullname not in LAZY:
            return None
        spec = PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not spec.submodule_search_locations:
            return spec
        spec.loader = cast("Loader", _LazyInit(spec.loader, spec.origin))  # a loader by its two methods
        return spec


def install() -> None:
    """From now on, LAZY's packages imported in this process are lazy (one already imported stays as is)."""
    if not any(isinstance(f, LazyKafkaFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, LazyKafkaFinder())
