"""The project's own streaming client: asyncio + aiohttp, one timestamp per network read.

It asks vLLM for continuous usage statistics, so every chunk carries the cumulative completion
token count from the served model's own tokenizer: tokens per chunk are exact, which is what
separates per-chunk from per-token latency under speculative decoding. Only when a server sends
no usage are chunk texts counted afterwards with the server's /tokenize (never during timing).

Every stream shares one event loop, so anything the loop does between a chunk's arrival and its
timestamp is lag. The design keeps that path to a timestamp and an append:
- before the run: the request body is encoded once, every request's headers and record built;
- while streams are open: each read is stamped and kept raw; nothing is parsed;
- after every stream of this engine is closed (both endpoints of a test case share the engine):
  the raw bytes are parsed, metrics computed, records handed to ``on_record``.
Measured with scripts/bench_chunk_lag.py (figures in specbench/README.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from specbench.load.endpoints import count_tokens_async
from specbench.load.types import Endpoint, LoadSpec, OnRecord, PreparedCase
from specbench.results.records import CLIENT_ERROR, COUNT_FROM_TOKENIZER, COUNT_FROM_USAGE, INTERRUPTED, RequestRecord, stream_metrics


class StreamError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def request_body(prepared: PreparedCase, load: LoadSpec, index: int = 0) -> tuple[str, dict[str, Any]]:
    """Path and JSON body of request ``index``; the chat form of a text case matches llmperf's (an
    empty system message, then the prompt), a dataset case sends its sampled messages in turn."""
    body: dict[str, Any] = {
        "model": load.model,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        **load.sampling_params(),
    }
    if load.api == "chat":
        body["messages"] = [dict(m) for m in prepared.messages(index)]
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
    end_to_end: float = 0.0  # arrival of the read that completed the [DONE] line

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
    at once, each waits its turn for the event loop to encode and write it (2-5 ms at 8 streams).
    ``written`` is called once the body is on the socket (it ends this request's launch turn)."""

    at: float
    written: Callable[[], None] | None = None

    def wrote(self) -> None:
        if self.written is not None:
            self.written, written = None, self.written
            written()


def _send_times() -> aiohttp.TraceConfig:
    async def on_chunk_sent(session: Any, context: Any, params: Any) -> None:
        if isinstance(context.trace_request_ctx, SendTime):
            context.trace_request_ctx.at = time.perf_counter()  # the last body chunk wins
            context.trace_request_ctx.wrote()

    trace = aiohttp.TraceConfig()
    trace.on_request_chunk_sent.append(on_chunk_sent)
    return trace


# The end of a stream, seen cheaply in raw bytes while streaming (a JSON string cannot hold a raw
# newline, so these cannot come from content); parsing confirms it afterwards. A [DONE] line that
# opens the body is not seen here: the stream then ends at the response's end, as any other does.
_DONE_MARKS = (b"\ndata: [DONE]", b"\ndata:[DONE]")
_TAIL = len(_DONE_MARKS[0]) - 1  # bytes of the previous read a mark may start in
EVENT_STREAM = "text/event-stream"
SETTLE_PASSES = 8  # NativeEngine._watch_reads: at most this many double passes of the loop
LAUNCH_TURN_MAX_S = 0.05  # NativeEngine._launch_turn: the longest one launch holds the next


def ends_stream(previous: bytes, data: bytes) -> bool:
    """Whether ``data`` (after ``previous``, the last read) completes a ``data: [DONE]`` line's start."""
    window = previous[-_TAIL:] + data
    return _DONE_MARKS[0] in window or _DONE_MARKS[1] in window


@dataclass
class RawStream:
    """One request as received: each network read and when it arrived (seconds after the send)."""

    record: RequestRecord
    reads: list[bytes] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    error: StreamError | None = None
    finished: bool = False  # the response was closed (normally or by an error); else still in flight


def digest(raw: RawStream) -> tuple[RequestRecord, StreamState | None]:
    """Parse a finished stream into its record; the state is returned when tokens must still be
    counted with /tokenize (no usage in the stream). Pure: no I/O, no clock."""
    record = raw.record
    if not raw.finished:
        record.error_code = INTERRUPTED
        record.error_msg = f"interrupted: the run was stopped while this request was in flight ({len(raw.reads)} reads received)"
        return record, None
    try:
        if raw.error is not None:
            raise raw.error
        state = parse_reads(raw.reads, raw.times)
    except StreamError as error:
        record.error_code, record.error_msg = error.code, str(error)
        return record, None
    if state.usage_seen:
        record.input_tokens = state.prompt_tokens or record.input_tokens
        fill_metrics(record, state, state.tokens, COUNT_FROM_USAGE)
        return record, None
    return record, state


def parse_reads(reads: list[bytes], times: list[float]) -> StreamState:
    """The stream's events, each stamped with the arrival of the read that completed its line."""
    state = StreamState()
    pending = b""
    end_to_end = None
    for data, at in zip(reads, times, strict=True):
        *lines, pending = (pending + data).split(b"\n")
        for line in lines:
            event = decode_event(line)
            if event is None:
                continue
            if event.get("__done__"):
                end_to_end = at
                break
            state.add(event, at)
        if end_to_end is not None:
            break
    if end_to_end is None:
        raise StreamError(CLIENT_ERROR, "stream ended before [DONE]: connection dropped")
    state.done = True
    state.end_to_end = end_to_end
    state.finish()
    if not state.times:
        raise StreamError(CLIENT_ERROR, "empty completion: no content chunk arrived")
    return state


def fill_metrics(record: RequestRecord, state: StreamState, tokens: list[int], source: str) -> None:
    record.token_count_source = source
    for key, value in stream_metrics(state.times, tokens, state.end_to_end, record.input_tokens).items():
        setattr(record, key, value)
    record.chunk_times_s = [round(t, 6) for t in state.times]
    record.chunk_tokens = tokens
    record.output_sha256 = hashlib.sha256("".join(state.texts).encode("utf-8")).hexdigest()


def not_an_event_stream(status: int, content_type: str, body: str) -> StreamError:
    """A response that is not a stream of events: its status and content type are what tell why."""
    snippet = " ".join(body.split())[:300]
    code = status if status != 200 else CLIENT_ERROR
    return StreamError(code, f"HTTP {status}, Content-Type {content_type or 'none'} (expected 200 {EVENT_STREAM}): {snippet}")


async def _until_body_end(response: aiohttp.ClientResponse, limit_s: float = 0.5) -> None:
    """After [DONE], let the body's end (the terminating chunk) in: aiohttp closes a connection
    released mid-body instead of pooling it (client_proto.ResponseHandler.should_close: payload not
    at EOF), and the next request would pay a new TCP handshake on the stamping loop. Bounded, for a
    server that keeps the body open after [DONE]; the stream's timings are already taken."""
    if response.content.is_eof():
        return
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(response.content.read(), limit_s)


def arrival_offsets(rate: float, count: int, seed: int) -> list[float]:
    """Open-loop arrivals: seconds after the start at which each request is sent, a Poisson process
    of ``rate`` requests/s (exponential gaps, the first at 0); seeded, so a rerun sends the same
    schedule. The same process as vLLM's ``benchmark_serving --request-rate`` at burstiness 1
    (vllm-project/vllm benchmarks/benchmark_serving.py get_request: the first request at once, then
    gaps of np.random.gamma(shape=burstiness, scale=1/(rate*burstiness)), exponential at 1)."""
    if not rate > 0:
        raise ValueError(f"request_rate must be > 0 requests/s, got {rate!r}")
    rng = random.Random(seed)
    offsets, at = [], 0.0
    for index in range(count):
        if index:
            at += rng.expovariate(rate)
        offsets.append(at)
    return offsets


class NativeEngine:
    name = "native"

    def __init__(self) -> None:
        # Streams open in this engine (all endpoints of the case), and who waits for none to be open.
        self._open = 0
        self._quiet: list[asyncio.Future[None]] = []
        self._gc_was_enabled = True
        # One request launched at a time, each after the loop has polled the network again (_launch_turn);
        # the lock of the running loop (an engine may serve runs on several loops, one after another).
        self._launching: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None
        self._reads = 0  # reads stamped so far (_reads_settled watches it move)
        self._settling: list[asyncio.Future[None]] = []  # who waits in _reads_settled
        self._settler: asyncio.Task[None] | None = None  # the task that watches for them

    async def run(
        self, endpoint: Endpoint, prepared: PreparedCase, load: LoadSpec, run_id: str, on_record: OnRecord
    ) -> list[RequestRecord]:
        # Every body encoded before the clock starts anywhere (once for a text case: they are all the same).
        distinct = len(prepared.case.items) or 1
        bodies = [request_body(prepared, load, index) for index in range(min(distinct, load.requests))]
        payloads = [json.dumps(body).encode("utf-8") for _, body in bodies]
        url = endpoint.api_base + bodies[0][0]
        raws = [
            RawStream(
                RequestRecord(
                    run_id=run_id,
                    variant=endpoint.name,
                    test_case=prepared.case.name,
                    prompt_class=prepared.case.prompt_class,
                    engine=self.name,
                    request_index=index,
                    started_at=0.0,
                    prompt_id=prepared.prompt_id(index),
                    input_tokens=prepared.prompt_tokens or None,
                )
            )
            for index in range(load.requests)
        ]
        headers = [
            {
                "X-Request-Id": f"{run_id}-{endpoint.name}-{prepared.case.name}-{index}",
                "Authorization": "Bearer specbench",
                "Content-Type": "application/json",
            }
            for index in range(load.requests)
        ]
        timeout = aiohttp.ClientTimeout(total=load.request_timeout_s)
        started: list[RawStream] = []
        connector = aiohttp.TCPConnector(limit=0, force_close=False)
        try:
            async with aiohttp.ClientSession(connector=connector, trace_configs=[_send_times()]) as session:
                await self.warm_up(session, endpoint, min(load.concurrency, load.requests))
                # Closed loop: at most ``concurrency`` in flight. Open loop: each request at its
                # scheduled arrival, however many are still in flight (the server's queue shows).
                gate = asyncio.Semaphore(load.concurrency if load.request_rate is None else load.requests)
                offsets = arrival_offsets(load.request_rate, load.requests, load.seed) if load.request_rate is not None else None
                begin = time.perf_counter()

                async def one(index: int) -> None:
                    if offsets is not None:
                        await asyncio.sleep(max(0.0, begin + offsets[index] - time.perf_counter()))
                    async with gate:
                        started.append(raws[index])
                        await self.collect(session, url, payloads[index % len(payloads)], headers[index], timeout, raws[index])

                await asyncio.gather(*(one(index) for index in range(load.requests)))
                await self._until_quiet()
                return await self._deliver(started, session, endpoint, load, on_record)
        except BaseException:
            # Cancelled (SIGTERM) or crashed: every request that was sent still gets its record,
            # those in flight as interrupted, and no further I/O (no /tokenize) is attempted.
            for raw in started:
                record, state = digest(raw)
                if state is not None:
                    record.error_code = INTERRUPTED
                    record.error_msg = "interrupted: completed, but the run stopped before its tokens were counted with /tokenize"
                on_record(record)
            raise

    async def _deliver(
        self, started: list[RawStream], session: aiohttp.ClientSession, endpoint: Endpoint, load: LoadSpec, on_record: OnRecord
    ) -> list[RequestRecord]:
        records = []
        while started:
            raw = started.pop(0)  # popped first: a cancellation during /tokenize must not deliver it twice
            record, state = digest(raw)
            if state is not None:
                try:
                    tokens = [await count_tokens_async(session, endpoint, load.model, text) for text in state.texts]
                    fill_metrics(record, state, tokens, COUNT_FROM_TOKENIZER)
                except asyncio.CancelledError:
                    record.error_code, record.error_msg = INTERRUPTED, "interrupted while counting its tokens with /tokenize"
                    on_record(record)
                    raise
                except (aiohttp.ClientError, asyncio.TimeoutError, KeyError, ValueError) as error:
                    record.error_code = CLIENT_ERROR
                    record.error_msg = f"no usage in the stream and /tokenize failed: {type(error).__name__}: {error}"[:500]
            on_record(record)
            records.append(record)
        return sorted(records, key=lambda r: r.request_index)

    def _quiet_again(self) -> None:
        """No stream is open: the garbage collector back on (as it was), and whoever waits to parse woken.

        While streams are open the cyclic garbage collector is off: a collection stops the loop
        (measured: 91 collections, up to 11 ms each, in one 64-stream run of bench_chunk_lag.py),
        and every chunk arriving meanwhile would be stamped late by that much. Reference counting
        still frees everything without cycles; cycles wait for the next collection after this."""
        if self._gc_was_enabled:
            gc.enable()
        for waiter in self._quiet:
            if not waiter.done():
                waiter.set_result(None)
        self._quiet.clear()

    async def _until_quiet(self) -> None:
        """Wait until no stream of this engine is open, so parsing never delays another's timestamps."""
        if self._open:
            waiter = asyncio.get_running_loop().create_future()
            self._quiet.append(waiter)
            await waiter

    @staticmethod
    async def warm_up(session: aiohttp.ClientSession, endpoint: Endpoint, connections: int) -> None:
        """Open the pooled keep-alive connections before timing: TTFT is request to first token, not
        TCP setup plus the client's first-use costs (measured at 20-30 ms on loopback otherwise)."""

        async def touch() -> None:
            async with session.get(endpoint.url.rstrip("/") + "/health") as response:
                await response.read()

        await asyncio.gather(*(touch() for _ in range(connections)), return_exceptions=True)

    async def collect(
        self,
        session: aiohttp.ClientSession,
        url: str,
        payload: bytes,
        headers: dict[str, str],
        timeout: aiohttp.ClientTimeout,
        raw: RawStream,
    ) -> None:
        """Send one request and keep its reads with their arrival times; never raises but cancellation."""
        raw.record.started_at = time.time()
        sent = SendTime(time.perf_counter())
        if not self._open:
            self._gc_was_enabled = gc.isenabled()
            gc.disable()  # see _quiet_again
        self._open += 1
        try:
            await self._launch_turn(sent)
            async with session.post(url, data=payload, headers=headers, timeout=timeout, trace_request_ctx=sent) as response:
                started = raw.record.sent_monotonic_s = sent.at  # the request's last byte went to the socket: the clock starts
                content_type = response.headers.get("Content-Type", "")
                if response.status != 200 or not content_type.startswith(EVENT_STREAM):
                    raw.error = not_an_event_stream(
                        response.status, content_type, (await response.content.read(2000)).decode("utf-8", "replace")
                    )
                else:
                    # The timing path: one await per network read, a timestamp and an append.
                    previous = b""
                    async for data in response.content.iter_any():
                        raw.times.append(time.perf_counter() - started)
                        raw.reads.append(data)
                        self._reads += 1
                        if ends_stream(previous, data):
                            await self._reads_settled()  # the others' waiting reads stamped before this end
                            await _until_body_end(response)
                            break
                        previous = data
        except asyncio.TimeoutError:
            raw.error = StreamError(CLIENT_ERROR, f"timeout: no complete response within {timeout.total:g} s")
        except aiohttp.ClientError as error:
            raw.error = StreamError(CLIENT_ERROR, f"connection error: {type(error).__name__}: {error}"[:500])
        else:
            raw.finished = True
        finally:
            sent.wrote()  # the turn ends here at the latest (a request that failed before its body was written)
            self._open -= 1
            if not self._open:
                self._quiet_again()
        if raw.error is not None:
            raw.finished = True

    async def _launch_turn(self, sent: SendTime) -> None:
        """Wait for this request's turn to be launched: one launch at a time, each once the reads
        already waiting are stamped (``_reads_settled``). The turn ends when the request's body is
        written (SendTime.wrote) or after LAUNCH_TURN_MAX_S, so a launch never waits for another's
        response nor for a connection that hangs; TTFT is timed from the write, so the wait for a
        turn is not in it."""
        loop = asyncio.get_running_loop()
        if self._launching is None or self._launching[0] is not loop:
            self._launching = (loop, asyncio.Lock())
        lock = self._launching[1]
        await lock.acquire()
        sent.written = lock.release
        # Bounded: a request whose connection hangs (an endpoint down) must not hold every launch.
        loop.call_later(LAUNCH_TURN_MAX_S, sent.wrote)
        await self._reads_settled()

    async def _reads_settled(self) -> None:
        """Wait until a pass of the event loop stamps no read (or SETTLE_PASSES double passes go by).

        Ending a stream (reading the body's end, pooling the connection) and launching the next
        request cost the loop several times what stamping a read does, and with a server that ends
        its streams in step (a batching engine: the same step finishes many requests; scripts/
        bench_chunk_lag.py --server in-step) dozens of streams end within a millisecond and their
        next requests are launched together. Done at once, that work kept the loop busy while the
        other streams' last chunks waited in their sockets to be stamped: 2 to 3 ms late at p90,
        against 0.3 to 0.4 ms for the other chunks. So that work waits here until the loop has
        polled the network and stamped what arrived (each pass runs the callbacks already queued,
        then those of the reads it polled: two yields see one poll's stamps). One watcher task
        yields for every waiter (waiters spinning each on their own would cost the loop a task
        switch per waiter per pass); bounded, so a busy stream of reads never starves an end."""
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        self._settling.append(waiter)
        if self._settler is None or self._settler.done():
            self._settler = loop.create_task(self._watch_reads())
        await waiter

    async def _watch_reads(self) -> None:
        for _ in range(SETTLE_PASSES):
            seen = self._reads
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            if self._reads == seen:
                break
        waiters, self._settling = self._settling, []
        for waiter in waiters:
            if not waiter.done():  # a cancelled stream's waiter is done already
                waiter.set_result(None)
