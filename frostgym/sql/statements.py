"""Reading the shape of a SQL string without executing it: comments and literals
masked, statements counted, the leading keyword, and whether the outermost query
orders its rows (which decides whether the grader compares lists or multisets)."""

from __future__ import annotations

import re

_WORD = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


def mask(sql: str) -> str:
    """``sql`` with comments, string literals and quoted identifiers replaced by spaces
    (same length), so keywords inside them are never mistaken for structure."""
    out = list(sql)
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch == "-" and sql.startswith("--", i):
            end = sql.find("\n", i)
            end = n if end < 0 else end
        elif ch == "/" and sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            end = n if end < 0 else end + 2
        elif ch in "'\"`[":
            close = "]" if ch == "[" else ch
            end = i + 1
            while end < n:
                if sql[end] == close:
                    if close != "]" and end + 1 < n and sql[end + 1] == close:  # doubled quote escapes
                        end += 2
                        continue
                    end += 1
                    break
                end += 1
        else:
            i += 1
            continue
        for k in range(i, end):
            if out[k] != "\n":
                out[k] = " "
        # keep quotes' positions visible as a placeholder token so "x='a'" still has a value
        if ch in "'\"`[" and end - i >= 2:
            out[i] = "?"
        i = end
    return "".join(out)


def statements(sql: str) -> list[str]:
    """The non-empty statements in ``sql``, split on semicolons outside literals and comments."""
    masked = mask(sql)
    parts, start = [], 0
    for i, ch in enumerate(masked):
        if ch == ";":
            parts.append((start, i))
            start = i + 1
    parts.append((start, len(sql)))
    return [sql[a:b].strip() for a, b in parts if masked[a:b].strip()]


def leading_keyword(sql: str) -> str:
    m = _WORD.search(mask(sql))
    return m.group(0).upper() if m else ""


def orders_rows(sql: str) -> bool:
    """True when the outermost query has ORDER BY (at parenthesis depth 0)."""
    masked = mask(sql)
    depth = 0
    previous = ""
    for m in re.finditer(r"[()]|[A-Za-z_][A-Za-z_0-9]*", masked):
        token = m.group(0)
        if token == "(":
            depth += 1
        elif token == ")":
            depth = max(0, depth - 1)
        elif depth == 0:
            upper = token.upper()
            if previous == "ORDER" and upper == "BY":
                return True
            previous = upper
    return False
