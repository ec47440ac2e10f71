"""The visible examples of a problem: the ``>>>`` lines of its docstring.

Only examples that call the entry point and whose expected output is a Python literal
are kept, as ``(call, expected)`` source pairs; prose examples ("f(3) ==> 5") are left
to the reader. These are what the ``run_tests`` tool runs; the hidden tests stay hidden.
"""

from __future__ import annotations

import ast
import doctest


def visible_examples(prompt: str, entry_point: str) -> list[tuple[str, str]]:
    examples: list[tuple[str, str]] = []
    try:
        parsed = doctest.DocTestParser().get_examples(prompt)
    except ValueError:
        return examples
    for example in parsed:
        call = example.source.strip()
        # A docstring's closing quotes at the example's indentation read as output.
        want_lines = []
        for line in example.want.splitlines():
            if line.strip().startswith(('"""', "'''")):
                break
            want_lines.append(line)
        want = "\n".join(want_lines).strip()
        if entry_point not in call or not want:
            continue
        try:
            tree = ast.parse(call, mode="eval")
            ast.literal_eval(want)
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            continue
        if any(isinstance(node, ast.Name) and node.id == entry_point for node in ast.walk(tree)):
            examples.append((call, want))
    return examples
