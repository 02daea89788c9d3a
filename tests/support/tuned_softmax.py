"""The FSR loop tuning a model's block-per-row softmax: shared by the GPU test
(tests/gpu/test_tune_gpu.py, the real evaluator) and its CPU dry run (tests/unit/test_tune_fsr.py,
the recorded evaluator), so the GPU command's plumbing is proven before it meets a GPU.

The scripted model (real HTTP, the openai SDK) answers `examples/softmax.cu`'s `softmax_rows`
with one candidate: the same algorithm with `THREADS` threads per row, declared in its launch
block as `tune.THREADS = [64, 128, 256, 512]` with `block = "THREADS"` (default 64, the first:
no `#define`). The loop builds it with real NVRTC, judges its default, tunes it, ranks it with
its best configuration and re-validates the winner's text (THREADS written in).
"""

from __future__ import annotations

from pathlib import Path

from cuda_llm_lsp.evaluate.types import Evaluator
from cuda_llm_lsp.fsr.endpoint import OpenAiLlm
from cuda_llm_lsp.fsr.loop import optimize
from cuda_llm_lsp.fsr.toolchain import DefaultToolchain
from cuda_llm_lsp.fsr.types import OptimizeConfig, OptimizeRequest, OptimizeResult
from tests.support.scripted_llm import ScriptedLlmServer, kernel_reply

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "softmax.cu"
VALUES = (64, 128, 256, 512)

CANDIDATE = f"""\
/* @cuda-llm launch
tune.THREADS = [{", ".join(map(str, VALUES))}]
block = "THREADS"
*/
extern "C" __global__ void softmax_rows(const float* in, float* out, int rows, int cols) {{
  // variant: tuned-rows
  __shared__ float scratch[THREADS];
  int row = blockIdx.x;
  if (row >= rows) return;
  const float* x = in + (size_t)row * cols;
  float* y = out + (size_t)row * cols;
  float local_max = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += THREADS) local_max = fmaxf(local_max, x[c]);
  scratch[threadIdx.x] = local_max;
  __syncthreads();
  for (int s = THREADS / 2; s > 0; s /= 2) {{
    if (threadIdx.x < s)
      scratch[threadIdx.x] = fmaxf(scratch[threadIdx.x], scratch[threadIdx.x + s]);
    __syncthreads();
  }}
  float row_max = scratch[0];
  __syncthreads();
  float local_sum = 0.0f;
  for (int c = threadIdx.x; c < cols; c += THREADS) local_sum += expf(x[c] - row_max);
  scratch[threadIdx.x] = local_sum;
  __syncthreads();
  for (int s = THREADS / 2; s > 0; s /= 2) {{
    if (threadIdx.x < s) scratch[threadIdx.x] += scratch[threadIdx.x + s];
    __syncthreads();
  }}
  float inv_sum = 1.0f / scratch[0];
  for (int c = threadIdx.x; c < cols; c += THREADS) y[c] = expf(x[c] - row_max) * inv_sum;
}}"""


async def tune_in_loop(evaluator: Evaluator, *, sanitize: bool = False) -> OptimizeResult:
    """One round, one candidate: the tuned softmax above, judged by `evaluator`."""
    with ScriptedLlmServer([{"text": kernel_reply(CANDIDATE)}]) as server:
        config = OptimizeConfig(
            rounds=1,
            candidates=1,
            profile=False,
            repairs=0,
            sanitize_winner=sanitize,
            launch="free",
            base_url=server.base_url,
            api_key="scripted",
            model="scripted-model",
        )
        request = OptimizeRequest(
            file_text=EXAMPLE.read_text(), kernel="softmax_rows", path=EXAMPLE, seed=5
        )
        return await optimize(
            request, config, evaluator, OpenAiLlm(config), toolchain=DefaultToolchain()
        )
