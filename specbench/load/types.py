"""The types the load stage shares: an endpoint, the load, a prepared test case, and the Engine
protocol every engine follows (specbench.load names the engines and makes one)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Protocol

from specbench.prompts.suite import TestCase
from specbench.results.records import RequestRecord


@dataclass(frozen=True)
class Endpoint:
    name: str  # the Variant dimension: the service name
    url: str  # base URL without /v1, e.g. http://qwen-vllm:8000

    @property
    def api_base(self) -> str:
        return self.url.rstrip("/") + "/v1"


@dataclass(frozen=True)
class LoadSpec:
    model: str
    max_tokens: int
    concurrency: int
    requests: int
    request_timeout_s: float
    temperature: float = 0.0
    seed: int = 11111
    api: str = "chat"
    ignore_eos: bool = False
    # Qwen3's thinking mode, set explicitly on every chat request: it changes what is generated and so
    # the acceptance. vLLM hands chat_template_kwargs to the chat template renderer (vllm-project/vllm
    # vllm/entrypoints/openai/protocol.py, ChatCompletionRequest.chat_template_kwargs); Qwen's vLLM guide:
    # https://qwen.readthedocs.io/en/latest/deployment/vllm.html#thinking-non-thinking-modes
    enable_thinking: bool = False
    # Open loop: requests arrive as a Poisson process at this rate (requests/s, a seeded schedule),
    # however many are in flight; None is the closed loop of ``concurrency`` requests in flight.
    request_rate: float | None = None
    # The circuit breaker (both engines): after this many consecutive failed requests of one
    # endpoint nothing more is sent to it this run (each request not sent is recorded as not_sent);
    # 0 never stops. specbench.load.native.CircuitBreaker.
    max_consecutive_failures: int = 8

    @property
    def level(self) -> str:
        """``c4`` or ``r2p5``: the load level's label in records and file names (point ids use it too)."""
        if self.request_rate is not None:
            return "r" + format(self.request_rate, "g").replace(".", "p")
        return f"c{self.concurrency}"

    def to_dict(self) -> dict:
        """run.json's ``plan.load``; a closed-loop load stores what it always did (no request_rate)."""
        data = asdict(self)
        if data["request_rate"] is None:
            del data["request_rate"]
        return data

    def sampling_params(self) -> dict:
        """What goes into every request body beside the prompt; llmperf's files record it too (its chat
        client merges these into the body: llmperf ray_clients/openai_chat_completions_client.py)."""
        params: dict = {"max_tokens": self.max_tokens, "temperature": self.temperature, "seed": self.seed}
        if self.ignore_eos:
            params["ignore_eos"] = True  # vLLM extension: always generate max_tokens
        if self.api == "chat":
            params["chat_template_kwargs"] = {"enable_thinking": self.enable_thinking}
        return params


@dataclass(frozen=True)
class PreparedCase:
    case: TestCase
    prompt: str
    prompt_tokens: int  # counted by the served model's tokenizer (or estimated; see the run's settings)

    def messages(self, index: int) -> tuple[dict[str, str], ...]:
        """Request ``index``'s chat messages: a dataset case's sampled prompts in turn, else llmperf's
        chat form (an empty system message, then the prompt)."""
        if self.case.items:
            return self.case.messages(index)
        return ({"role": "system", "content": ""}, {"role": "user", "content": self.prompt})

    def prompt_id(self, index: int) -> str:
        return self.case.items[index % len(self.case.items)].id if self.case.items else ""


OnRecord = Callable[[RequestRecord], None]


class Engine(Protocol):
    name: str

    async def run(
        self, endpoint: Endpoint, prepared: PreparedCase, load: LoadSpec, run_id: str, on_record: OnRecord
    ) -> list[RequestRecord]:
        """Send ``load.requests`` requests, ``load.concurrency`` at a time; never raise for a failed request."""
        ...
