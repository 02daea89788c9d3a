"""`cuda-llm capture` on real programs built with nvcc (static cudart, nvcc's default): the
launch recorded, a spec made from it, and `bench` on that spec as is, the original first
reproducing the captured outputs (issue 39). One program, its mode chosen by argv."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from cuda_llm_lsp.cli import main
from cuda_llm_lsp.engine.capture import CaptureRequest, run_capture

pytestmark = pytest.mark.gpu

PROGRAM = r"""
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

__global__ void saxpy(float* y, const float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

__global__ void spin(float* p, int n, int rounds) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = p[i];
        for (int r = 0; r < rounds; r++) v = v * 0.999f + 0.001f;
        p[i] = v;
    }
}

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); return 3; } } while (0)

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "plain";
    int n = 10000 + (argc > 2 ? atoi(argv[2]) : 0);
    bool managed = !strcmp(mode, "managed");
    float *x, *y, *z;
    if (managed) {
        CHECK(cudaMallocManaged(&x, n * sizeof(float)));
        CHECK(cudaMallocManaged(&y, n * sizeof(float)));
        for (int i = 0; i < n; i++) { x[i] = i * 0.5f; y[i] = 1.0f - i; }
    } else {
        CHECK(cudaMalloc(&x, n * sizeof(float)));
        CHECK(cudaMalloc(&y, n * sizeof(float)));
        float* h = (float*)malloc(n * sizeof(float));
        for (int i = 0; i < n; i++) h[i] = i * 0.5f;
        CHECK(cudaMemcpy(x, h, n * sizeof(float), cudaMemcpyHostToDevice));
        for (int i = 0; i < n; i++) h[i] = 1.0f - i;
        CHECK(cudaMemcpy(y, h, n * sizeof(float), cudaMemcpyHostToDevice));
        free(h);
    }
    CHECK(cudaMalloc(&z, 1 << 20));
    CHECK(cudaMemset(z, 0, 1 << 20));
    cudaStream_t s1, s2;
    CHECK(cudaStreamCreate(&s1));
    CHECK(cudaStreamCreate(&s2));
    if (!strcmp(mode, "graph")) {  // recorded once by stream capture, launched three times
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        CHECK(cudaStreamBeginCapture(s2, cudaStreamCaptureModeGlobal));
        saxpy<<<(n + 255) / 256, 256, 0, s2>>>(y, x, 2.0f, n);
        CHECK(cudaStreamEndCapture(s2, &graph));
        CHECK(cudaGraphInstantiate(&exec, graph, 0));
        for (int round = 0; round < 3; round++) CHECK(cudaGraphLaunch(exec, s2));
        CHECK(cudaStreamSynchronize(s2));
        printf("done\n");
        return 0;
    }
    for (int round = 0; round < 3; round++) {
        if (!strcmp(mode, "streams")) {
            spin<<<256, 256, 0, s1>>>(z, 1 << 18, 2000);
            saxpy<<<(n + 255) / 256, 256, 0, s2>>>(y, x, 2.0f + round, n);
        } else if (!strcmp(mode, "never")) {
            spin<<<4, 256>>>(z, 1024, 10);
        } else {
            saxpy<<<(n + 255) / 256, 256>>>(y, x, 2.0f + round, n);
        }
    }
    CHECK(cudaDeviceSynchronize());
    if (!strcmp(mode, "crash")) abort();
    printf("done\n");
    return 0;
}
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    root = tmp_path_factory.mktemp("capture")
    (root / "prog.cu").write_text(PROGRAM)
    binary = root / "prog"
    done = subprocess.run(
        [nvcc, "-O2", "-arch=native", str(root / "prog.cu"), "-o", str(binary)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return binary


def _capture(program: Path, out: Path, *args: str, **kw: object) -> object:
    request = CaptureRequest((str(program), *args), out, quiet=True, timeout_s=60, **kw)  # type: ignore[arg-type]
    return run_capture(request)


def _spec_and_bench(program: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> str:
    source = program.parent / "prog.cu"
    assert main(["spec", str(source), "--from-capture", str(out), "--write"]) == 0
    text = source.read_text()
    assert 'capture = "' in text and 'args.y = "inout float32[n]"' in text, text
    assert 'grid = "cdiv(n, 256)"' in text, text
    capsys.readouterr()
    code = main(["bench", str(source), "--kernel", "saxpy"])
    printed = capsys.readouterr()
    assert code == 0, printed.out + printed.err
    return printed.out


def test_plain_program_capture_spec_and_bench(
    program: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = program.parent / "cap-plain"
    outcome = _capture(program, out, "plain", kernel="saxpy", launch=2)
    assert outcome.ok, outcome.message  # type: ignore[attr-defined]
    capture = outcome.capture  # type: ignore[attr-defined]
    assert capture.function_name == "saxpy" and capture.launch == 2
    assert capture.grid == (40, 1, 1) and capture.block == (256, 1, 1)
    assert (out.stat().st_mode & 0o777) == 0o700
    assert all((f.stat().st_mode & 0o777) == 0o600 for f in out.iterdir())
    y = capture.params[0].pointer
    assert y is not None and y.changed and y.captured >= 10000 * 4  # (the allocation's size)
    assert not capture.params[1].pointer.changed
    seen = json.loads((out / "seen.json").read_text())
    assert seen["kernels"]["saxpy(float*, float const*, float, int)"] == 3
    _spec_and_bench(program, out, capsys)
    # the captured outputs altered: the original no longer reproduces them
    (out / y.after).write_bytes(b"\0" * y.captured)
    capsys.readouterr()
    code = main(["bench", str(program.parent / "prog.cu"), "--kernel", "saxpy"])
    printed = capsys.readouterr()
    assert code != 0
    assert "does not reproduce the captured outputs" in printed.out + printed.err


def test_two_streams(program: Path) -> None:
    outcome = _capture(program, program.parent / "cap-streams", "streams", kernel="saxpy")
    assert outcome.ok, outcome.message  # type: ignore[attr-defined]
    assert outcome.capture.params[0].pointer.changed  # type: ignore[attr-defined]


def test_managed_memory(program: Path) -> None:
    outcome = _capture(program, program.parent / "cap-managed", "managed", kernel="saxpy")
    assert outcome.ok, outcome.message  # type: ignore[attr-defined]
    pointer = outcome.capture.params[0].pointer  # type: ignore[attr-defined]
    assert pointer is not None and pointer.captured >= 10000 * 4 and pointer.changed


def test_never_launched_lists_the_kernels_seen(program: Path) -> None:
    outcome = _capture(program, program.parent / "cap-never", "never", kernel="saxpy")
    assert not outcome.ok  # type: ignore[attr-defined]
    message = outcome.message  # type: ignore[attr-defined]
    assert "never launched" in message and "spin" in message and "×3" in message, message


def test_a_kernel_inside_a_cuda_graph_is_named_and_the_program_unharmed(program: Path) -> None:
    outcome = _capture(program, program.parent / "cap-graph", "graph", kernel="saxpy")
    assert not outcome.ok  # type: ignore[attr-defined]
    message = outcome.message  # type: ignore[attr-defined]
    assert outcome.returncode == 0, message  # type: ignore[attr-defined]  # capture intact
    assert "recorded into CUDA graphs" in message and "3 CUDA graphs" in message, message


def test_crash_after_the_launch(program: Path) -> None:
    kept = _capture(program, program.parent / "cap-crash", "crash", kernel="saxpy")
    assert kept.ok, kept.message  # type: ignore[attr-defined]
    assert "signal" in kept.message  # type: ignore[attr-defined]
    lost = _capture(program, program.parent / "cap-crash2", "crash", kernel="nothere")
    assert not lost.ok  # type: ignore[attr-defined]
    assert "crashed" in lost.message and "saxpy" in lost.message  # type: ignore[attr-defined]


def test_slowest_and_max_bytes(program: Path) -> None:
    slow = _capture(program, program.parent / "cap-slow", "plain", kernel="saxpy", slowest=True)
    assert slow.ok, slow.message  # type: ignore[attr-defined]
    assert 1 <= slow.capture.launch <= 3  # type: ignore[attr-defined]
    small = _capture(program, program.parent / "cap-small", "plain", kernel="saxpy", max_bytes=100)
    assert not small.ok  # type: ignore[attr-defined]
    assert "--max-bytes" in small.message  # type: ignore[attr-defined]


def _build(root: Path, source: str) -> Path:
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    (root / "prog.cu").write_text(source)
    done = subprocess.run(
        [nvcc, "-O2", "-arch=native", str(root / "prog.cu"), "-o", str(root / "prog")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return root / "prog"


def test_verify_after_a_rebuild(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    binary = _build(tmp_path, PROGRAM)
    # the first launch: a later one's inputs are what the rebuilt kernel's earlier launches
    # wrote, which verify rightly reports as "not verified" rather than as differing outputs
    outcome = _capture(binary, tmp_path / "cap", "plain", kernel="saxpy", launch=1)
    assert outcome.ok, outcome.message  # type: ignore[attr-defined]
    source = tmp_path / "prog.cu"
    assert main(["spec", str(source), "--from-capture", str(tmp_path / "cap"), "--write"]) == 0
    capsys.readouterr()
    assert main(["verify", str(source), "--", str(binary), "plain"]) == 0
    same = capsys.readouterr().out
    assert "the outputs match the capture's" in same and "kernel saxpy:" in same, same
    # the "rebuild": a kernel that is off by one everywhere
    wrong = source.read_text().replace("y[i] = a * x[i] + y[i];", "y[i] = a * x[i] + y[i] + 1;")
    assert wrong != source.read_text()
    other = tmp_path / "rebuilt"
    other.mkdir()
    rebuilt = _build(other, wrong)
    capsys.readouterr()
    assert main(["verify", str(source), "--", str(rebuilt), "plain"]) == 1
    printed = capsys.readouterr()
    assert "y: 10000 of 10000 elements differ" in printed.out, printed.out + printed.err


CUBLAS_PROGRAM = r"""
#include <cstdio>
#include <cublas_v2.h>
#include <cuda_runtime.h>

__global__ void scale_rows(float* m, const float* s, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y;
    if (c < cols && r < rows) m[r * cols + c] *= s[r];
}

int main() {
    const int n = 128;
    float *a, *b, *c, *s;
    cudaMalloc(&a, n * n * sizeof(float));
    cudaMalloc(&b, n * n * sizeof(float));
    cudaMalloc(&c, n * n * sizeof(float));
    cudaMalloc(&s, n * sizeof(float));
    cudaMemset(a, 0, n * n * sizeof(float));
    cudaMemset(b, 0, n * n * sizeof(float));
    cudaMemset(s, 0, n * sizeof(float));
    cublasHandle_t handle;
    if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return 4;
    const float one = 1.0f, zero = 0.0f;
    cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n);
    scale_rows<<<dim3((n + 127) / 128, n), 128>>>(c, s, n, n);
    cudaDeviceSynchronize();
    cublasDestroy(handle);
    printf("done\n");
    return 0;
}
"""


def test_a_program_that_also_calls_cublas(tmp_path: Path) -> None:
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    (tmp_path / "blas.cu").write_text(CUBLAS_PROGRAM)
    done = subprocess.run(
        [nvcc, "-O2", "-arch=native", str(tmp_path / "blas.cu"), "-o", str(tmp_path / "blas"),
         "-lcublas"],
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    if done.returncode != 0 and "cublas" in done.stderr:
        pytest.skip(f"no cuBLAS to link here: {done.stderr[-300:]}")
    assert done.returncode == 0, done.stderr
    outcome = _capture(tmp_path / "blas", tmp_path / "cap", kernel="scale_rows")
    assert outcome.ok, outcome.message  # type: ignore[attr-defined]
    capture = outcome.capture  # type: ignore[attr-defined]
    assert capture.grid == (1, 128, 1) and capture.block == (128, 1, 1)
    assert len(outcome.seen) >= 2, outcome.seen  # type: ignore[attr-defined]  # cuBLAS's too


def test_a_python_program_using_pytorch(tmp_path: Path) -> None:
    import importlib.util
    import sys

    if importlib.util.find_spec("torch") is None:
        pytest.skip("PyTorch is not installed here")
    script = tmp_path / "torch_prog.py"
    script.write_text(
        "import torch\n"
        "x = torch.arange(4096, device='cuda', dtype=torch.float32)\n"
        "y = torch.sin(x) * 2\n"
        "torch.cuda.synchronize()\n"
        "print(float(y.sum()))\n"
    )
    outcome = _capture(Path(sys.executable), tmp_path / "cap", str(script))
    assert outcome.ok, outcome.message  # type: ignore[attr-defined]
    assert outcome.capture.launch == 1  # type: ignore[attr-defined]


def test_capture_overhead_is_measured(program: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The program's wall time alone and under capture (its library loaded, one launch
    recorded), printed for the record (`pytest -s` or the captured output of a failure)."""
    import time

    start = time.perf_counter()
    plain = subprocess.run([str(program), "plain"], capture_output=True, timeout=60)
    alone = time.perf_counter() - start
    assert plain.returncode == 0, plain.stderr
    outcome = _capture(program, program.parent / "cap-overhead", "plain", kernel="saxpy")
    assert outcome.ok, outcome.message  # type: ignore[attr-defined]
    wall = outcome.wall_s  # type: ignore[attr-defined]
    with capsys.disabled():
        print(f"\ncapture overhead: program {alone:.3f} s alone, {wall:.3f} s under capture")
    assert wall < alone + 30


GEMM_PROGRAM = r"""
#include <cstdio>
#include <cuda_runtime.h>

// Column-major reference GEMM with leading dimensions, launched as a program does (lda = M).
__global__ void gemm_ref(int M, int N, int K, float alpha, const float* A, int lda,
                         const float* B, int ldb, float beta, float* C, int ldc) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < M && j < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) acc += A[i + k * lda] * B[k + j * ldb];
        C[i + j * ldc] = alpha * acc + beta * C[i + j * ldc];
    }
}

__global__ void fill(float* m, int rows, int columns, int seed) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < rows && j < columns)
        m[i + j * rows] = (float)(((i + j * rows + seed) * 16807) % 16 - 8);
}

int main() {
    const int M = 128, N = 128, K = 128;
    float *A, *B, *C;
    cudaMalloc(&A, sizeof(float) * M * K);
    cudaMalloc(&B, sizeof(float) * K * N);
    cudaMalloc(&C, sizeof(float) * M * N);
    dim3 block(16, 16);
    fill<<<dim3((M + 15) / 16, (K + 15) / 16), block>>>(A, M, K, 0);
    fill<<<dim3((K + 15) / 16, (N + 15) / 16), block>>>(B, K, N, 17);
    fill<<<dim3((M + 15) / 16, (N + 15) / 16), block>>>(C, M, N, 101);
    gemm_ref<<<dim3((M + 15) / 16, (N + 15) / 16), block>>>(M, N, K, 1.0f, A, M, B, K, 0.5f, C, M);
    if (cudaDeviceSynchronize() != cudaSuccess) return 1;
    printf("done\n");
    return 0;
}
"""


def test_a_gemm_with_leading_dimensions_benches_as_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """CUTLASS's basic_gemm pattern (M = N = K = 128, lda = M): the leading dimensions and K
    follow the sizes in the smaller cases, so bench passes as is; with the captured literal
    they read past the smaller cases' buffers."""
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    source = tmp_path / "gemm.cu"
    source.write_text(GEMM_PROGRAM)
    done = subprocess.run(
        [nvcc, "-O2", "-arch=native", str(source), "-o", str(tmp_path / "gemm")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    out = tmp_path / "cap"
    outcome = _capture(tmp_path / "gemm", out, kernel="gemm_ref")
    assert outcome.ok, outcome.message  # type: ignore[attr-defined]
    assert main(["spec", str(source), "--from-capture", str(out), "--write"]) == 0
    text = source.read_text()
    assert 'args.lda   = "M"' in text and 'args.K     = "M"' in text, text
    capsys.readouterr()
    code = main(["bench", str(source), "--kernel", "gemm_ref"])
    printed = capsys.readouterr()
    assert code == 0, printed.out + printed.err


BY_VALUE_PROGRAM = r"""
#include <cstdio>
#include <cuda_runtime.h>

struct View { const float* x; int n; };          // a pointer inside a struct (16 bytes)
struct Pair { float* lo; float* hi; int half; };  // two pointers into one allocation
enum class Mode : int { add = 1, sub = 2 };
struct Scale { float a; };                        // a struct of no pointer
struct Range { const float* begin; const float* end; };  // `end` one past the allocation

__global__ void axpy_view(View v, Pair out, Mode mode, Scale s, Range r) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= v.n || i >= r.end - r.begin) return;
    float* dst = i < out.half ? out.lo + i : out.hi + (i - out.half);
    *dst = mode == Mode::add ? *dst + s.a * v.x[i] : *dst - s.a * v.x[i];
}

int main() {
    const int n = 20000;
    float *x, *y;
    cudaMalloc(&x, n * sizeof(float));
    cudaMalloc(&y, n * sizeof(float));
    float* h = new float[n];
    for (int i = 0; i < n; i++) h[i] = 0.25f * (i % 97);
    cudaMemcpy(x, h, n * sizeof(float), cudaMemcpyHostToDevice);
    for (int i = 0; i < n; i++) h[i] = 1.0f + (i % 13);
    cudaMemcpy(y, h, n * sizeof(float), cudaMemcpyHostToDevice);
    View v{x, n};
    Pair p{y, y + n / 2, n / 2};
    axpy_view<<<(n + 255) / 256, 256>>>(v, p, Mode::add, Scale{3.0f}, Range{x, x + n});
    if (cudaDeviceSynchronize() != cudaSuccess) return 3;
    printf("done\n");
    return 0;
}
"""


def test_structs_passed_by_value_are_captured_relocated_and_benched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A struct holding a device pointer, one holding two pointers into one allocation, an
    enum, a pointer-free struct and a range whose end is one past its allocation: the spec
    passes their captured bytes (`"@captured"`), the pointers relocated to buffers of their
    own, and the original reproduces the outputs."""
    binary = _build(tmp_path, BY_VALUE_PROGRAM)
    out = tmp_path / "cap"
    outcome = _capture(binary, out, kernel="axpy_view")
    assert outcome.ok, outcome.message  # type: ignore[attr-defined]
    params = outcome.capture.params  # type: ignore[attr-defined]
    assert [r.at for r in params[0].embedded] == [0]
    assert [r.at for r in params[1].embedded] == [0, 8]
    assert all(r.pointer.changed for r in params[1].embedded)
    assert not params[2].regions and not params[3].regions
    end = params[4].embedded
    assert [r.at for r in end] == [0, 8] and end[1].pointer.captured == 0, end
    source = tmp_path / "prog.cu"
    assert main(["spec", str(source), "--from-capture", str(out), "--write"]) == 0
    text = source.read_text()
    assert 'args.v    = "@captured float32"' in text, text
    assert 'args.out  = "@captured float32"' in text, text
    assert 'args.mode = "@captured"' in text and 'args.s    = "@captured"' in text, text
    assert 'args.r    = "@captured float32"' in text, text
    capsys.readouterr()
    code = main(["bench", str(source), "--kernel", "axpy_view"])
    printed = capsys.readouterr()
    assert code == 0, printed.out + printed.err
    assert ": ok" in printed.out, printed.out
    # verify compares the buffers inside the structs too
    assert main(["verify", str(source), "--", str(binary)]) == 0
    same = capsys.readouterr().out
    assert "the outputs match the capture's" in same, same
