"""Which Python version a file's syntax needs, when the running interpreter cannot parse it: a token
scan for constructs each grammar version added (``def f[T](x)`` on 3.11), run only after a parse
failure.
"""

from __future__ import annotations

import sys
import tokenize
from collections.abc import Iterator
from io import StringIO
from typing import NamedTuple

_TEMPLATE_PREFIXES = frozenset({"t", "tr", "rt"})
_STATEMENT_START = frozenset({tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT})


class NewerSyntax(NamedTuple):
    """A construct of a newer grammar than the running interpreter's."""

    version: tuple[int, int]
    feature: str
    line: int

    def describe(self, running: tuple[int, int] | None = None) -> str:
        """``needs Python 3.12+ (PEP 695 type parameter list, line 11); ...``."""
        major, minor = running or sys.version_info[:2]
        return (
            f"needs Python {self.version[0]}.{self.version[1]} or later "
            f"({self.feature}, line {self.line}); the checker runs on Python {major}.{minor}, "
            "whose parser cannot read it"
        )


def _significant(text: str) -> Iterator[tokenize.TokenInfo]:
    try:
        for tok in tokenize.generate_tokens(StringIO(text).readline):
            if tok.type not in (tokenize.NL, tokenize.COMMENT):
                yield tok
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return


def _unbalanced_fstring(tok: tokenize.TokenInfo) -> bool:
    """An f-string token that ends inside a replacement field: a quote reused inside it
    (``f"{d["k"]}"``), which only PEP 701 (Python 3.12) allows."""
    text = tok.string
    quote = min((i for i in (text.find("'"), text.find('"')) if i >= 0), default=-1)
    if quote <= 0 or "f" not in text[:quote].lower():
        return False
    depth = 0
    body = text[quote:]
    i = 0
    while i < len(body):
        c = body[i]
        if c in "{}" and body[i : i + 2] in ("{{", "}}") and depth == 0:
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}" and depth:
            depth -= 1
        i += 1
    return depth > 0


def scan(text: str) -> list[NewerSyntax]:
    """Every construct newer than Python 3.10 found in ``text``, in source order."""
    found: list[NewerSyntax] = []
    tokens = list(_significant(text))
    at_start = True
    for i, tok in enumerate(tokens):
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        after = tokens[i + 2] if i + 2 < len(tokens) else None
        line = tok.start[0]
        if tok.type == tokenize.NAME and nxt is not None:
            word = tok.string
            if word in ("def", "class") and after is not None and after.string == "[":
                found.append(NewerSyntax((3, 12), "PEP 695 type parameter list", line))
                if _has_default(tokens, i + 2):
                    found.append(NewerSyntax((3, 13), "PEP 696 type parameter default", line))
            elif (
                word == "type"
                and at_start
                and nxt.type == tokenize.NAME
                and after is not None
                and after.string in ("=", "[")
            ):
                found.append(NewerSyntax((3, 12), "PEP 695 type alias statement", line))
            elif word == "except" and nxt.string == "*":
                found.append(NewerSyntax((3, 11), "PEP 654 except* clause", line))
            elif word == "except" and _bare_tuple(tokens, i + 1):
                found.append(NewerSyntax((3, 14), "PEP 758 except without parentheses", line))
            elif (
                word.lower() in _TEMPLATE_PREFIXES
                and nxt.type == tokenize.STRING
                and nxt.start == tok.end
            ):
                found.append(NewerSyntax((3, 14), "PEP 750 template string", line))
        elif tok.type == tokenize.STRING and _unbalanced_fstring(tok):
            found.append(NewerSyntax((3, 12), "PEP 701 f-string syntax", line))
        elif (
            tok.string == "["
            and nxt is not None
            and nxt.string == "*"
            and i > 0
            and (tokens[i - 1].type == tokenize.NAME or tokens[i - 1].string in (")", "]"))
        ):
            found.append(NewerSyntax((3, 11), "PEP 646 star expression in a subscript", line))
        at_start = tok.type in _STATEMENT_START
    return found


def _has_default(tokens: list[tokenize.TokenInfo], open_index: int) -> bool:
    """``[T = int]``: an ``=`` at the top level of the bracket opened at ``open_index``."""
    depth = 0
    for tok in tokens[open_index:]:
        if tok.string in "([{" and tok.type == tokenize.OP:
            depth += 1
        elif tok.string in ")]}" and tok.type == tokenize.OP:
            depth -= 1
            if depth == 0:
                return False
        elif tok.string == "=" and depth == 1:
            return True
    return False


def _bare_tuple(tokens: list[tokenize.TokenInfo], start: int) -> bool:
    """``except A, B:``: a top-level comma before the colon, and no ``as``."""
    depth = 0
    comma = False
    for tok in tokens[start:]:
        if tok.type != tokenize.OP and tok.type != tokenize.NAME:
            return False
        if tok.string in "([{":
            depth += 1
        elif tok.string in ")]}":
            depth -= 1
        elif depth == 0 and tok.string == ",":
            comma = True
        elif depth == 0 and tok.string == "as":
            return False
        elif depth == 0 and tok.string == ":":
            return comma
    return False


def newer_syntax(text: str, running: tuple[int, int] | None = None) -> NewerSyntax | None:
    """The construct that needs the newest Python above ``running`` (default: this
    interpreter), or ``None`` when the file uses none (an ordinary syntax error)."""
    current = running or sys.version_info[:2]
    newer = [f for f in scan(text) if f.version > current]
    return max(newer, key=lambda f: f.version, default=None)  # the first of the newest
