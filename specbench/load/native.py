"""The project's own streaming client: asyncio + aiohttp, one timestamp per network read.

It asks vLLM for continuous usage statistics, so every chunk carries the cumulative completion
token count from the served model's own tokenizer: tokens per chunk are exact, which is what
separates per-chunk from per-token latency under speculative decoding. Only when a server sends
no usage are chunk texts counted afterwards with the server's /tokenize (never during timing).

Every stream shares one event loop. A read is stamped when the loop hands its bytes to the
connection's protocol (StampingHandler.data_received), before any task runs, so the stream's task
getting to it later (other streams ending, the next requests launched) is not lag; what the loop
does between polls still is, so the design keeps the loop's work between polls small:
- before the run: the request body is encoded once, every request's headers and record built;
- while streams are open: each read is stamped and kept raw; nothing is parsed;
- as each request finishes, its record is parsed in a worker thread (the interpreter's switch
  interval is 0.2 ms while streams are open, so the loop waits at most that long for the GIL to
  stamp a read) and handed to ``on_record`` back on the loop (the runner stores it before the slot
  sends its next request: a killed run keeps it); only a stream without usage,
  whose tokens /tokenize must count, waits until every stream of this engine is closed (both
  endpoints of a test case share the engine).
Measured with scripts/bench_chunk_lag.py (figures in docs/performance.md).
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import contextlib
import functools
import gc
import hashlib
import itertools
import json
import random
import re
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp.client_proto import ResponseHandler

from specbench import jsonfile
from specbench.load.endpoints import count_tokens_async
from specbench.load.types import Endpoint, LoadSpec, OnRecord, PreparedCase
from specbench.results.records import (
    CLIENT_ERROR,
    COUNT_FROM_FINAL_USAGE,
    COUNT_FROM_TOKENIZER,
    COUNT_FROM_USAGE,
    INTERRUPTED,
    NOT_SENT,
    RequestRecord,
    stream_metrics,
)


class StreamError(Exception):
    """One request's failure: ``code`` is llmperf's integer (an HTTP status, else negative), ``kind``
    its class (records.ERROR_KINDS)."""

    def __init__(self, code: int, message: str, kind: str = "client_exception") -> None:
        super().__init__(message)
        self.code = code
        self.kind = kind


EXCERPT_BYTES = 120  # of a bad event, kept in the error message (escaped)


def excerpt(data: bytes, limit: int = EXCERPT_BYTES) -> str:
    """At most ``limit`` bytes of what was received, escaped as a bytes literal (control characters
    and non-ASCII as ``\\x..``), with its full size when cut: at most 4 * limit + 30 characters."""
    text = repr(bytes(data[:limit]))
    return text if len(data) <= limit else f"{text}... ({len(data)} bytes)"


def _malformed(message: str) -> StreamError:
    return StreamError(CLIENT_ERROR, f"malformed server-sent event: {message}", "malformed_event")


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


def _count(value: Any, where: str) -> int | None:
    """A token count as vLLM sends it (a non-negative integer), None when absent or null."""
    if value is None:
        return None
    if type(value) is not int or value < 0:  # bool is an int subclass: excluded by the exact type
        raise _malformed(f"{where} is {value!r:.40}, expected a non-negative integer")
    return value


def _field(container: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    """``container[key]`` when present and of ``kind``; None when absent or null (vLLM's serializer
    leaves unset fields out, other OpenAI-compatible ones write null); anything else is malformed."""
    value = container.get(key)
    if value is not None and not isinstance(value, kind):
        expected = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise _malformed(f"{where} is a {type(value).__name__}, expected {'an' if expected[0] in 'aeiou' else 'a'} {expected}")
    return value


@dataclass
class StreamState:
    """What one stream has delivered so far; fed one decoded event at a time (pure, testable).

    Every event is checked against the shapes vLLM sends (vllm/entrypoints/openai/protocol.py:
    ChatCompletionStreamResponse / CompletionStreamResponse, ``choices`` a list of objects with
    ``delta.content`` or ``text`` a string, ``usage`` a UsageInfo of integer counts); anything else
    raises StreamError, and so does a stream whose usage would give a wrong figure.

    A chunk is one server step that delivered output: an event with a choice carrying text, or one
    whose usage rose although its text is empty. vLLM sends one event per engine step, and a step's
    text is empty when its last token ends inside a UTF-8 character (the next step's event shows the
    character: 0.9.1 detokenizer_utils.py ``new_text.endswith("�")`` returns "", 0.29.0
    v1/engine/detokenizer.py ``return token or ""``) or when the token is the end of sequence (never
    detokenized: 0.9.1 stop_checker.py, 0.29.0 detokenizer ``update`` with ``stop_terminated``); the
    usage still counts it. Merging such a step into the next would make a non-speculative server
    look as if it coalesced two steps; an end-of-sequence first token is a 1-token completion."""

    # The model requested, and any other name the stream may carry for it: an event naming another
    # is model_mismatch ("" = not checked). vLLM streams its first --served-model-name whichever
    # alias was requested (vllm/entrypoints/openai/serving_models.py, OpenAIServingModels.model_name:
    # ``return self.base_model_paths[0].name``), the first id of its /v1/models.
    model: str = ""
    aliases: tuple[str, ...] = ()
    max_tokens: int | None = None  # the request's max_tokens: more completion tokens is over_max_tokens
    times: list[float] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    usage_seen: bool = False
    prompt_tokens: int | None = None
    completion_tokens: int = 0
    pending_tokens: int = 0  # counted by usage on an event that is no chunk (no choice): joins the next chunk
    content_without_usage: int = 0  # chunks whose event carried no usage
    content_after_usage: bool = False  # a chunk came after the last usage seen
    per_chunk: bool = True  # every chunk's tokens are known (false: only the total is)
    finish_at: float | None = None  # arrival of the first event whose choice carried a finish_reason
    done: bool = False
    end_to_end: float = 0.0  # arrival of the read that completed the [DONE] line

    def add(self, event: dict[str, Any], at: float) -> None:
        if "error" in event:
            error = event["error"]
            code = error.get("code") if isinstance(error, dict) else None
            message = error.get("message", str(error)) if isinstance(error, dict) else str(error)
            code = code if type(code) is int else CLIENT_ERROR
            raise StreamError(code, f"error event in stream: {str(message)[:300]}", "stream_error_event")
        model = _field(event, "model", str, "model")
        if self.model and model is not None and model != self.model and model not in self.aliases:
            raise StreamError(CLIENT_ERROR, f"the stream names model {model[:80]!r}, not the requested {self.model!r}", "model_mismatch")
        usage = _field(event, "usage", dict, "usage")
        choices = _field(event, "choices", list, "choices") or []
        if len(choices) > 1:
            raise _malformed(f"{len(choices)} choices in one event (n=1 was asked)")
        text = None
        if choices:
            choice = choices[0]
            if not isinstance(choice, dict):
                raise _malformed(f"choices[0] is a {type(choice).__name__}, expected an object")
            if "delta" in choice:
                delta = _field(choice, "delta", dict, "choices[0].delta") or {}
                text = _field(delta, "content", str, "choices[0].delta.content")
            else:
                text = _field(choice, "text", str, "choices[0].text")
            if self.finish_at is None and choice.get("finish_reason") is not None:
                self.finish_at = at
        rose = self._add_usage(usage) if usage is not None else False
        if text or (rose and choices):  # a step's tokens, shown or not yet (see the class's docstring)
            if usage is None:
                self.content_without_usage += 1
                if self.usage_seen:
                    self.content_after_usage = True
            self.times.append(at)
            self.texts.append(text or "")
            self.tokens.append(self.pending_tokens)
            self.pending_tokens = 0

    def _add_usage(self, usage: dict[str, Any]) -> bool:
        """Take in an event's usage; whether it counted more completion tokens than the last."""
        self.usage_seen, self.content_after_usage = True, False
        prompt = _count(usage.get("prompt_tokens"), "usage.prompt_tokens")
        self.prompt_tokens = self.prompt_tokens if prompt is None else prompt
        cumulative = _count(usage.get("completion_tokens"), "usage.completion_tokens")
        if cumulative is None:
            raise StreamError(
                CLIENT_ERROR, "usage without completion_tokens (missing or null): the token count is unknown", "tokens_missing"
            )
        if cumulative < self.completion_tokens:
            raise StreamError(
                CLIENT_ERROR,
                f"usage.completion_tokens went backwards, {self.completion_tokens} -> {cumulative}: no token count can be trusted",
                "tokens_backwards",
            )
        rose = cumulative > self.completion_tokens
        self.pending_tokens += cumulative - self.completion_tokens
        self.completion_tokens = cumulative
        return rose

    def finish(self) -> None:
        """After [DONE]: the last usage's tokens join the last chunk, and the counts are checked."""
        if not self.times and self.pending_tokens and self.finish_at is not None:
            # Usage only at the end (no continuous_usage_stats) of a completion whose only token was
            # the end of sequence: its finish event, text empty and no usage, was that token's step.
            self.times.append(self.finish_at)
            self.texts.append("")
            self.tokens.append(0)
            self.content_without_usage += 1
        if not self.times:
            raise StreamError(CLIENT_ERROR, "empty completion: no text and no token arrived", "empty_completion")
        if not self.usage_seen:
            return  # tokens are counted with /tokenize afterwards
        if self.content_after_usage:
            raise StreamError(
                CLIENT_ERROR, "content arrived after the last usage: the completion's token count is unknown", "tokens_missing"
            )
        if self.pending_tokens:
            self.tokens[-1] += self.pending_tokens  # e.g. a final usage-only event counting more tokens
            self.pending_tokens = 0
        # Usage on some events but not on every chunk (vLLM without continuous_usage_stats: only the
        # final usage-only event): the total is exact, the tokens of each chunk are not known.
        self.per_chunk = self.content_without_usage == 0
        chunks, total = len(self.times), self.completion_tokens
        if total < chunks or (self.per_chunk and 0 in self.tokens):
            raise StreamError(
                CLIENT_ERROR,
                f"usage counts {total} completion tokens for {chunks} chunks"
                + (f" (chunk {self.tokens.index(0) + 1} carried none)" if self.per_chunk and total >= chunks else ""),
                "fewer_tokens_than_chunks",
            )
        if self.max_tokens is not None and total > self.max_tokens:
            raise StreamError(
                CLIENT_ERROR, f"usage counts {total} completion tokens, more than max_tokens {self.max_tokens}", "over_max_tokens"
            )


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")  # NaN, Infinity: Python's json accepts them, vLLM never sends them


# json.loads(text, parse_constant=f) builds a JSONDecoder(parse_constant=f) per call and decodes with
# it (CPython Lib/json/__init__.py, loads); one built once decodes the same, without the 2 us a call.
_decode_json = json.JSONDecoder(parse_constant=_reject_constant).decode
DONE: dict[str, Any] = {"__done__": True}  # the [DONE] line, told apart by identity (no event can forge it)


def decode_event(line: bytes) -> dict[str, Any] | None:
    """One SSE line to its JSON event; None for blank, comment, non-data lines and [DONE]."""
    line = line.strip()
    if not line or not line.startswith(b"data:"):
        return None
    payload = line[5:].strip()
    if payload == b"[DONE]":
        return DONE
    try:
        event = _decode_json(payload.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise _malformed(f"not UTF-8 (byte {error.start}): {excerpt(payload)}") from None
    except (ValueError, RecursionError):
        raise _malformed(excerpt(payload)) from None
    if not isinstance(event, dict):
        raise _malformed(f"a JSON {type(event).__name__}, not an object: {excerpt(payload)}")
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
PARSE_SWITCH_INTERVAL_S = 0.0002  # sys.setswitchinterval while streams are open (see _hand_over)
_TAIL = len(_DONE_MARKS[0]) - 1  # bytes of the previous read a mark may start in
EVENT_STREAM = "text/event-stream"
SETTLE_PASSES = 8  # NativeEngine._watch_reads: at most this many double passes of the loop
SETTLE_MAX_S = 0.005  # NativeEngine._watch_reads: the longest the oldest end waits before all go at once
LAUNCH_TURN_MAX_S = 0.05  # NativeEngine._launch_turn: the longest one launch holds the next


def ends_stream(previous: bytes, data: bytes) -> bool:
    """Whether ``data`` (after ``previous``, the last read) completes a ``data: [DONE]`` line's start."""
    window = previous[-_TAIL:] + data
    return _DONE_MARKS[0] in window or _DONE_MARKS[1] in window


class StampingHandler(ResponseHandler):
    """aiohttp's client connection protocol, which also stamps each network read when it arrives.

    A chunk's time is when the event loop hands its bytes to the protocol, before any task runs:
    the stream's task may get to them later (other streams ending, requests launched, a parse
    holding the GIL), and that wait is the client's, not the server's. aiohttp 3.14.5
    (aiohttp/client_proto.py, ResponseHandler.data_received) feeds each read to the response parser,
    which passes the body's bytes to the response's StreamReader (streams.py, StreamReader.feed_data:
    ``self.total_bytes += data_len``) within the same call, and sets ``self._payload`` to the
    StreamReader of the response whose headers it parsed. So after each read, ``(arrival,
    payload.total_bytes)`` says which of the body's bytes had arrived by then; the stream's task
    maps its reads onto these (``arrival_pieces``). (A compressed body counts decompressed bytes,
    and bytes aiohttp decompresses only when the task reads are stamped then; vLLM does not
    compress its streams.)"""

    def __init__(self, loop: asyncio.AbstractEventLoop, engine: NativeEngine) -> None:
        super().__init__(loop)
        self._engine = engine
        self._stamped: object = None  # the payload the arrivals belong to (one response at a time)
        self.arrivals: list[tuple[float, int]] = []  # (perf_counter, body bytes received by then)

    def data_received(self, data: bytes) -> None:
        at = time.perf_counter()
        super().data_received(data)
        self._engine._reads += 1  # the engine's count of reads, watched by _reads_settled
        payload = self._payload
        if payload is None:
            return
        if payload is not self._stamped:  # a new response on this (pooled) connection: its own list
            self._stamped, self.arrivals = payload, []
        total = payload.total_bytes
        if total > (self.arrivals[-1][1] if self.arrivals else 0):
            self.arrivals.append((at, total))

    def arrivals_of(self, payload: object) -> list[tuple[float, int]] | None:
        """The arrival list of ``payload`` (the live list: reads arriving later join it), or None when
        this connection has moved on to another response."""
        return self.arrivals if payload is self._stamped else None


def stamping_connector(engine: NativeEngine) -> aiohttp.TCPConnector:
    """A keep-alive connector (no limit) whose connections stamp their reads (StampingHandler).
    aiohttp's connectors build each connection's protocol with ``self._factory`` (aiohttp 3.14.5
    connector.py, BaseConnector.__init__: ``functools.partial(ResponseHandler, loop=loop)``, passed
    to ``loop.create_connection`` by TCPConnector._create_direct_connection)."""
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    # Private attributes: aiohttp has no public hook for a connection's protocol.
    connector._factory = functools.partial(StampingHandler, loop=connector._loop, engine=engine)
    return connector


def arrivals_for(response: aiohttp.ClientResponse) -> list[tuple[float, int]] | None:
    """The arrival stamps of ``response``'s body, None when its connection does not stamp. The body's
    StreamReader keeps the protocol it was made for (aiohttp 3.14.5 _http_parser.pyx, on headers
    complete: ``StreamReader(self.protocol, ...)``; streams.py: ``self._protocol = protocol``), which
    still holds after the connection went back to the pool at the body's end."""
    payload = response.content
    protocol = getattr(payload, "_protocol", None)
    return protocol.arrivals_of(payload) if isinstance(protocol, StampingHandler) else None


def arrival_pieces(
    data: bytes, offset: int, arrivals: Sequence[tuple[float, int]], first: int, now: float
) -> tuple[list[tuple[float, bytes]], int]:
    """``data``, the body's bytes from ``offset`` on as the stream's task read them, cut where one
    network read's bytes end, each piece with its read's arrival; ``arrivals`` is a connection's
    (arrival, body bytes received by then) list, ``first`` the index of the first arrival not wholly
    read before. Bytes no arrival covers (a connection that does not stamp) get ``now``. Returns
    the pieces and the new ``first`` (pure)."""
    end, position, pieces = offset + len(data), offset, []
    count = len(arrivals)
    while first < count and arrivals[first][1] <= position:
        first += 1
    while position < end:
        if first < count:
            at, stop = arrivals[first][0], min(end, arrivals[first][1])
        else:
            at, stop = now, end
        pieces.append((at, data[position - offset : stop - offset]))
        position = stop
        if first < count and arrivals[first][1] <= position:
            first += 1
    return pieces, first


@dataclass
class RawStream:
    """One request as received: each network read and when it arrived (seconds after the send)."""

    record: RequestRecord
    reads: list[bytes] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    error: StreamError | None = None
    finished: bool = False  # the response was closed (normally or by an error); else still in flight
    model: str = ""  # what was requested: parsing checks the stream against it ("" = unchecked)
    aliases: tuple[str, ...] = ()  # other names the endpoint's stream may give that model (StreamState.aliases)
    max_tokens: int | None = None
    done_seen: bool = False  # a [DONE] line's start was seen while streaming (confirmed by parsing)


def stream_size_limit(max_tokens: int) -> int:
    """Bytes one stream may bring before it is cut as oversized: 1 MiB plus 16 KiB per token asked,
    far above vLLM's ~300-byte chunks (one per token at worst), far below what exhausts memory."""
    return (1 << 20) + max_tokens * (16 << 10)


def stream_read_limit(max_tokens: int) -> int:
    """Network reads one stream may take (each is kept with its timestamp): 16 per token asked plus
    1024, far above vLLM's one event per token, however the network splits them."""
    return 1024 + 16 * max_tokens


DEFAULT_MAX_CONSECUTIVE_FAILURES = 8  # one test case's worth of requests at the default --requests


@dataclass
class CircuitBreaker:
    """Consecutive failed requests of one endpoint; open at ``threshold`` of them (0: never), and then
    open for the rest of the run: nothing more is sent to that endpoint.

    The trigger is kubernetes-sigs/inference-perf's ``consecutive`` one
    (inference_perf/circuit_breaker/triggers/consecutive.py: a hit adds one, anything else resets to
    0, fired at ``threshold``); an open breaker there ends the load stage
    (inference_perf/loadgen/load_generator.py, "Loadgen detects circuit breakers ... open") and is
    never reset during the run. Here it is one breaker per endpoint, the other endpoints go on, and
    every request not sent is still recorded (``not_sent``), so the counts add up."""

    threshold: int
    failures: int = 0
    opened: bool = False
    reason: str = ""  # the failure that opened it

    def feed(self, ok: bool, why: str = "") -> bool:
        """One request's outcome; True when this one opened the breaker."""
        if self.opened:
            return False
        self.failures = 0 if ok else self.failures + 1
        if self.threshold and self.failures >= self.threshold:
            self.opened, self.reason = True, why
            return True
        return False


def digest(raw: RawStream) -> tuple[RequestRecord, StreamState | None]:
    """Parse a finished stream into its record; the state is returned when tokens must still be
    counted with /tokenize (no usage in the stream). Pure: no I/O, no clock. Never raises: whatever
    a server sent spoils this request's record only, never the endpoint's other records."""
    record = raw.record
    if not raw.finished:
        fail(
            record,
            INTERRUPTED,
            "interrupted",
            f"interrupted: the run was stopped while this request was in flight ({len(raw.reads)} reads received)",
        )
        return record, None
    try:
        if raw.error is not None:
            raise raw.error
        state = parse_reads(raw.reads, raw.times, raw.model, raw.max_tokens, raw.aliases)
        if state.usage_seen:
            record.input_tokens = state.prompt_tokens or record.input_tokens
            fill_metrics(record, state, state.tokens, COUNT_FROM_USAGE if state.per_chunk else COUNT_FROM_FINAL_USAGE)
            return record, None
    except StreamError as error:
        fail(record, error.code, error.kind, str(error))
        return record, None
    except Exception as error:  # noqa: BLE001 - a case no check above foresaw: still this request's alone
        fail(record, CLIENT_ERROR, "client_exception", f"could not read this response: {type(error).__name__}: {error}")
        return record, None
    return record, state


def fail(record: RequestRecord, code: int, kind: str, message: str) -> None:
    """Make ``record`` a failure of ``kind``: no figure of a failed request is kept (none may be used)."""
    clean = RequestRecord(**{f: getattr(record, f) for f in _IDENTITY})
    for name in _FIGURES:
        setattr(record, name, getattr(clean, name))
    record.error_code, record.error_kind, record.error_msg = code, kind, message[:500]


_IDENTITY = ("run_id", "variant", "test_case", "prompt_class", "engine", "request_index", "started_at")
_FIGURES = tuple(
    name
    for name in RequestRecord.__dataclass_fields__
    if name not in (*_IDENTITY, "prompt_id", "input_tokens", "sent_monotonic_s", "load_level", "error_code", "error_msg", "error_kind")
)
_LINE_END = re.compile(rb"\r\n|\r|\n")  # SSE ends a line with any of the three


def parse_reads(
    reads: list[bytes], times: list[float], model: str = "", max_tokens: int | None = None, aliases: tuple[str, ...] = ()
) -> StreamState:
    """The stream's events, each stamped with the arrival of the read that completed its line.

    Linear in the stream's size however its lines fall across reads (the reads are joined once);
    a bad event raises StreamError naming the event and an excerpt of it."""
    if len(reads) != len(times):
        raise ValueError("reads and times differ in length")
    state = StreamState(model=model, max_tokens=max_tokens, aliases=aliases)
    body = b"".join(reads)
    ends = list(itertools.accumulate(len(data) for data in reads))  # offset just past each read
    lines = _line_spans(body)
    if (lines[-1][1] if lines else 0) < len(body):
        lines.append((len(body), len(body)))  # the unterminated tail: only a [DONE] counts there
    end_to_end, start = None, 0
    for number, (line_end, next_start) in enumerate(lines, 1):
        line, start = body[start:line_end], next_start
        tail = line_end == len(body)
        if not line and not tail:
            continue  # a blank line: nothing to decode (half the lines of an event stream)
        if tail and line.strip() not in (b"data: [DONE]", b"data:[DONE]"):
            break  # cut mid-line (a reset, a truncated body): the stream has not ended properly
        at = times[-1] if tail else times[bisect.bisect_right(ends, line_end)]  # the read holding the line's end
        try:
            event = decode_event(line)
        except StreamError as error:
            raise StreamError(error.code, f"line {number}: {error}", error.kind) from None
        if event is None:
            continue
        if event is DONE:
            end_to_end = at
            break
        try:
            state.add(event, at)
        except StreamError as error:
            raise StreamError(error.code, f"line {number}: {error}: {excerpt(line.strip())}", error.kind) from None
    if end_to_end is None:
        raise StreamError(CLIENT_ERROR, "stream ended before [DONE]: connection dropped", "truncated")
    state.done = True
    state.end_to_end = end_to_end
    state.finish()
    return state


def _line_spans(body: bytes) -> list[tuple[int, int]]:
    """Where each line of ``body`` ends and the next starts (its terminator skipped)."""
    if b"\r" in body:
        return [m.span() for m in _LINE_END.finditer(body)]
    spans, find, at = [], body.find, 0  # only newlines: found without the regex, 5 times faster
    while (end := find(b"\n", at)) != -1:
        at = end + 1
        spans.append((end, at))
    return spans


def fill_metrics(record: RequestRecord, state: StreamState, tokens: list[int], source: str) -> None:
    record.token_count_source = source
    for key, value in stream_metrics(state.times, tokens, state.end_to_end, record.input_tokens).items():
        setattr(record, key, value)
    record.chunk_times_s = [round(t, 6) for t in state.times]
    record.chunk_tokens = list(tokens)
    if source == COUNT_FROM_FINAL_USAGE:
        # The total is exact, each chunk's share is not: no per-chunk figure (stream acceptance is
        # unavailable for this request, never 0.0 from the zeros of chunks without usage).
        record.chunk_tokens, record.acceptance_length, record.acceptance_chunks = [], None, 0
    record.output_sha256 = hashlib.sha256("".join(state.texts).encode("utf-8")).hexdigest()


def not_an_event_stream(status: int, content_type: str, body: str) -> StreamError:
    """A response that is not a stream of events: its status and content type are what tell why."""
    snippet = " ".join(body.split())[:300]
    code = status if status != 200 else CLIENT_ERROR
    kind = "http_status" if status != 200 else "not_event_stream"
    return StreamError(code, f"HTTP {status}, Content-Type {content_type or 'none'} (expected 200 {EVENT_STREAM}): {snippet}", kind)


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


def not_sent(raw: RawStream, endpoint: Endpoint, breaker: CircuitBreaker) -> None:
    """A request the open breaker kept back: recorded, so the endpoint's counts still add up."""
    raw.record.started_at = time.time()
    raw.error = StreamError(NOT_SENT, not_sent_message(endpoint.name, breaker), "not_sent")
    raw.finished = True


def not_sent_message(name: str, breaker: CircuitBreaker) -> str:
    """A not_sent record's message (both engines)."""
    return f"not sent: {name}'s circuit breaker opened after {breaker.threshold} consecutive failures ({breaker.reason[:200]})"


def endpoint_breaker(breakers: dict[str, CircuitBreaker], endpoint: Endpoint, load: LoadSpec) -> CircuitBreaker:
    """The endpoint's breaker in an engine's ``breakers`` (one per endpoint for the whole run: the
    engine outlives the test cases), at this load's threshold (both engines)."""
    breaker = breakers.setdefault(endpoint.name, CircuitBreaker(load.max_consecutive_failures))
    breaker.threshold = load.max_consecutive_failures
    return breaker


def breaker_opened_line(name: str, breaker: CircuitBreaker) -> str:
    """The one line printed when an endpoint's breaker opens (both engines)."""
    return (
        f"specbench: {name}: circuit breaker open after {breaker.failures} consecutive failed requests "
        f"(last: {breaker.reason[:160]}); nothing more is sent to it this run (its requests are recorded as not_sent), "
        "the other endpoints go on"
    )


class NativeEngine:
    name = "native"

    def __init__(self, log: Callable[[str], None] = print) -> None:
        # Streams open in this engine (all endpoints of the case), and who waits for none to be open.
        self._open = 0
        self._quiet: list[asyncio.Future[None]] = []
        self._gc_was_enabled = True
        self.log = log
        # One circuit breaker per endpoint, for the whole run (the engine outlives the test cases).
        self.breakers: dict[str, CircuitBreaker] = {}
        self._opened: list[str] = []  # endpoints whose breaker opened in this case: said once, after parsing
        self._names: dict[str, tuple[str, ...]] = {}  # endpoint -> other names its stream may give the model
        # One request launched at a time, each after the loop has polled the network again (_launch_turn);
        # the lock of the running loop (an engine may serve runs on several loops, one after another).
        self._launching: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None
        self._reads = 0  # reads stamped so far (_reads_settled watches it move)
        # who waits in _reads_settled, and since when (loop time)
        self._settling: collections.deque[tuple[asyncio.Future[None], float]] = collections.deque()
        self._settler: asyncio.Task[None] | None = None  # the task that watches for them
        self._parser: ThreadPoolExecutor | None = None  # parses finished streams off the loop (_hand_over)
        self._switch_interval = sys.getswitchinterval()

    async def stream_names(self, endpoint: Endpoint, load: LoadSpec) -> tuple[str, ...]:
        """The name the endpoint's stream gives the requested model when it is served under several
        (vLLM: the first id of /v1/models, see StreamState.aliases); asked once per endpoint and
        run, before any timing; () when /v1/models does not list the requested model."""
        if endpoint.name not in self._names:
            names: list[str] = []
            with contextlib.suppress(aiohttp.ClientError, asyncio.TimeoutError, ValueError, TypeError, AttributeError):
                async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
                    async with session.get(endpoint.api_base + "/models") as response:
                        data = (await response.json()).get("data") or []
                names = [item.get("id") for item in data if isinstance(item, dict) and isinstance(item.get("id"), str)]
            self._names[endpoint.name] = (names[0],) if load.model in names and names[0] != load.model else ()
        return self._names[endpoint.name]

    def breaker(self, endpoint: Endpoint, load: LoadSpec) -> CircuitBreaker:
        return endpoint_breaker(self.breakers, endpoint, load)

    async def run(
        self, endpoint: Endpoint, prepared: PreparedCase, load: LoadSpec, run_id: str, on_record: OnRecord
    ) -> list[RequestRecord]:
        aliases = await self.stream_names(endpoint, load)
        # Every body encoded before the clock starts anywhere (once for a text case: they are all the same).
        distinct = len(prepared.case.items) or 1
        bodies = [request_body(prepared, load, index) for index in range(min(distinct, load.requests))]
        payloads = [jsonfile.dumps(body).encode("utf-8") for _, body in bodies]
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
                ),
                model=load.model,
                aliases=aliases,
                max_tokens=load.max_tokens,
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
        limit, read_limit = stream_size_limit(load.max_tokens), stream_read_limit(load.max_tokens)
        breaker = self.breaker(endpoint, load)
        started: list[RawStream] = []
        handed: list[RequestRecord] = []  # records handed over as their request finished
        connector = stamping_connector(self)
        try:
            async with aiohttp.ClientSession(connector=connector, trace_configs=[_send_times()]) as session:
                if not breaker.opened:
                    await self.warm_up(session, endpoint, min(load.concurrency, load.requests), min(10.0, load.request_timeout_s))
                # Closed loop: at most ``concurrency`` in flight. Open loop: each request at its
                # scheduled arrival, however many are still in flight (the server's queue shows).
                gate = asyncio.Semaphore(load.concurrency if load.request_rate is None else load.requests)
                offsets = arrival_offsets(load.request_rate, load.requests, load.seed) if load.request_rate is not None else None
                begin = time.perf_counter()

                async def one(index: int) -> None:
                    if offsets is not None and not breaker.opened:
                        await asyncio.sleep(max(0.0, begin + offsets[index] - time.perf_counter()))
                    async with gate:
                        raw = raws[index]
                        started.append(raw)
                        if breaker.opened:
                            not_sent(raw, endpoint, breaker)
                            return
                        payload = payloads[index % len(payloads)]
                        await self.collect(session, url, payload, headers[index], timeout, raw, limit, read_limit)
                        await self._hand_over(raw, started, handed, on_record, endpoint, breaker)  # stored before the slot's next

                await asyncio.gather(*(one(index) for index in range(load.requests)))
                await self._until_quiet()
                rest = await self._deliver(started, session, endpoint, load, on_record)
                return sorted(handed + rest, key=lambda r: r.request_index)
        except BaseException:
            # Cancelled (SIGTERM) or crashed: every request that was sent still gets its record,
            # those in flight as interrupted, and no further I/O (no /tokenize) is attempted.
            for raw in started:
                record, state = digest(raw)
                if state is not None:
                    fail(
                        record,
                        INTERRUPTED,
                        "interrupted",
                        "interrupted: completed, but the run stopped before its tokens were counted with /tokenize",
                    )
                on_record(record)
            raise

    async def _hand_over(
        self,
        raw: RawStream,
        started: list[RawStream],
        handed: list[RequestRecord],
        on_record: OnRecord,
        endpoint: Endpoint,
        breaker: CircuitBreaker,
    ) -> None:
        """A finished request's record handed over at once (the runner stores it, issue 22: a run
        killed later keeps it) and its outcome fed to the endpoint's circuit breaker, unless its
        tokens must still be counted with /tokenize (no usage in the stream: that waits for
        _deliver, after every stream is closed). Parsing runs in the engine's parser thread: done on
        the loop, a finished 600-chunk stream held it a few milliseconds, and the last chunks of the
        streams ending beside it were stamped that much later (scripts/bench_chunk_lag.py --server
        in-step: p90 5.3 ms parsed on the loop; the current figures in docs/performance.md)."""
        record, state = await asyncio.get_running_loop().run_in_executor(self._parser_thread(), digest, raw)
        if state is None and raw in started:  # (not already delivered by an interruption meanwhile)
            started.remove(raw)  # delivered: neither _deliver nor the interrupted path sees it again
            handed.append(record)
            self._feed(breaker, endpoint, record)
            on_record(record)

    def _parser_thread(self) -> ThreadPoolExecutor:
        """The one thread that parses finished streams (digest is pure: it reads its RawStream only)."""
        if self._parser is None:
            self._parser = ThreadPoolExecutor(max_workers=1, thread_name_prefix="specbench-parse")
        return self._parser

    def _feed(self, breaker: CircuitBreaker, endpoint: Endpoint, record: RequestRecord) -> None:
        """A parsed request's outcome to the breaker (requests never sent or cut by the run's end do not count)."""
        if record.error_kind in ("not_sent", "interrupted"):
            return
        why = "" if record.ok else f"{record.error_kind}: {record.error_msg}"
        if breaker.feed(record.ok, why) and endpoint.name not in self._opened:
            self._opened.append(endpoint.name)

    async def _deliver(
        self, started: list[RawStream], session: aiohttp.ClientSession, endpoint: Endpoint, load: LoadSpec, on_record: OnRecord
    ) -> list[RequestRecord]:
        breaker = self.breaker(endpoint, load)
        records = []
        while started:
            raw = started.pop(0)  # popped first: a cancellation during /tokenize must not deliver it twice
            record, state = digest(raw)
            if state is not None:
                try:
                    tokens = [await count_tokens_async(session, endpoint, load.model, text) for text in state.texts]
                    if any(type(count) is not int or count < 1 for count in tokens):  # a non-empty text is 1+ tokens
                        raise ValueError(f"/tokenize counted {tokens[:8]} for non-empty chunks")
                    fill_metrics(record, state, tokens, COUNT_FROM_TOKENIZER)
                except asyncio.CancelledError:
                    fail(record, INTERRUPTED, "interrupted", "interrupted while counting its tokens with /tokenize")
                    on_record(record)
                    raise
                except Exception as error:  # noqa: BLE001 - a /tokenize that fails spoils this request only
                    fail(
                        record,
                        CLIENT_ERROR,
                        "tokenize_failed",
                        f"no usage in the stream and /tokenize failed: {type(error).__name__}: {error}",
                    )
            self._feed(breaker, endpoint, record)
            on_record(record)
            records.append(record)
        if endpoint.name in self._opened:
            self._opened.remove(endpoint.name)
            self.log(breaker_opened_line(endpoint.name, breaker))
        return sorted(records, key=lambda r: r.request_index)

    def _quiet_again(self) -> None:
        """No stream is open: the garbage collector back on (as it was), and whoever waits to parse woken.

        While streams are open the cyclic garbage collector is off: a collection stops the loop
        (measured: 91 collections, up to 11 ms each, in one 64-stream run of bench_chunk_lag.py),
        and every chunk arriving meanwhile would be stamped late by that much. Reference counting
        still frees everything without cycles; cycles wait for the next collection after this."""
        if self._gc_was_enabled:
            gc.enable()
        sys.setswitchinterval(self._switch_interval)
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
    async def warm_up(session: aiohttp.ClientSession, endpoint: Endpoint, connections: int, limit_s: float = 10.0) -> None:
        """Open the pooled keep-alive connections before timing: TTFT is request to first token, not
        TCP setup plus the client's first-use costs (measured at 20-30 ms on loopback otherwise).
        Bounded: a server that stopped answering costs ``limit_s``, not aiohttp's 5-minute default."""

        async def touch() -> None:
            async with session.get(endpoint.url.rstrip("/") + "/health", timeout=aiohttp.ClientTimeout(total=limit_s)) as response:
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
        limit: int = stream_size_limit(4096),
        read_limit: int = stream_read_limit(4096),
    ) -> None:
        """Send one request and keep its reads with their arrival times; never raises but cancellation."""
        raw.record.started_at = time.time()  # a request never written keeps the moment it asked
        sent = SendTime(asked := time.perf_counter())
        if not self._open:
            self._gc_was_enabled = gc.isenabled()
            gc.disable()  # see _quiet_again
            # The parser thread gives the GIL back within 0.2 ms (default 5 ms) when a read arrives.
            self._switch_interval = sys.getswitchinterval()
            sys.setswitchinterval(PARSE_SWITCH_INTERVAL_S)
        self._open += 1
        try:
            await self._launch_turn(sent)
            # No redirect is followed: the endpoint measured is the one given (aiohttp would follow a
            # 302 with a GET). A 3xx is then an http_status failure like any other status but 200.
            async with session.post(
                url, data=payload, headers=headers, timeout=timeout, trace_request_ctx=sent, allow_redirects=False
            ) as response:
                started = raw.record.sent_monotonic_s = sent.at  # the request's last byte went to the socket: the clock starts
                # The wall clock at that same moment, not when the request asked for its launch turn:
                # every busy window is [started_at, + end-to-end] (analysis/cost.window), and windows
                # shifted back by launch waits of different lengths overlap as they never did on the
                # wire (a busy time short by the waits, so a throughput too high).
                raw.record.started_at += started - asked
                content_type = response.headers.get("Content-Type", "")
                if response.status != 200 or response.content_type.lower() != EVENT_STREAM:
                    body = b""
                    with contextlib.suppress(aiohttp.ClientError, asyncio.TimeoutError, ValueError):
                        body = await response.content.read(2000)
                    raw.error = not_an_event_stream(response.status, content_type, body.decode("utf-8", "replace"))
                else:
                    # The timing path: one await per batch of network reads, each read kept with
                    # its arrival (stamped by the connection, StampingHandler), a sum.
                    previous, size = b"", 0  # previous: the stream's last bytes (a mark may span reads of any size)
                    arrivals, first = arrivals_for(response), 0
                    async for data in response.content.iter_any():
                        if arrivals is None:  # a connection that does not stamp: stamped here, as it is read
                            raw.times.append(time.perf_counter() - started)
                            raw.reads.append(data)
                            self._reads += 1
                        else:
                            pieces, first = arrival_pieces(data, size, arrivals, first, time.perf_counter())
                            for at, piece in pieces:
                                raw.times.append(at - started)
                                raw.reads.append(piece)
                        size += len(data)
                        if ends_stream(previous, data):
                            raw.done_seen = True
                            await self._reads_settled()  # the others' waiting reads stamped before this end
                            await _until_body_end(response)
                            break
                        if size > limit or len(raw.reads) > read_limit:
                            raw.error = StreamError(
                                CLIENT_ERROR,
                                f"oversized stream: {size} bytes in {len(raw.reads)} reads without [DONE], "
                                f"over the bound of {limit} bytes or {read_limit} reads",
                                "oversized_stream",
                            )
                            break
                        previous = data[-_TAIL:] if len(data) >= _TAIL else (previous + data)[-_TAIL:]
        except asyncio.TimeoutError:
            raw.error = StreamError(CLIENT_ERROR, f"timeout: no complete response within {timeout.total:g} s", "timeout")
        except aiohttp.ClientError as error:
            raw.error = StreamError(CLIENT_ERROR, f"connection error: {type(error).__name__}: {error}"[:500], "connection")
        except Exception as error:  # noqa: BLE001 - whatever a server makes the client raise, it is this request's alone
            raw.error = StreamError(CLIENT_ERROR, f"client error: {type(error).__name__}: {error}"[:500], "client_exception")
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
        """Wait for this end's turn: after a pass of the event loop that stamps no read (or
        SETTLE_PASSES double passes), one waiter at a time (``_watch_reads``).

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
        self._settling.append((waiter, loop.time()))
        if self._settler is None or self._settler.done():
            self._settler = loop.create_task(self._watch_reads())
        await waiter

    async def _watch_reads(self) -> None:
        """Release the waiters one at a time, each after a pass of the loop that stamped no read (or
        SETTLE_PASSES double passes), so a pass runs one stream's end (or one launch) and the loop
        polls the network again before the next: released together, the ends of a wave that
        finished in step ran back to back while the wave's later last chunks waited in their sockets
        (2.3 to 3.3 ms late at p90 with the server on a CPU of its own, against 0.3 to 0.4 ms one at
        a time; scripts/bench_chunk_lag.py --server in-step --pin). Once the oldest waiter has
        waited SETTLE_MAX_S, every waiter goes at once: a busy stream of reads must never queue the
        ends behind it."""
        loop = asyncio.get_running_loop()
        while self._settling:
            for _ in range(SETTLE_PASSES):
                seen = self._reads
                await asyncio.sleep(0)
                await asyncio.sleep(0)
                if self._reads == seen:
                    break
            while self._settling and self._settling[0][0].done():  # a cancelled stream's waiter: no turn
                self._settling.popleft()
            if not self._settling:
                break
            if loop.time() - self._settling[0][1] >= SETTLE_MAX_S:
                released, self._settling = list(self._settling), collections.deque()
            else:
                released = [self._settling.popleft()]
            for waiter, _since in released:
                if not waiter.done():
                    waiter.set_result(None)
