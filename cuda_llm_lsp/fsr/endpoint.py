"""`OpenAiLlm`: one chat completion per candidate on any OpenAI-compatible endpoint.

Built on the openai SDK's async client with the SDK's own retries off: this module retries
429 / 5xx / connection errors itself (exponential backoff with jitter, honouring Retry-After,
bounded), limits the requests in flight, and turns every failure into a plain `LlmReply.error`
that never contains the API key. It never asks for `n > 1` (vLLM, Ollama and llama.cpp differ
there): one request per candidate.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import os
import random
import re
from email.utils import parsedate_to_datetime
from typing import Any

from cuda_llm_lsp.fsr.client import LlmReply, Prompt, extract_kernel
from cuda_llm_lsp.fsr.types import OptimizeConfig

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 30.0
MAX_RETRY_AFTER_S = 60.0
MAX_CONNECTION_ATTEMPTS = 3  # a refused connection is rarely transient: give up sooner


def _retry_after_s(headers: Any) -> float | None:
    if headers is None:
        return None
    for name in ("retry-after-ms", "retry-after"):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / (1000.0 if name.endswith("-ms") else 1.0)
        except ValueError:
            try:
                when = parsedate_to_datetime(value)
            except (TypeError, ValueError):
                continue
            seconds = (when - datetime.datetime.now(when.tzinfo)).total_seconds()
        return max(0.0, min(seconds, MAX_RETRY_AFTER_S))
    return None


def backoff_s(attempt: int, retry_after: float | None, base: float = 0.5) -> float:
    """Seconds before retry `attempt` (0-based): Retry-After if given, else 2^n with jitter."""
    if retry_after is not None:
        return retry_after + random.uniform(0.0, 0.1)
    ceiling = min(MAX_BACKOFF_S, base * (2**attempt))
    return random.uniform(ceiling / 2, ceiling)


class OpenAiLlm:
    """`LlmClient` on `openai.AsyncOpenAI`; settings from `OptimizeConfig` or the environment."""

    def __init__(self, config: OptimizeConfig, *, backoff_base_s: float = 0.5) -> None:
        import openai  # ~0.9 s to import: only runs that reach an endpoint pay for it

        self._openai = openai
        self.config = config
        self.model = config.model or os.environ.get("CUDA_LLM_MODEL") or "gpt-4o-mini"
        key = config.api_key or os.environ.get("OPENAI_API_KEY")
        self._key_missing = not key
        self.base_url = config.base_url or os.environ.get("OPENAI_BASE_URL") or None
        self._client = openai.AsyncOpenAI(
            api_key=key or "no-key-set",  # local servers need none; OpenAI answers 401
            base_url=self.base_url,
            timeout=config.request_timeout_s,
            max_retries=0,
        )
        self._semaphore = asyncio.Semaphore(max(1, config.concurrency))
        self._completion_tokens_param = False  # True once the model refused `max_tokens`
        self._send_temperature = config.temperature is not None
        self._send_reasoning_effort = config.reasoning_effort is not None
        self._max_tokens = config.max_output_tokens  # lowered once if the model allows fewer
        self._backoff_base_s = backoff_base_s

    @property
    def endpoint(self) -> str:
        return str(self._client.base_url).rstrip("/")

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._client.close()

    async def complete(self, prompt: Prompt) -> LlmReply:
        async with self._semaphore:
            return await self._complete(prompt)

    async def _complete(self, prompt: Prompt) -> LlmReply:
        openai = self._openai
        attempts = max(0, self.config.max_retries) + 1
        last_error = "no attempt made"
        connection_failures = 0
        adaptations = 0
        attempt = 0
        while attempt < attempts:
            retry_after: float | None = None
            try:
                response = await self._client.chat.completions.create(
                    model=self.model,
                    messages=list(prompt.messages),  # type: ignore[arg-type]
                    **self._sampling(),
                )
            except openai.AuthenticationError:
                hint = " (OPENAI_API_KEY is not set)" if self._key_missing else ""
                return self._fatal(f"the endpoint {self.endpoint} rejected the API key (401){hint}")
            except openai.PermissionDeniedError:
                return self._fatal(
                    f"the endpoint {self.endpoint} refused access (403) for this key"
                )
            except openai.NotFoundError:
                return self._fatal(
                    f"model {self.model!r} not found at {self.endpoint} (404): "
                    "check CUDA_LLM_MODEL / cudaLlm.model and the base URL"
                )
            except openai.RateLimitError as exc:
                retry_after = _retry_after_s(exc.response.headers)
                last_error = f"rate limited by {self.endpoint} (429) after {attempt + 1} attempts"
            except openai.APITimeoutError:
                last_error = (
                    f"request timed out after {self.config.request_timeout_s:g} s "
                    f"({attempt + 1} attempts)"
                )
            except openai.APIConnectionError:
                last_error = f"cannot reach the endpoint {self.endpoint} (connection failed)"
                connection_failures += 1
                if attempt + 1 == attempts or connection_failures >= MAX_CONNECTION_ATTEMPTS:
                    return self._fatal(
                        f"{last_error}: is the server running? "
                        "Set OPENAI_BASE_URL / cudaLlm.baseUrl"
                    )
            except openai.APIStatusError as exc:
                status = exc.status_code
                if status == 400 and adaptations < 4 and self._adapt(exc):
                    adaptations += 1
                    continue  # the same attempt, with parameters this model accepts
                if status < 500:
                    return LlmReply(
                        text="",
                        code=None,
                        error=f"the endpoint refused the request ({status}): {_brief(exc)}",
                    )
                retry_after = _retry_after_s(exc.response.headers)
                last_error = (
                    f"server error {status} from {self.endpoint} after {attempt + 1} attempts"
                )
            except openai.OpenAIError as exc:
                return LlmReply(text="", code=None, error=f"LLM request failed: {_brief(exc)}")
            else:
                return self._reply(prompt, response)
            if attempt + 1 < attempts:
                await asyncio.sleep(backoff_s(attempt, retry_after, self._backoff_base_s))
            attempt += 1
        return LlmReply(text="", code=None, error=last_error)

    def _sampling(self) -> dict[str, Any]:
        """Only what the settings ask for: no temperature or reasoning effort unless set
        (reasoning models refuse a temperature; other servers refuse `reasoning_effort`)."""
        params: dict[str, Any] = {}
        if self._send_temperature:
            params["temperature"] = self.config.temperature
        if self._send_reasoning_effort:
            params["reasoning_effort"] = self.config.reasoning_effort
        key = "max_completion_tokens" if self._completion_tokens_param else "max_tokens"
        params[key] = self._max_tokens
        return params

    def _adapt(self, exc: Exception) -> bool:
        """A 400 about a parameter this model does not take: change it, and retry once.

        Newer OpenAI models want `max_completion_tokens` and refuse a temperature; a model with
        a smaller output or context limit names it ("at most 16384 completion tokens", vLLM's
        "maximum context length is 32768 tokens ... 1200 in the messages"); servers without
        reasoning refuse `reasoning_effort`."""
        message = str(getattr(exc, "message", "") or exc)
        lowered = message.lower()
        limit = _token_limit(message)
        if limit is not None and limit < self._max_tokens:
            log.warning("%s allows at most %d output tokens: using that", self.model, limit)
            self._max_tokens = limit
            return True
        if (
            "max_tokens" in message
            and "max_completion_tokens" in message
            and not self._completion_tokens_param
        ):
            self._completion_tokens_param = True
            return True
        if "reasoning_effort" in lowered and self._send_reasoning_effort:
            log.warning("%s does not take reasoning_effort: not sending it", self.model)
            self._send_reasoning_effort = False
            return True
        if "temperature" in lowered and self._send_temperature:
            log.warning("%s does not take a temperature: not sending it", self.model)
            self._send_temperature = False
            return True
        return False

    def _fatal(self, message: str) -> LlmReply:
        return LlmReply(text="", code=None, error=message, fatal=True)

    def _reply(self, prompt: Prompt, response: Any) -> LlmReply:
        usage = getattr(response, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0) if usage else 0
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0) if usage else 0
        choices = getattr(response, "choices", None) or []
        if not choices:
            return LlmReply(
                text="",
                code=None,
                error="the endpoint returned no choices",
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
            )
        choice = choices[0]
        message = choice.message
        text = (getattr(message, "content", None) or "") if message else ""
        refusal = (getattr(message, "refusal", None) or None) if message else None
        reasoning = _reasoning(message)
        finish = getattr(choice, "finish_reason", None)
        code, error = extract_kernel(
            text, prompt.kernel, finish, refusal=refusal, reasoning=reasoning
        )
        return LlmReply(
            text=text,
            code=code,
            error=error,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            finish_reason=finish,
            model=getattr(response, "model", None),
            refusal=refusal,
            reasoning=reasoning,
        )


def _reasoning(message: Any) -> str | None:
    """The reasoning a server sends beside the content (`reasoning_content`: DeepSeek, vLLM,
    llama.cpp; `reasoning`: OpenRouter, newer vLLM); the SDK keeps such fields as extras."""
    if message is None:
        return None
    for name in ("reasoning_content", "reasoning"):
        value = getattr(message, name, None)
        if isinstance(value, str) and value:
            return value
    return None


def _token_limit(message: str) -> int | None:
    """The output token limit a 400 names, if any."""
    found = re.search(r"at most (\d+) completion tokens", message)
    if found:
        return int(found.group(1))
    context = re.search(r"maximum context length is (\d+) tokens", message)
    prompt = re.search(r"(\d+) (?:tokens )?in the messages", message)
    if context and prompt:
        room = int(context.group(1)) - int(prompt.group(1)) - 64
        return room if room > 0 else None
    return None


def _brief(exc: BaseException) -> str:
    """A one-line message from the server's error, without anything that looks like a key."""
    message = str(getattr(exc, "message", None) or exc).splitlines()[0] if str(exc) else ""
    message = re.sub(r"\b(sk|key|api)[-_A-Za-z0-9*]{6,}", "<redacted>", message)
    return message[:300] or type(exc).__name__
