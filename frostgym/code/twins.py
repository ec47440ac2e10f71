"""HumanEval twins: the same problem under new names, its docstring examples reordered.

Why: a model that memorised HumanEval recalls ``has_close_elements`` and its tests, not the
problem; under other names, with its examples in another order, recall has less to hold on
to while the problem stays the same one. The hidden tests and the canonical solution follow
the renames, so the oracle still passes every twin.

The rules (``twin_problem``):

- The entry point gets a new name (an adjective and a noun from fixed lists: ``amber_heron``)
  and each parameter another (a single letter for a single letter, a noun otherwise), drawn
  from the given RNG, never a keyword, a builtin, nor a name or word the problem's text,
  solution or tests use.
- Code is renamed by its syntax tree, never by searching text: each definition, use and
  call keyword of the entry point and of its parameters, scope by scope (a nested function,
  lambda or comprehension that binds the same name keeps its own), is located by the
  tree's positions and replaced in place, so the code keeps its layout and comments. The
  hidden tests' references to the entry point follow (``check`` calls ``candidate``).
- In the docstring, the ``>>>`` examples are code and renamed by their tree; their outputs
  are never touched. Prose is renamed word by word, and only where a name reads as an
  identifier: the entry point where it has an ``_``, a digit or a capital inside, is one
  letter, or is called (``fib(3)``); a parameter where it has an ``_`` or a digit or is at
  most three letters (``l``, ``arr``). A parameter named by an English word (``numbers``)
  keeps it in the prose, and one named ``a``, ``A`` or ``I`` keeps its name everywhere:
  prose uses those as words, and could not say which ``a`` is the parameter.
- Consecutive ``>>>`` examples that show an output are put in another order (a seeded
  shuffle, never the original one).
"""

from __future__ import annotations

import ast
import builtins
import itertools
import keyword
import random
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from frostgym.code.examples import visible_examples

ADJECTIVES = (
    "amber", "brisk", "calm", "dusky", "eager", "fabled", "gentle", "hazel", "ivory", "jolly", "keen", "lunar",
    "mellow", "nimble", "olive", "placid", "quiet", "rustic", "silver", "tidal", "umber", "vivid", "woolly", "zesty",
)  # fmt: skip
NOUNS = (
    "anchor", "badger", "beacon", "bramble", "canyon", "cobalt", "comet", "dune", "ember", "falcon", "fern",
    "glacier", "harbor", "heron", "juniper", "kestrel", "lantern", "larch", "meadow", "marble", "nectar", "orchid",
    "otter", "pebble", "quartz", "quill", "raven", "saffron", "sparrow", "thistle", "tundra", "walnut", "willow",
    "yarrow", "zephyr", "acorn", "basalt", "cedar", "delta", "fjord", "garnet", "hollow", "iris", "jasper", "kelp",
    "lichen", "mosaic", "nimbus",
)  # fmt: skip
#: Letters a single-letter parameter may become: none that reads as a word or as a digit.
LOWER_LETTERS = "bcdfghjkmnpqrstuvwxyz"
UPPER_LETTERS = "BCDFGHJKMNPQRSTUVWXYZ"
#: One-letter words of prose: a parameter so named keeps its name (the prose cannot say which
#: ``a`` is the parameter).
PROSE_LETTERS = frozenset("aAI")
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_EXAMPLE_PREFIX = re.compile(r"^(\s*)(>>>|\.\.\.)( ?)(.*?)(\r?\n)?$", re.DOTALL)


def twin_problem(problem: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    """The twin of a HumanEval ``problem`` (its ``task_id``, ``prompt``,
    ``canonical_solution``, ``test`` and ``entry_point``), renamed and reordered by the rules
    above with names drawn from ``rng``. Raises ``ValueError`` for a problem these rules
    cannot rename (code that does not parse, an entry point defined other than once)."""
    prompt, solution, test = str(problem["prompt"]), str(problem["canonical_solution"]), str(problem["test"])
    entry = str(problem["entry_point"])
    program = prompt + solution
    tree = _parse(program, problem)
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == entry]
    if len(defs) != 1:
        raise ValueError(f"{problem['task_id']}: the entry point {entry!r} is defined {len(defs)} times")
    function = defs[0]
    params = [a.arg for a in _arguments(function.args)]
    test_tree = _parse(test, problem)
    taken = _taken(program, test, tree, test_tree)
    new_entry = _fresh_entry(rng, taken)
    taken.add(new_entry)
    # each takes its name; one named as a word of prose ("a") keeps it, in prose and code alike
    renames = {name: _fresh_param(name, rng, taken) for name in params if name not in PROSE_LETTERS}

    edits = _code_edits(program, tree, function, entry, new_entry, renames)
    docstring = _docstring_span(program, function)
    if docstring is not None:
        start, end = docstring
        literal = program[start:end]
        edits.append(Edit(start, end, _twin_docstring(literal, entry, new_entry, renames, rng)))
    new_program, boundary = _apply(program, edits, len(prompt))
    new_test, _ = _apply(test, _code_edits(test, test_tree, None, entry, new_entry, {}), 0)
    twin = {
        "task_id": problem["task_id"],
        "prompt": new_program[:boundary],
        "canonical_solution": new_program[boundary:],
        "test": new_test,
        "entry_point": new_entry,
    }
    _check(problem, twin)
    return twin


# -- names -------------------------------------------------------------------------------


def _parse(source: str, problem: Mapping[str, Any]) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as error:
        raise ValueError(f"{problem['task_id']}: does not parse: {error}") from error


def _arguments(args: ast.arguments) -> list[ast.arg]:
    found = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    return found + [a for a in (args.vararg, args.kwarg) if a is not None]


def _taken(program: str, test: str, *trees: ast.Module) -> set[str]:
    """Every name a new name must not be: keywords, builtins, and each identifier or word
    of the problem's text, code and tests (compared in lower case)."""
    names = {*keyword.kwlist, *keyword.softkwlist, *dir(builtins), "candidate", "check"}
    for tree in trees:
        for node in ast.walk(tree):
            for attr in ("id", "arg", "name", "attr", "asname"):
                value = getattr(node, attr, None)
                if isinstance(value, str):
                    names.add(value)
    names.update(re.findall(r"\w+", program + "\n" + test))
    return {name.lower() for name in names}


def _fresh_entry(rng: random.Random, taken: set[str]) -> str:
    for _ in range(64):
        name = f"{rng.choice(ADJECTIVES)}_{rng.choice(NOUNS)}"
        if name.lower() not in taken:
            return name
    raise ValueError("no free name for the entry point")


def _fresh_param(old: str, rng: random.Random, taken: set[str]) -> str:
    """A new name for the parameter ``old``: a free letter of the same case for a single
    letter (a noun if none is free), else a free noun (with an adjective if none is)."""
    if len(old) == 1:
        letters = [c for c in (UPPER_LETTERS if old.isupper() else LOWER_LETTERS) if c.lower() not in taken]
        if letters:
            choice = rng.choice(letters)
            taken.add(choice.lower())
            return choice
    nouns = [n for n in NOUNS if n not in taken]
    choice = rng.choice(nouns) if nouns else f"{rng.choice(ADJECTIVES)}_{rng.choice(NOUNS)}"
    if choice in taken:
        raise ValueError("no free name for a parameter")
    taken.add(choice)
    return choice


# -- code, by its syntax tree ------------------------------------------------------------


@dataclass(frozen=True)
class Edit:
    """Replace ``source[start:end]`` by ``text`` (character offsets)."""

    start: int
    end: int
    text: str


class _Positions:
    """Character offsets of a source's (line, UTF-8 byte column) positions, as ``ast`` gives them."""

    def __init__(self, source: str) -> None:
        self.lines = source.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, line: int, byte_col: int) -> int:
        text = self.lines[line - 1] if line - 1 < len(self.lines) else ""
        return self.starts[line - 1] + len(text.encode("utf-8")[:byte_col].decode("utf-8"))


def _code_edits(
    source: str,
    tree: ast.Module,
    function: ast.FunctionDef | None,
    entry: str,
    new_entry: str,
    renames: Mapping[str, str],
) -> list[Edit]:
    """The edits that rename, in ``source`` (parsed as ``tree``), the module-level name
    ``entry`` wherever it is meant, and in ``function`` (the entry point's definition) its
    parameters as ``renames`` says: their definitions, their uses, and the keywords of calls
    to the entry point. Raises ``ValueError`` where a position does not hold the name."""
    at = _Positions(source)
    edits: list[Edit] = []

    def rename(line: int, col: int, old: str, new: str) -> None:
        start = at.offset(line, col)
        if source[start : start + len(old)] != old:
            raise ValueError(f"the syntax tree puts {old!r} at line {line}, column {col}, where it is not")
        edits.append(Edit(start, start + len(old), new))

    # The entry point is the module's name, where it is defined (the program) and where it
    # is not (the tests, an example: the harness binds it).
    for node, owner in _resolved(tree, dict.fromkeys(_bound_in(tree) | {entry}, tree)):
        if isinstance(node, ast.Name):
            if owner is tree and node.id == entry:
                rename(node.lineno, node.col_offset, entry, new_entry)
            elif function is not None and owner is function and node.id in renames:
                rename(node.lineno, node.col_offset, node.id, renames[node.id])
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == entry:
            for kw in node.keywords:
                if kw.arg is not None and kw.arg in renames and owner is tree:
                    rename(kw.lineno, kw.col_offset, kw.arg, renames[kw.arg])
    if function is not None:
        line = at.lines[function.lineno - 1]
        column = at.offset(function.lineno, function.col_offset) - at.starts[function.lineno - 1]
        found = re.compile(rf"def\s+({re.escape(entry)})\b").search(line, column)
        if found is None:
            raise ValueError(f"no 'def {entry}' on line {function.lineno}")
        start = at.starts[function.lineno - 1] + found.start(1)
        edits.append(Edit(start, start + len(entry), new_entry))
        for arg in _arguments(function.args):
            if arg.arg in renames:
                rename(arg.lineno, arg.col_offset, arg.arg, renames[arg.arg])
    return edits


def _bound_in(scope: ast.AST) -> set[str]:
    """The names ``scope`` (a module, function, lambda or comprehension) binds itself: its
    parameters or targets, and every name stored, defined or imported in its body outside
    nested scopes (``global`` and ``nonlocal`` names are not its own)."""
    bound: set[str] = set()
    foreign: set[str] = set()
    if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
        bound.update(a.arg for a in _arguments(scope.args))
        roots: list[ast.AST] = list(scope.body) if isinstance(scope.body, list) else [scope.body]
    elif isinstance(scope, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
        roots = [g.target for g in scope.generators]
    else:
        roots = [scope]
    stack = list(roots)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            bound.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
            stack.extend([*node.decorator_list, *_defaults(node)])
            continue
        elif isinstance(node, ast.Import | ast.ImportFrom):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            foreign.update(node.names)
        if node is not scope and isinstance(node, _SCOPES):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return bound - foreign


def _defaults(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef) -> list[ast.AST]:
    if isinstance(node, ast.ClassDef):
        return [*node.bases, *node.keywords]
    return [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]


def _resolved(node: ast.AST, scope: Mapping[str, ast.AST]) -> Iterator[tuple[ast.AST, ast.AST | None]]:
    """``node`` and every node under it, each ``ast.Name`` with the scope that binds its id
    and each call of a name with the scope that binds that name (None: a builtin, or
    unbound). ``scope`` maps the names visible at ``node`` to the scopes that bind them."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
        outside = _defaults(node)
        if not isinstance(node, ast.Lambda):
            outside += [*node.decorator_list, *(a.annotation for a in _arguments(node.args) if a.annotation)]
            outside += [node.returns] if node.returns is not None else []
        for part in outside:
            yield from _resolved(part, scope)
        inner = {**scope, **dict.fromkeys(_bound_in(node), node)}
        for part in node.body if isinstance(node.body, list) else [node.body]:
            yield from _resolved(part, inner)
        return
    if isinstance(node, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
        yield from _resolved(node.generators[0].iter, scope)  # evaluated in the enclosing scope
        inner = {**scope, **dict.fromkeys(_bound_in(node), node)}
        parts: list[ast.AST] = [g.target for g in node.generators]
        parts += [g.iter for g in node.generators[1:]] + [c for g in node.generators for c in g.ifs]
        parts += [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        for part in parts:
            yield from _resolved(part, inner)
        return
    if isinstance(node, ast.Name):
        yield node, scope.get(node.id)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        yield node, scope.get(node.func.id)
    for child in ast.iter_child_nodes(node):
        yield from _resolved(child, scope)


def _docstring_span(source: str, function: ast.FunctionDef) -> tuple[int, int] | None:
    """Where the literal of ``function``'s docstring is in ``source``, or None without one."""
    first = function.body[0] if function.body else None
    if not (
        isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)
    ):
        return None
    node = first.value
    if node.end_lineno is None or node.end_col_offset is None:
        return None
    at = _Positions(source)
    return at.offset(node.lineno, node.col_offset), at.offset(node.end_lineno, node.end_col_offset)


def _apply(source: str, edits: Sequence[Edit], boundary: int) -> tuple[str, int]:
    """``source`` with ``edits`` made, and where ``boundary`` (an offset no edit spans) went.
    Raises ``ValueError`` for overlapping edits."""
    ordered = sorted(edits, key=lambda e: e.start)
    for before, after in itertools.pairwise(ordered):
        if after.start < before.end:
            raise ValueError(f"overlapping renames at {before.start} and {after.start}")
    parts, last, shift = [], 0, 0
    for edit in ordered:
        parts += [source[last : edit.start], edit.text]
        last = edit.end
        if edit.end <= boundary:
            shift += len(edit.text) - (edit.end - edit.start)
        elif edit.start < boundary:
            raise ValueError("an edit spans the boundary between prompt and solution")
    parts.append(source[last:])
    return "".join(parts), boundary + shift


# -- the docstring -----------------------------------------------------------------------


def _twin_docstring(literal: str, entry: str, new_entry: str, renames: Mapping[str, str], rng: random.Random) -> str:
    """The docstring literal with its examples reordered, their code renamed by its tree and
    its prose by the word rules."""
    prefix = re.match(r"[rRuU]?(\"\"\"|'''|\"|')", literal)
    if prefix is None or not literal.endswith(prefix.group(1)):
        raise ValueError(f"not a string literal: {literal[:40]!r}")
    head, tail = prefix.group(0), prefix.group(1)
    lines = _reordered(literal[len(head) : len(literal) - len(tail)].splitlines(keepends=True), rng)
    kinds = _line_kinds(lines)
    out: list[str] = []
    index = 0
    while index < len(lines):
        if kinds[index] == "source":
            end = index + 1
            while end < len(lines) and kinds[end] == "continuation":
                end += 1
            out += _renamed_example(lines[index:end], entry, new_entry, renames)
            index = end
            continue
        out.append(
            lines[index] if kinds[index] == "output" else _renamed_prose(lines[index], entry, new_entry, renames)
        )
        index += 1
    return head + "".join(out) + tail


def _line_kinds(lines: Sequence[str]) -> list[str]:
    """Each docstring line's kind: ``source`` (``>>>``), ``continuation`` (``...`` after a
    source line), ``output`` (after an example's source, until a blank line) or ``prose``."""
    kinds: list[str] = []
    for line in lines:
        stripped = line.strip()
        previous = kinds[-1] if kinds else "prose"
        if stripped.startswith(">>>"):
            kinds.append("source")
        elif stripped.startswith("...") and previous in ("source", "continuation"):
            kinds.append("continuation")
        elif stripped and previous in ("source", "continuation", "output"):
            kinds.append("output")
        else:
            kinds.append("prose")
    return kinds


def _reordered(lines: list[str], rng: random.Random) -> list[str]:
    """``lines`` with each run of consecutive examples that show an output shuffled (never
    into the order it had); an example without output (an assignment) ends a run."""
    kinds = _line_kinds(lines)
    blocks: list[tuple[int, int]] = []  # [start, end) of each example with output
    index = 0
    while index < len(lines):
        if kinds[index] != "source":
            index += 1
            continue
        end = index + 1
        while end < len(lines) and kinds[end] in ("continuation", "output"):
            end += 1
        if "output" in kinds[index:end]:
            blocks.append((index, end))
        index = end
    runs: list[list[tuple[int, int]]] = []
    for block in blocks:
        if runs and runs[-1][-1][1] == block[0]:
            runs[-1].append(block)
        else:
            runs.append([block])
    result = list(lines)
    for run in runs:
        if len(run) < 2:
            continue
        order = list(range(len(run)))
        rng.shuffle(order)
        if order == sorted(order):
            order = order[1:] + order[:1]
        texts = ["".join(lines[start:end]) for start, end in run]
        newline_at_end = texts[-1].endswith("\n")
        texts = [text if text.endswith("\n") else text + "\n" for text in texts]
        joined = "".join(texts[i] for i in order)
        if not newline_at_end:
            joined = joined[:-1]
        start, end = run[0][0], run[-1][1]
        result[start:end] = joined.splitlines(keepends=True)
    return result


def _renamed_example(lines: Sequence[str], entry: str, new_entry: str, renames: Mapping[str, str]) -> list[str]:
    """An example's source lines (``>>>`` and ``...``) renamed by the tree of their code: the
    entry point, and the keywords of calls to it; prose rules if the code does not parse."""
    parts = [_EXAMPLE_PREFIX.match(line) for line in lines]
    if any(part is None for part in parts):
        return [_renamed_prose(line, entry, new_entry, renames) for line in lines]
    code = "\n".join(part.group(4) for part in parts if part is not None)
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return [_renamed_prose(line, entry, new_entry, renames) for line in lines]
    renamed, _ = _apply(code, _code_edits(code, tree, None, entry, new_entry, renames), 0)
    return [
        f"{part.group(1)}{part.group(2)}{part.group(3)}{text}{part.group(5) or ''}"
        for part, text in zip(parts, renamed.split("\n"), strict=True)
        if part is not None
    ]


def _renamed_prose(line: str, entry: str, new_entry: str, renames: Mapping[str, str]) -> str:
    """A prose line with the names that read as identifiers renamed, as whole words, outside
    quoted literals (a quoted name alone is renamed)."""
    quoted = [m.span() for m in re.finditer(r"(?<!\w)(['\"])[^'\"\n]*\1(?!\w)", line)]
    patterns: list[tuple[re.Pattern[str], str]] = []
    entry_word = _word(entry)
    patterns.append((re.compile(entry_word if _reads_as_identifier(entry) else entry_word + r"(?=\s*\()"), new_entry))
    for old, new in renames.items():
        if _reads_as_identifier(old) or len(old) <= 3:
            patterns.append((re.compile(_word(old)), new))
    edits: list[Edit] = []
    for pattern, new in patterns:
        for found in pattern.finditer(line):
            inside = [(start, end) for start, end in quoted if start <= found.start() < end]
            # a quoted name alone ('arr') is the name; other quoted text is a value, kept
            if not inside or inside[0] == (found.start() - 1, found.end() + 1):
                edits.append(Edit(found.start(), found.end(), new))
    return _apply(line, edits, 0)[0]


def _word(name: str) -> str:
    """``name`` as a whole word: not inside another word, a contraction (``it's``) or an
    abbreviation (``e.g.``)."""
    return rf"(?<![\w.])(?<!\w')\b{re.escape(name)}\b(?!\.\w)"


def _reads_as_identifier(name: str) -> bool:
    return len(name) == 1 or "_" in name or any(c.isdigit() for c in name) or any(c.isupper() for c in name[1:])


def _check(problem: Mapping[str, Any], twin: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` unless the twin parses, defines its entry point and keeps as many
    runnable examples as the problem."""
    _parse(str(twin["prompt"]) + str(twin["canonical_solution"]), problem)
    _parse(str(twin["test"]), problem)
    before = visible_examples(str(problem["prompt"]), str(problem["entry_point"]))
    after = visible_examples(str(twin["prompt"]), str(twin["entry_point"]))
    if len(before) != len(after) or sorted(want for _, want in before) != sorted(want for _, want in after):
        raise ValueError(f"{problem['task_id']}: the twin's examples differ from the problem's")
