"""Lazy re-exports for the ``fleet_*`` packages (PEP 562).

Ansible imports every filter plugin in each worker process; a package ``__init__`` that imported all its
submodules made each filter pay for the whole package (the planner, every inventory check) though it
needs one module. A package built with ``lazy_exports`` imports a submodule when one of its names is
first read (``from ..fleet_planner import plan``, ``fleet_planner.plan``, ``import *``), then keeps it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def lazy_exports(
    namespace: dict[str, Any], exports: Mapping[str, Iterable[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for the package whose ``globals()`` is ``namespace``;
    ``exports``: submodule -> the names it gives.

    A name that is none of the exports but a submodule is that submodule, as when ``__init__`` imported
    it (``fleet_validate.cross``)."""
    where = {name: module for module, names in exports.items() for name in names}
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is not None:
            value = getattr(importlib.import_module(f"{package}.{module}"), name)
            namespace[name] = value  # later reads are plain attribute reads
            return value
        if name.startswith("__"):
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        try:
            return importlib.import_module(f"{package}.{name}")
        except ModuleNotFoundError as missing:
            if missing.name != f"{package}.{name}":
                raise  # the submodule exists and lacks something it imports
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None

    def __dir__() -> list[str]:
        return sorted({*namespace, *where})

    return __getattr__, __dir__
