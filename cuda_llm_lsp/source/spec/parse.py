"""The spec parser: a kernel's `/* @cuda-llm */` TOML block to a `TestSpec` and `SpecError`s.

`parse_spec` is the one entry. It never raises on user input: tomllib's syntax errors and every
problem the parser or the case evaluation finds become `SpecError`s placed by the `Locator`.
The rules it checks are the test-spec contract (docs/design.md) and the decisions listed in
this package's docstring.
"""

from __future__ import annotations

import logging
import math
import re
import sys
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, cast

from cuda_llm_lsp.source.c_types import (
    DTYPES,
    FLOAT_DTYPES,
    INT_RANGES,
    VECTOR_TYPES,
    c_type_dtype,
    resolved_base,
)
from cuda_llm_lsp.source.expr import FUNCTIONS, Expr, ExprError, parse_expr
from cuda_llm_lsp.source.kernels import Kernel, Param, SpecBlock
from cuda_llm_lsp.source.roles import ROLES, Role, infer_roles
from cuda_llm_lsp.source.spec.cases import evaluate_cases
from cuda_llm_lsp.source.spec.hook import hook_path_problem
from cuda_llm_lsp.source.spec.locate import Locator, Problem
from cuda_llm_lsp.source.spec.model import CAPTURED, ArgSpec, InitSpec, SpecError, TestSpec
from cuda_llm_lsp.source.spec.tunables import Tunables, parse_tunables
from cuda_llm_lsp.source.templates import (
    split_template_args,
    template_constants,
    template_parameters,
)
from cuda_llm_lsp.source.text import Point, Span, offset_of

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

INIT_KINDS: dict[str, int] = {
    "uniform": 2, "normal": 2, "randint": 2, "arange": 0, "zeros": 0, "ones": 0,
}  # fmt: skip
TOP_LEVEL_KEYS: tuple[str, ...] = (
    "sizes", "grid", "block", "args", "smem", "instance", "init", "outputs", "rtol", "atol",
    "inputs", "flops", "generalize", "align", "tune", "restrict", "capture",
)  # fmt: skip
ALIGNMENTS = (1, 2, 4, 8, 16, 32, 64, 128, 256)  # `align = N`: bytes
log = logging.getLogger(__name__)

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
#: Limits that keep a spec's parse within milliseconds (a spec is read on every edit): a spec
#: is a few lines; one of megabytes, or of a million cases, is refused with a message.
MAX_SPEC_CHARS = 64_000
MAX_CASES = 256
MAX_NESTING = 32  # arrays / inline tables inside one another (tomllib recurses per level)
MAX_SIZE = 2**40  # a size beyond any buffer a GPU holds
#: Lines of a spec searched for the start of a TOML error reported at the end (one parse each).
_MAX_SEARCHED_LINES = 200


_LONG_NUMBER = re.compile(r"[0-9][0-9_]{4000,}")  # near Python's int-conversion limit
_TOML_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")


def _toml_error(locator: Locator, error: Exception) -> SpecError:
    text = str(error)
    message = _TOML_POSITION.sub("", text).replace("(at end of document)", "").strip()
    m = _TOML_POSITION.search(text)
    if m:
        line = int(m.group(1)) - 1
        column = int(m.group(2)) - 1
        line_text = locator.lines[line] if line < len(locator.lines) else ""
        content_end = len(line_text.rstrip())
        if line > 0 and not _parses(locator.lines[:line]):
            # e.g. an unclosed array: tomllib trips over the next line, the mistake is earlier
            span = locator.line_span(_first_bad_line(locator.lines[:line]))
        elif column >= content_end:
            span = locator.line_span(line)
        else:
            span = locator.span(line, column, content_end)
    else:
        span = locator.line_span(_first_bad_line(locator.lines))
    if "overwrite" in message.lower():
        message = "duplicate key: " + message[0].lower() + message[1:]
    return SpecError(span, f"TOML syntax error: {message}")


def _parses(lines: list[str]) -> bool:
    try:
        tomllib.loads("\n".join(lines))
    except tomllib.TOMLDecodeError:
        return False
    return True


def _first_bad_line(lines: list[str]) -> int:
    """For errors tomllib reports at the end of the document: the line after the longest
    prefix of the block that still parses."""
    if len(lines) > _MAX_SEARCHED_LINES:
        return len(lines) - 1
    good = 0
    for n in range(1, len(lines) + 1):
        if _parses(lines[:n]):
            good = n
    return min(good, len(lines) - 1)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _expr_text(value: object) -> str | None:
    """A TOML value that may be an expression: a string or a finite number (as source text)."""
    if isinstance(value, str):
        return value
    if _is_number(value) and math.isfinite(cast(float, value)):
        return repr(value)
    return None


def _why(value: object) -> str:
    """What is wrong with a number TOML gave as infinite or NaN (`1e400`, `inf`, `nan`)."""
    if isinstance(value, float) and not math.isfinite(value):
        return f" (TOML read {value}: beyond the range of a number)"
    return ""


_POINTER_SPEC = re.compile(r"\s*(?:([A-Za-z_]\w*)\s+)?([A-Za-z_]\w*)\s*\[(.*)\]\s*\Z", re.S)
_INIT_CALL = re.compile(r"\s*([A-Za-z_]\w*)\s*\((.*)\)\s*\Z", re.S)
_INPUTS = re.compile(r".+\.py:[A-Za-z_]\w*\Z")


class _SpecParser:
    def __init__(self, kernel: Kernel, source: str) -> None:
        self.kernel = kernel
        self.source = source
        self.problems: list[Problem] = []
        self.names: set[str] = set()

    def error(
        self,
        path: tuple[str, ...],
        message: str,
        needle: str | None = None,
        column: int | None = None,
    ) -> None:
        self.problems.append(Problem(path, message, needle, column))

    def warn(self, path: tuple[str, ...], message: str, needle: str | None = None) -> None:
        self.problems.append(Problem(path, message, needle, severity="warning"))

    def has_errors(self) -> bool:
        return any(p.severity == "error" for p in self.problems)

    def expression(self, path: tuple[str, ...], text: str, what: str) -> Expr | None:
        """Parse `text` and check its names; problems are reported at `path`."""
        try:
            expr = parse_expr(text)
        except ExprError as e:
            self.error(path, f"{what}: {e.message} in {text!r}", text, e.column)
            return None
        unknown = sorted(expr.names() - self.names)
        if unknown:
            known = ", ".join(sorted(self.names)) or "none: add sizes.NAME = [...]"
            first = unknown[0]
            column = _name_column(text, first)
            self.error(
                path,
                f"{what}: unknown name {first!r} in {text!r} (sizes: {known})",
                text,
                column,
            )
            return None
        return expr

    # ------------------------------------------------------------------------------------------

    def parse(self, doc: dict[str, Any]) -> TestSpec | None:
        """The spec document as a `TestSpec`; None after an error (each reported where it is).

        Long because it reads the spec's keys in the order they depend on each other, one block
        per key; each key's own reading is a method of its own."""
        kernel = self.kernel
        for key in doc:
            if key not in TOP_LEVEL_KEYS:
                self.warn(
                    (key,), f"unknown key {key!r} is ignored (known: {', '.join(TOP_LEVEL_KEYS)})"
                )

        instance, template_args = self.parse_instance(doc.get("instance"))
        sizes = self.parse_sizes(doc.get("sizes"))
        constants = template_constants(template_args)
        raw_sizes = doc.get("sizes")
        declared: dict[str, Any] = raw_sizes if isinstance(raw_sizes, dict) else {}
        # a size with a bad value is still a known name: no follow-on "unknown name" errors
        self.names = set(sizes) | set(declared) | set(constants)
        if kernel.is_template and not template_args:  # instance missing or bad: reported once
            self.names |= set(kernel.template_params)

        tunables = self.parse_tunables(doc, constants)
        launch_names = self.names  # tunables are names in grid, block and smem only
        raw_tune = doc.get("tune")  # named even when unusable: no follow-on "unknown name"
        self.names = self.names | (set(raw_tune) if isinstance(raw_tune, dict) else set())
        grid = self.parse_dims("grid", doc.get("grid"))
        block = self.parse_dims("block", doc.get("block"))
        smem = "0"
        if "smem" in doc:
            smem_text = _expr_text(doc["smem"])
            if smem_text is None:
                self.error(
                    ("smem",), "smem must be an integer or an expression string" + _why(doc["smem"])
                )
            elif self.expression(("smem",), smem_text, "smem"):
                smem = smem_text
        self.names = launch_names

        roles = infer_roles(kernel, self.source)
        args = self.parse_args(doc.get("args"), roles, template_args)
        inits = self.parse_inits(doc.get("init"), args)
        args = [
            replace(a, init=inits.get(a.name) or _default_init(a)) if a.is_pointer else a
            for a in args
        ]
        outputs = self.parse_outputs(doc.get("outputs"), args)
        rtol, atol = _default_tolerances(args, outputs)
        rtol = self.parse_tolerance(doc, "rtol", rtol)
        atol = self.parse_tolerance(doc, "atol", atol)

        inputs = None
        if "inputs" in doc:
            value = doc["inputs"]
            if not isinstance(value, str) or not _INPUTS.match(value.strip()):
                self.error(
                    ("inputs",),
                    'inputs must be "path/to/file.py:function" (a Python function '
                    "f(sizes, rng) -> dict of arrays)",
                )
            elif problem := hook_path_problem(value.strip().rpartition(":")[0]):
                self.error(("inputs",), f"inputs: the hook file {problem}")
            else:
                inputs = value.strip()
        capture = None
        if "capture" in doc:
            value = doc["capture"]
            if not isinstance(value, str) or not value.strip():
                self.error(("capture",), 'capture must be "path/to/capture-directory"')
            elif problem := hook_path_problem(value.strip()):
                self.error(("capture",), f"capture: the directory {problem}")
            elif inputs is not None:
                self.error(("capture",), "capture and inputs cannot both give the data")
            else:
                capture = value.strip()
        generalize, align = self.parse_hidden_case_keys(doc)
        self.check_captured(args, capture, len(next(iter(sizes.values()), [0])) if sizes else 1)

        flops = None
        if "flops" in doc:
            flops_text = _expr_text(doc["flops"])
            if flops_text is None:
                self.error(
                    ("flops",),
                    "flops must be a number or an expression string" + _why(doc["flops"]),
                )
            elif self.expression(("flops",), flops_text, "flops"):
                flops = flops_text

        if self.has_errors() or grid is None or block is None:
            return None
        spec = TestSpec(
            kernel=kernel.name,
            sizes=sizes,
            grid=grid,
            block=block,
            args=tuple(args),
            smem=smem,
            outputs=outputs,
            rtol=rtol,
            atol=atol,
            atol_relative="atol" not in doc,
            instance=instance,
            inputs=inputs,
            capture=capture,
            flops=flops,
            template_args={**template_args, **Tunables.as_constants(tunables.default)}
            if tunables
            else template_args,
            generalize=generalize,
            align=align,
            tunables=tunables,
        )
        _, problems = evaluate_cases(spec)
        self.problems.extend(problems)
        return None if problems else spec

    def parse_tunables(
        self, doc: Mapping[str, Any], constants: Mapping[str, int]
    ) -> Tunables | None:
        """`tune` / `restrict` (spec/tunables.py); a spec with an unusable one is unusable."""
        if "tune" not in doc and "restrict" not in doc:
            return None
        taken = self.names | set(self.kernel.template_params)
        span = self.kernel.span
        body = self.source[offset_of(self.source, span.start) : offset_of(self.source, span.end)]
        return parse_tunables(self, doc, taken, self.source, constants, kernel_text=body)

    def parse_instance(self, value: object) -> tuple[str | None, dict[str, str]]:
        kernel = self.kernel
        if value is None:
            if kernel.is_template:
                example = (
                    kernel.instantiations[0]
                    if kernel.instantiations
                    else (f"{kernel.name}<{', '.join('float' for _ in kernel.template_params)}>")
                )
                self.error(
                    (),
                    f"{kernel.name} is a template: add instance = {example!r} "
                    f"(the instantiation to test)",
                )
            return None, {}
        if not kernel.is_template:
            self.error(("instance",), f"instance given but {kernel.name} is not a template")
            return None, {}
        if not isinstance(value, str):
            self.error(("instance",), f'instance must be a string like "{kernel.name}<float>"')
            return None, {}
        m = re.fullmatch(r"\s*([A-Za-z_][\w:]*)\s*<(.*)>\s*", value, re.S)
        if not m:
            self.error(("instance",), f'instance must look like "{kernel.name}<float, 128>"', value)
            return None, {}
        if m.group(1).split("::")[-1] != kernel.name:
            self.error(
                ("instance",),
                f"instance names {m.group(1)!r}, not this kernel {kernel.name!r}",
                m.group(1),
            )
            return None, {}
        args = split_template_args(m.group(2))
        if not args or any(not a for a in args) or len(args) > len(kernel.template_params):
            self.error(
                ("instance",),
                f"instance has {len(args)} template argument(s); {kernel.name} takes "
                f"{len(kernel.template_params)} ({', '.join(kernel.template_params)})",
            )
            return None, {}
        given = dict(zip(kernel.template_params, args, strict=False))
        for param in template_parameters(kernel, self.source)[len(args) :]:
            if param.default is None:
                self.error(
                    ("instance",),
                    f"instance gives no argument for {param.name}, which has no default",
                )
                return None, {}
            given[param.name] = param.default
        return value.strip(), given

    def parse_sizes(self, value: object) -> dict[str, list[int]]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.error(("sizes",), "sizes must be a table: sizes.NAME = [values, ...]")
            return {}
        sizes: dict[str, list[int]] = {}
        length: tuple[str, int] | None = None
        for name, values in value.items():
            path = ("sizes", name)
            if not _IDENTIFIER.match(name) or name in FUNCTIONS:
                self.error(
                    path, f"size name {name!r} must be an identifier other than cdiv/min/max"
                )
                continue
            if not isinstance(values, list):
                self.error(path, f"sizes.{name} must be a list of integers, e.g. [1, 17, 1000]")
                continue
            if not values:
                self.error(path, f"sizes.{name} is empty: give at least one value")
                continue
            bad = next((v for v in values if not isinstance(v, int) or isinstance(v, bool)), None)
            if bad is not None:
                self.error(path, f"sizes.{name}: {bad!r} is not an integer", _toml_repr(bad))
                continue
            negative = next((v for v in values if v < 0), None)
            if negative is not None:
                self.error(path, f"sizes.{name}: {negative} is negative", str(negative))
                continue
            huge = next((v for v in values if v > MAX_SIZE), None)
            if huge is not None:
                self.error(
                    path,
                    f"sizes.{name}: {huge} is over the limit of {MAX_SIZE} (2^40) for a size",
                    str(huge),
                )
                continue
            if len(values) > MAX_CASES:
                self.error(
                    path,
                    f"sizes.{name} has {len(values)} values: at most {MAX_CASES} cases are "
                    "allowed (each is compiled, run and checked)",
                )
                continue
            if length is not None and len(values) != length[1]:
                self.error(
                    path,
                    f"sizes.{name} has {len(values)} values but sizes.{length[0]} has "
                    f"{length[1]}: every size list needs the same length (case i takes value i)",
                )
                continue
            length = length or (name, len(values))
            sizes[name] = list(values)
        return sizes

    def parse_dims(self, key: str, value: object) -> tuple[str, ...] | None:
        if value is None:
            self.error((), f"missing {key} (an integer, an expression, or a list of up to 3)")
            return None
        items = value if isinstance(value, list) else [value]
        if not items:
            self.error((key,), f"{key} is empty: give 1 to 3 dimensions")
            return None
        if len(items) > 3:
            self.error((key,), f"{key} has {len(items)} dimensions; CUDA allows at most 3")
            return None
        dims: list[str] = []
        ok = True
        for n, item in enumerate(items):
            text = _expr_text(item)
            if text is None:
                self.error(
                    (key,), f"{key}[{n}] must be an integer or an expression string" + _why(item)
                )
                ok = False
                continue
            if self.expression((key,), text, f"{key}[{n}]") is None:
                ok = False
            dims.append(text)
        return tuple(dims) if ok else None

    def parse_args(
        self, value: object, roles: Mapping[str, Role], template_args: Mapping[str, str]
    ) -> list[ArgSpec]:
        kernel = self.kernel
        if value is None:
            value = {}
        if not isinstance(value, dict):
            self.error(("args",), 'args must be a table: args.NAME = "..."')
            return []
        # an unnamed parameter (`int`, `L` alone) is keyed by its position: `args.3`
        named = [replace(p, name=p.name or str(p.index)) for p in kernel.params]
        params = {p.name: p for p in named}
        signature = ", ".join(p.name for p in named) or "none"
        for name in value:
            if name not in params:
                self.error(
                    ("args", name),
                    f"args.{name}: {kernel.name} has no parameter {name!r} "
                    f"(parameters: {signature})",
                )
        missing = [p for p in named if p.name not in value]
        for p in missing:
            if not p.is_pointer and c_type_dtype(resolved_base(p, template_args)) is None:
                self.error(
                    ("args",),
                    f"missing args.{p.name}, and a {p.c_type.strip()} cannot be given in a spec "
                    "(only integer, floating-point and bool scalars can; with a capture, "
                    f'args.{p.name} = "{CAPTURED}" passes the bytes the program passed)',
                )
                continue
            example = f'"{roles.get(p.name, "in")} float32[n]"' if p.is_pointer else f'"{p.name}"'
            self.error(("args",), f"missing args.{p.name} (e.g. args.{p.name} = {example})")
        args: list[ArgSpec] = []
        for p in named:
            if p.name not in value:
                continue
            if p.is_pointer:
                arg = self.parse_pointer(p, value[p.name], roles, template_args)
            else:
                arg = self.parse_scalar(p, value[p.name], template_args)
            if arg is not None:
                args.append(arg)
        return args

    def parse_pointer(
        self,
        param: Param,
        value: object,
        roles: Mapping[str, Role],
        template_args: Mapping[str, str],
    ) -> ArgSpec | None:
        path = ("args", param.name)
        where = f"args.{param.name}"
        if not isinstance(value, str):
            self.error(
                path,
                f'{where} is a pointer: write "[in|out|inout] dtype[count]", e.g. "float32[n]"',
            )
            return None
        m = _POINTER_SPEC.match(value)
        if not m:
            words = value.split()
            if words and "[" not in value and len(words) <= 2:
                problem = "needs an element count"
            else:
                problem = "is not of the form"
            self.error(
                path, f'{where} {problem} "[in|out|inout] dtype[count]", e.g. "float32[n]"', value
            )
            return None
        role_text, dtype, count = m.group(1), m.group(2), m.group(3).strip()
        role: Role
        if role_text is None:
            role = roles.get(param.name, "inout")
        elif role_text not in ROLES:
            self.error(
                path, f"{where}: unknown role {role_text!r} (use in, out or inout)", role_text
            )
            return None
        else:
            role = cast(Role, role_text)
        if role != "in" and param.is_const:
            self.error(
                path, f"{where}: a const pointer cannot be {role!r}; it is only read", role_text
            )
            return None
        if dtype not in DTYPES:
            hint = c_type_dtype(dtype)
            suggestion = f" (did you mean {hint}?)" if hint in DTYPES else ""
            self.error(
                path,
                f"{where}: unknown element type {dtype!r}{suggestion}; "
                f"use one of {', '.join(DTYPES)}",
                dtype,
            )
            return None
        if not count:
            self.error(path, f"{where}: empty element count in {value!r}", value)
            return None
        count_ok = self.expression(path, count, f"{where} count") is not None
        base = resolved_base(param, template_args)
        declared = c_type_dtype(base) or VECTOR_TYPES.get(base, (None, 1))[0]
        if declared is not None and declared != dtype:
            self.warn(
                path,
                f"{where}: element type {dtype} but the signature declares {param.c_type.strip()} "
                f"({base} is {declared})",
                dtype,
            )
        if not count_ok:
            return None
        return ArgSpec(
            param.name, param.index, param.c_type, True, role=role, dtype=dtype, count=count
        )

    def parse_scalar(
        self, param: Param, value: object, template_args: Mapping[str, str]
    ) -> ArgSpec | None:
        path = ("args", param.name)
        where = f"args.{param.name}"
        base = resolved_base(param, template_args)
        dtype = c_type_dtype(base)
        if isinstance(value, str) and value.strip().startswith("@"):
            # wider than `ArgSpec.is_captured` on purpose: "@capture" is told what the marker is
            return self.parse_captured(param, value.strip())
        if dtype is None:
            self.error(
                path,
                f"{where}: cannot pass a value of C type {base!r}; supported scalar types are "
                "integer, floating-point, half, __nv_bfloat16 and bool",
            )
            return None
        if isinstance(value, bool):
            value = int(value)
        text = _expr_text(value)
        if text is None:
            self.error(
                path, f"{where} is a scalar: give a number or an expression string" + _why(value)
            )
            return None
        if _POINTER_SPEC.match(text) and any(d in text for d in DTYPES):
            self.error(
                path,
                f"{where} is a scalar ({param.c_type.strip()}), not a pointer: "
                "give a value or an expression",
                text,
            )
            return None
        if self.expression(path, text, where) is None:
            return None
        return ArgSpec(param.name, param.index, param.c_type, False, dtype=dtype, value=text)

    def parse_captured(self, param: Param, text: str) -> ArgSpec | None:
        """`"@captured"` or `"@captured float32"` (the element type of the buffers the struct
        points to, compared with that type's tolerance; without it byte for byte)."""
        path = ("args", param.name)
        words = text.split()
        if words[0] != CAPTURED or len(words) > 2:
            self.error(
                path,
                f'args.{param.name}: "{text}" is not "{CAPTURED}" or "{CAPTURED} float32" '
                "(the bytes the captured launch passed)",
                text,
            )
            return None
        if len(words) == 2 and words[1] not in DTYPES:
            self.error(
                path,
                f"args.{param.name}: unknown element type {words[1]!r}; use one of "
                f"{', '.join(DTYPES)}",
                words[1],
            )
            return None
        return ArgSpec(param.name, param.index, param.c_type, False, value=" ".join(words))

    def check_captured(self, args: list[ArgSpec], capture: str | None, cases: int) -> None:
        """`"@captured"` bytes exist only in the captured launch: the spec needs its `capture`
        and has that case alone (the bytes may hold sizes, strides and addresses)."""
        captured = [a.name for a in args if a.is_captured]
        if not captured:
            return
        names = ", ".join(f"args.{n}" for n in captured)
        if capture is None:
            self.error(
                ("args", captured[0]),
                f'{names}: "{CAPTURED}" needs the spec\'s capture = "DIR" (the launch whose '
                "bytes it passes)",
            )
        elif cases > 1:
            self.error(
                ("sizes",),
                f'{names}: "{CAPTURED}" passes the captured launch\'s bytes, which fit that '
                "launch only: give every size one value (the captured case)",
            )

    def parse_inits(self, value: object, args: list[ArgSpec]) -> dict[str, InitSpec]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.error(("init",), 'init must be a table: init.NAME = "uniform(-1, 1)"')
            return {}
        by_name = {a.name: a for a in args}
        params = {p.name: p for p in self.kernel.params}
        inits: dict[str, InitSpec] = {}
        for name, text in value.items():
            path = ("init", name)
            param = params.get(name)
            if param is None:
                self.error(path, f"init.{name}: {self.kernel.name} has no parameter {name!r}")
                continue
            if not param.is_pointer:
                self.error(path, f"init.{name}: only pointer arguments are initialised")
                continue
            if not isinstance(text, str):
                self.error(path, f'init.{name} must be a string such as "uniform(-1, 1)"')
                continue
            init = self.parse_init(path, name, text)
            arg = by_name.get(name)
            if init is None or arg is None:
                continue
            if arg.role == "out":
                self.warn(
                    path, f"init.{name} is ignored: {name} is 'out' (poisoned before each run)"
                )
            dtype = arg.dtype or "float32"
            if dtype not in FLOAT_DTYPES and init.kind in ("uniform", "normal"):
                self.error(
                    path,
                    f"init.{name}: {init.kind}() gives floats but {name} is {dtype}; "
                    "use randint(lo, hi)",
                    text,
                )
                continue
            if init.kind == "randint" and dtype in INT_RANGES:
                low, high = INT_RANGES[dtype]
                if init.a < low or init.b > high:
                    self.error(
                        path,
                        f"init.{name}: randint({int(init.a)}, {int(init.b)}) does not fit {dtype}",
                        text,
                    )
                    continue
            inits[name] = init
        return inits

    def parse_init(self, path: tuple[str, ...], name: str, text: str) -> InitSpec | None:
        known = ", ".join(f"{k}()" for k in INIT_KINDS)
        m = _INIT_CALL.match(text)
        if not m or m.group(1) not in INIT_KINDS:
            self.error(path, f"init.{name}: unknown init function {text!r} (known: {known})", text)
            return None
        kind = m.group(1)
        arg_texts = [a for a in split_template_args(m.group(2))] if m.group(2).strip() else []
        if len(arg_texts) != INIT_KINDS[kind]:
            self.error(
                path,
                f"init.{name}: {kind}() takes {INIT_KINDS[kind]} arguments, got {len(arg_texts)}",
                text,
            )
            return None
        values: list[float] = []
        for arg_text in arg_texts:
            try:
                number = parse_expr(arg_text).evaluate({})
            except ExprError as e:
                self.error(path, f"init.{name}: {arg_text!r} is not a number ({e.message})", text)
                return None
            values.append(number)
        a, b = [*values, 0.0, 0.0][:2]
        if kind == "randint" and not all(isinstance(v, int) for v in values):
            self.error(path, f"init.{name}: randint() takes integers", text)
            return None
        if kind == "uniform" and not a < b:
            self.error(path, f"init.{name}: uniform(lo, hi) needs lo < hi", text)
            return None
        if kind == "randint" and not a <= b:  # both ends included
            self.error(path, f"init.{name}: randint(lo, hi) needs lo <= hi", text)
            return None
        if kind == "normal" and b < 0:
            self.error(path, f"init.{name}: normal(mean, std) needs std >= 0", text)
            return None
        return InitSpec(cast(Any, kind), a, b)

    def parse_outputs(self, value: object, args: list[ArgSpec]) -> tuple[str, ...]:
        pointers = {a.name: a for a in args if a.is_pointer}
        if value is None:
            outputs = tuple(a.name for a in args if a.is_pointer and a.role in ("out", "inout"))
            known_pointers = {p.name for p in self.kernel.params if p.is_pointer}
            captured = any(a.is_captured for a in args)  # its buffers may be the outputs
            if not outputs and set(pointers) == known_pointers and not self.has_errors():
                if captured:
                    return outputs
                self.error(
                    (), "nothing to compare: no pointer is 'out' or 'inout' (set roles or outputs)"
                )
            return outputs
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.error(("outputs",), 'outputs must be a list of pointer names, e.g. ["out"]')
            return ()
        if not value:
            self.error(("outputs",), "outputs is empty: name at least one pointer to compare")
            return ()
        params = {p.name: p for p in self.kernel.params}
        for name in value:
            param = params.get(name)
            if param is None:
                self.error(
                    ("outputs",),
                    f"outputs: {self.kernel.name} has no parameter {name!r}",
                    f'"{name}"',
                )
            elif not param.is_pointer:
                self.error(("outputs",), f"outputs: {name!r} is not a pointer", f'"{name}"')
            elif name in pointers and pointers[name].role == "in":
                self.error(
                    ("outputs",),
                    f"outputs: {name!r} has role 'in' (make it out or inout)",
                    f'"{name}"',
                )
        if len(set(value)) != len(value):
            self.error(("outputs",), "outputs lists a pointer twice")
        return tuple(value)

    def parse_hidden_case_keys(self, doc: Mapping[str, Any]) -> tuple[bool, int | None]:
        """`generalize = false` (no hidden extra sizes), `align = N` (buffers N-byte aligned)."""
        generalize = True
        if "generalize" in doc:
            if isinstance(doc["generalize"], bool):
                generalize = doc["generalize"]
            else:
                self.error(("generalize",), "generalize must be true or false")
        align = None
        if "align" in doc:
            value = doc["align"]
            if not isinstance(value, int) or isinstance(value, bool) or value not in ALIGNMENTS:
                self.error(
                    ("align",),
                    "align must be a power of two from 1 to 256 (bytes), "
                    "e.g. align = 16 for float4 loads",
                )
            else:
                align = value
        return generalize, align

    def parse_tolerance(self, doc: Mapping[str, Any], key: str, default: float) -> float:
        if key not in doc:
            return default
        value = doc[key]
        if not _is_number(value):
            self.error((key,), f"{key} must be a number, e.g. {key} = 1e-4")
            return default
        if value < 0:
            self.error((key,), f"{key} must not be negative")
            return default
        try:
            return float(value)
        except OverflowError:  # an integer beyond any float
            self.error((key,), f"{key} is too large: a tolerance is a small number, e.g. 1e-4")
            return default


def _toml_repr(value: object) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _name_column(text: str, name: str) -> int:
    m = re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", text)
    return m.start() if m else 0


def _default_init(arg: ArgSpec) -> InitSpec:
    if arg.dtype in FLOAT_DTYPES or arg.dtype is None:
        return InitSpec("uniform", -1.0, 1.0)
    return InitSpec("randint", 0, 100)


def default_tolerance(dtype: str) -> tuple[float, float]:
    """(rtol, atol) the contract gives an element type; integers compare exactly."""
    if dtype in ("float16", "bfloat16"):
        return 1e-2, 1e-2
    if dtype in ("float32", "float64"):
        return 1e-4, 1e-5
    return 0.0, 0.0


def _default_tolerances(args: list[ArgSpec], outputs: tuple[str, ...]) -> tuple[float, float]:
    by_name = {a.name: a for a in args}
    tolerances = [default_tolerance(by_name[o].dtype or "") for o in outputs if o in by_name]
    if not tolerances:
        return 1e-4, 1e-5
    return max(t[0] for t in tolerances), max(t[1] for t in tolerances)


def parse_spec(kernel: Kernel, source: str) -> tuple[TestSpec | None, list[SpecError]]:
    """The kernel's spec (from `kernel.spec`) and the problems found in it.

    `source` is the whole file text (roles of unprefixed pointers are decided from the body).
    Returns (None, []) when the kernel has no spec block; spec is None whenever it is unusable
    (any problem of severity "error"; warnings leave it usable).
    """
    block = kernel.spec
    if block is None:
        return None, []
    if len(block.toml) > MAX_SPEC_CHARS:
        message = (
            f"spec is {len(block.toml) // 1000} kB: over the {MAX_SPEC_CHARS // 1000} kB limit, "
            'not read (a spec lists a few sizes; large inputs go in `inputs = "file.py:fn"`)'
        )
        return None, [SpecError(_marker_span(block), message)]
    locator = Locator(block)
    deep = _too_deep(locator.lines)
    if deep is not None:
        message = f"TOML nests arrays or tables more than {MAX_NESTING} deep: not read"
        return None, [SpecError(locator.line_span(deep), message)]
    try:
        doc = tomllib.loads(block.toml)
    except tomllib.TOMLDecodeError as e:
        return None, [_toml_error(locator, e)]
    except RecursionError:  # nesting that `_too_deep` misjudged (brackets inside strings)
        return None, [SpecError(locator.marker(), "TOML nests too deeply: not read")]
    except ValueError:  # an integer of more digits than Python converts (4,300)
        return None, [_long_number_error(locator)]
    parser = _SpecParser(kernel, source)
    try:
        spec = parser.parse(doc)
    except RecursionError:  # absurdly nested input: report, never raise
        return None, [SpecError(locator.marker(), "spec is nested too deeply")]
    except Exception as exc:  # a bug here must be a diagnostic, not a failed analysis
        log.exception("reading the spec of %s failed", kernel.name)
        message = f"the spec could not be read ({type(exc).__name__}): not usable"
        return None, [SpecError(locator.marker(), message)]
    errors = [_to_error(locator, p) for p in parser.problems]
    errors.sort(key=lambda e: (e.span.start, e.severity != "error"))
    if any(e.severity == "error" for e in errors):
        spec = None
    return spec, errors


def _long_number_error(locator: Locator) -> SpecError:
    """The spec line holding an integer too long to read (the marker if none is found)."""
    message = "a number of thousands of digits: not read (sizes and counts fit in 64 bits)"
    for row, line in enumerate(locator.lines):
        found = _LONG_NUMBER.search(line)
        if found is not None:
            return SpecError(locator.span(row, found.start(), found.end()), message)
    return SpecError(locator.marker(), message)


def _marker_span(block: SpecBlock) -> Span:
    """The `@cuda-llm` marker line of a block too large to scan with a `Locator`."""
    start = block.span.start
    return Span(start, Point(start.line, start.column + 2))


def _too_deep(lines: list[str]) -> int | None:
    """The first line where brackets nest beyond `MAX_NESTING`, or None.

    Counted outside `#` comments and single-line strings (an approximation of TOML that errs
    toward reading the spec: tomllib's own RecursionError is caught as well).
    """
    depth = 0
    for row, line in enumerate(lines):
        if "[" not in line and "{" not in line and depth == 0:
            continue
        quote = ""
        for ch in line:
            if quote:
                if ch == quote:
                    quote = ""
            elif ch in "\"'":
                quote = ch
            elif ch == "#":
                break
            elif ch in "[{":
                depth += 1
                if depth > MAX_NESTING:
                    return row
            elif ch in "]}":
                depth = max(depth - 1, 0)
    return None


def _to_error(locator: Locator, problem: Problem) -> SpecError:
    path = problem.path
    if not path:
        span = locator.marker()
    elif problem.needle is not None:
        span = locator.value(path, problem.needle, problem.column)
    else:
        span = locator.key(path)
    return SpecError(span, problem.message, problem.severity)
