"""Test specs: parsing per the contract, every error at its line, roles, tolerances, drafts."""

from __future__ import annotations

import textwrap

import pytest

from cuda_llm_lsp.source.c_types import c_type_dtype
from cuda_llm_lsp.source.draft import draft_spec
from cuda_llm_lsp.source.kernels import Kernel, find_kernels
from cuda_llm_lsp.source.roles import infer_roles
from cuda_llm_lsp.source.spec import Case, InitSpec, SpecError, TestSpec, parse_spec
from cuda_llm_lsp.source.text import Point

VADD = """\
extern "C" __global__ void vadd(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
"""

VADD_SPEC = """\
sizes.n = [1, 17, 1000]
grid = "cdiv(n, 256)"
block = 256
args.a = "float32[n]"
args.b = "float32[n]"
args.c = "float32[n]"
args.n = "n"
"""


def kernel_in(source: str, name: str | None = None) -> Kernel:
    kernels = find_kernels(source)
    return next(k for k in kernels if name is None or k.name == name)


def with_spec(body: str, kernel: str = VADD, prefix: str = "#include <cuda_runtime.h>\n") -> str:
    return prefix + "/* @cuda-llm\n" + textwrap.dedent(body) + "*/\n" + kernel


def parse(body: str, kernel: str = VADD, name: str | None = None):
    source = with_spec(body, kernel)
    return (*parse_spec(kernel_in(source, name), source), source)


def line_of(source: str, needle: str, occurrence: int = 0) -> int:
    lines = [n for n, line in enumerate(source.split("\n")) if needle in line]
    return lines[occurrence]


def edit(body: str, old: str, new: str) -> str:
    assert old in body
    return body.replace(old, new)


def only_error(body: str, needle: str, fragment: str, kernel: str = VADD) -> SpecError:
    """Parse; expect exactly one error, containing `fragment`, on the line holding `needle`."""
    spec, errors, source = parse(body, kernel)
    assert spec is None
    real = [e for e in errors if e.severity == "error"]
    assert len(real) == 1, errors
    error = real[0]
    assert fragment in error.message, error.message
    assert error.span.start.line == line_of(source, needle), (error, source)
    assert error.span.end >= error.span.start
    return error


# --- the contract example -----------------------------------------------------------------------

CONTRACT = """\
/* @cuda-llm
sizes.rows = [1, 17, 1000, 4096]     # every size list has the same length: case i takes value i
sizes.cols = [1, 33, 999, 8192]      # the last case is the one that is timed
grid = ["cdiv(cols, 16)", "cdiv(rows, 16)"]   # int, expression, or list of up to 3
block = [16, 16]
args.in  = "float32[rows * cols]"    # pointer: [role] element type [element count expression]
args.out = "out float32[rows * cols]"
args.rows = "rows"                   # scalar: literal or expression; C type from the signature
args.cols = "cols"
*/
extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols) {
  int x = blockIdx.x * 16 + threadIdx.x, y = blockIdx.y * 16 + threadIdx.y;
  if (x < cols && y < rows) out[x * rows + y] = in[y * cols + x];
}
"""


def test_contract_example_parses_to_its_cases() -> None:
    spec, errors = parse_spec(kernel_in(CONTRACT), CONTRACT)
    assert errors == []
    assert isinstance(spec, TestSpec)
    assert spec.kernel == "transpose"
    assert spec.case_count == 4
    assert [a.name for a in spec.args] == ["in", "out", "rows", "cols"]
    assert [(a.role, a.dtype) for a in spec.args[:2]] == [("in", "float32"), ("out", "float32")]
    assert [a.dtype for a in spec.args[2:]] == ["int32", "int32"]
    assert spec.outputs == ("out",)
    assert (spec.rtol, spec.atol) == (1e-4, 1e-5)
    assert spec.args[0].init == InitSpec("uniform", -1.0, 1.0)
    cases = spec.cases()
    assert cases[1] == Case(
        index=1,
        sizes={"rows": 17, "cols": 33},
        grid=(3, 2, 1),
        block=(16, 16, 1),
        smem=0,
        counts={"in": 561, "out": 561},
        scalars={"rows": 17, "cols": 33},
    )
    assert cases[-1].grid == (512, 256, 1)
    assert cases[-1].counts["out"] == 4096 * 8192
    assert cases[0].grid == (1, 1, 1)


def test_no_spec_block_gives_nothing() -> None:
    assert parse_spec(kernel_in(VADD), VADD) == (None, [])


def test_optional_keys() -> None:
    body = VADD_SPEC + textwrap.dedent(
        """\
        smem = "4 * 256"
        init.a = "normal(0, 2)"
        init.b = "randint(-5, 5)"
        outputs = ["c"]
        rtol = 1e-3
        atol = 0
        inputs = "gen/csr.py:make_inputs"
        flops = "n"
        """
    )
    body = edit(body, 'args.b = "float32[n]"', 'args.b = "in int32[n]"')
    kernel = VADD.replace("const float* b", "const int* b")
    spec, errors, _ = parse(body, kernel)
    assert errors == []
    assert spec is not None
    assert spec.smem == "4 * 256"
    assert spec.cases()[0].smem == 1024
    assert spec.arg("a").init == InitSpec("normal", 0, 2)
    assert spec.arg("b").init == InitSpec("randint", -5, 5)
    assert spec.arg("b").dtype == "int32"
    assert (spec.rtol, spec.atol) == (1e-3, 0.0)
    assert spec.atol_relative is False  # the spec's own atol: an absolute bound as written
    assert spec.inputs == "gen/csr.py:make_inputs"
    assert [c.flops for c in spec.cases()] == [1, 17, 1000]


def test_scalars_take_literals_and_expressions() -> None:
    kernel = """\
__global__ void axpby(const double* x, double* y, double alpha, unsigned n, long long stride) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i * stride] = alpha * x[i * stride];
}
"""
    body = """\
sizes.n = [10, 20]
grid = "cdiv(n, 128)"
block = 128
args.x = "float64[n * 2]"
args.y = "float64[n * 2]"
args.alpha = 0.25
args.n = "n"
args.stride = 2
"""
    spec, errors, _ = parse(body, kernel)
    assert errors == []
    assert spec is not None
    assert [a.dtype for a in spec.args] == ["float64", "float64", "float64", "uint32", "int64"]
    assert spec.cases()[1].scalars == {"alpha": 0.25, "n": 20, "stride": 2}
    assert isinstance(spec.cases()[1].scalars["alpha"], float)


def test_template_constants_are_names_in_expressions() -> None:
    kernel = """\
template <typename T, int BLOCK>
__global__ void scale(T* x, T a, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) x[i] *= a;
}
void launch(float* x, int n) { scale<float, 128><<<(n + 127) / 128, 128>>>(x, 2.f, n); }
"""
    body = """\
instance = "scale<float, 128>"
sizes.n = [1, 1000]
grid = "cdiv(n, BLOCK)"
block = "BLOCK"
args.x = "float32[n]"
args.a = 1.5
args.n = "n"
"""
    spec, errors, _ = parse(body, kernel)
    assert errors == []
    assert spec is not None
    assert spec.instance == "scale<float, 128>"
    assert spec.template_args == {"T": "float", "BLOCK": "128"}
    assert spec.arg("x").role == "inout"  # x[i] *= a reads x
    assert spec.arg("a").dtype == "float32"  # T resolved through the instance
    assert spec.cases()[1].block == (128, 1, 1)
    assert spec.cases()[1].grid == (8, 1, 1)


# --- every error at its line --------------------------------------------------------------------


def test_toml_syntax_error_is_on_its_line_and_column() -> None:
    body = edit(VADD_SPEC, "block = 256", "block = = 256")
    error = only_error(body, "block = = 256", "TOML syntax error")
    source = with_spec(body)
    assert error.span.start.column == source.split("\n")[error.span.start.line].index("= 256")


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        ('args.a = "float32[n]"', 'args.a = "float32[n]', 'args.a = "float32[n]'),  # unterminated
        ("sizes.n = [1, 17, 1000]", "sizes.n = [1, 17,", "sizes.n = [1, 17,"),  # unclosed array
        ("block = 256", "block = 256\nblock = 128", "block = 128"),  # duplicate key
        ("args.n = ", "args.n == ", "args.n =="),
    ],
)
def test_toml_errors_reported_at_end_of_document_find_their_line(
    old: str, new: str, needle: str
) -> None:
    only_error(edit(VADD_SPEC, old, new), needle, "TOML syntax error")


def test_toml_error_on_the_marker_line_keeps_the_marker_offset() -> None:
    source = "/* @cuda-llm grid = = 1\n*/\n__global__ void k(float* x) { x[0] = 1; }\n"
    kernel = kernel_in(source)
    assert kernel.spec is not None
    spec, errors = parse_spec(kernel, source)
    assert spec is None
    assert errors[0].span.start == Point(0, source.index("= 1"))


@pytest.mark.parametrize(
    ("old", "new", "needle", "fragment"),
    [
        ('args.a = "float32[n]"', 'args.a = "float[n]"', "args.a", "did you mean float32"),
        ('args.a = "float32[n]"', 'args.a = "int128[n]"', "args.a", "unknown element type"),
        ('args.a = "float32[n]"', 'args.a = "float32[m]"', "args.a", "unknown name 'm'"),
        ('grid = "cdiv(n, 256)"', 'grid = "cdiv(n, 256"', "grid", "expected ')'"),
        ('grid = "cdiv(n, 256)"', 'grid = "cdiv(N, 256)"', "grid", "unknown name 'N'"),
        ('args.n = "n"', 'args.n = "n +"', "args.n", "ends too early"),
        ('args.n = "n"', 'args.n = "n"\nargs.d = "float32[n]"', "args.d", "no parameter 'd'"),
        ("sizes.n = [1, 17, 1000]", "sizes.n = []", "sizes.n", "is empty"),
        ("sizes.n = [1, 17, 1000]", "sizes.n = [1, 2.5, 3]", "sizes.n", "not an integer"),
        ("sizes.n = [1, 17, 1000]", 'sizes.n = [1, "2"]', "sizes.n", "not an integer"),
        ("sizes.n = [1, 17, 1000]", "sizes.n = [1, -2]", "sizes.n", "negative"),
        ("sizes.n = [1, 17, 1000]", "sizes.n = 5", "sizes.n", "must be a list"),
        ("block = 256", "block = [1, 1, 1, 1]", "block", "at most 3"),
        ('grid = "cdiv(n, 256)"', "grid = []", "grid", "is empty"),
        ('grid = "cdiv(n, 256)"', "grid = [true]", "grid", "integer or an expression"),
        ('args.c = "float32[n]"', 'args.c = "output float32[n]"', "args.c", "unknown role"),
        ('args.c = "float32[n]"', 'args.c = "float32"', "args.c", "element count"),
        ('args.c = "float32[n]"', 'args.c = "float32[]"', "args.c", "empty element count"),
        ('args.c = "float32[n]"', "args.c = 3", "args.c", "is a pointer"),
        ('args.a = "float32[n]"', 'args.a = "out float32[n]"', "args.a", "const pointer"),
        ('args.n = "n"', 'args.n = "int32[n]"', "args.n", "not a pointer"),
        ('args.n = "n"', "args.n = [1]", "args.n", "is a scalar"),
        ("block = 256", 'block = 256\ninit.z = "zeros()"', "init.z", "no parameter 'z'"),
        ("block = 256", 'block = 256\ninit.a = "gauss(0, 1)"', "init.a", "unknown init"),
        ("block = 256", 'block = 256\ninit.a = "uniform(1)"', "init.a", "takes 2"),
        ("block = 256", 'block = 256\ninit.a = "uniform(1, -1)"', "init.a", "lo < hi"),
        ("block = 256", 'block = 256\ninit.a = "uniform(x, 1)"', "init.a", "not a number"),
        ("block = 256", 'block = 256\ninit.a = "randint(0.5, 1)"', "init.a", "takes integers"),
        ("block = 256", 'block = 256\ninit.n = "zeros()"', "init.n", "only pointer"),
        ("block = 256", 'block = 256\noutputs = ["n"]', "outputs", "not a pointer"),
        ("block = 256", 'block = 256\noutputs = ["q"]', "outputs", "no parameter 'q'"),
        ("block = 256", 'block = 256\noutputs = ["a"]', "outputs", "role 'in'"),
        ("block = 256", "block = 256\noutputs = []", "outputs", "is empty"),
        ("block = 256", 'block = 256\ninstance = "vadd<float>"', "instance", "not a template"),
        ("block = 256", 'block = 256\ninputs = "gen.py"', "inputs", "file.py:function"),
        ("block = 256", "block = 256\ninputs = 3", "inputs", "file.py:function"),
        ("block = 256", 'block = 256\nrtol = "1e-3"', "rtol", "must be a number"),
        ("block = 256", "block = 256\natol = -1.0", "atol", "negative"),
        ("block = 256", "block = 256\nflops = [1]", "flops", "number or an expression"),
        ("block = 256", 'block = 256\nflops = "2 * m"', "flops", "unknown name 'm'"),
        ("block = 256", 'block = 256\nsmem = "s"', "smem", "unknown name 's'"),
    ],
)
def test_error_on_its_line(old: str, new: str, needle: str, fragment: str) -> None:
    only_error(edit(VADD_SPEC, old, new), needle, fragment)


def test_unequal_size_lists() -> None:
    body = edit(VADD_SPEC, "sizes.n = [1, 17, 1000]", "sizes.n = [1, 17, 1000]\nsizes.m = [1, 2]")
    only_error(body, "sizes.m", "same length")


def test_missing_argument_is_reported_in_the_args_section() -> None:
    body = edit(VADD_SPEC, 'args.n = "n"\n', "")
    only_error(body, "args.a", "missing args.n")


def test_missing_grid_is_reported_on_the_marker_line() -> None:
    body = edit(VADD_SPEC, 'grid = "cdiv(n, 256)"\n', "")
    only_error(body, "/* @cuda-llm", "missing grid")


def test_errors_inside_tables_and_multiline_values() -> None:
    body = """\
grid = "cdiv(n, 256)"
block = 256

[sizes]
n = [
  1,
  2.5,
]

[args]
a = "float32[n]"
b = "float32[nn]"
c = "float32[n]"
n = "n"
"""
    spec, errors, source = parse(body)
    assert spec is None
    by_message = {e.message.split(":")[0]: e for e in errors}
    assert by_message["sizes.n"].span.start.line == line_of(source, "2.5")
    nn = by_message["args.b count"]
    assert nn.span.start.line == line_of(source, 'b = "float32[nn]"')
    assert source.split("\n")[nn.span.start.line][nn.span.start.column :].startswith("nn]")


def test_unknown_name_points_at_the_name() -> None:
    body = edit(VADD_SPEC, 'args.a = "float32[n]"', 'args.a = "float32[n * colz]"')
    error = only_error(body, "args.a", "unknown name 'colz'")
    line = with_spec(body).split("\n")[error.span.start.line]
    assert line[error.span.start.column : error.span.end.column] == "colz"


@pytest.mark.parametrize(
    ("old", "new", "needle", "fragment"),
    [
        ('args.a = "float32[n]"', 'args.a = "float32[n - 10]"', "args.a", "case 0 (n=1)"),
        ('grid = "cdiv(n, 256)"', 'grid = "n / 256"', "grid", "at least 1"),
        ('grid = "cdiv(n, 256)"', 'grid = "cdiv(n, n - 1)"', "grid", "division by zero"),
        ('grid = "cdiv(n, 256)"', "grid = [1, 70000]", "grid", "limit for axis y"),
        ("block = 256", "block = [64, 32]", "block", "2048 threads"),
        ("block = 256", "block = 2048", "block", "limit for axis x"),
        ("block = 256", 'block = "n"', "block", "limit for axis x"),  # n = 1000 is fine, 1000 ok
        ("block = 256", "block = 0", "block", "at least 1"),
        ("block = 256", "block = [1, 1, 128]", "block", "limit for axis z"),
        ("block = 256", 'block = "n / 2.0"', "block", "not an integer"),
        ('args.n = "n"', 'args.n = "n * 3000000"', "args.n", "outside the range of int"),
        ('args.n = "n"', 'args.n = "n / 2.0"', "args.n", "needs an integer"),
        ("block = 256", 'block = 256\nsmem = "-n"', "smem", "must not be negative"),
        ("block = 256", 'block = 256\nflops = "-n"', "flops", "must not be negative"),
    ],
)
def test_evaluation_errors_surface_from_parse_spec(
    old: str, new: str, needle: str, fragment: str
) -> None:
    body = edit(VADD_SPEC, old, new)
    if new == 'block = "n"':
        body = edit(body, "sizes.n = [1, 17, 1000]", "sizes.n = [1, 17, 2000]")
    only_error(body, needle, fragment)


def test_only_the_first_failing_case_per_key_is_reported() -> None:
    body = edit(VADD_SPEC, 'grid = "cdiv(n, 256)"', 'grid = "n / 2000"')
    error = only_error(body, "grid", "case 0")
    assert "case 1" not in error.message


def test_template_without_instance_is_an_error_on_the_marker() -> None:
    kernel = "template <typename T>\n__global__ void fill(T* x, int n) { x[0] = 1; }\n"
    body = 'sizes.n = [4]\ngrid = 1\nblock = 32\nargs.x = "float32[n]"\nargs.n = "n"\n'
    error = only_error(body, "/* @cuda-llm", "is a template", kernel)
    assert "instance = 'fill<float>'" in error.message
    ok = parse('instance = "fill<float>"\n' + body, kernel)
    assert ok[1] == [] and ok[0] is not None


@pytest.mark.parametrize(
    ("instance", "fragment"),
    [
        ('"fill"', "must look like"),
        ('"other<float>"', "not this kernel"),
        ('"fill<float, 4>"', "takes 1"),
        ("3", "must be a string"),
    ],
)
def test_bad_instance(instance: str, fragment: str) -> None:
    kernel = "template <typename T>\n__global__ void fill(T* x, int n) { x[0] = 1; }\n"
    body = f'instance = {instance}\nsizes.n = [4]\ngrid = 1\nblock = 32\nargs.x = "float32[n]"\n'
    body += 'args.n = "n"\n'
    only_error(body, "instance", fragment, kernel)


def test_namespaced_instance_is_accepted() -> None:
    kernel = "template <typename T>\n__global__ void fill(T* x, int n) { x[0] = 1; }\n}\n"
    body = 'instance = "ops::fill<double>"\nsizes.n = [4]\ngrid = 1\nblock = 32\n'
    body += 'args.x = "float64[n]"\nargs.n = "n"\n'
    source = with_spec(body, kernel, prefix="namespace ops {\n")
    spec, errors = parse_spec(kernel_in(source), source)
    assert errors == [] and spec is not None


def test_unknown_top_level_key_is_a_warning_and_the_spec_stays_usable() -> None:
    spec, errors, source = parse(VADD_SPEC + "rtoll = 1e-3\n")
    assert spec is not None
    assert len(errors) == 1
    assert errors[0].severity == "warning"
    assert "unknown key 'rtoll'" in errors[0].message
    assert errors[0].span.start.line == line_of(source, "rtoll")


def test_dtype_disagreeing_with_the_signature_is_a_warning() -> None:
    body = edit(VADD_SPEC, 'args.a = "float32[n]"', 'args.a = "float64[n]"')
    spec, errors, source = parse(body)
    assert spec is not None
    assert [e.severity for e in errors] == ["warning"]
    assert "float64" in errors[0].message and "float32" in errors[0].message
    assert errors[0].span.start.line == line_of(source, "args.a")


def test_unsupported_scalar_type_is_an_error() -> None:
    kernel = "__global__ void k(float* x, P p) { x[0] = p.a; }\n"
    body = 'grid = 1\nblock = 1\nargs.x = "float32[1]"\nargs.p = 1\n'
    source = with_spec(body, kernel, prefix="struct P { int a; };\n")
    spec, errors = parse_spec(kernel_in(source), source)
    assert spec is None and len(errors) == 1
    assert "cannot pass a value of C type 'P'" in errors[0].message
    assert errors[0].span.start.line == line_of(source, "args.p")


def test_nothing_to_compare_is_an_error() -> None:
    kernel = "__global__ void sink(const float* x, int n) { }\n"
    body = 'sizes.n = [4]\ngrid = 1\nblock = 32\nargs.x = "float32[n]"\nargs.n = "n"\n'
    only_error(body, "/* @cuda-llm", "nothing to compare", kernel)


def test_init_for_an_out_pointer_is_a_warning() -> None:
    spec, errors, _ = parse(VADD_SPEC + 'init.c = "zeros()"\n')
    assert spec is not None
    assert [e.severity for e in errors] == ["warning"]
    assert "ignored" in errors[0].message


def test_float_init_on_integer_buffer_is_an_error() -> None:
    kernel = VADD.replace("const float* b", "const int* b")
    body = edit(VADD_SPEC, 'args.b = "float32[n]"', 'args.b = "int32[n]"')
    only_error(body + 'init.b = "uniform(0, 1)"\n', "init.b", "use randint", kernel)


def test_randint_must_fit_the_dtype() -> None:
    kernel = VADD.replace("const float* b", "const unsigned char* b")
    body = edit(VADD_SPEC, 'args.b = "float32[n]"', 'args.b = "uint8[n]"')
    only_error(body + 'init.b = "randint(0, 256)"\n', "init.b", "does not fit uint8", kernel)
    spec, errors, _ = parse(body + 'init.b = "randint(0, 255)"\n', kernel)  # both ends included
    assert errors == [] and spec is not None


def test_error_spans_are_inside_the_block() -> None:
    body = edit(VADD_SPEC, 'args.a = "float32[n]"', 'args.a = "float32[m]"')
    body = edit(body, "block = 256", "block = [1, 2, 3, 4]")
    spec, errors, source = parse(body)
    kernel = kernel_in(source)
    assert kernel.spec is not None and spec is None and len(errors) == 2
    for error in errors:
        assert kernel.spec.span.start <= error.span.start <= kernel.spec.span.end


# --- roles ---------------------------------------------------------------------------------------


ROLE_BODIES = [
    ("c[i] = a[i];", "out"),
    ("*c = a[0];", "out"),
    ("c[i] = c[i] = a[i];", "out"),
    ("if (i < n) { c[i] = 0.f; c[n - 1 - i] = a[i]; }", "out"),
    ("c[i] += a[i];", "inout"),
    ("c[i] = c[i - 1] + a[i];", "inout"),
    ("if (c[i] > 0) c[i] = a[i];", "inout"),
    ("atomicAdd(&c[0], a[i]);", "inout"),
    ("atomicAdd(c + i, a[i]);", "inout"),
    ("float* q = c; q[i] = a[i];", "inout"),
    ("store(c, i, a[i]);", "inout"),
    ("c[i]++;", "inout"),
    ("*(c + i) = a[i];", "inout"),  # conservative: the pointer is used in arithmetic
]  # a pointer never written is `in`: tests/unit/test_roles.py


@pytest.mark.parametrize(("statement", "role"), ROLE_BODIES)
def test_unprefixed_pointer_role_is_decided_from_the_body(statement: str, role: str) -> None:
    kernel = (
        "__global__ void k(const float* __restrict__ a, float* c, int n) {\n"
        f"  int i = threadIdx.x;\n  {statement}\n}}\n"
    )
    source = with_spec(
        'sizes.n = [8]\ngrid = 1\nblock = 8\nargs.a = "float32[n]"\nargs.c = "float32[n]"\n'
        'args.n = "n"\n',
        kernel,
        prefix="__device__ void store(float* p, int i, float v) { p[i] = v; }\n",
    )
    k = kernel_in(source, "k")
    assert infer_roles(k, source) == {"a": "in", "c": role}
    spec, errors = parse_spec(k, source)
    assert errors == [] and spec is not None
    assert spec.arg("c").role == role
    assert spec.outputs == ("c",)
    assert f'args.c = "{role} float32[n]"' in draft_spec(k, source)


def test_explicit_role_overrides_inference() -> None:
    body = edit(VADD_SPEC, 'args.c = "float32[n]"', 'args.c = "inout float32[n]"')
    spec, errors, _ = parse(body)
    assert errors == [] and spec is not None and spec.arg("c").role == "inout"


# --- tolerances --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("c_type", "dtype", "tolerance"),
    [
        ("float", "float32", (1e-4, 1e-5)),
        ("double", "float64", (1e-4, 1e-5)),
        ("__half", "float16", (1e-2, 1e-2)),
        ("__nv_bfloat16", "bfloat16", (1e-2, 1e-2)),
        ("int", "int32", (0.0, 0.0)),
        ("unsigned char", "uint8", (0.0, 0.0)),
    ],
)
def test_default_tolerance_by_output_dtype(
    c_type: str, dtype: str, tolerance: tuple[float, float]
) -> None:
    kernel = f"__global__ void k(const float* a, {c_type}* c, int n) {{ c[0] = a[0]; }}\n"
    body = 'sizes.n = [4]\ngrid = 1\nblock = 4\nargs.a = "float32[n]"\n'
    body += f'args.c = "{dtype}[n]"\nargs.n = "n"\n'
    spec, errors, _ = parse(body, kernel)
    assert errors == [] and spec is not None
    assert (spec.rtol, spec.atol) == tolerance


def test_mixed_outputs_take_the_loosest_tolerance() -> None:
    kernel = "__global__ void k(float* x, __nv_bfloat16* y, int n) { x[0] = 1; y[0] = 1; }\n"
    body = 'sizes.n = [4]\ngrid = 1\nblock = 4\nargs.x = "float32[n]"\n'
    body += 'args.y = "bfloat16[n]"\nargs.n = "n"\n'
    spec, errors, _ = parse(body, kernel)
    assert errors == [] and spec is not None
    assert (spec.rtol, spec.atol) == (1e-2, 1e-2)
    spec, errors, _ = parse(body + 'outputs = ["x"]\n', kernel)
    assert spec is not None and (spec.rtol, spec.atol) == (1e-4, 1e-5)
    spec, errors, _ = parse(body + "rtol = 0.1\n", kernel)
    assert spec is not None and (spec.rtol, spec.atol) == (0.1, 1e-2)
    assert spec.atol_relative  # the default atol: relative to the buffer's mean magnitude
    spec, errors, _ = parse(body + "atol = 1e-2\n", kernel)
    assert spec is not None and (spec.atol, spec.atol_relative) == (1e-2, False)


@pytest.mark.parametrize(
    ("c_type", "dtype"),
    [
        ("int", "int32"),
        ("const unsigned int", "uint32"),
        ("unsigned", "uint32"),
        ("long long", "int64"),
        ("int64_t", "int64"),
        ("size_t", "uint64"),
        ("float", "float32"),
        ("double", "float64"),
        ("half", "float16"),
        ("const __half* __restrict__", "float16"),
        ("__nv_bfloat16", "bfloat16"),
        ("int8_t", "int8"),
        ("uint8_t", "uint8"),
        ("bool", "bool"),
        ("float4", None),
    ],
)
def test_c_type_dtype(c_type: str, dtype: str | None) -> None:
    assert c_type_dtype(c_type) == dtype


# --- drafts ------------------------------------------------------------------------------------


def round_trip(kernel_source: str, name: str | None = None) -> tuple[str, TestSpec]:
    """Insert the draft above the kernel, parse it back: no errors, no warnings."""
    kernel = kernel_in(kernel_source, name)
    assert kernel.spec is None
    draft = draft_spec(kernel, kernel_source)
    assert draft.startswith("/* @cuda-llm\n") and draft.endswith("*/\n")
    lines = kernel_source.split("\n")
    at = kernel.span.start.line
    source = "\n".join(lines[:at]) + ("\n" if at else "") + draft + "\n".join(lines[at:])
    again = kernel_in(source, kernel.name)
    assert again.spec is not None
    spec, errors = parse_spec(again, source)
    assert errors == [], (errors, draft)
    assert spec is not None
    assert spec.cases()
    return draft, spec


def test_draft_1d() -> None:
    draft, spec = round_trip(VADD)
    assert "sizes.n = [1, 17, 1000, 1048576]" in draft
    assert 'grid = "cdiv(n, 256)"' in draft and "block = 256" in draft
    assert 'args.a = "in float32[n]"' in draft
    assert 'args.c = "out float32[n]"' in draft
    assert spec.outputs == ("c",)
    assert spec.cases()[-1].grid == (4096, 1, 1)


def test_draft_2d() -> None:
    draft, spec = round_trip(CONTRACT.split("*/\n", 1)[1])
    assert 'grid = ["cdiv(cols, 16)", "cdiv(rows, 16)"]' in draft
    assert "block = [16, 16]" in draft
    assert 'args.out  = "out float32[rows * cols]"' in draft
    assert spec.cases()[1].grid == (3, 2, 1)


def test_draft_matmul_counts() -> None:
    kernel = """\
__global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
  int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
  }
}
"""
    _, spec = round_trip(kernel)
    assert spec.arg("A").count == "M * K"
    assert spec.arg("B").count == "K * N"
    assert spec.arg("C").count == "M * N"
    assert spec.arg("C").role == "out"
    assert spec.grid == ("cdiv(N, 16)", "cdiv(M, 16)")


def test_draft_3d_stencil() -> None:
    kernel = """\
__global__ void stencil(const float* in, float* out, int nx, int ny, int nz) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  int z = blockIdx.z * blockDim.z + threadIdx.z;
  if (x < nx && y < ny && z < nz) out[(z * ny + y) * nx + x] = 2.f * in[(z * ny + y) * nx + x];
}
"""
    _, spec = round_trip(kernel)
    assert spec.block == ("8", "8", "4")
    assert spec.arg("out").count == "nz * ny * nx"
    assert spec.cases()[-1].grid == (32, 32, 64)


def test_draft_template_uses_the_launched_instance() -> None:
    kernel = """\
template <typename T, int BLOCK_SIZE>
__global__ void scale(T* x, T a, int n) {
  int i = blockIdx.x * BLOCK_SIZE + threadIdx.x;
  if (i < n) x[i] = a * x[i];
}
void run(double* x, int n) { scale<double, 128><<<(n + 127) / 128, 128>>>(x, 2.0, n); }
"""
    draft, spec = round_trip(kernel)
    assert 'instance = "scale<double, 128>"' in draft
    assert spec.arg("x").dtype == "float64" and spec.arg("x").role == "inout"
    assert spec.block == ("BLOCK_SIZE",)
    assert spec.cases()[0].block == (128, 1, 1)


def test_draft_template_without_launch_site_guesses_an_instance() -> None:
    kernel = """\
template <typename T, int TILE>
__global__ void copy(const T* in, T* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i];
}
"""
    draft, spec = round_trip(kernel)
    assert 'instance = "copy<float, 16>"' in draft
    assert "review" in draft
    assert spec.arg("out").dtype == "float32"


def test_draft_without_integer_parameters() -> None:
    kernel = """\
__global__ void relu(float* x) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  x[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""
    draft, spec = round_trip(kernel)
    assert "sizes.n = [256, 1024, 65536, 1048576]" in draft
    assert spec.arg("x").role == "inout"
    assert all(c.counts["x"] % 256 == 0 for c in spec.cases())


def test_draft_float_scalars_half_types_and_launch_bounds() -> None:
    kernel = """\
#include <cuda_fp16.h>
__global__ void __launch_bounds__(128) axpy(const __half* x, __half* y, float alpha, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __float2half(alpha * __half2float(x[i]) + __half2float(y[i]));
}
"""
    draft, spec = round_trip(kernel)
    assert "args.alpha = 0.5" in draft
    assert 'grid = "cdiv(n, 128)"' in draft
    assert spec.arg("y").dtype == "float16" and spec.arg("y").role == "inout"
    assert (spec.rtol, spec.atol) == (1e-2, 1e-2)


def test_draft_several_integer_parameters() -> None:
    kernel = """\
__global__ void softmax(const float* x, float* y, int batch, int dim) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < batch) for (int j = 0; j < dim; ++j) y[r * dim + j] = x[r * dim + j];
}
"""
    draft, spec = round_trip(kernel)
    assert spec.arg("y").count == "batch * dim"
    assert "Review" in draft


def test_draft_comments_explain_what_to_review() -> None:
    draft = draft_spec(kernel_in(VADD), VADD)
    comments = [line for line in draft.split("\n") if line.startswith("#")]
    assert any("review" in c for c in comments)
    assert any("timed" in c for c in comments)


def test_draft_vector_types_and_small_scalars() -> None:
    kernel = """\
__global__ void fill4(float4* v, int n, bool flag, unsigned char c) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) v[i] = make_float4(flag, c, 0.f, 1.f);
}
"""
    draft, spec = round_trip(kernel)
    assert 'args.v    = "out float32[n * 4]"' in draft
    assert spec.arg("flag").dtype == "bool" and spec.arg("c").dtype == "uint8"
    assert spec.cases()[0].scalars == {"n": 1, "flag": 1, "c": 1}
    assert list(spec.sizes) == ["n"]


def test_draft_for_an_untestable_parameter_says_so_and_parse_explains() -> None:
    source = "struct P { int a; };\n__global__ void k(float* x, P p, int n) { x[0] = p.a; }\n"
    kernel = kernel_in(source)
    draft = draft_spec(kernel, source)
    assert "# TODO args.p: a P cannot be given a value in a spec" in draft
    assert '"@captured"' in draft and "cuda-llm capture" in draft  # what would give it
    lines = source.split("\n")
    with_draft = lines[0] + "\n" + draft + "\n".join(lines[1:])
    spec, errors = parse_spec(kernel_in(with_draft), with_draft)
    assert spec is None
    assert [e.message for e in errors] == [
        "missing args.p, and a P cannot be given in a spec (only integer, floating-point and "
        'bool scalars can; with a capture, args.p = "@captured" passes the bytes the program '
        "passed)"
    ]


def test_parse_spec_never_raises_on_mangled_specs() -> None:
    import random

    rng = random.Random(7)
    alphabet = "[]{}\"'=.,#\n -+*/%()abcnrowsl0123456789_e"
    base = VADD_SPEC + 'smem = "n*4"\ninit.a = "uniform(-1, 1)"\noutputs = ["c"]\nflops = "n"\n'
    for _ in range(400):
        body = list(base)
        for _ in range(rng.randint(1, 4)):
            pos = rng.randrange(len(body))
            choice = rng.random()
            if choice < 0.4:
                body.insert(pos, rng.choice(alphabet))
            elif choice < 0.8:
                del body[pos]
            else:
                body[pos] = rng.choice(alphabet)
        source = with_spec("".join(body).rstrip("\n") + "\n")
        for kernel in find_kernels(source):
            spec, errors = parse_spec(kernel, source)
            if kernel.spec is not None:
                for error in errors:
                    assert kernel.spec.span.start <= error.span.start <= kernel.spec.span.end
                    assert error.span.start <= error.span.end
            if spec is not None:
                assert len(spec.cases()) == spec.case_count


def test_instance_may_rely_on_template_defaults() -> None:
    kernel = "template <typename T, int B = 64>\n__global__ void f(T* x, int n) { x[0] = B; }\n"
    body = 'sizes.n = [4]\ngrid = 1\nblock = "B"\nargs.x = "float32[n]"\nargs.n = "n"\n'
    spec, errors, _ = parse('instance = "f<float>"\n' + body, kernel)
    assert errors == [] and spec is not None
    assert spec.template_args == {"T": "float", "B": "64"}
    assert spec.cases()[0].block == (64, 1, 1)
    kernel = kernel.replace(" = 64", "")
    only_error('instance = "f<float>"\n' + body, "instance", "no argument for B", kernel)


def test_roles_of_a_body_with_a_lone_surrogate_and_from_many_threads() -> None:
    from concurrent.futures import ThreadPoolExecutor

    # an undecodable byte read with surrogateescape: the body must still be parsed, not guessed
    source = "__global__ void k(float* x, float* y) {\n  // caf\udce9\n  y[0] = x[0] + y[1];\n}\n"
    (k,) = find_kernels(source)
    assert infer_roles(k, source) == {"x": "in", "y": "inout"}
    with ThreadPoolExecutor(4) as pool:  # the language server compiles on two threads
        roles = list(pool.map(lambda _: infer_roles(k, source), range(64)))
    assert all(r == {"x": "in", "y": "inout"} for r in roles)


def test_flops_use_template_constants_of_the_instance() -> None:
    source = (
        "/* @cuda-llm\n"
        'instance = "k<float,128>"\n'
        "sizes.n = [1024, 4096]\n"
        'grid = "n / B"\n'
        'block = "B"\n'
        'flops = "n * B"\n'
        'args.x = "float32[n]"\n'
        'args.y = "float32[n]"\n'
        'args.n = "n"\n'
        "*/\n"
        "template <typename T, int B> __global__ void k(const T* x, T* y, int n) { y[0] = x[0]; }\n"
    )
    (k,) = find_kernels(source)
    spec, problems = parse_spec(k, source)
    assert problems == [] and spec is not None
    assert [(c.flops, c.grid[0], c.block[0]) for c in spec.cases()] == [
        (1024 * 128, 8, 128),
        (4096 * 128, 32, 128),
    ]


# --- numbers no buffer can have (issue 25, finding 6) ---------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "needle", "fragment"),
    [
        ("sizes.n = [1, 17, 1000]", "sizes.n = [1, 17, " + "9" * 5000 + "]", "sizes.n", "digits"),
        ("block = 256", "block = " + "7" * 4400, "block =", "digits"),
        ("sizes.n = [1, 17, 1000]", "sizes.n = [1, 17, 2199023255553]", "sizes.n", "2^40"),
        ('args.a = "float32[n]"', 'args.a = "float32[n * 1e30]"', "args.a", "64-bit"),
        ('args.a = "float32[n]"', 'args.a = "float32[n' + " * n" * 600 + ']"', "args.a", "64-bit"),
        ('args.a = "float32[n]"', 'args.a = "float32[n * 68719476737]"', "args.a", "2^36"),
        ('grid = "cdiv(n, 256)"', 'grid = "n' + " * 1000" * 500 + '"', "grid", "64-bit"),
    ],
)
def test_numbers_beyond_any_buffer_are_errors_at_their_key(
    old: str, new: str, needle: str, fragment: str
) -> None:
    only_error(edit(VADD_SPEC, old, new), needle, fragment)


def test_a_tolerance_or_tunable_beyond_any_number_is_an_error_at_its_key() -> None:
    only_error(VADD_SPEC + "rtol = " + "9" * 400 + "\n", "rtol", "too large")
    tuned = VADD.replace("c[i] = a[i] + b[i]", "c[i] = a[i] + b[i] * BLOCK")
    body = edit(VADD_SPEC, "block = 256", "block = 256\ntune.BLOCK = [1, " + "9" * 30 + "]")
    source = with_spec(body, tuned, prefix="#ifndef BLOCK\n#define BLOCK 1\n#endif\n")
    spec, errors = parse_spec(kernel_in(source), source)
    assert spec is None and len(errors) == 1 and "64-bit" in errors[0].message, errors
    assert errors[0].span.start.line == line_of(source, "tune.BLOCK")


def test_draft_names_an_enum_parameter_without_its_default_value() -> None:
    source = (
        "enum class Fill { lower, upper };\n"
        "__global__ void k(float* x, int n, Fill fill = Fill::lower) { x[0] = n; }\n"
    )
    draft = draft_spec(kernel_in(source), source)
    assert "# TODO args.fill: a Fill cannot be given a value in a spec;" in draft
    assert "Fill::lower" not in draft
