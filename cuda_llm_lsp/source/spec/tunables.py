"""Tunable parameters of a spec or a candidate's launch block: `tune.NAME = [ints]`, `restrict`.

The contract is docs/design.md's "Tuning": each tunable is compiled as `-DNAME=value` and is a
name in the `grid`, `block` and `smem` expressions; `restrict = ["BLOCK * ITEMS <= 4096", ...]`
lists conditions (`source.expr.parse_condition`, never `eval`) over the tunables and integer
template constants that every configuration tried must satisfy. Problems are reported through the
parser's `error` (a `Reporter`), so they land at their line like every spec error.

The default configuration (what the file compiles to without any `-D`, the one `bench` runs and
tuning is measured against) takes each tunable from the file's `#define NAME value` where one
exists, else its first listed value. A `#define` that is not guarded (`#ifndef NAME`) is an
error: `-DNAME=value` would be redefined by it and every configuration would be the same kernel.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from cuda_llm_lsp.source.expr import FUNCTIONS, Expr, ExprError, parse_condition

TUNE_KEYS = ("tune", "restrict")
MAX_VALUES = 256  # values of one tunable
MAX_TUNABLES = 16
MAX_RESTRICTIONS = 64
#: Configurations a spec parse looks through for one that the restrictions allow (a parse runs
#: on every edit: a huge space restricted to nothing is not searched to its end).
PARSE_SCAN_LIMIT = 20_000
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(?![\w(])[ \t]*([^\n]*)$", re.M)
_GUARD = re.compile(r"^[ \t]*#[ \t]*(?:ifndef[ \t]+(\w+)|if[ \t]+!\s*defined\s*\(?\s*(\w+))", re.M)
_INT = re.compile(r"\s*([+-]?\d+)[uUlL]*\s*(?://.*|/\*.*)?\Z")

Configuration = Mapping[str, int]


class Reporter(Protocol):
    """What tunables parsing needs of the spec parser: problems by key path (`Problem`)."""

    def error(
        self,
        path: tuple[str, ...],
        message: str,
        needle: str | None = None,
        column: int | None = None,
    ) -> None: ...

    def warn(self, path: tuple[str, ...], message: str, needle: str | None = None) -> None: ...


@dataclass(frozen=True)
class DefineDefault:
    """A tunable's `#define NAME value` in the file: where its value is, for the tuned edit."""

    name: str
    value: int
    start: int  # character offsets of the value text in the file
    end: int


@dataclass(frozen=True)
class Tunables:
    """The tunables of a spec (or a candidate), their restrictions and default configuration."""

    values: dict[str, tuple[int, ...]]  # name -> values to try, in the spec's order
    restrict: tuple[str, ...] = ()  # conditions (source text)
    default: dict[str, int] = field(default_factory=dict)
    defines: dict[str, DefineDefault] = field(default_factory=dict)  # from the file, if any

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.values)

    @property
    def space_size(self) -> int:
        """Configurations before restrictions (the product of the value counts)."""
        size = 1
        for values in self.values.values():
            size *= len(values)
        return size

    def allows(self, config: Configuration, constants: Mapping[str, int] = {}) -> bool:
        """Whether `config` satisfies every restriction (a condition that cannot be evaluated,
        e.g. a division by zero, excludes it)."""
        env = {**constants, **config}
        for text in self.restrict:
            try:
                if not _condition(text).evaluate(env):
                    return False
            except ExprError:
                return False
        return True

    def configurations(
        self, constants: Mapping[str, int] = {}, scan_limit: int | None = None
    ) -> Iterator[dict[str, int]]:
        """Every configuration allowed by the restrictions, in the listed order (lazily; with
        `scan_limit`, only among that many first combinations)."""
        names = self.names
        combos = itertools.product(*self.values.values())
        for combo in itertools.islice(combos, scan_limit):
            config = dict(zip(names, combo, strict=True))
            if self.allows(config, constants):
                yield config

    @staticmethod
    def compile_defines(config: Configuration) -> tuple[str, ...]:
        """`NAME=value` for each tunable: what NVRTC gets as `-D`."""
        return tuple(f"{name}={value}" for name, value in config.items())

    @staticmethod
    def as_constants(config: Configuration) -> dict[str, str]:
        """`config` as template-argument text: how a spec's expressions see the values."""
        return {name: str(value) for name, value in config.items()}


def describe(config: Configuration) -> str:
    """`BLOCK=256 ITEMS=4`: one configuration in one line (tables, prompts, history)."""
    return " ".join(f"{name}={value}" for name, value in config.items())


def parse_tunables(
    reporter: Reporter,
    doc: Mapping[str, Any],
    taken: set[str],
    source: str,
    constants: Mapping[str, int] = {},
    kernel_text: str = "",
) -> Tunables | None:
    """The `tune` and `restrict` keys of `doc` (None when absent or unusable).

    `taken`: names a tunable may not reuse (sizes, template parameters); `source`: the text the
    kernel is compiled from (its `#define` defaults); `constants`: integer template arguments,
    usable in restrictions; `kernel_text`: the kernel's definition, where a tunable used without a
    `#define` default is worth a warning (the file alone, as `bench` and the editor compile it,
    would not build).

    Long because it reads `tune`, then `restrict`, then checks them against each other, one
    block each, with the problems reported where they are.
    """
    if "tune" not in doc:
        if "restrict" in doc:
            reporter.error(("restrict",), "restrict without tune: add tune.NAME = [values]")
        return None
    raw = doc["tune"]
    if not isinstance(raw, dict) or not raw:
        reporter.error(("tune",), "tune must be a table of integer lists: tune.BLOCK = [64, 128]")
        return None
    if len(raw) > MAX_TUNABLES:
        reporter.error(("tune",), f"tune has {len(raw)} names: at most {MAX_TUNABLES}")
        return None
    values: dict[str, tuple[int, ...]] = {}
    ok = True
    for name, items in raw.items():
        path = ("tune", name)
        if not _IDENTIFIER.match(name) or name in FUNCTIONS:
            reporter.error(path, f"tune.{name}: the name must be a C identifier (a macro name)")
            ok = False
        elif name in taken:
            reporter.error(path, f"tune.{name}: {name!r} is already a size or template name")
            ok = False
        elif not isinstance(items, list) or not items:
            reporter.error(
                path, f"tune.{name} must be a non-empty list of integers, e.g. [64, 128]"
            )
            ok = False
        elif bad := [v for v in items if not isinstance(v, int) or isinstance(v, bool)]:
            reporter.error(path, f"tune.{name}: {bad[0]!r} is not an integer", _repr(bad[0]))
            ok = False
        elif len(items) > MAX_VALUES:
            reporter.error(path, f"tune.{name} has {len(items)} values: at most {MAX_VALUES}")
            ok = False
        elif huge := [v for v in items if not -(2**63) <= v < 2**63]:
            reporter.error(path, f"tune.{name}: a value beyond 64-bit integers", str(huge[0]))
            ok = False
        elif len(set(items)) != len(items):
            twice = next(v for v in items if items.count(v) > 1)
            reporter.error(path, f"tune.{name} lists {twice} twice", str(twice))
            ok = False
        else:
            values[name] = tuple(items)
    restrict = _parse_restrict(reporter, doc.get("restrict"), set(raw), constants)
    defines = _define_defaults(reporter, source, values)
    if not ok or restrict is None or defines is None:
        return None
    for name in values:
        if name not in defines and re.search(rf"(?<!\w){re.escape(name)}(?!\w)", kernel_text):
            reporter.warn(
                ("tune", name),
                f"tune.{name}: the kernel uses {name} but the file has no default for it: add "
                f"#ifndef {name} / #define {name} {values[name][0]} / #endif above the spec",
            )
    default = {n: defines[n].value if n in defines else v[0] for n, v in values.items()}
    tunables = Tunables(values, restrict, default, defines)
    for text in restrict:
        try:
            held = parse_condition(text).evaluate({**constants, **default})
        except ExprError as e:
            reporter.error(
                ("restrict",),
                f"restrict: {e.message} in {text!r} for the default "
                f"configuration ({describe(default)})",
                text,
                e.column,
            )
            return None
        if not held:
            reporter.error(
                ("restrict",),
                f"restrict: the default configuration ({describe(default)}) breaks {text!r}",
                text,
            )
            return None
    scanned = min(tunables.space_size, PARSE_SCAN_LIMIT)
    allowed = itertools.islice(tunables.configurations(constants, scanned), 1)
    if scanned == tunables.space_size and not any(True for _ in allowed):
        reporter.error(("restrict",), "restrict excludes every configuration")  # all searched
        return None
    return tunables


@functools.lru_cache(maxsize=256)
def _condition(text: str) -> Expr:
    """A restriction parsed once (checked for every configuration of a search)."""
    return parse_condition(text)


def _parse_restrict(
    reporter: Reporter, raw: object, names: set[str], constants: Mapping[str, int]
) -> tuple[str, ...] | None:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(v, str) for v in raw):
        reporter.error(
            ("restrict",), 'restrict must be a list of conditions, e.g. ["BLOCK * ITEMS <= 4096"]'
        )
        return None
    if len(raw) > MAX_RESTRICTIONS:
        reporter.error(
            ("restrict",), f"restrict has {len(raw)} conditions: at most {MAX_RESTRICTIONS}"
        )
        return None
    known = names | set(constants)
    ok = True
    for text in raw:
        try:
            expr: Expr = parse_condition(text)
        except ExprError as e:
            reporter.error(("restrict",), f"restrict: {e.message} in {text!r}", text, e.column)
            ok = False
            continue
        unknown = sorted(expr.names() - known)
        if unknown:
            column = re.search(rf"(?<!\w){re.escape(unknown[0])}(?!\w)", text)
            reporter.error(
                ("restrict",),
                f"restrict: unknown name {unknown[0]!r} in {text!r} (a restriction names "
                f"tunables only: {', '.join(sorted(names))})",
                text,
                column.start() if column else None,
            )
            ok = False
    return tuple(raw) if ok else None


def _define_defaults(
    reporter: Reporter, source: str, values: Mapping[str, Sequence[int]]
) -> dict[str, DefineDefault] | None:
    """Each tunable's guarded `#define NAME <int>` in `source`; None after an error (unguarded)."""
    guarded = {m.group(1) or m.group(2) for m in _GUARD.finditer(source)}
    found: dict[str, DefineDefault] = {}
    ok = True
    for m in _DEFINE.finditer(source):
        name = m.group(1)
        if name not in values or name in found:
            continue
        line = source.count("\n", 0, m.start()) + 1
        if name not in guarded:
            reporter.error(
                ("tune", name),
                f"tune.{name}: line {line} defines {name} unconditionally, so -D{name}=value "
                f"cannot change it: write #ifndef {name} / #define {name} ... / #endif",
            )
            ok = False
            continue
        value = _INT.match(m.group(2))
        if value is None:
            reporter.error(
                ("tune", name),
                f"tune.{name}: the default #define {name} on line {line} is not an integer literal",
            )
            ok = False
            continue
        start = m.start(2) + value.start(1)
        found[name] = DefineDefault(name, int(value.group(1)), start, m.start(2) + value.end(1))
    return found if ok else None


def _repr(value: object) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
