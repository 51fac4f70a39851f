"""The project's own streaming client: asyncio + aiohttp, one timestamp per server-sent event.

It asks vLLM for continuous usage statistics, so every chunk carries the cumulative completion
token count from the served model's own tokenizer: tokens per chunk are exact, which is what
separates per-chunk from per-token latency under speculative decoding. Only when a server sends
no usage are chunk texts counted afterwards with the server's /tokenize (never during timing).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from ..endpoints import count_tokens_async
from ..records import CLIENT_ERROR, COUNT_FROM_TOKENIZER, COUNT_FROM_USAGE, RequestRecord, stream_metrics
from . import Endpoint, LoadSpec, OnRecord, PreparedCase


class StreamError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def request_body(prepared: PreparedCase, load: LoadSpec) -> tuple[str, dict[str, Any]]:
    """Path and JSON body; the chat form matches llmperf's (an empty system message, then the prompt)."""
    body: dict[str, Any] = {
        "model": load.model,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        **load.sampling_params(),
    }
    if load.api == "chat":
        body["messages"] = [{"role": "system", "content": ""}, {"role": "user", "content": prepared.prompt}]
        return "/chat/completions", body
    body["prompt"] = prepared.prompt
    return "/completions", body


@dataclass
class StreamState:
    """What one stream has delivered so far; fed one decoded event at a time (pure, testable)."""

    times: list[float] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    usage_seen: bool = False
    prompt_tokens: int | None = None
    completion_tokens: int = 0
    pending_tokens: int = 0  # counted by usage on a chunk without content: belongs to the next content
    done: bool = False

    def add(self, event: dict[str, Any], at: float) -> None:
        if "error" in event:
            error = event["error"]
            code = error.get("code") if isinstance(error, dict) else None
            message = error.get("message", str(error)) if isinstance(error, dict) else str(error)
            raise StreamError(code if isinstance(code, int) else CLIENT_ERROR, f"error event in stream: {message}")
        usage = event.get("usage")
        if usage:
            self.usage_seen = True
            self.prompt_tokens = usage.get("prompt_tokens", self.prompt_tokens)
            cumulative = usage.get("completion_tokens") or 0
            self.pending_tokens += cumulative - self.completion_tokens
            self.completion_tokens = cumulative
        choices = event.get("choices") or []
        if not choices:
            return
        choice = choices[0]
        text = (choice.get("delta") or {}).get("content") if "delta" in choice else choice.get("text")
        if text:
            self.times.append(at)
            self.texts.append(text)
            self.tokens.append(self.pending_tokens)
            self.pending_tokens = 0

    def finish(self) -> None:
        if self.pending_tokens and self.tokens:
            self.tokens[-1] += self.pending_tokens  # e.g. a final usage chunk counting the stop token
            self.pending_tokens = 0


def decode_event(line: bytes) -> dict[str, Any] | None:
    """One SSE line to its JSON event; None for blank, comment, non-data lines and [DONE]."""
    line = line.strip()
    if not line or not line.startswith(b"data:"):
        return None
    payload = line[5:].strip()
    if payload == b"[DONE]":
        return {"__done__": True}
    try:
        event = json.loads(payload)
    except json.JSONDecodeError:
        raise StreamError(CLIENT_ERROR, f"malformed server-sent event: {payload[:120]!r}") from None
    if not isinstance(event, dict):
        raise StreamError(CLIENT_ERROR, f"malformed server-sent event: {payload[:120]!r}")
    return event


@dataclass
class SendTime:
    """When the request was handed to the socket. Starting the clock there, not when the coroutine
    asked for the request, keeps the client's own queueing out of TTFT: with many streams started
    at once, each waits its turn for the event loop to encode and write it (2-5 ms at 8 streams)."""

    at: float


def _send_times() -> aiohttp.TraceConfig:
    async def on_chunk_sent(session: Any, context: Any, params: Any) -> None:
        if isinstance(context.trace_request_ctx, SendTime):
            context.trace_request_ctx.at = time.perf_counter()  # the last body chunk wins

    trace = aiohttp.TraceConfig()
    trace.on_request_chunk_sent.append(on_chunk_sent)
    return trace


class NativeEngine:
    name = "native"

    async def run(
        self, endpoint: Endpoint, prepared: PreparedCase, load: LoadSpec, run_id: str, on_record: OnRecord
    ) -> list[RequestRecord]:
        connector = aiohttp.TCPConnector(limit=0, force_close=False)
        async with aiohttp.ClientSession(connector=connector, trace_configs=[_send_times()]) as session:
            await self.warm_up(session, endpoint, min(load.concurrency, load.requests))
            gate = asyncio.Semaphore(load.concurrency)

            async def one(index: int) -> RequestRecord:
                async with gate:
                    record = await self.request(session, endpoint, prepared, load, run_id, index)
                on_record(record)
                return record

            return list(await asyncio.gather(*(one(index) for index in range(load.requests))))

    @staticmethod
    async def warm_up(session: aiohttp.ClientSession, endpoint: Endpoint, connections: int) -> None:
        """Open the pooled keep-alive connections before timing: TTFT is request to first token, not
        TCP setup plus the client's first-use costs (measured at 20-30 ms on loopback otherwise)."""

        async def touch() -> None:
            async with session.get(endpoint.url.rstrip("/") + "/health") as response:
                await response.read()

        await asyncio.gather(*(touch() for _ in range(connections)), return_exceptions=True)

    async def request(
        self, session: aiohttp.ClientSession, endpoint: Endpoint, prepared: PreparedCase, load: LoadSpec, run_id: str, index: int
    ) -> RequestRecord:
        path, body = request_body(prepared, load)
        record = RequestRecord(
            run_id=run_id,
            variant=endpoint.name,
            test_case=prepared.case.name,
            prompt_class=prepared.case.prompt_class,
            engine=self.name,
            request_index=index,
            started_at=time.time(),
            input_tokens=prepared.prompt_tokens,
        )
        headers = {"X-Request-Id": f"{run_id}-{endpoint.name}-{prepared.case.name}-{index}", "Authorization": "Bearer specbench"}
        state = StreamState()
        timeout = aiohttp.ClientTimeout(total=load.request_timeout_s)
        sent = SendTime(time.perf_counter())
        try:
            async with session.post(
                endpoint.api_base + path, json=body, headers=headers, timeout=timeout, trace_request_ctx=sent
            ) as response:
                started = record.sent_monotonic_s = sent.at  # the request's last byte went to the socket: the clock starts
                if response.status != 200:
                    raise StreamError(response.status, (await response.text())[:500])
                pending = b""
                # Whatever bytes arrived, as they arrive: one await per network read, not per line,
                # and the timestamp is taken before any parsing.
                async for data in response.content.iter_any():
                    at = time.perf_counter() - started
                    *lines, pending = (pending + data).split(b"\n")
                    for line in lines:
                        event = decode_event(line)
                        if event is None:
                            continue
                        if event.get("__done__"):
                            state.done = True
                            break
                        state.add(event, at)
                    if state.done:
                        break
            end_to_end = time.perf_counter() - started
            if not state.done:
                raise StreamError(CLIENT_ERROR, "stream ended before [DONE]: connection dropped")
            state.finish()
            if not state.times:
                raise StreamError(CLIENT_ERROR, "empty completion: no content chunk arrived")
        except StreamError as error:
            record.error_code, record.error_msg = error.code, str(error)
            return record
        except asyncio.TimeoutError:
            record.error_code, record.error_msg = CLIENT_ERROR, f"timeout: no complete response within {load.request_timeout_s:g} s"
            return record
        except aiohttp.ClientError as error:
            record.error_code, record.error_msg = CLIENT_ERROR, f"connection error: {type(error).__name__}: {error}"[:500]
            return record

        if state.usage_seen:
            tokens, record.token_count_source = state.tokens, COUNT_FROM_USAGE
            record.input_tokens = state.prompt_tokens or prepared.prompt_tokens
        else:
            tokens = [await count_tokens_async(session, endpoint, load.model, text) for text in state.texts]
            record.token_count_source = COUNT_FROM_TOKENIZER
        for key, value in stream_metrics(state.times, tokens, end_to_end, record.input_tokens).items():
            setattr(record, key, value)
        record.chunk_times_s = [round(t, 6) for t in state.times]
        record.chunk_tokens = tokens
        record.output_sha256 = hashlib.sha256("".join(state.texts).encode("utf-8")).hexdigest()
        return record
