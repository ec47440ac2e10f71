"""The package's layering, read from the source: ``core`` is the ground floor and no two
units import each other, directly or round a cycle.

A unit is a top-level subpackage (``frostgym.core``, ``frostgym.graders``, ...) or a
top-level module (``frostgym.run.runner``, ``frostgym.train.vector``, ...). Every import statement in
every module counts, wherever it is: module level, inside a function (a lazy import is
still a dependency), and under ``if TYPE_CHECKING:`` (a type-only import that closes a
cycle says the layering is wrong just the same). Relative imports are resolved against the
importing module. The package's ``__init__`` (``import frostgym`` registers the ids) is
the front door and may import any unit; no unit may import it back.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "frostgym"
ROOT = "frostgym"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _imported(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """``(absolute name, line)`` of everything ``module`` imports from anywhere: a name
    imported from a package (``from frostgym.tools import calls``) is given as
    ``package.name``; the caller decides whether that is a module or an attribute."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = module.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                yield (f"{base}.{alias.name}" if alias.name != "*" else base), node.lineno
            yield base, node.lineno


def _unit(name: str, modules: dict[str, Path]) -> str | None:
    """The unit a name belongs to (``frostgym`` itself for the package root), or None
    outside the package."""
    parts = name.split(".")
    if parts[0] != ROOT:
        return None
    if len(parts) == 1:
        return ROOT
    unit = f"{ROOT}.{parts[1]}"
    return unit if unit in modules else ROOT  # ``from frostgym import Grade``: the root


def _edges() -> dict[tuple[str, str], list[str]]:
    """``(unit, unit it imports)`` -> where: ``module:line imports name`` for each import."""
    modules = _modules()
    edges: dict[tuple[str, str], list[str]] = {}
    for module, path in modules.items():
        source = _unit(module, modules)
        assert source is not None
        for name, line in _imported(module, path):
            target = _unit(name, modules)
            if target is None or target == source:
                continue
            edges.setdefault((source, target), []).append(f"{module}:{line} imports {name}")
    return edges


def _cycle(edges: dict[tuple[str, str], list[str]]) -> list[str] | None:
    """One cycle between units, as the list of units round it (first == last), or None."""
    graph: dict[str, list[str]] = {}
    for source, target in edges:
        graph.setdefault(source, []).append(target)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(unit: str) -> list[str] | None:
        state[unit] = 1
        path.append(unit)
        for target in sorted(graph.get(unit, [])):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (found := visit(target)):
                return found
        path.pop()
        state[unit] = 2
        return None

    for unit in sorted(graph):
        if unit not in state and (found := visit(unit)):
            return found
    return None


def test_the_reader_sees_every_kind_of_import() -> None:
    """The reader itself: function-local, TYPE_CHECKING and relative imports all count."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "__init__.py"
        path.write_text(
            "from typing import TYPE_CHECKING\n"
            "from . import calls\n"
            "from ..core import env\n"
            "if TYPE_CHECKING:\n"
            "    import frostgym.cards.card\n"
            "def f():\n"
            "    from frostgym.run.runner import run_plan\n",
            encoding="utf-8",
        )
        names = {name for name, _ in _imported("frostgym.tools.http", path)}
    assert {
        "frostgym.tools.http.calls",
        "frostgym.tools.core.env",
        "frostgym.cards.card",
        "frostgym.run.runner.run_plan",
    } <= names
    assert _cycle({("a", "b"): [], ("b", "c"): [], ("c", "a"): []}) == ["a", "b", "c", "a"]
    assert _cycle({("a", "b"): [], ("b", "c"): []}) is None


def test_core_imports_nothing_above_it() -> None:
    upward = [
        where
        for (source, target), places in sorted(_edges().items())
        if source == f"{ROOT}.core" and target != source
        for where in places
    ]
    assert not upward, "frostgym.core imports from above it:\n  " + "\n  ".join(upward)


def test_no_unit_imports_the_package_root() -> None:
    back = [where for (source, target), places in sorted(_edges().items()) if target == ROOT for where in places]
    assert not back, "import the unit, not the package root:\n  " + "\n  ".join(back)


def test_no_cycle_between_units() -> None:
    edges = _edges()
    cycle = _cycle({edge: places for edge, places in edges.items() if ROOT not in edge})
    if cycle:
        steps = [
            f"{source} -> {target}: " + "; ".join(edges[(source, target)][:3])
            for source, target in itertools.pairwise(cycle)
        ]
        raise AssertionError("import cycle " + " -> ".join(cycle) + "\n  " + "\n  ".join(steps))


#: The floors of the house, lowest first: a unit imports only units on floors below its own.
#: The pipeline reads upwards: tasks and envs, a run (plan, runner, backends), its card (the
#: on-disk format), evaluation over cards, then comparing and reporting; training sits beside
#: evaluation, on the run; the trainers' reader of cards (``integrations``) above the card. A new
#: unit is given its floor here.
FLOORS: dict[str, int] = {
    "version": 0,
    "core": 0,
    "sandbox": 1,
    "sql": 1,
    "tools": 1,
    "customer": 1,
    "agents": 1,
    "models": 2,
    "code": 2,
    "graders": 3,
    "envs": 4,
    "serve": 5,
    "run": 6,
    "cards": 7,
    "contamination": 7,
    "train": 7,
    "integrations": 8,
    "evaluate": 8,
    "compare": 8,
    "export": 8,
    "report": 9,
    "commands": 10,
    "cli": 11,
}


def test_every_import_goes_down_a_floor() -> None:
    modules = _modules()
    units = {unit.split(".")[1] for unit in (_unit(m, modules) for m in modules) if unit and unit != ROOT}
    assert sorted(units - set(FLOORS)) == [], "give each new unit its floor in FLOORS"
    upward = [
        f"{source} (floor {FLOORS[s]}) -> {target} (floor {FLOORS[t]}): {places[0]}"
        for (source, target), places in sorted(_edges().items())
        if ROOT not in (source, target)
        for s, t in [(source.split(".")[1], target.split(".")[1])]
        if FLOORS[t] >= FLOORS[s]
    ]
    assert not upward, "imports that do not go down a floor:\n  " + "\n  ".join(upward)


def test_the_top_level_holds_stages_not_loose_modules() -> None:
    loose = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "version", "cli"))
    assert loose == [], f"modules loose in frostgym/: put them in the stage they belong to: {loose}"
