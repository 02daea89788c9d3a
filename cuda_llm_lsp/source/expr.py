"""Size expressions of test specs: a tiny arithmetic language, parsed and evaluated safely.

Specs come from users (and edits by LLMs), so they are never handed to `eval` or to Python's
`ast`: a hand-written tokenizer and precedence-climbing parser build a small tree, and the
evaluator only knows the operators below.

Grammar (lowest precedence first)::

    expr    := term (('+' | '-') term)*
    term    := unary (('*' | '/' | '%') unary)*
    unary   := ('-' | '+') unary | primary
    primary := NUMBER | NAME | NAME '(' expr (',' expr)* ')' | '(' expr ')'

Conditions (`parse_condition`, the spec's `restrict` list) add one comparison on top::

    condition := expr (('<' | '<=' | '>' | '>=' | '==' | '!=') expr)?

evaluating to 1 (true) or 0 (false); `parse_expr` refuses comparison operators, so a grid or a
size is never a truth value.

Numbers are integer literals (`1048576`, `1_000`) or float literals (`0.5`, `1e-3`, `.5`).
Functions: `cdiv(a, b)` (ceiling division), `min(a, ...)`, `max(a, ...)`.

Division follows C, because these expressions mirror the launch code users write in C/C++:
with two integer operands `/` truncates toward zero and `%` takes the sign of the dividend
(`-7 / 2 == -3`, `-7 % 2 == -1`); if either operand is a float, `/` is true division and `%` is
C's `fmod`. `cdiv(a, b)` is the mathematical ceiling of a / b (for integers). Division or
modulo by zero raises `ExprError`, and so does any value that is not finite (`1e400`,
`1e308 * 10`, their difference): a launch size never is, and infinity or NaN would otherwise
fail later, far from the spec line, as OverflowError or ValueError.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

Number = int | float

FUNCTIONS: dict[str, tuple[int, int | None]] = {"cdiv": (2, 2), "min": (1, None), "max": (1, None)}


class ExprError(ValueError):
    """A problem in an expression; `column` is 0-based within the expression text."""

    def __init__(self, message: str, column: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.column = column


@dataclass(frozen=True)
class _Token:
    kind: str  # "int", "float", "name", "op", "end"
    text: str
    column: int


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if ch.isdigit() or (ch == "." and i + 1 < n and text[i + 1].isdigit()):
            start = i
            while i < n and (text[i].isdigit() or text[i] == "_"):
                i += 1
            is_float = False
            if i < n and text[i] == ".":
                is_float = True
                i += 1
                while i < n and (text[i].isdigit() or text[i] == "_"):
                    i += 1
            if i < n and text[i] in "eE":
                j = i + 1
                if j < n and text[j] in "+-":
                    j += 1
                if j < n and text[j].isdigit():
                    is_float = True
                    i = j
                    while i < n and text[i].isdigit():
                        i += 1
                else:
                    raise ExprError(f"malformed number {text[start : j + 1]!r}", start)
            if i < n and (text[i].isalpha() or text[i] == "_"):
                raise ExprError(f"malformed number {text[start : i + 1]!r}", start)
            literal = text[start:i]
            if literal.endswith("_") or "__" in literal or "_." in literal:
                raise ExprError(f"malformed number {literal!r}", start)
            tokens.append(_Token("float" if is_float else "int", literal, start))
            continue
        if ch.isalpha() or ch == "_":
            start = i
            while i < n and (text[i].isalnum() or text[i] == "_"):
                i += 1
            tokens.append(_Token("name", text[start:i], start))
            continue
        if ch in "+-*/%(),":
            tokens.append(_Token("op", ch, i))
            i += 1
            continue
        two = text[i : i + 2]
        if two in _COMPARISONS:
            tokens.append(_Token("op", two, i))
            i += 2
            continue
        if ch in "<>":
            tokens.append(_Token("op", ch, i))
            i += 1
            continue
        raise ExprError(f"unexpected character {ch!r}", i)
    tokens.append(_Token("end", "", n))
    return tokens


_COMPARISONS = ("<=", ">=", "==", "!=")


class Expr:
    """A parsed expression; `text` is the source it came from."""

    column: int
    text: str = ""

    def names(self) -> set[str]:
        """Size names the expression refers to."""
        raise NotImplementedError

    def evaluate(self, env: Mapping[str, Number]) -> Number:
        """The value with names taken from `env`; raises ExprError (unknown name, x / 0)."""
        raise NotImplementedError


@dataclass(frozen=True)
class _Num(Expr):
    value: Number
    column: int

    def names(self) -> set[str]:
        return set()

    def evaluate(self, env: Mapping[str, Number]) -> Number:
        return self.value


@dataclass(frozen=True)
class _Name(Expr):
    name: str
    column: int

    def names(self) -> set[str]:
        return {self.name}

    def evaluate(self, env: Mapping[str, Number]) -> Number:
        if self.name not in env:
            raise ExprError(f"unknown name {self.name!r}", self.column)
        value = env[self.name]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ExprError(f"{self.name!r} is not a number", self.column)
        return _checked(value, self.column)


@dataclass(frozen=True)
class _Neg(Expr):
    operand: Expr
    column: int

    def names(self) -> set[str]:
        return self.operand.names()

    def evaluate(self, env: Mapping[str, Number]) -> Number:
        return _checked(-self.operand.evaluate(env), self.column)


def _checked(value: Number, column: int) -> Number:
    """`value`, or ExprError when it is NaN or infinite."""
    if isinstance(value, float) and not math.isfinite(value):
        problem = "is not a number (NaN)" if math.isnan(value) else "overflows to infinity"
        raise ExprError(f"the value {problem}", column)
    return value


def c_div(a: Number, b: Number) -> Number:
    """C semantics: integer division truncates toward zero; floats divide exactly."""
    if isinstance(a, int) and isinstance(b, int):
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    return a / b


def c_mod(a: Number, b: Number) -> Number:
    """C semantics: the remainder has the sign of the dividend."""
    if isinstance(a, int) and isinstance(b, int):
        return a - b * int(c_div(a, b))
    return math.fmod(a, b)


def cdiv(a: Number, b: Number) -> Number:
    """Ceiling of a / b (integers stay integers)."""
    if isinstance(a, int) and isinstance(b, int):
        return -(-a // b)
    return math.ceil(a / b)


@dataclass(frozen=True)
class _Binary(Expr):
    op: str
    left: Expr
    right: Expr
    column: int  # of the operator

    def names(self) -> set[str]:
        return self.left.names() | self.right.names()

    def evaluate(self, env: Mapping[str, Number]) -> Number:
        a = self.left.evaluate(env)
        b = self.right.evaluate(env)
        try:
            return _checked(self._apply(a, b), self.column)
        except OverflowError:  # an int too large for a float, e.g. 10**30 * 0.5 ... chained
            raise ExprError(
                "the value is too large for a floating-point number", self.column
            ) from None

    def _apply(self, a: Number, b: Number) -> Number:
        if self.op == "+":
            return a + b
        if self.op == "-":
            return a - b
        if self.op == "*":
            return a * b
        if b == 0:
            raise ExprError("division by zero" if self.op == "/" else "modulo by zero", self.column)
        return c_div(a, b) if self.op == "/" else c_mod(a, b)


@dataclass(frozen=True)
class _Call(Expr):
    function: str
    args: tuple[Expr, ...]
    column: int

    def names(self) -> set[str]:
        out: set[str] = set()
        for arg in self.args:
            out |= arg.names()
        return out

    def evaluate(self, env: Mapping[str, Number]) -> Number:
        values = [arg.evaluate(env) for arg in self.args]
        if self.function == "min":
            return min(values)
        if self.function == "max":
            return max(values)
        if values[1] == 0:
            raise ExprError("division by zero in cdiv", self.column)
        try:
            return _checked(cdiv(values[0], values[1]), self.column)
        except OverflowError:
            raise ExprError(
                "the value is too large for a floating-point number", self.column
            ) from None


@dataclass(frozen=True)
class _Compare(Expr):
    op: str  # one of < <= > >= == !=
    left: Expr
    right: Expr
    column: int  # of the operator

    def names(self) -> set[str]:
        return self.left.names() | self.right.names()

    def evaluate(self, env: Mapping[str, Number]) -> Number:
        a = self.left.evaluate(env)
        b = self.right.evaluate(env)
        result = {
            "<": a < b,
            "<=": a <= b,
            ">": a > b,
            ">=": a >= b,
            "==": a == b,
            "!=": a != b,
        }[self.op]
        return 1 if result else 0


_MAX_DEPTH = 64


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.pos = 0
        self.depth = 0

    @property
    def token(self) -> _Token:
        return self.tokens[self.pos]

    def take(self) -> _Token:
        token = self.tokens[self.pos]
        self.pos += 1
        return token

    def expect(self, op: str) -> _Token:
        token = self.token
        if token.kind != "op" or token.text != op:
            found = f"{token.text!r}" if token.kind != "end" else "end of expression"
            raise ExprError(f"expected {op!r}, found {found}", token.column)
        return self.take()

    def parse(self, condition: bool = False) -> Expr:
        if self.token.kind == "end":
            raise ExprError("empty expression", 0)
        node = self.expr()
        token = self.token
        if token.kind == "op" and token.text in _COMPARISON_OPS:
            if not condition:
                raise ExprError(
                    f"comparison {token.text!r} is only allowed in restrict conditions",
                    token.column,
                )
            self.take()
            node = _Compare(token.text, node, self.expr(), token.column)
            if self.token.kind == "op" and self.token.text in _COMPARISON_OPS:
                raise ExprError(
                    "one comparison per condition: give each as its own restrict entry",
                    self.token.column,
                )
        if self.token.kind != "end":
            raise ExprError(f"unexpected {self.token.text!r}", self.token.column)
        return node

    def expr(self) -> Expr:
        node = self.term()
        while self.token.kind == "op" and self.token.text in "+-":
            op = self.take()
            node = _Binary(op.text, node, self.term(), op.column)
        return node

    def term(self) -> Expr:
        node = self.unary()
        while self.token.kind == "op" and self.token.text in "*/%":
            op = self.take()
            node = _Binary(op.text, node, self.unary(), op.column)
        return node

    def unary(self) -> Expr:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise ExprError("expression nests too deeply", self.token.column)
        try:
            return self._unary()
        finally:
            self.depth -= 1

    def _unary(self) -> Expr:
        if self.token.kind == "op" and self.token.text in "+-":
            op = self.take()
            operand = self.unary()
            return _Neg(operand, op.column) if op.text == "-" else operand
        return self.primary()

    def primary(self) -> Expr:
        token = self.token
        if token.kind == "int":
            self.take()
            if len(token.text) > 40:  # int() of a huge literal is slow; nothing valid is so long
                raise ExprError(f"the number {token.text[:12]}... is too large", token.column)
            return _Num(_checked(int(token.text.replace("_", "")), token.column), token.column)
        if token.kind == "float":
            self.take()
            return _Num(_checked(float(token.text.replace("_", "")), token.column), token.column)
        if token.kind == "name":
            self.take()
            if self.token.kind == "op" and self.token.text == "(":
                return self.call(token)
            if token.text in FUNCTIONS:
                raise ExprError(
                    f"{token.text} is a function: write {token.text}(...)", token.column
                )
            return _Name(token.text, token.column)
        if token.kind == "op" and token.text == "(":
            self.take()
            node = self.expr()
            self.expect(")")
            return node
        if token.kind == "end":
            raise ExprError("expression ends too early", token.column)
        raise ExprError(f"unexpected {token.text!r}", token.column)

    def call(self, name: _Token) -> Expr:
        if name.text not in FUNCTIONS:
            known = ", ".join(FUNCTIONS)
            raise ExprError(f"unknown function {name.text!r} (known: {known})", name.column)
        self.expect("(")
        args: list[Expr] = []
        if not (self.token.kind == "op" and self.token.text == ")"):
            args.append(self.expr())
            while self.token.kind == "op" and self.token.text == ",":
                self.take()
                args.append(self.expr())
        self.expect(")")
        low, high = FUNCTIONS[name.text]
        if len(args) < low or (high is not None and len(args) > high):
            wanted = f"{low}" if low == high else f"at least {low}"
            raise ExprError(
                f"{name.text}() takes {wanted} argument{'s' if low != 1 else ''}, got {len(args)}",
                name.column,
            )
        return _Call(name.text, tuple(args), name.column)


def parse_expr(text: str) -> Expr:
    """Parse `text`; raises ExprError with the 0-based column of the problem."""
    node = _Parser(text).parse()
    object.__setattr__(node, "text", text)
    return node


def parse_condition(text: str) -> Expr:
    """Parse a condition (`expr OP expr`, or a bare expression: true when non-zero); raises
    ExprError with the 0-based column of the problem."""
    node = _Parser(text).parse(condition=True)
    object.__setattr__(node, "text", text)
    return node


def evaluate(text: str, env: Mapping[str, Number]) -> Number:
    """Parse and evaluate in one step (raises ExprError)."""
    return parse_expr(text).evaluate(env)


_COMPARISON_OPS = ("<", "<=", ">", ">=", "==", "!=")
_C_ATOM = re.compile(r"\s*(?:[A-Za-z_]\w*(?:\s*(?:\.|->)\s*[A-Za-z_]\w*)*|\d+[uUlL]*)\s*\Z")


def to_c(expr: Expr, names: Mapping[str, str]) -> str:
    """C source computing `expr`, each size name replaced by `names[name]` (C text, put in
    parentheses unless it is a name or a number): how a launch site is written in its own terms
    (source/launch_sites.py). `cdiv(a, b)` becomes `(a + b - 1) / b`, `min`/`max` conditional
    expressions; the arguments are repeated, so `names` must hold side-effect-free expressions.
    Raises KeyError for a name missing from `names`."""
    return _c(expr, names, 0)


def _c(expr: Expr, names: Mapping[str, str], need: int) -> str:
    """`expr` as C, parenthesised when its precedence is below `need` (0 additive, 1
    multiplicative, 2 unary, 3 primary)."""
    if isinstance(expr, _Num):
        text, level = str(expr.value), 3
    elif isinstance(expr, _Name):
        given = names[expr.name].strip()
        text, level = (given if _C_ATOM.match(given) else f"({given})"), 3
    elif isinstance(expr, _Neg):
        text, level = "-" + _c(expr.operand, names, 2), 2
    elif isinstance(expr, _Binary):
        level = 0 if expr.op in "+-" else 1
        text = f"{_c(expr.left, names, level)} {expr.op} {_c(expr.right, names, level + 1)}"
    elif isinstance(expr, _Call) and expr.function == "cdiv":
        a, b = _c(expr.args[0], names, 0), _c(expr.args[1], names, 2)
        divisor = expr.args[1]
        if isinstance(divisor, _Num) and isinstance(divisor.value, int) and divisor.value > 1:
            text = f"({a} + {divisor.value - 1}) / {b}"
        else:
            text = f"({a} + {b} - 1) / {b}"
        level = 1
    elif isinstance(expr, _Call):
        text = _c(expr.args[0], names, 3)
        compare = "<" if expr.function == "min" else ">"
        for arg in expr.args[1:]:
            other = _c(arg, names, 3)
            text = f"({text} {compare} {other} ? {text} : {other})"
        level = 3
    elif isinstance(expr, _Compare):
        left, right = _c(expr.left, names, 0), _c(expr.right, names, 0)
        text, level = f"{left} {expr.op} {right}", -1
    else:  # pragma: no cover - every node type is handled above
        raise TypeError(f"unknown expression node {expr!r}")
    return text if level >= need else f"({text})"
