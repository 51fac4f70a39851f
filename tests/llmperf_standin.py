"""A stand-in for ray-project/llmperf (f1d6bed), which cannot be installed in CI (Python <3.11, GitHub).

It behaves like the real pieces the llmperf engine touches, read at that commit:
- ``requests_launcher.py``: ``RequestsLauncher`` over a ray ``ActorPool``: ``launch_requests``
  submits only when a client is free (else drops the request), ``get_next_ready`` returns results
  only through the pool and blocks until *every* submitted request is done.
- ``ray_clients/openai_chat_completions_client.py``: ``llm_request`` posts with ``requests``
  (module global, stream=True, timeout 180), counts every data line but [DONE] as a token, times
  content chunks with ``time.monotonic`` and returns only their sum; on any exception it prints it
  and returns ``error_code`` -1 (or the HTTP status) with ``error_msg`` empty unless the status was
  not 200. Written here from that behaviour, not copied.
- An actor runs one call at a time in its own process: here each stand-in actor has its own thread
  and its own copy of this module (its own ``requests`` global, as a process would), and reads the
  endpoint from itself, since threads share one environment.
"""

from __future__ import annotations

import concurrent.futures
import importlib.util
import itertools
import json
import time
from pathlib import Path
from typing import Any

import requests

from specbench.load import llmperf_actor


def llm_request(owner: Any, config: Any) -> tuple[dict[str, Any], str, Any]:
    prompt, prompt_len = config.prompt
    body = {"model": config.model, "messages": [{"role": "system", "content": ""}, {"role": "user", "content": prompt}], "stream": True}
    body.update(config.sampling_params or {})
    gaps: list[float] = []
    tokens_received, ttft, code, text, error_msg, total, throughput = 0, 0, -1, "", "", 0, 0
    metrics: dict[str, Any] = {"error_code": None, "error_msg": ""}
    start = last = time.monotonic()
    try:
        with requests.post(owner.api_base + "/chat/completions", json=body, stream=True, timeout=180, headers={}) as response:
            if response.status_code != 200:
                error_msg, code = response.text, response.status_code
                response.raise_for_status()
            for chunk in response.iter_lines(chunk_size=None):
                chunk = chunk.strip()
                if not chunk:
                    continue
                chunk = chunk[len("data: ") :]
                if chunk == b"[DONE]":
                    continue
                tokens_received += 1
                data = json.loads(chunk)
                if "error" in data:
                    error_msg, code = data["error"]["message"], data["error"]["code"]
                    raise RuntimeError(error_msg)
                delta = data["choices"][0]["delta"]
                if delta.get("content", None):
                    now = time.monotonic()
                    if not ttft:
                        ttft = now - start
                        gaps.append(ttft)
                    else:
                        gaps.append(now - last)
                    last = time.monotonic()
                    text += delta["content"]
        total = time.monotonic() - start
        throughput = tokens_received / total
    except Exception as e:  # noqa: BLE001 - as llmperf: printed, then an error row
        metrics["error_msg"], metrics["error_code"] = error_msg, code
        print(f"Warning Or Error: {e}")
        print(code)
    metrics.update(
        inter_token_latency_s=sum(gaps),
        ttft_s=ttft,
        end_to_end_latency_s=total,
        request_output_throughput_token_per_s=throughput,
        number_total_tokens=tokens_received + prompt_len,
        number_output_tokens=tokens_received,
        number_input_tokens=prompt_len,
    )
    return metrics, text, config


class RequestConfig:
    def __init__(self, model: str, prompt: tuple[str, int], sampling_params: Any = None, llm_api: Any = None, metadata: Any = None):
        self.model, self.prompt, self.sampling_params, self.llm_api, self.metadata = model, prompt, sampling_params, llm_api, metadata


_copies = itertools.count()


class StandInActor:
    """The engine's recording actor (llmperf_actor.RecordingChatClient) on a thread of its own."""

    def __init__(self, api_base: str) -> None:
        spec = importlib.util.spec_from_file_location(f"llmperf_standin_copy_{next(_copies)}", Path(__file__))
        self.module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.module)
        self.api_base = api_base
        self.thread = concurrent.futures.ThreadPoolExecutor(max_workers=1)

    def submit(self, config: Any) -> concurrent.futures.Future:
        return self.thread.submit(llmperf_actor.traced_request, self.module, self.module.llm_request, self, config)


class RequestsLauncher:
    def __init__(self, clients: list[StandInActor]) -> None:
        self.idle, self.pending = list(clients), {}

    def launch_requests(self, config: Any) -> None:
        if self.idle:
            client = self.idle.pop()
            self.pending[client.submit(config)] = client

    def get_next_ready(self, block: bool = False) -> list[Any]:
        results = []
        while self.pending:  # ActorPool.has_next(), then get_next_unordered(): blocks for each
            done, _ = concurrent.futures.wait(self.pending, return_when=concurrent.futures.FIRST_COMPLETED)
            future = next(iter(done))
            self.idle.append(self.pending.pop(future))
            results.append(future.result())
        return results


class StandInBackend:
    """The engine's Backend over the stand-ins; counts its calls so tests can check set-up and close."""

    def __init__(self, fail_for: str = "", start_delay_s: float = 0.0, start_error: str = "") -> None:
        self.starts = self.closes = 0
        self.fail_for, self.start_delay_s, self.start_error = fail_for, start_delay_s, start_error
        self.actors: list[StandInActor] = []

    def start(self):
        self.starts += 1
        time.sleep(self.start_delay_s)  # a slow import: a second endpoint must wait, not start again
        if self.start_error:
            raise OSError(self.start_error)  # e.g. the tokenizer not found, after Ray had started
        return lambda text: len(text.split()) + 1  # a stand-in for Llama-2: one token a word, plus BOS

    def client(self, endpoint):
        if endpoint.name == self.fail_for:
            raise RuntimeError(f"actor for {endpoint.name} died")
        actor = StandInActor(endpoint.api_base)
        self.actors.append(actor)
        return actor

    def launcher(self, clients):
        return RequestsLauncher(clients)

    def request_config(self, **fields):
        return RequestConfig(**fields)

    def close(self):
        self.closes += 1
        for actor in self.actors:
            actor.thread.shutdown(wait=False)
