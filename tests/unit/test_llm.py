"""The LLM client against a scripted OpenAI-compatible server, through the real openai SDK."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from cuda_llm_lsp.fsr.client import Prompt, extract_kernel
from cuda_llm_lsp.fsr.endpoint import OpenAiLlm, backoff_s
from cuda_llm_lsp.fsr.types import OptimizeConfig
from tests.support.fixtures import scripted_llm_fixture  # noqa: F401
from tests.support.load import slack
from tests.support.scripted_llm import ScriptedLlmServer, error, kernel_reply, reply

KERNEL = """\
extern "C" __global__ void saxpy(const float* x, float* y, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}"""
SECRET = "sk-test-SECRET-0123456789abcdef"


def prompt(index: int = 1) -> Prompt:
    return Prompt(
        kernel="saxpy",
        round=1,
        index=index,
        messages=(
            {"role": "system", "content": "sys"},
            {"role": "user", "content": f"candidate {index}"},
        ),
    )


def client(server: ScriptedLlmServer, **overrides: object) -> OpenAiLlm:
    values: dict[str, object] = {
        "base_url": server.base_url,
        "api_key": SECRET,
        "model": "scripted-model",
        "request_timeout_s": 5.0,
    }
    values.update(overrides)
    return OpenAiLlm(OptimizeConfig(**values), backoff_base_s=0.01)  # type: ignore[arg-type]


async def test_reply_gives_the_kernel_and_token_use(scripted_llm: ScriptedLlmServer) -> None:
    scripted_llm.add(reply(kernel_reply(KERNEL)))
    llm = client(scripted_llm)
    answer = await llm.complete(prompt())
    await llm.close()
    assert answer.error is None
    assert answer.code == KERNEL + "\n"
    assert answer.prompt_tokens > 0 and answer.completion_tokens > 0
    assert answer.tokens == answer.prompt_tokens + answer.completion_tokens
    [request] = scripted_llm.chat_requests()
    body = request["body"]
    assert body["model"] == "scripted-model"
    assert body.get("n", 1) == 1
    assert body["messages"][1]["content"] == "candidate 1"
    assert request["headers"]["authorization"] == f"Bearer {SECRET}"


async def test_block_defining_the_kernel_is_chosen(scripted_llm: ScriptedLlmServer) -> None:
    text = (
        "First a helper:\n```cpp\n__device__ float twice(float v) { return 2 * v; }\n```\n"
        "Host usage:\n```\nsaxpy<<<g, b>>>(x, y, a, n);\n```\n"
        f"The kernel:\n```c++\n{KERNEL}\n```\n"
    )
    scripted_llm.add(reply(text))
    llm = client(scripted_llm)
    answer = await llm.complete(prompt())
    await llm.close()
    assert answer.code is not None and "__global__ void saxpy" in answer.code
    assert "twice" not in answer.code


async def test_server_without_usage_still_works(scripted_llm: ScriptedLlmServer) -> None:
    scripted_llm.add(reply(kernel_reply(KERNEL), usage=False))
    llm = client(scripted_llm)
    answer = await llm.complete(prompt())
    await llm.close()
    assert answer.code is not None and answer.tokens == 0


async def test_reply_without_code_block_is_an_llm_error(scripted_llm: ScriptedLlmServer) -> None:
    scripted_llm.add(reply("I would use shared memory tiling here."))
    llm = client(scripted_llm)
    answer = await llm.complete(prompt())
    await llm.close()
    assert answer.code is None and not answer.fatal
    assert answer.error is not None and "no code block" in answer.error


async def test_truncated_reply_is_reported(scripted_llm: ScriptedLlmServer) -> None:
    scripted_llm.add(reply("```cuda\n" + KERNEL[:80], finish_reason="length"))
    llm = client(scripted_llm)
    answer = await llm.complete(prompt())
    await llm.close()
    assert answer.code is None
    assert answer.error is not None and answer.error.startswith("reply truncated")


async def test_429_then_success_honours_retry_after(scripted_llm: ScriptedLlmServer) -> None:
    scripted_llm.add(
        error(429, "slow down", headers={"Retry-After": "0.2"}), reply(kernel_reply(KERNEL))
    )
    llm = client(scripted_llm)
    started = time.monotonic()
    answer = await llm.complete(prompt())
    await llm.close()
    assert answer.code is not None
    assert time.monotonic() - started >= 0.2
    assert len(scripted_llm.chat_requests()) == 2


async def test_429_storm_gives_up_after_bounded_retries(scripted_llm: ScriptedLlmServer) -> None:
    scripted_llm.add(error(429, "rate limit", headers={"Retry-After": "0"}, repeat=-1))
    llm = client(scripted_llm, max_retries=3)
    answer = await llm.complete(prompt())
    await llm.close()
    assert answer.code is None and not answer.fatal
    assert answer.error is not None and "rate limited" in answer.error and "429" in answer.error
    assert len(scripted_llm.chat_requests()) == 4


async def test_500_is_retried(scripted_llm: ScriptedLlmServer) -> None:
    scripted_llm.add(error(500, "boom"), error(503, "busy"), reply(kernel_reply(KERNEL)))
    llm = client(scripted_llm)
    answer = await llm.complete(prompt())
    await llm.close()
    assert answer.code is not None
    assert len(scripted_llm.chat_requests()) == 3


async def test_401_is_fatal_and_never_echoes_the_key(scripted_llm: ScriptedLlmServer) -> None:
    scripted_llm.add(error(401, f"Incorrect API key provided: {SECRET}"))
    llm = client(scripted_llm)
    answer = await llm.complete(prompt())
    await llm.close()
    assert answer.fatal and answer.error is not None
    assert "401" in answer.error and "API key" in answer.error
    assert SECRET not in answer.error and "SECRET" not in answer.error
    assert len(scripted_llm.chat_requests()) == 1  # not retried


async def test_unknown_model_is_fatal(scripted_llm: ScriptedLlmServer) -> None:
    scripted_llm.add(error(404, "model 'nope' does not exist"))
    llm = client(scripted_llm, model="nope")
    answer = await llm.complete(prompt())
    await llm.close()
    assert answer.fatal and answer.error is not None
    assert "'nope' not found" in answer.error and "404" in answer.error


async def test_other_4xx_is_not_retried(scripted_llm: ScriptedLlmServer) -> None:
    scripted_llm.add(error(400, "context length exceeded"))
    llm = client(scripted_llm)
    answer = await llm.complete(prompt())
    await llm.close()
    assert not answer.fatal and answer.error is not None and "400" in answer.error
    assert "context length exceeded" in answer.error
    assert len(scripted_llm.chat_requests()) == 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_unreachable_endpoint_is_fatal_with_a_clear_message() -> None:
    port = _free_port()
    llm = OpenAiLlm(
        OptimizeConfig(base_url=f"http://127.0.0.1:{port}/v1", api_key=SECRET, max_retries=1),
        backoff_base_s=0.01,
    )
    answer = await llm.complete(prompt())
    await llm.close()
    assert answer.fatal and answer.error is not None
    assert "cannot reach" in answer.error and str(port) in answer.error
    assert SECRET not in answer.error


async def test_timeout_is_reported(scripted_llm: ScriptedLlmServer) -> None:
    scripted_llm.add(reply(kernel_reply(KERNEL), delay_s=3, repeat=2))
    llm = client(scripted_llm, request_timeout_s=0.3, max_retries=1)
    started = time.monotonic()
    answer = await llm.complete(prompt())
    await llm.close()
    assert answer.error is not None and "timed out" in answer.error
    assert time.monotonic() - started < 2.5 * slack()


async def test_missing_key_is_explained(
    scripted_llm: ScriptedLlmServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    scripted_llm.add(error(401, "no key"))
    llm = client(scripted_llm, api_key=None)
    answer = await llm.complete(prompt())
    await llm.close()
    assert answer.fatal and answer.error is not None and "OPENAI_API_KEY is not set" in answer.error


async def test_settings_come_from_the_environment(
    scripted_llm: ScriptedLlmServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", scripted_llm.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    scripted_llm.add(reply(kernel_reply(KERNEL)))
    llm = OpenAiLlm(OptimizeConfig(model="env-model"))
    answer = await llm.complete(prompt())
    await llm.close()
    assert answer.code is not None
    assert scripted_llm.chat_requests()[0]["body"]["model"] == "env-model"


async def test_concurrency_is_limited(scripted_llm: ScriptedLlmServer) -> None:
    scripted_llm.add(reply(kernel_reply(KERNEL), delay_s=0.4, repeat=4))
    llm = client(scripted_llm, concurrency=2)
    started = time.monotonic()
    answers = await asyncio.gather(*(llm.complete(prompt(i)) for i in range(1, 5)))
    elapsed = time.monotonic() - started
    await llm.close()
    assert all(a.code for a in answers)
    assert elapsed >= 0.8  # two waves of two
    times = sorted(r["time"] for r in scripted_llm.chat_requests())
    assert times[2] - times[0] >= 0.35  # the third request waited for a slot


# -- extraction and backoff (pure) --------------------------------------------------------------


def test_extract_handles_templates_and_launch_bounds() -> None:
    code = "template <int B>\n__global__ void __launch_bounds__(256) saxpy(float* y) { y[0] = B; }"
    got, err = extract_kernel(f"```cuda\n{code}\n```", "saxpy")
    assert err is None and got == code + "\n"


def test_extract_accepts_an_unclosed_fence_when_the_reply_finished() -> None:
    got, err = extract_kernel(f"```cuda\n{KERNEL}\n", "saxpy", "stop")
    assert err is None and got is not None and got.startswith('extern "C"')


def test_extract_hands_a_renamed_kernel_to_the_judge() -> None:
    """A kernel under another name is the judge's `signature_mismatch`, not "no code"."""
    got, err = extract_kernel("```cuda\n__global__ void other(int* p) { }\n```", "saxpy")
    assert err is None and got is not None and "other(" in got


def test_extract_without_any_kernel_says_what_is_missing() -> None:
    got, err = extract_kernel("```cuda\n__device__ int f(int v) { return v; }\n```", "saxpy")
    assert got is None and err is not None and "saxpy" in err


def test_backoff_grows_and_is_bounded() -> None:
    assert backoff_s(0, 1.5) >= 1.5
    waits = [backoff_s(n, None, base=1.0) for n in range(12)]
    assert waits[3] >= 4.0 and max(waits) <= 30.0


async def test_models_refusing_max_tokens_and_temperature_are_adapted_to(
    scripted_llm: ScriptedLlmServer,
) -> None:
    scripted_llm.add(
        error(
            400,
            "Unsupported parameter: 'max_tokens' is not supported with this model. "
            "Use 'max_completion_tokens' instead.",
        ),
        error(400, "Unsupported value: 'temperature' does not support 0.8 with this model."),
        reply(kernel_reply(KERNEL)),
        reply(kernel_reply(KERNEL)),
    )
    llm = client(scripted_llm, temperature=0.8)
    first = await llm.complete(prompt(1))
    second = await llm.complete(prompt(2))
    await llm.close()
    assert first.code is not None and second.code is not None
    bodies = [r["body"] for r in scripted_llm.chat_requests()]
    assert len(bodies) == 4
    assert "max_tokens" in bodies[0] and "temperature" in bodies[0]
    assert "max_completion_tokens" in bodies[2] and "max_tokens" not in bodies[2]
    assert "temperature" not in bodies[2] and "temperature" not in bodies[3]


async def test_sampling_defaults_suit_reasoning_models(scripted_llm: ScriptedLlmServer) -> None:
    """No temperature and no reasoning_effort unless set; room for reasoning in max_tokens."""
    scripted_llm.add(reply(kernel_reply(KERNEL)), reply(kernel_reply(KERNEL)))
    plain = client(scripted_llm)
    await plain.complete(prompt(1))
    await plain.close()
    tuned = client(scripted_llm, temperature=0.2, max_output_tokens=4096, reasoning_effort="high")
    await tuned.complete(prompt(2))
    await tuned.close()
    first, second = (r["body"] for r in scripted_llm.chat_requests())
    assert "temperature" not in first and "reasoning_effort" not in first
    assert first["max_tokens"] == 32768
    assert second["temperature"] == 0.2 and second["max_tokens"] == 4096
    assert second["reasoning_effort"] == "high"


async def test_limits_and_parameters_the_model_refuses_are_adapted_to(
    scripted_llm: ScriptedLlmServer,
) -> None:
    """A smaller output limit (OpenAI's wording, vLLM's context wording) and a server without
    reasoning_effort: the request is retried with what the model takes."""
    scripted_llm.add(
        error(
            400,
            "max_tokens is too large: 32768. This model supports at most 16384 "
            "completion tokens, whereas you provided 32768.",
        ),
        error(
            400,
            "This model's maximum context length is 8192 tokens. However, you requested "
            "18384 tokens (2000 in the messages, 16384 in the completion).",
        ),
        error(400, "Unrecognized request argument supplied: reasoning_effort"),
        reply(kernel_reply(KERNEL)),
    )
    llm = client(scripted_llm, reasoning_effort="low")
    answer = await llm.complete(prompt())
    await llm.close()
    assert answer.code is not None, answer.error
    bodies = [r["body"] for r in scripted_llm.chat_requests()]
    assert [b["max_tokens"] for b in bodies] == [32768, 16384, 8192 - 2000 - 64, 6128]
    assert "reasoning_effort" in bodies[2] and "reasoning_effort" not in bodies[3]


async def test_refusal_and_reasoning_fields_reach_the_reply(
    scripted_llm: ScriptedLlmServer,
) -> None:
    scripted_llm.add(
        reply("", refusal="I can't help with that.", content_null=True),
        reply(kernel_reply(KERNEL), reasoning_content="thinking about coalescing"),
    )
    llm = client(scripted_llm)
    refused = await llm.complete(prompt(1))
    answered = await llm.complete(prompt(2))
    await llm.close()
    assert refused.code is None and refused.refusal == "I can't help with that."
    assert refused.error == "the model refused: I can't help with that."
    assert answered.code is not None and answered.reasoning == "thinking about coalescing"


def test_a_kernel_declared_with_braces_in_its_launch_bounds_is_read() -> None:
    """CuTe's kernels: `__global__ static __launch_bounds__(size(CThreadLayout{}))` puts braces
    between `__global__` and the name; the reply's kernel is still the one taken."""
    from cuda_llm_lsp.fsr.client import extract_kernel

    reply = """Here it is:
```cuda
template <class CtaTiler, class CThreadLayout>
__global__ static
__launch_bounds__(decltype(size(CThreadLayout{}))::value)
void
gemm_device(CtaTiler cta_tiler, float const* A, float* C)
{
    C[threadIdx.x] = 2.0f * A[threadIdx.x];
}
```"""
    code, why = extract_kernel(reply, "gemm_device")
    assert why is None and code is not None and "gemm_device(CtaTiler" in code
