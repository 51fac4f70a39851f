"""Which stored values are possible: the one rule every reader (specbench.results.runfiles: the
report, the aggregation Lambda, sweep-report) and every publisher (specbench.outputs.publish) applies
before a value reaches a figure, CloudWatch or the dashboard. Pure functions, standard library only.

A record is impossible when a latency is negative or not finite (or 0 in a successful request), its first token came after the end
of its stream, it has fewer tokens than content chunks (every content chunk carries a token), more
tokens than the ``max_tokens`` it was sent with (counted with the served model's tokenizer), or it is
the same request (service, test case, load level, request index) a second time. An acceptance figure
is impossible when a count is negative or not finite, a rate lies outside 0..1, or the mean
acceptance length is below 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from specbench.results.records import COUNT_FROM_TOKENIZER, COUNT_FROM_USAGE, RequestRecord

# Seconds measured from the moment a request was sent: never negative, always finite.
DURATION_FIELDS = (
    "ttft_s",
    "end_to_end_latency_s",
    "inter_token_latency_s",
    "time_per_output_token_s",
    "llmperf_ttft_s",
    "llmperf_end_to_end_latency_s",
    "llmperf_inter_token_latency_s",
)
# Ratios of counts and durations: never negative, always finite.
RATE_FIELDS = ("tokens_per_chunk", "output_throughput_tps", "acceptance_length", "llmperf_output_throughput_tps")
COUNT_FIELDS = ("input_tokens", "output_tokens", "chunks", "acceptance_chunks", "llmperf_chunks", "llmperf_output_tokens")
# Token counts made with the served model's own tokenizer: only these can be held against max_tokens
# (llmperf's Llama-2 count of another model's text may exceed it honestly).
SERVED_MODEL_COUNTS = (COUNT_FROM_USAGE, COUNT_FROM_TOKENIZER)

# Acceptance figures (specbench.analysis.acceptance.Acceptance.to_dict, acceptance/<case>.json).
ACCEPTANCE_COUNTS = ("drafts", "draft_tokens", "accepted_tokens", "efficiency")
ACCEPTANCE_RATIOS = ("acceptance_rate",)  # accepted / drafted tokens: 0..1
ACCEPTANCE_TEXT = ("source", "reason", "note")


# Names that become CloudWatch dimension values and dashboard labels.
NAME_FIELDS = ("variant", "test_case", "prompt_class")
MAX_NAME_LENGTH = 1024  # CloudWatch's dimension value limit


def name_problem(value: Any) -> str:
    """Why ``value`` cannot name a service, test case or prompt class ("" if it can): CloudWatch takes
    1..1024 printable ASCII characters, not only blanks, as a dimension value."""
    if not isinstance(value, str):
        return f"is {type(value).__name__}, expected a text"
    if not value.strip() or len(value) > MAX_NAME_LENGTH or not value.isascii() or not value.isprintable():
        return f"is {_excerpt(value)}: expected 1..{MAX_NAME_LENGTH} printable ASCII characters, not only blanks"
    return ""


def _number_problem(name: str, value: Any, *, integer: bool = False) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not isinstance(value, int)):
        return f"{name} is {type(value).__name__} {_excerpt(value)}, expected {'an integer' if integer else 'a number'}"
    if not math.isfinite(value):
        return f"{name} is {value}, expected a finite number"
    if value < 0:
        return f"{name} is negative ({value:g})"
    return ""


def _excerpt(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def record_problem(record: RequestRecord, max_tokens: int | None = None) -> str:
    """Why ``record`` cannot be a measured request ("" when it can). ``max_tokens``: what the
    request was sent with, when known (the test case's own, else the run's)."""
    for name in ("run_id", "engine", "prompt_id", "token_count_source", "load_level"):
        if not isinstance(getattr(record, name), str):
            return f"{name} is not a text"
    for name in NAME_FIELDS:
        if problem := name_problem(getattr(record, name)):
            return f"{name} {problem}"
    problem = _number_problem("request_index", record.request_index, integer=True) or _number_problem("started_at", record.started_at)
    if problem:
        return problem
    for name in (*DURATION_FIELDS, *RATE_FIELDS):
        value = getattr(record, name)
        if value is not None and (problem := _number_problem(name, value)):
            return problem
    for name in COUNT_FIELDS:
        value = getattr(record, name)
        if value is not None and (problem := _number_problem(name, value, integer=True)):
            return problem
    if record.error_code is not None and (isinstance(record.error_code, bool) or not isinstance(record.error_code, int)):
        return f"error_code is {type(record.error_code).__name__} {_excerpt(record.error_code)}, expected an integer or null"
    for name, integer in (("chunk_times_s", False), ("chunk_tokens", True)):
        values = getattr(record, name)
        if not isinstance(values, list):
            return f"{name} is {type(values).__name__}, expected a list"
        for index, value in enumerate(values):
            if problem := _number_problem(f"{name}[{index}]", value, integer=integer):
                return problem
    times = record.chunk_times_s
    if any(later < earlier for earlier, later in zip(times, times[1:], strict=False)):
        return "chunk_times_s go backwards"
    if times and record.chunk_tokens and len(times) != len(record.chunk_tokens):
        return f"{len(times)} chunk times but {len(record.chunk_tokens)} chunk token counts"
    if not record.ok:
        return ""  # a failed request's figures are partial and left out of every figure anyway
    for name in DURATION_FIELDS:
        if getattr(record, name) == 0:  # a request that was answered took time: every latency of it does
            return f"{name} is 0 in a successful request"
    ttft, e2e = record.ttft_s, record.end_to_end_latency_s
    if ttft is not None and e2e is not None and ttft > e2e:
        return f"TTFT {ttft:g} s above the end-to-end latency {e2e:g} s"
    tokens = record.output_tokens
    if tokens is not None and tokens < record.chunks:
        return f"{tokens} output tokens in {record.chunks} content chunks (each carries at least one)"
    if tokens is not None and max_tokens and record.token_count_source in SERVED_MODEL_COUNTS and tokens > max_tokens:
        return f"{tokens} output tokens, more than the max_tokens {max_tokens} it was sent with"
    return ""


def request_key(record: RequestRecord) -> tuple[str, str, str, int]:
    """What makes a request one: its service, test case, load level and index."""
    return (record.variant, record.test_case, record.load_level, record.request_index)


def screen(
    records: Iterable[RequestRecord], max_tokens_of: Callable[[str], int | None] = lambda case: None
) -> tuple[list[RequestRecord], list[tuple[int, str]]]:
    """The possible records, first of each request kept; and (position, reason) of the others.
    ``max_tokens_of``: test case -> the max_tokens its requests were sent with."""
    kept: list[RequestRecord] = []
    rejected: list[tuple[int, str]] = []
    seen: dict[tuple[str, str, str, int], int] = {}
    for index, record in enumerate(records):
        problem = record_problem(record, max_tokens_of(record.test_case) if isinstance(record.test_case, str) else None)
        if not problem:
            key = request_key(record)
            if key in seen:
                problem = f"the same request as #{seen[key]} ({key[0]} {key[1]}{'@' + key[2] if key[2] else ''} #{key[3]})"
            else:
                seen[key] = index
        if problem:
            rejected.append((index, problem))
        else:
            kept.append(record)
    return kept, rejected


def acceptance_problem(figures: Any) -> str:
    """Why one endpoint's acceptance figures cannot be measured ones ("" when they can)."""
    if not isinstance(figures, Mapping):
        return f"is {type(figures).__name__}, expected an object"
    for name in ACCEPTANCE_TEXT:
        if figures.get(name) is not None and not isinstance(figures[name], str):
            return f"{name} is {type(figures[name]).__name__}, expected a text"
    for name in (*ACCEPTANCE_COUNTS, *ACCEPTANCE_RATIOS, "mean_acceptance_length"):
        value = figures.get(name)
        if value is not None and (problem := _number_problem(name, value)):
            return problem
    for name in ACCEPTANCE_RATIOS:
        if (figures.get(name) or 0) > 1:
            return f"{name} is {figures[name]:g}, above 1"
    length = figures.get("mean_acceptance_length")
    if length is not None and length < 1:
        return f"mean_acceptance_length is {length:g}, below 1 (the target's own token is always accepted)"
    drafted, accepted = figures.get("draft_tokens"), figures.get("accepted_tokens")
    if drafted is not None and accepted is not None and accepted > drafted:
        return f"accepted_tokens {accepted:g} above draft_tokens {drafted:g}"
    positions = figures.get("per_position")
    if positions is not None:
        if not isinstance(positions, list):
            return f"per_position is {type(positions).__name__}, expected a list"
        for index, value in enumerate(positions):
            if (problem := _number_problem(f"per_position[{index}]", value)) or value > 1:
                return problem or f"per_position[{index}] is {value:g}, above 1"
    return ""
