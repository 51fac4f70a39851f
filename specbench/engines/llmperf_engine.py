"""ray-project/llmperf as an engine, driven through its library API with the suite's prompts.

llmperf has no option for custom prompts, but its ``RequestsLauncher`` and OpenAI chat client take
any ``RequestConfig(prompt=(text, n_tokens))``. Its client reads the endpoint from the environment
(OPENAI_API_BASE), so each endpoint gets its own Ray actors with their own ``runtime_env``.

What its client measures is kept as llmperf computes it (see ../../shared/REFERENCE.md section 2):
chunk gaps are summed and divided by the number of streamed data lines (llmperf's inter-token
latency: per chunk), and output tokens are counted with the Llama-2 tokenizer llmperf uses,
whatever model is served. Time per output token is then derived from those counts.

Needs Python 3.10 and ``pip install -r specbench/requirements-llmperf.txt`` (the Job's image does
this); imports are deferred so the package works without it.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable
from typing import Any

from ..records import COUNT_FROM_LLAMA2, RequestRecord, time_per_output_token
from . import Endpoint, LoadSpec, OnRecord, PreparedCase

LLAMA2_TOKENIZER = "hf-internal-testing/llama-tokenizer"  # the tokenizer llmperf counts with


def record_from_llmperf(
    metrics: dict[str, Any],
    generated_text: str,
    count_tokens: Callable[[str], int],
    *,
    run_id: str,
    endpoint: str,
    prepared: PreparedCase,
    index: int,
    started_at: float,
) -> RequestRecord:
    """Our record from what llmperf's client returned for one request (a pure function)."""
    record = RequestRecord(
        run_id=run_id,
        variant=endpoint,
        test_case=prepared.case.name,
        prompt_class=prepared.case.prompt_class,
        engine="llmperf",
        request_index=index,
        started_at=started_at,
        input_tokens=metrics.get("number_input_tokens"),
        token_count_source=COUNT_FROM_LLAMA2,
    )
    if metrics.get("error_code") is not None:
        record.error_code = int(metrics["error_code"])
        record.error_msg = str(metrics.get("error_msg") or "")[:500] or "llmperf client error"
        return record
    chunks = int(metrics.get("number_output_tokens") or 0)  # llmperf's client counts data lines here
    output_tokens = count_tokens(generated_text) if generated_text else 0
    if not chunks or not output_tokens:
        record.error_code, record.error_msg = -1, "empty completion: no content chunk arrived"
        return record
    ttft, e2e = float(metrics["ttft_s"]), float(metrics["end_to_end_latency_s"])
    record.ttft_s = ttft
    record.end_to_end_latency_s = e2e
    record.inter_token_latency_s = float(metrics["inter_token_latency_s"]) / chunks
    record.output_tokens = output_tokens
    record.chunks = chunks
    record.tokens_per_chunk = output_tokens / chunks
    record.time_per_output_token_s = time_per_output_token(ttft, e2e, output_tokens)
    record.output_throughput_tps = output_tokens / e2e if e2e > 0 else None
    record.output_sha256 = hashlib.sha256(generated_text.encode("utf-8")).hexdigest()
    return record


class LlmperfEngine:
    name = "llmperf"

    def __init__(self) -> None:
        self._count_tokens: Callable[[str], int] | None = None

    def _setup(self, actors_needed: int) -> None:
        import ray
        from transformers import LlamaTokenizerFast

        if not ray.is_initialized():
            # Actors reserve one logical CPU each for scheduling; the pod may have one real CPU.
            ray.init(num_cpus=max(actors_needed, 1), include_dashboard=False, log_to_driver=False)
        if self._count_tokens is None:
            tokenizer = LlamaTokenizerFast.from_pretrained(LLAMA2_TOKENIZER)
            self._count_tokens = lambda text: len(tokenizer.encode(text))

    async def run(
        self, endpoint: Endpoint, prepared: PreparedCase, load: LoadSpec, run_id: str, on_record: OnRecord
    ) -> list[RequestRecord]:
        if load.api != "chat":
            raise ValueError("the llmperf engine speaks chat completions only (llmperf's OpenAI client); use --api chat")
        return await asyncio.to_thread(self._run_blocking, endpoint, prepared, load, run_id, on_record)

    def _run_blocking(
        self, endpoint: Endpoint, prepared: PreparedCase, load: LoadSpec, run_id: str, on_record: OnRecord
    ) -> list[RequestRecord]:
        from llmperf.models import RequestConfig
        from llmperf.ray_clients.openai_chat_completions_client import OpenAIChatCompletionsClient
        from llmperf.requests_launcher import RequestsLauncher

        self._setup(load.concurrency * 4)
        environment = {"env_vars": {"OPENAI_API_BASE": endpoint.api_base, "OPENAI_API_KEY": "specbench"}}
        clients = [OpenAIChatCompletionsClient.options(runtime_env=environment).remote() for _ in range(load.concurrency)]
        launcher = RequestsLauncher(clients)
        started: dict[int, float] = {}
        records: list[RequestRecord] = []
        next_index, in_flight = 0, 0
        while len(records) < load.requests:
            # launch_requests silently drops a request when no client is free: launch only into free slots.
            while next_index < load.requests and in_flight < load.concurrency:
                config = RequestConfig(
                    model=load.model,
                    prompt=(prepared.prompt, prepared.prompt_tokens),
                    sampling_params=load.sampling_params(),
                    llm_api="openai",
                    metadata={"index": next_index},
                )
                started[next_index] = time.time()
                launcher.launch_requests(config)
                next_index, in_flight = next_index + 1, in_flight + 1
            # Non-blocking get_next_ready waits for one result without llmperf's busy loop.
            for metrics, text, config in launcher.get_next_ready(block=False):
                in_flight -= 1
                index = (config.metadata or {}).get("index", len(records))
                record = record_from_llmperf(
                    metrics,
                    text,
                    self._count_tokens,
                    run_id=run_id,
                    endpoint=endpoint.name,
                    prepared=prepared,
                    index=index,
                    started_at=started.get(index, time.time()),
                )
                on_record(record)
                records.append(record)
        return sorted(records, key=lambda r: r.request_index)
