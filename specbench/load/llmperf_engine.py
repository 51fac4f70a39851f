"""ray-project/llmperf as an engine, driven through its library API with the suite's prompts.

llmperf has no option for custom prompts, but its ``RequestsLauncher`` and OpenAI chat client take
any ``RequestConfig(prompt=(text, n_tokens))``. Its client's code runs unchanged in our Ray actor
(``llmperf_actor.py``), which also stamps every streamed line: llmperf times its chunks but
returns only their sum.

Figures (records.FIGURE_DEFINITIONS): timed from the request written, over content chunks (events
with text) and content tokens (the served model's tokenizer via /tokenize, no BOS), as the native
engine does. llmperf's own figures (its clock from before the connection, data lines as chunks,
Llama-2 tokens with BOS) are kept beside them in the ``llmperf_*`` fields and in llmperf's files.

Load: each concurrency slot has its own launcher with one client and launches its next request as
soon as its last one finished, as llmperf's token_benchmark_ray.py does since #59 (f1d6bed): a
launcher's ``get_next_ready`` waits for every request in its pool, so one shared pool would send
in waves.

Set-up (imports, ``ray.init``, the Llama-2 tokenizer, each endpoint's actors) happens once, on one
thread, before any request is timed; ``close`` shuts Ray down. Needs Python 3.10 and ``pip install
-r specbench/requirements-llmperf.txt``; imports are deferred so the package works without it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp

from specbench.load.endpoints import count_tokens_async
from specbench.load.native import CircuitBreaker, breaker_opened_line, endpoint_breaker, not_sent_message
from specbench.load.types import Endpoint, LoadSpec, OnRecord, PreparedCase
from specbench.results.records import (
    CLIENT_ERROR,
    COUNT_FROM_LLAMA2,
    COUNT_FROM_TOKENIZER,
    INTERRUPTED,
    NOT_SENT,
    RequestRecord,
    stream_metrics,
)

LLAMA2_TOKENIZER = "hf-internal-testing/llama-tokenizer"  # what llmperf counts with (token_benchmark_ray.py)
API_KEY = "specbench"  # llmperf's client insists on a non-empty OPENAI_API_KEY


# Pure functions ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParsedStream:
    times: list[float]  # arrival of each content chunk, seconds after the request was sent
    texts: list[str]
    data_lines: int  # what llmperf's client counts as "tokens_received": every data line but [DONE]


def parse_lines(lines: Sequence[tuple[float, str]]) -> ParsedStream:
    """Content chunks from the stamped lines, read the way llmperf's client reads them: strip, skip
    blanks, cut the 6-character ``data: `` prefix, skip ``[DONE]``, count the line, then a chunk is
    content when ``choices[0].delta.content`` is non-empty. Stops where llmperf's loop would raise."""
    times: list[float] = []
    texts: list[str] = []
    data_lines = 0
    for at, raw in lines:
        line = raw.strip()
        if not line:
            continue
        payload = line[len("data: ") :]
        if payload == "[DONE]":
            continue
        data_lines += 1
        try:
            event = json.loads(payload)
            if "error" in event:
                break
            content = event["choices"][0]["delta"].get("content")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            break
        if content:
            times.append(at)
            texts.append(content)
    return ParsedStream(times, texts, data_lines)


def llmperf_error_message(metrics: dict[str, Any], trace: dict[str, Any]) -> str:
    """llmperf's error_msg, else the exception it printed ("Warning Or Error: ..."), else what the recorder saw."""
    message = str(metrics.get("error_msg") or "").strip()
    if message:
        return message[:500]
    for line in str(trace.get("printed") or "").splitlines():
        if line.startswith("Warning Or Error:"):
            return line[len("Warning Or Error:") :].strip()[:500] or "llmperf client error (no message)"
    return str(trace.get("error") or "llmperf client error (no message)")[:500]


def record_from_llmperf(
    metrics: dict[str, Any],
    generated_text: str,
    trace: dict[str, Any],
    chunk_tokens: list[int] | None,
    llama2_tokens: int,
    *,
    run_id: str,
    endpoint: str,
    prepared: PreparedCase,
    index: int,
    token_count_source: str = COUNT_FROM_TOKENIZER,
) -> RequestRecord:
    """Our record from llmperf's result for one request and its stamped stream (a pure function).

    ``chunk_tokens``: the served model's tokens in each content chunk (None on errors);
    ``llama2_tokens``: llmperf's own count, ``len(tokenizer.encode(text))`` with its BOS.
    """
    record = RequestRecord(
        run_id=run_id,
        variant=endpoint,
        test_case=prepared.case.name,
        prompt_class=prepared.case.prompt_class,
        engine="llmperf",
        request_index=index,
        started_at=trace.get("sent_wall_s") or time.time(),
        input_tokens=metrics.get("number_input_tokens"),
        token_count_source=token_count_source,
        sent_monotonic_s=trace.get("written_perf_s"),
    )
    if metrics.get("error_code") is not None:
        record.error_code = int(metrics["error_code"])
        record.error_msg = llmperf_error_message(metrics, trace)
        return record
    stream = parse_lines(trace.get("lines") or [])
    if not stream.times or not chunk_tokens:
        record.error_code, record.error_msg = CLIENT_ERROR, "empty completion: no content chunk arrived"
        return record
    e2e = float(metrics["end_to_end_latency_s"])
    # Timed from the request written, as the native engine times: llmperf's clock starts before
    # requests builds a session and opens a connection (its figures are kept below).
    end = trace.get("end_s")
    for key, value in stream_metrics(stream.times, chunk_tokens, e2e if end is None else end, record.input_tokens).items():
        setattr(record, key, value)
    record.chunk_times_s = [round(t, 6) for t in stream.times]
    record.chunk_tokens = list(chunk_tokens)
    record.output_sha256 = hashlib.sha256(generated_text.encode("utf-8")).hexdigest()
    # llmperf's figures as its token_benchmark_ray.py writes them (#59): its client's data-line count
    # divides the summed gaps, the Llama-2 count (BOS included) is the output tokens and throughput.
    record.llmperf_ttft_s = float(metrics["ttft_s"])
    record.llmperf_end_to_end_latency_s = e2e
    record.llmperf_chunks = stream.data_lines
    record.llmperf_output_tokens = llama2_tokens
    record.llmperf_inter_token_latency_s = float(metrics["inter_token_latency_s"]) / stream.data_lines
    record.llmperf_output_throughput_tps = llama2_tokens / e2e if e2e > 0 else None
    return record


def request_outcome(metrics: dict[str, Any], trace: dict[str, Any]) -> tuple[bool, str]:
    """Whether one llmperf result will be a successful record, and why not, as soon as it returns
    (for the circuit breaker; the record itself is made after the endpoint's traffic): the failures
    record_from_llmperf makes without counting tokens (an llmperf error, no content chunk)."""
    if metrics.get("error_code") is not None:
        return False, f"llmperf error {metrics['error_code']}: {llmperf_error_message(metrics, trace)}"
    if not parse_lines(trace.get("lines") or []).texts:
        return False, "empty completion: no content chunk arrived"
    return True, ""


# The llmperf side, behind a small interface so tests can stand in for it -----------------------


class Backend(Protocol):
    def start(self) -> Callable[[str], int]:
        """Import and initialise everything once; return llmperf's token counter."""

    def client(self, endpoint: Endpoint) -> Any:
        """A started client for one slot, ready to take requests."""

    def launcher(self, clients: list[Any]) -> Any:
        """llmperf's RequestsLauncher over these clients."""

    def request_config(self, **fields: Any) -> Any: ...

    def close(self) -> None: ...


class RayBackend:
    """llmperf itself: its RequestsLauncher and RequestConfig, its client code in our Ray actor."""

    def __init__(self) -> None:
        self._actor_class: Any = None

    def start(self) -> Callable[[str], int]:
        import ray
        from llmperf.models import RequestConfig
        from llmperf.requests_launcher import RequestsLauncher
        from transformers import LlamaTokenizerFast

        from specbench.load import llmperf_actor

        self._request_config, self._launcher = RequestConfig, RequestsLauncher
        # The actor's module travels by value: Ray's workers need llmperf, not specbench, on their path.
        ray.cloudpickle.register_pickle_by_value(llmperf_actor)
        if not ray.is_initialized():
            ray.init(include_dashboard=False, log_to_driver=False)
        # Actors hold no CPU (num_cpus=0): one per slot and endpoint, whatever the pod's CPUs.
        self._actor_class = ray.remote(num_cpus=0)(llmperf_actor.RecordingChatClient)
        tokenizer = LlamaTokenizerFast.from_pretrained(LLAMA2_TOKENIZER)
        return lambda text: len(tokenizer.encode(text))

    def client(self, endpoint: Endpoint) -> Any:
        import ray

        actor = self._actor_class.remote(endpoint.api_base, API_KEY)
        ray.get(actor.ready.remote())  # the worker process is up and llmperf imported before timing
        return actor

    def launcher(self, clients: list[Any]) -> Any:
        return self._launcher(clients)

    def request_config(self, **fields: Any) -> Any:
        return self._request_config(**fields)

    def close(self) -> None:
        ray = sys.modules.get("ray")  # nothing to shut down if Ray was never imported
        if ray is not None:
            ray.shutdown()  # stops the raylet, GCS and agents this process started (no orphans)


class LlmperfEngine:
    name = "llmperf"

    def __init__(self, backend: Backend | None = None, log: Callable[[str], None] = print) -> None:
        self._backend: Backend = backend or RayBackend()
        self.log = log
        # One circuit breaker per endpoint for the whole run, as the native engine's (LoadSpec.max_consecutive_failures).
        self.breakers: dict[str, CircuitBreaker] = {}
        self._count_llama2: Callable[[str], int] | None = None
        self._clients: dict[str, list[Any]] = {}
        self._failed: dict[str, str] = {}  # endpoint -> why its clients could not be started
        self._backend_started = False
        self._setup_lock: asyncio.Lock | None = None
        self._pools: list[concurrent.futures.ThreadPoolExecutor] = []

    async def start(self, endpoints: Sequence[Endpoint], load: LoadSpec) -> None:
        """Everything that takes time or is not thread-safe, once, before any request: the runner
        calls this first; ``run`` calls it too (idempotent), so concurrent runs never race."""
        if self._setup_lock is None:
            self._setup_lock = asyncio.Lock()
        async with self._setup_lock:
            if self._count_llama2 is None:
                self._backend_started = True  # even a failed start may have started Ray: close shuts it down
                self._count_llama2 = await asyncio.to_thread(self._backend.start)
            for endpoint in endpoints:
                clients = self._clients.setdefault(endpoint.name, [])
                try:
                    while len(clients) < load.concurrency:
                        clients.append(await asyncio.to_thread(self._backend.client, endpoint))
                    self._failed.pop(endpoint.name, None)
                except Exception as error:  # noqa: BLE001 - this endpoint's requests become error records
                    self._failed[endpoint.name] = f"llmperf set-up failed: {type(error).__name__}: {error}"[:500]

    def close(self) -> None:
        for pool in self._pools:
            pool.shutdown(wait=False, cancel_futures=True)
        self._pools.clear()
        if self._backend_started:
            self._backend_started, self._count_llama2 = False, None
            self._clients.clear()
            self._backend.close()

    async def run(
        self, endpoint: Endpoint, prepared: PreparedCase, load: LoadSpec, run_id: str, on_record: OnRecord
    ) -> list[RequestRecord]:
        if load.request_rate is not None:  # the CLI refuses it first; a library caller is told here
            raise ValueError("request_rate: the llmperf engine is closed-loop only (concurrency); use the native engine")
        if load.api != "chat":
            raise ValueError("the llmperf engine speaks chat completions only (llmperf's OpenAI client); use --api chat")
        records: list[RequestRecord] = []
        try:
            await self.start([endpoint], load)
            message = self._failed.get(endpoint.name, "")
        except Exception as error:  # noqa: BLE001 - every request of this endpoint becomes an error record
            message = f"llmperf set-up failed: {type(error).__name__}: {error}"[:500]
        if message:
            for index in range(load.requests):
                record = self._error_record(endpoint, prepared, run_id, index, message)
                on_record(record)
                records.append(record)
            return records

        breaker = endpoint_breaker(self.breakers, endpoint, load)
        was_open = breaker.opened
        loop = asyncio.get_running_loop()
        # One thread per slot: the blocking waits must not queue behind each other (the default
        # executor has min(32, CPUs + 4) threads, fewer than 2 endpoints x 4 slots on 2 CPUs).
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=load.concurrency, thread_name_prefix=f"llmperf-{endpoint.name}")
        self._pools.append(pool)
        queue = iter(range(load.requests))
        # Results are turned into records once this endpoint's traffic is over: counting content
        # tokens calls the server's /tokenize, which must not share the server with timed requests.
        finished: list[tuple[Any, int]] = []
        in_flight: set[int] = set()  # sent, no result yet: interrupted if the run stops now
        counts: dict[str, int] = {}

        async with aiohttp.ClientSession() as session:

            async def finish(out: Any, index: int) -> None:
                try:
                    record = await self._record(session, endpoint, prepared, load, run_id, index, out, counts)
                except Exception as error:  # noqa: BLE001 - a request is never lost: it becomes an error record
                    record = self._error_record(
                        endpoint, prepared, run_id, index, f"unreadable llmperf result: {type(error).__name__}: {error}"
                    )
                on_record(record)
                records.append(record)

            async def slot(client: Any) -> None:
                launcher = self._backend.launcher([client])
                for index in queue:  # shared: the next request goes to whichever slot is free first
                    if breaker.opened:  # recorded, not sent: the endpoint's counts still add up
                        record = self._error_record(endpoint, prepared, run_id, index, not_sent_message(endpoint.name, breaker))
                        record.error_code = NOT_SENT
                        on_record(record)
                        records.append(record)
                        continue
                    config = self._backend.request_config(
                        model=load.model,
                        prompt=(prepared.prompt, prepared.prompt_tokens),
                        sampling_params=load.sampling_params(),
                        llm_api="openai",
                        metadata={"index": index, "request_id": f"{run_id}-{endpoint.name}-{prepared.case.name}-{index}"},
                    )
                    in_flight.add(index)
                    try:
                        outs = await loop.run_in_executor(pool, _launch_and_wait, launcher, config)
                    except Exception as error:  # noqa: BLE001 - e.g. the actor died: this request failed
                        outs = [({"error_code": CLIENT_ERROR, "error_msg": f"{type(error).__name__}: {error}"}, "", config, {})]
                    in_flight.discard(index)
                    finished.extend((out, index) for out in outs)
                    for out in outs:
                        try:
                            metrics, _text, _config, trace = out
                            ok, why = request_outcome(metrics, trace)
                        except Exception as error:  # noqa: BLE001 - finish() records it as unreadable; a failure here too
                            ok, why = False, f"unreadable llmperf result: {type(error).__name__}: {error}"
                        breaker.feed(ok, why)

            try:
                await asyncio.gather(*(slot(client) for client in self._clients[endpoint.name][: load.concurrency]))
            finally:
                for out, index in finished:
                    await finish(out, index)
                for index in sorted(in_flight):  # the run was stopped (SIGTERM, Ctrl-C) while these were sent
                    record = self._error_record(
                        endpoint, prepared, run_id, index, "interrupted: the run was stopped while this request was in flight"
                    )
                    record.error_code = INTERRUPTED
                    on_record(record)
                    records.append(record)
                pool.shutdown(wait=False)
                if pool in self._pools:
                    self._pools.remove(pool)
        if breaker.opened and not was_open:
            self.log(breaker_opened_line(endpoint.name, breaker))
        return sorted(records, key=lambda r: r.request_index)

    async def _record(
        self,
        session: aiohttp.ClientSession,
        endpoint: Endpoint,
        prepared: PreparedCase,
        load: LoadSpec,
        run_id: str,
        index: int,
        out: Any,
        cache: dict[str, int],
    ) -> RequestRecord:
        metrics, text, _config, trace = out
        stream = parse_lines(trace.get("lines") or [])
        source = COUNT_FROM_TOKENIZER
        chunk_tokens: list[int] | None = None
        if metrics.get("error_code") is None and stream.texts:
            try:
                # After the endpoint's traffic (see run), never during timing: the served model's own tokenizer.
                chunk_tokens = [await _count_cached(session, endpoint, load.model, t, cache) for t in stream.texts]
            except (aiohttp.ClientError, asyncio.TimeoutError, KeyError, ValueError):
                source = COUNT_FROM_LLAMA2  # no /tokenize: Llama-2 counts without BOS, still content tokens
                chunk_tokens = [self._count_llama2(t) - 1 for t in stream.texts] if self._count_llama2 else None
        return record_from_llmperf(
            metrics,
            text or "",
            trace,
            chunk_tokens,
            self._count_llama2(text) if (self._count_llama2 and text) else 0,
            run_id=run_id,
            endpoint=endpoint.name,
            prepared=prepared,
            index=index,
            token_count_source=source,
        )

    @staticmethod
    def _error_record(endpoint: Endpoint, prepared: PreparedCase, run_id: str, index: int, message: str) -> RequestRecord:
        return RequestRecord(
            run_id=run_id,
            variant=endpoint.name,
            test_case=prepared.case.name,
            prompt_class=prepared.case.prompt_class,
            engine="llmperf",
            request_index=index,
            started_at=time.time(),
            error_code=CLIENT_ERROR,
            error_msg=message,
        )


def _launch_and_wait(launcher: Any, config: Any) -> list[Any]:
    """One request through llmperf's launcher; its get_next_ready blocks until the pool is empty,
    which with one client is exactly this request (requests_launcher.py at f1d6bed)."""
    launcher.launch_requests(config)
    return launcher.get_next_ready()


async def _count_cached(session: aiohttp.ClientSession, endpoint: Endpoint, model: str, text: str, cache: dict[str, int]) -> int:
    if text not in cache:
        cache[text] = await count_tokens_async(session, endpoint, model, text)
    return cache[text]
