"""The native client's stream bookkeeping and the record math, without a server; and, against one
loopback server, when each chunk is stamped."""

import asyncio
import functools
import gc
import json
import re
import socket
import threading
import time

import aiohttp
import pytest

from specbench.load import native
from specbench.load.native import (
    DONE,
    EXCERPT_BYTES,
    CircuitBreaker,
    NativeEngine,
    RawStream,
    StreamError,
    StreamState,
    arrival_pieces,
    decode_event,
    digest,
    ends_stream,
    excerpt,
    not_an_event_stream,
    parse_reads,
    request_body,
)
from specbench.load.types import LoadSpec, PreparedCase
from specbench.prompts.suite import DEFAULT_SUITE
from specbench.results.records import (
    CLIENT_ERROR,
    COUNT_FROM_FINAL_USAGE,
    INTERRUPTED,
    RequestRecord,
    stream_metrics,
    time_per_output_token,
)

pytestmark = pytest.mark.servers  # real-time loopback servers: scheduled first (tests/conftest.py)


def line(event):
    return b"data: " + json.dumps(event).encode() + b"\n"


def chat(content, completion_tokens=None, prompt_tokens=64):
    event = {"choices": [{"index": 0, "delta": {"content": content}}]}
    if completion_tokens is not None:
        event["usage"] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
    return event


def test_usage_gives_exact_tokens_per_chunk_and_a_usage_only_frames_tokens_go_to_the_last_chunk():
    state = StreamState()
    state.add({"choices": [{"delta": {"role": "assistant", "content": ""}}], "usage": {"prompt_tokens": 70, "completion_tokens": 0}}, 0.01)
    state.add(chat(" a", 1, 70), 0.2)
    state.add(chat(" b c d", 4, 70), 0.3)
    state.add({"choices": [{"delta": {}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 70, "completion_tokens": 5}}, 0.31)
    state.finish()
    # The finish frame's usage rose: the step that made the stop token is a chunk of its own (text empty).
    assert state.times == [0.2, 0.3, 0.31] and state.tokens == [1, 3, 1] and state.texts == [" a", " b c d", ""]
    state = StreamState()
    state.add(chat(" a", 1), 0.2)
    state.add(chat(" b", 2), 0.25)
    state.add({"choices": [], "usage": {"prompt_tokens": 64, "completion_tokens": 3}}, 0.26)
    state.finish()
    assert state.tokens == [1, 2] and state.prompt_tokens == 64


def test_completions_text_and_error_events():
    state = StreamState()
    state.add({"choices": [{"text": "hi"}]}, 0.1)
    assert state.texts == ["hi"] and not state.usage_seen
    with pytest.raises(StreamError, match="error event in stream: overloaded") as error:
        state.add({"error": {"message": "overloaded", "code": 503}}, 0.2)
    assert error.value.code == 503


def test_sse_lines():
    assert decode_event(b"\n") is None and decode_event(b": keep-alive\n") is None
    assert decode_event(b"data: [DONE]\n") == {"__done__": True}
    assert decode_event(b'data:{"a":1}\n') == {"a": 1}
    with pytest.raises(StreamError, match="malformed server-sent event"):
        decode_event(b"data: {not json\n")


def test_request_body_matches_llmperf_chat_form_and_asks_for_continuous_usage():
    prepared = PreparedCase(DEFAULT_SUITE.test_cases[0], "the prompt", 64)
    path, body = request_body(prepared, LoadSpec("Qwen/Qwen3-32B", 600, 4, 8, 60.0))
    assert path == "/chat/completions"
    assert body["messages"] == [{"role": "system", "content": ""}, {"role": "user", "content": "the prompt"}]
    assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert (body["max_tokens"], body["temperature"], body["seed"], "ignore_eos" in body) == (600, 0.0, 11111, False)
    path, body = request_body(prepared, LoadSpec("m", 10, 1, 1, 1.0, api="completions", ignore_eos=True))
    assert path == "/completions" and body["prompt"] == "the prompt" and body["ignore_eos"] is True


def test_both_latency_definitions_from_chunks():
    # Speculative-looking stream: first token at 0.2 s, then 3 chunks of 4 tokens 0.05 s apart.
    metrics = stream_metrics([0.2, 0.25, 0.3, 0.35], [1, 4, 4, 4], 0.36, 64)
    assert metrics["ttft_s"] == 0.2 and metrics["output_tokens"] == 13 and metrics["chunks"] == 4
    assert metrics["inter_token_latency_s"] == pytest.approx(0.35 / 4)  # llmperf: per chunk, TTFT included
    assert metrics["time_per_output_token_s"] == pytest.approx(0.16 / 12)  # per token
    assert metrics["tokens_per_chunk"] == pytest.approx(13 / 4)
    assert metrics["output_throughput_tps"] == pytest.approx(13 / 0.36)
    assert time_per_output_token(0.2, 0.3, 1) is None
    with pytest.raises(ValueError, match="empty completion"):
        stream_metrics([], [], 1.0, 64)


def sse(*events):
    return b"".join(b"data: " + (e if isinstance(e, bytes) else json.dumps(e).encode()) + b"\n\n" for e in events)


def test_reads_are_parsed_after_the_stream_with_each_event_stamped_by_the_read_that_completed_it():
    body = sse(
        {"choices": [{"delta": {"role": "assistant", "content": ""}}], "usage": {"prompt_tokens": 9, "completion_tokens": 0}},
        chat(" a", 1, 9),
        chat(" b c", 3, 9),
        b"[DONE]",
    )
    cut1, cut2 = body.index(b" a") + 1, body.index(b" b c") + 2  # events split across reads
    reads = [body[:cut1], body[cut1:cut2], body[cut2:-5], body[-5:]]
    state = parse_reads(reads, [0.1, 0.2, 0.3, 0.4])
    assert (state.times, state.tokens, state.texts, state.end_to_end) == ([0.2, 0.3], [1, 2], [" a", " b c"], 0.4)
    assert [ends_stream(p, d) for p, d in zip([b"", *reads], reads, strict=False)] == [False, False, False, True]
    assert ends_stream(b"", sse(chat("data: [DONE] as text", 1))) is False  # content cannot hold a raw newline
    with pytest.raises(StreamError, match="stream ended before \\[DONE\\]"):
        parse_reads(reads[:3], [0.1, 0.2, 0.3])
    # SSE ends a line with CRLF, CR or LF: each gives the same events at the same times.
    for ending in (b"\r\n", b"\r", b"\r\n\n"):
        crlf = [read.replace(b"\n", ending) for read in reads]
        state = parse_reads(crlf, [0.1, 0.2, 0.3, 0.4])
        assert (state.times, state.tokens, state.texts, state.end_to_end) == ([0.2, 0.3], [1, 2], [" a", " b c"], 0.4)


def raw_stream(**changes):
    record = RequestRecord("r", "svc", "counting", "structured", "native", 0, 1.0, input_tokens=5)
    return RawStream(record, **changes)


def test_digest_turns_each_kind_of_stream_into_its_record():
    body = sse(chat(" a", 1, 7), chat(" b", 2, 7), b"[DONE]")
    record, pending = digest(raw_stream(reads=[body], times=[0.25], finished=True))
    assert pending is None and (record.ok, record.output_tokens, record.input_tokens, record.chunk_tokens) == (True, 2, 7, [1, 1])
    assert record.end_to_end_latency_s == 0.25 and record.token_count_source == "usage"
    record, _ = digest(raw_stream(reads=[body[:20]], times=[0.1]))  # still in flight when the run stopped
    assert (record.error_code, record.error_msg) == (
        INTERRUPTED,
        "interrupted: the run was stopped while this request was in flight (1 reads received)",
    )
    html = not_an_event_stream(200, "text/html; charset=utf-8", "<html>\n  <body>Sign in</body>\n</html>")
    record, _ = digest(raw_stream(error=html, finished=True))
    assert (record.error_code, record.error_msg) == (
        CLIENT_ERROR,
        "HTTP 200, Content-Type text/html; charset=utf-8 (expected 200 text/event-stream): <html> <body>Sign in</body> </html>",
    )
    assert not_an_event_stream(502, "", "Bad gateway").code == 502
    record, pending = digest(raw_stream(reads=[sse({"choices": [{"text": "hi"}]}, b"[DONE]")], times=[0.3], finished=True))
    assert pending is not None and pending.texts == ["hi"]  # no usage: tokens are counted with /tokenize afterwards


def test_garbage_collection_is_off_while_streams_are_open_and_restored_after():
    """A collection stops the event loop that stamps chunks; the engine turns it off from the first
    stream opened to the last one closed, then back on (and leaves it off if it was off)."""
    seen = []

    class Watch(NativeEngine):
        def _quiet_again(self):
            seen.append(gc.isenabled())  # the last stream just closed
            super()._quiet_again()

    class RefusingSession:
        def post(self, *args, **kwargs):
            seen.append(gc.isenabled())  # the stream is open
            raise aiohttp.ClientConnectionError("refused")

    def one_stream():
        raw = raw_stream()
        asyncio.run(Watch().collect(RefusingSession(), "http://127.0.0.1:9/v1/chat/completions", b"{}", {}, None, raw))
        return raw

    assert gc.isenabled()
    raw = one_stream()
    assert seen == [False, False] and gc.isenabled()
    assert raw.finished and raw.error.args[0] == "connection error: ClientConnectionError: refused"
    gc.disable()
    try:
        seen.clear()
        one_stream()
        assert seen == [False, False] and not gc.isenabled()
    finally:
        gc.enable()


def test_excerpts_are_escaped_and_bounded():
    assert excerpt(b'data: {"a": "\xff"}\n') == repr(b'data: {"a": "\xff"}\n')
    long = excerpt(b"\x00" * 10_000)
    assert long.endswith("... (10000 bytes)") and len(long) <= 4 * EXCERPT_BYTES + 30 and "\x00" not in long


def test_every_shape_vllm_never_sends_is_a_malformed_event_naming_the_field():
    for bad, field in [
        ({"usage": "lots"}, "usage is a str"),
        ({"choices": {"0": {}}}, "choices is a dict"),
        ({"choices": [3]}, "choices[0] is a int"),
        ({"choices": [{"delta": "x"}]}, "choices[0].delta is a str"),
        ({"choices": [{"delta": {"content": 1}}]}, "choices[0].delta.content is a int"),
        ({"choices": [{"text": []}]}, "choices[0].text is a list"),
        ({"usage": {"completion_tokens": True}}, "usage.completion_tokens is True"),
        ({"usage": {"completion_tokens": 1, "prompt_tokens": -1}}, "usage.prompt_tokens is -1"),
        ({"model": ["m"]}, "model is a list"),
    ]:
        with pytest.raises(StreamError, match=re.escape(field)) as error:
            StreamState().add(bad, 0.1)
        assert error.value.kind == "malformed_event"
    with pytest.raises(StreamError, match="not UTF-8") as error:
        decode_event(b'data: {"a": "\xc3"}')
    assert error.value.kind == "malformed_event"
    for payload in (b"NaN", b'{"a": Infinity}', b"[" * 100_000, b"1" * 5000):
        with pytest.raises(StreamError, match="malformed server-sent event"):
            decode_event(b"data: " + payload)
    assert decode_event(b'data: {"__done__": true}') is not DONE  # no event can forge the end of a stream


def test_usage_that_would_give_a_wrong_figure_is_its_own_error():
    def finished(*events, **limits):
        state = StreamState(**limits)
        for event in events:
            state.add(event, 0.1)
        state.finish()
        return state

    cases = [
        ((chat("a", 2), chat("b", 1)), {}, "tokens_backwards"),
        ((chat("a", 1), {"choices": [], "usage": {"completion_tokens": None}}), {}, "tokens_missing"),
        ((chat("a", 1), chat("b")), {}, "tokens_missing"),  # content after the last usage: the total is unknown
        ((chat("a", 1), chat("b", 50)), {"max_tokens": 40}, "over_max_tokens"),
        ((chat("a", 1), chat("b", 1)), {}, "fewer_tokens_than_chunks"),
        ((chat("a", 0), chat("b", 0)), {}, "fewer_tokens_than_chunks"),
        (({**chat("a", 1), "model": "other"},), {"model": "Qwen/Qwen3-32B"}, "model_mismatch"),
        (({"choices": [], "usage": {"completion_tokens": 0}},), {}, "empty_completion"),
    ]
    for events, limits, kind in cases:
        with pytest.raises(StreamError) as error:
            finished(*events, **limits)
        assert error.value.kind == kind, (events, error.value)
    state = finished(chat("a", 1), chat("b", 40), max_tokens=40, model="Qwen/Qwen3-32B")
    assert state.tokens == [1, 39] and state.per_chunk
    state = finished({**chat("a", 1), "model": "qwen3"}, model="Qwen/Qwen3-32B", aliases=("qwen3",))  # vLLM's first served name
    assert state.tokens == [1]


def test_usage_on_the_last_chunk_only_keeps_the_total_and_no_per_chunk_figure():
    body = sse(chat(" a"), chat(" b"), chat(" c"), chat(" d"), {"choices": [], "usage": {"completion_tokens": 6}}, b"[DONE]")
    record, pending = digest(raw_stream(reads=[body], times=[0.4], finished=True))
    assert pending is None and record.ok and record.token_count_source == COUNT_FROM_FINAL_USAGE
    assert (record.output_tokens, record.chunks, record.tokens_per_chunk) == (6, 4, 1.5)
    assert (record.chunk_tokens, record.acceptance_length, record.acceptance_chunks) == ([], None, 0)


def test_a_failure_keeps_no_figure_and_parsing_never_raises():
    record, _ = digest(raw_stream(reads=[sse(chat(" a", 1), chat(" b", 0), b"[DONE]")], times=[0.2], finished=True))
    assert (record.error_kind, record.ttft_s, record.output_tokens, record.chunk_times_s) == ("tokens_backwards", None, None, [])
    record, _ = digest(raw_stream(reads=[b"x"], times=[0.1, 0.2], finished=True))  # an impossible RawStream: still a record
    assert (record.ok, record.error_kind) == (False, "client_exception") and "ValueError" in record.error_msg


def test_the_breaker_opens_at_n_consecutive_failures_and_stays_open():
    breaker = CircuitBreaker(3)
    assert [breaker.feed(ok, "503") for ok in (False, False, True, False, False)] == [False] * 5 and breaker.failures == 2
    assert breaker.feed(False, "timeout") is True and breaker.opened and breaker.reason == "timeout"
    assert breaker.feed(True) is False and breaker.opened  # open for the rest of the run
    never = CircuitBreaker(0)
    assert not any(never.feed(False) for _ in range(100)) and not never.opened


def test_arrival_pieces_cut_each_read_where_a_network_read_ended():
    arrivals = [(1.0, 4), (2.0, 10), (3.0, 12)]  # (arrival, body bytes received by then)
    # One read of the task that took in all three network reads: three pieces, each its own arrival.
    assert arrival_pieces(b"aaaabbbbbbcc", 0, arrivals, 0, 9.0) == ([(1.0, b"aaaa"), (2.0, b"bbbbbb"), (3.0, b"cc")], 3)
    # A read that starts inside a network read and stops inside the next.
    assert arrival_pieces(b"aabbb", 2, arrivals, 0, 9.0) == ([(1.0, b"aa"), (2.0, b"bbb")], 1)
    assert arrival_pieces(b"bbbcc", 7, arrivals, 1, 9.0) == ([(2.0, b"bbb"), (3.0, b"cc")], 3)
    # Bytes no arrival covers (a connection that does not stamp) get the time they were read.
    assert arrival_pieces(b"ccdd", 10, arrivals, 1, 9.0) == ([(3.0, b"cc"), (9.0, b"dd")], 3)
    assert arrival_pieces(b"xy", 0, [], 0, 9.0) == ([(9.0, b"xy")], 0)
    assert arrival_pieces(b"", 12, arrivals, 3, 9.0) == ([], 3)


class TwoChunkServer(threading.Thread):
    """A loopback HTTP/1.1 server (standard library, its own thread) answering each request on one
    keep-alive connection with a chunked event stream in two sends: the first content chunk, then
    (for the first request only once ``go`` is set) the second with [DONE]. ``sent`` holds each
    request's ``time.perf_counter()`` taken just before each send (CLOCK_MONOTONIC, the client's clock)."""

    def __init__(self, requests: int) -> None:
        super().__init__(daemon=True)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(10)
        self.port = self.listener.getsockname()[1]
        self.requests = requests
        self.go, self.second_sent = threading.Event(), threading.Event()
        self.sent: list[list[float]] = []

    @staticmethod
    def chunk(data: bytes) -> bytes:
        return f"{len(data):x}\r\n".encode() + data + b"\r\n"

    def run(self) -> None:
        connection, _ = self.listener.accept()
        connection.settimeout(10)
        with connection, self.listener:
            pending = b""
            for number in range(self.requests):
                while b"\r\n\r\n" not in pending:
                    pending += connection.recv(65536)
                head, _, pending = pending.partition(b"\r\n\r\n")
                length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
                while len(pending) < length:
                    pending += connection.recv(65536)
                pending = pending[length:]
                times: list[float] = []
                self.sent.append(times)
                first = sse({"choices": [{"delta": {"role": "assistant", "content": ""}}]}, chat(" a", 1))
                header = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                times.append(time.perf_counter())
                connection.sendall(header + self.chunk(first))
                if number == 0:
                    self.go.wait(10)
                times.append(time.perf_counter())
                connection.sendall(self.chunk(sse(chat(" b", 2), b"[DONE]")) + b"0\r\n\r\n")
                self.second_sent.set()


def test_each_chunk_is_stamped_when_its_bytes_arrive_not_when_the_stream_reads_them():
    """The first chunk's read makes the loop run something else before the stream's task gets to it
    (as other streams' ends do): a callback queued ahead of the task, which holds the loop until the
    server has sent the second chunk and FORCED_DELAY_S more. The first chunk must be stamped before
    that callback began (when its bytes arrived), not after it ended (when the task read it); the
    second, which the loop could only read after the callback, after its own send. Then a second
    request on the same pooled connection gets stamps of its own (never the first response's)."""
    forced_delay_s = 0.1
    server = TwoChunkServer(requests=2)
    server.start()
    held: dict[str, float] = {}

    def hold_the_loop() -> None:
        held["from"] = time.perf_counter()
        server.go.set()
        server.second_sent.wait(10)
        time.sleep(forced_delay_s)
        held["until"] = time.perf_counter()

    class HeldAfterTheFirstChunk(native.StampingHandler):
        def data_received(self, data):
            if b'" a"' in data and not held:
                self._loop.call_soon(hold_the_loop)  # queued ahead of the stream's task this read wakes
            super().data_received(data)

    async def two_requests(engine):
        connector = native.stamping_connector(engine)
        connector._factory = functools.partial(HeldAfterTheFirstChunk, loop=connector._loop, engine=engine)
        raws = [raw_stream(), raw_stream()]
        async with aiohttp.ClientSession(connector=connector) as session:
            for raw in raws:
                url = f"http://127.0.0.1:{server.port}/v1/chat/completions"
                await engine.collect(session, url, b"{}", {"Content-Type": "application/json"}, aiohttp.ClientTimeout(total=20), raw)
        return raws

    raws = asyncio.run(two_requests(NativeEngine()))
    server.join(10)
    records = [digest(raw)[0] for raw in raws]
    assert [r.ok for r in records] == [True, True], [r.error_msg for r in records]
    stamps = [[r.sent_monotonic_s + t for t in r.chunk_times_s] for r in records]
    first, second = stamps[0]
    assert server.sent[0][0] <= first < held["from"]  # on arrival, though read after the forced delay
    assert held["until"] <= second and server.sent[0][1] <= second
    assert records[0].ttft_s < held["from"] - records[0].sent_monotonic_s
    assert len(stamps[1]) == 2 and all(sent <= at for sent, at in zip(server.sent[1], stamps[1], strict=True))
    assert stamps[1][0] >= second  # the reused connection's stamps are the second response's own
