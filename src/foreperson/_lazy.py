"""Names a package exports but imports only on first use (PEP 562 module ``__getattr__``),
so that importing a package does not pay for the subpackages a program never touches."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, namespace: dict[str, Any], homes: Mapping[str, tuple[str, ...]]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package``.

    Args:
        package: the package's ``__name__``.
        namespace: its ``globals()`` (a name, once imported, is kept there, so the next
            lookup costs nothing).
        homes: relative module name (``".work"``) to the names imported from it.

    Returns:
        ``(__getattr__, __dir__)``; ``__getattr__`` raises AttributeError for a name not
        in ``homes``, as Python does.
    """
    home_of = {name: module for module, names in homes.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = home_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *home_of})

    return __getattr__, __dir__
