"""The per-request record every engine produces, and the pure math that fills it.

Two inter-token figures, because speculative decoding makes them differ:
- ``inter_token_latency_s`` is llmperf's: the sum of gaps between streamed chunks (TTFT included)
  divided by the number of chunks. vLLM streams one chunk per engine step, and a speculative step
  carries several tokens, so this is a per-*chunk* time.
- ``time_per_output_token_s`` is per *token*: (end-to-end - TTFT) / (output tokens - 1).

Chunks and tokens in every figure the project derives are *content* chunks (events that delivered
output: text, or with usage on every event a rise in the token count under empty text, one per server
step; specbench.load.native.StreamState says why) and *content* tokens (the served model's, no BOS),
whichever engine measured them. llmperf's own
figures (every data line a chunk, Llama-2 tokens with BOS) ride along in the ``llmperf_*`` fields
when the llmperf engine ran. ``FIGURE_DEFINITIONS`` says which is which; a run stores it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from specbench import jsonfile

# Where the token counts came from, kept in every record so a reader can tell exact from estimated.
COUNT_FROM_USAGE = "usage"  # vLLM continuous usage statistics: the served model's own tokenizer
COUNT_FROM_TOKENIZER = "tokenizer"  # the served model's tokenizer, asked after the request
COUNT_FROM_LLAMA2 = "llama2-tokenizer"  # llmperf's own counting, whatever model is served
# Usage only on the stream's last chunk (vLLM without continuous_usage_stats): the total is exact, the
# tokens of each chunk are unknown (chunk_tokens empty), so stream acceptance is unavailable, never 0.
COUNT_FROM_FINAL_USAGE = "final-usage"

FIGURE_DEFINITIONS = {
    "ttft_s": "request written to first content chunk",
    "end_to_end_latency_s": "request written to the end of the stream",
    "chunks": "content chunks: streamed events that delivered output, one per server step: non-empty text, or (usage on every "
    "event) a rise in completion_tokens under empty text (a character's first byte-level token, the end-of-sequence token); "
    "role-only and usage-only frames excluded",
    "output_tokens": "content tokens, no BOS; counted as token_count_source says",
    "inter_token_latency_s": "per content chunk: (last content chunk - sent) / chunks",
    "time_per_output_token_s": "per content token: (end-to-end - TTFT) / (output_tokens - 1)",
    "tokens_per_chunk": "output_tokens / chunks",
    "output_throughput_tps": "output_tokens / end-to-end",
    "chunk_times_s": "arrival of each content chunk after the request was sent (empty for imported llmperf files)",
    "acceptance_length": "stream acceptance: mean content tokens per decode chunk (first and last chunk excluded); "
    "accepted drafts + 1 on a server streaming one chunk per target step",
    "acceptance_chunks": "decode chunks acceptance_length averages (content chunks - 2, 0 below 3 chunks)",
    "llmperf_ttft_s": "llmperf's: from before requests.post (session and connection set-up included) to the first content chunk",
    "llmperf_end_to_end_latency_s": "llmperf's: from before requests.post to the end of the stream",
    "llmperf_chunks": "llmperf's count: every data line but [DONE] (role and finish frames included)",
    "llmperf_output_tokens": "llmperf's count: len(Llama-2 tokenizer.encode(text)), BOS included",
    "llmperf_inter_token_latency_s": "llmperf's: summed gaps / llmperf_chunks, as its token_benchmark_ray.py",
    "llmperf_output_throughput_tps": "llmperf's: llmperf_output_tokens / end-to-end",
}

CLIENT_ERROR = -1  # llmperf's code for a failure with no HTTP status (timeout, dropped stream)
INTERRUPTED = -2  # the run was stopped (SIGTERM, Ctrl-C, a crash) while the request was in flight
NOT_SENT = -3  # never sent: the endpoint's circuit breaker was open (consecutive failures)

# What went wrong, one stable name per class (``error_kind``): ``error_code`` stays llmperf's integer
# (the HTTP status, else the negative codes above), the kind says which fault it was. Stored in every
# failed record of the native engine and counted per kind in run.json (``error_kinds``).
ERROR_KINDS = (
    "http_status",  # the server answered with an HTTP status other than 200
    "not_event_stream",  # HTTP 200 but not a text/event-stream body
    "timeout",  # no complete response within the request timeout
    "connection",  # connection refused, reset or dropped, or an HTTP response aiohttp could not read
    "truncated",  # the stream ended before its [DONE] line
    "oversized_stream",  # the stream grew beyond the client's bound on its size (a runaway server)
    "stream_error_event",  # the server reported an error inside the stream
    "malformed_event",  # an event vLLM never sends: not UTF-8, not JSON, not an object, or a field of the wrong type
    "empty_completion",  # [DONE] without any content chunk: no text, and usage counted no token
    "tokens_backwards",  # usage.completion_tokens went down during the stream
    "tokens_missing",  # usage was on but a usage (the last one included) had no completion_tokens, or content came after the last usage
    "over_max_tokens",  # more completion tokens than the request's max_tokens
    "fewer_tokens_than_chunks",  # a content chunk carried no token (usage counts fewer tokens than content chunks)
    "model_mismatch",  # an event named a model other than the one requested
    "tokenize_failed",  # no usage in the stream and the server's /tokenize could not count the chunks
    "client_exception",  # the client failed on this response in a way no other kind names (its type is in error_msg)
    "interrupted",  # the run was stopped while the request was in flight
    "not_sent",  # not sent: the endpoint's circuit breaker had opened after consecutive failures
    "client_error",  # a failure without an HTTP status stored without a kind (older runs, the llmperf engine)
)


@dataclass
class RequestRecord:
    run_id: str
    variant: str
    test_case: str
    prompt_class: str
    engine: str
    request_index: int
    started_at: float  # wall clock (s since the epoch) at the body's write, as sent_monotonic_s: CloudWatch timestamp, busy window start
    prompt_id: str = ""  # the dataset item the request sent (suites with dataset sources); "" for text cases
    error_code: int | None = None
    error_msg: str = ""
    # The class of the failure, one of ERROR_KINDS; empty on success (and then left out of the stored
    # record, as records written before it were).
    error_kind: str = ""
    ttft_s: float | None = None
    end_to_end_latency_s: float | None = None
    inter_token_latency_s: float | None = None
    time_per_output_token_s: float | None = None
    tokens_per_chunk: float | None = None
    output_throughput_tps: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    chunks: int = 0
    token_count_source: str = ""
    # Greedy decoding with lossless speculation must give the baseline's text: compared per test case.
    output_sha256: str = ""
    # time.perf_counter() (CLOCK_MONOTONIC) when the request's last byte was written: meaningless on
    # its own, it lets a server on the same host (the emulator) be compared with the client.
    sent_monotonic_s: float | None = None
    # Raw stream: arrival of each content chunk, seconds after the request was sent, and its tokens.
    chunk_times_s: list[float] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    # Stream acceptance (specbench.analysis.stream_acceptance): tokens per chunk of the decode steps.
    acceptance_length: float | None = None
    acceptance_chunks: int = 0
    # llmperf's own figures, as llmperf computes them (FIGURE_DEFINITIONS); None from the native engine.
    llmperf_ttft_s: float | None = None
    llmperf_end_to_end_latency_s: float | None = None
    llmperf_chunks: int | None = None
    llmperf_output_tokens: int | None = None
    llmperf_inter_token_latency_s: float | None = None
    llmperf_output_throughput_tps: float | None = None
    # The load level of a multi-level run (``c4``: 4 in flight; ``r2p5``: 2.5 requests/s, Poisson);
    # empty in a single-level run, and then left out of the stored record (files stay as they were).
    load_level: str = ""

    @property
    def ok(self) -> bool:
        return self.error_code is None

    def to_json(self) -> str:
        # The fields as they are, not asdict(): a record holds only scalars and lists of scalars, which
        # serialize the same, and asdict() deep-copies every float of the chunk lists one by one
        # (Python 3.11 dataclasses._asdict_inner): 1.1 ms for a 600-token record instead of 0.16 ms,
        # spent in the client's event loop as each request completes.
        data = {name: getattr(self, name) for name in _FIELD_NAMES}
        for optional in ("load_level", "error_kind"):
            if not data[optional]:
                del data[optional]
        return jsonfile.dumps(data, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RequestRecord:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


_FIELD_NAMES = tuple(f.name for f in fields(RequestRecord))


def stream_metrics(
    chunk_times_s: Sequence[float],
    chunk_tokens: Sequence[int],
    end_to_end_latency_s: float,
    input_tokens: int | None,
) -> dict[str, Any]:
    """Latency and throughput figures of one successful stream, from its chunk arrivals.

    ``chunk_times_s`` are offsets from the moment the request was sent; ``chunk_tokens`` the
    tokens each chunk carried. Raises ValueError on an empty stream: that is an error, not a record.
    """
    if not chunk_times_s:
        raise ValueError("empty completion: no content chunk arrived")
    if len(chunk_times_s) != len(chunk_tokens):
        raise ValueError("chunk_times_s and chunk_tokens differ in length")
    output_tokens = sum(chunk_tokens)
    ttft = chunk_times_s[0]
    chunks = len(chunk_times_s)
    return {
        "ttft_s": ttft,
        "end_to_end_latency_s": end_to_end_latency_s,
        # llmperf: sum of gaps including TTFT, over chunks; the gaps telescope to the last arrival.
        "inter_token_latency_s": chunk_times_s[-1] / chunks,
        "time_per_output_token_s": time_per_output_token(ttft, end_to_end_latency_s, output_tokens),
        "tokens_per_chunk": output_tokens / chunks,
        "output_throughput_tps": output_tokens / end_to_end_latency_s if end_to_end_latency_s > 0 else None,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "chunks": chunks,
        **decode_acceptance(chunk_tokens),
    }


def decode_acceptance(chunk_tokens: Sequence[int]) -> dict[str, Any]:
    """Mean tokens per chunk of the decode chunks: the first (prefill, one token) and the last
    (cut by max_tokens or a stop, and carrying a final usage frame's stop token) are left out, so
    on a server that streams one chunk per target step every chunk counted is accepted + 1."""
    decode = list(chunk_tokens[1:-1])
    return {"acceptance_length": sum(decode) / len(decode) if decode else None, "acceptance_chunks": len(decode)}


def time_per_output_token(ttft_s: float, end_to_end_latency_s: float, output_tokens: int) -> float | None:
    """(e2e - TTFT) / (tokens - 1): the decode time per token after the first; None below 2 tokens."""
    if output_tokens < 2:
        return None
    return (end_to_end_latency_s - ttft_s) / (output_tokens - 1)


def read_jsonl(lines: Iterable[str]) -> list[RequestRecord]:
    return [RequestRecord.from_dict(json.loads(line)) for line in lines if line.strip()]


def failure_kind(record: RequestRecord) -> str:
    """The record's ERROR_KINDS name; for records stored without one (older runs, the llmperf engine),
    the kind its code implies. "" for a success."""
    if record.ok:
        return ""
    if record.error_kind:
        return record.error_kind
    if record.error_code == INTERRUPTED:
        return "interrupted"
    if record.error_code == NOT_SENT:
        return "not_sent"
    return "http_status" if isinstance(record.error_code, int) and record.error_code > 0 else "client_error"


def error_kinds(records: Iterable[RequestRecord]) -> dict[str, int]:
    """Failed requests per kind, kinds sorted: what run.json and the run's summary count."""
    counted: dict[str, int] = {}
    for record in records:
        kind = failure_kind(record)
        if kind:
            counted[kind] = counted.get(kind, 0) + 1
    return dict(sorted(counted.items()))
