"""Re-exports that import their module on first use (PEP 562's module ``__getattr__``).

Why: a package's front door names its small public API (``frostgym.run_to_card``,
``frostgym.cards.load_card``), but ``import frostgym`` must stay cheap (it only registers
the ids): the modules behind those names import agents, cards and numpy-heavy views. A
package lists its exports once, as ``name -> module``, and gets the two hooks Python calls.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: attribute ``name`` is ``exports[name]``'s
    attribute of that name, imported when first asked for (``AttributeError`` for another)."""

    def getattr_(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    def dir_() -> list[str]:
        return sorted(exports)

    return getattr_, dir_
