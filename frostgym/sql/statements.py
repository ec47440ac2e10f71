"""Reading the shape of a SQL string without executing it: comments and literals
masked, statements counted, the leading keyword, and whether the outermost query
orders its rows (which decides whether the grader compares lists or multisets)."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

_WORD = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


_LITERAL_OR_COMMENT = re.compile(
    r"--[^\n]*"  # line comment
    r"|/\*.*?(?:\*/|\Z)"  # block comment, possibly unclosed
    r"|'(?:[^']|'')*'?"  # string literal ('' escapes a quote), possibly unclosed
    r'|"(?:[^"]|"")*"?'  # quoted identifier
    r"|`[^`]*`?|\[[^\]]*\]?",  # MySQL- and MSSQL-style identifiers, which SQLite accepts
    re.DOTALL,
)
_NOT_NEWLINE = re.compile(r"[^\n]")


def _blank(m: re.Match[str]) -> str:
    text = m.group(0)
    # A quoted token keeps a placeholder so "x = 'a'" still has a value in it.
    head = "?" if text[0] in "'\"`[" else _NOT_NEWLINE.sub(" ", text[0])
    return head + _NOT_NEWLINE.sub(" ", text[1:])


def mask(sql: str) -> str:
    """``sql`` with comments, string literals and quoted identifiers replaced by spaces
    (same length, newlines kept), so keywords inside them are never mistaken for structure."""
    return _LITERAL_OR_COMMENT.sub(_blank, sql)


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


@dataclass(frozen=True)
class Token:
    text: str  # an upper-cased word, or ","
    start: int
    end: int


_TOKEN = re.compile(r"[(),]|[A-Za-z_][A-Za-z_0-9]*")


def top_level_tokens(sql: str) -> list[Token]:
    """Words and commas of the outermost query: outside parentheses, literals and comments."""
    out: list[Token] = []
    depth = 0
    for m in _TOKEN.finditer(mask(sql)):
        token = m.group(0)
        if token == "(":
            depth += 1
        elif token == ")":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(Token(token.upper(), m.start(), m.end()))
    return out


def orders_rows(sql: str) -> bool:
    """True when the outermost query has ORDER BY (at parenthesis depth 0)."""
    words = [t.text for t in top_level_tokens(sql)]
    return any(a == "ORDER" and b == "BY" for a, b in itertools.pairwise(words))


#: Statements that change a database or the files around it: what a read-only task must
#: never send, whether or not the connection would have run it.
WRITE_KEYWORDS = frozenset(
    {
        "INSERT",
        "UPDATE",
        "DELETE",
        "REPLACE",
        "UPSERT",
        "MERGE",
        "TRUNCATE",
        "DROP",
        "ALTER",
        "CREATE",
        "ATTACH",
        "DETACH",
        "VACUUM",
        "REINDEX",
    }
)
#: Functions that write files or load code into the database process: an escape attempt
#: from the SQL sandbox even inside a SELECT.
ESCAPE_FUNCTIONS = frozenset({"load_extension", "writefile", "edit", "fts3_tokenizer", "sqlar_compress"})
#: The verbs a statement after ``WITH``'s common table expressions can have.
_MAIN_VERBS = frozenset({"SELECT", "VALUES", "INSERT", "UPDATE", "DELETE", "REPLACE"})
_FUNCTION_CALL = re.compile(r"\b([A-Za-z_][A-Za-z_0-9]*)\s*\(")
_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")


def unfenced(sql: str) -> str:
    """``sql`` without a Markdown code fence around it (```` ```sql … ``` ````), stripped."""
    return _FENCE.sub("", sql.strip()).strip()


def unsafe_reason(sql: str) -> str | None:
    """Why ``sql`` would change the database or escape it, or None when it only reads.

    Every statement counts, so ``SELECT 1; DROP TABLE t`` is unsafe though it never runs:
    a statement whose verb is in ``WRITE_KEYWORDS`` (``WITH … DELETE`` included: the verb
    after the common table expressions), a ``PRAGMA`` that sets a value (``PRAGMA x = 1``),
    or a call to one of ``ESCAPE_FUNCTIONS``. Keywords and calls inside
    literals, comments and quoted identifiers are not read. A reading ``PRAGMA``
    (``PRAGMA table_info(t)``) is safe, and a Markdown fence around the query is read through."""
    for statement in statements(unfenced(sql)):
        words = [t.text for t in top_level_tokens(statement)]
        verb = words[0] if words else ""
        if verb == "WITH":
            verb = next((w for w in words[1:] if w in _MAIN_VERBS), "WITH")
        if verb in WRITE_KEYWORDS:
            return f"{verb} statement"
        masked = mask(statement)
        if verb == "PRAGMA" and "=" in masked:
            return "PRAGMA that sets a value"
        for call in _FUNCTION_CALL.finditer(masked):
            if call.group(1).lower() in ESCAPE_FUNCTIONS:
                return f"call to {call.group(1).lower()}()"
    return None
