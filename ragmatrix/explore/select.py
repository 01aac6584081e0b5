"""pytest-style `-k` expressions over stored items: `minilm and q07`, `rag and not strict`,
`(bm25 or bow) and bounded`.

As in pytest, each word matches an item when it is a case-insensitive substring of one of its
names (its test id `test[model-case:variant]`, family, model, case, variant); `and`, `or`,
`not` and parentheses combine them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

Matcher = Callable[[Sequence[str]], bool]

_TOKEN = re.compile(r"\(|\)|[^\s()]+")
_OPERATORS = {"and", "or", "not"}


class ExpressionError(ValueError):
    """A `-k` expression that cannot be read; the message says where."""


def compile_expression(expression: str) -> Matcher:
    """A function of an item's names that says whether the expression selects it. An empty
    expression selects everything."""
    tokens = _TOKEN.findall(expression)
    if not tokens:
        return lambda names: True
    parser = _Parser(tokens, expression)
    matcher = parser.either()
    if parser.position != len(tokens):
        raise ExpressionError(f"-k {expression!r}: unexpected {tokens[parser.position]!r}")
    return matcher


class _Parser:
    """either := both ('or' both)*; both := negated ('and' negated)*;
    negated := 'not' negated | '(' either ')' | word."""

    def __init__(self, tokens: list[str], expression: str) -> None:
        self.tokens = tokens
        self.expression = expression
        self.position = 0

    def _peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def _take(self) -> str:
        token = self._peek()
        if token is None:
            raise ExpressionError(f"-k {self.expression!r}: the expression ends too soon")
        self.position += 1
        return token

    def either(self) -> Matcher:
        parts = [self.both()]
        while self._peek() == "or":
            self._take()
            parts.append(self.both())
        return parts[0] if len(parts) == 1 else (lambda names: any(part(names) for part in parts))

    def both(self) -> Matcher:
        parts = [self.negated()]
        while self._peek() == "and":
            self._take()
            parts.append(self.negated())
        return parts[0] if len(parts) == 1 else (lambda names: all(part(names) for part in parts))

    def negated(self) -> Matcher:
        token = self._take()
        if token == "not":
            inner = self.negated()
            return lambda names: not inner(names)
        if token == "(":
            inner = self.either()
            if self._take() != ")":
                raise ExpressionError(f"-k {self.expression!r}: a '(' is not closed")
            return inner
        if token == ")" or token in _OPERATORS:
            raise ExpressionError(f"-k {self.expression!r}: expected a name, found {token!r}")
        word = token.lower()
        return lambda names: any(word in name.lower() for name in names)
