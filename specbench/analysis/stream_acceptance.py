"""Draft acceptance measured from the stream, per request (issue 13).

With continuous usage statistics every chunk carries the served model's token count. A server that
streams one chunk per target step sends, after the prefill chunk, accepted drafts + 1 tokens per
chunk, so a request's mean tokens per decode chunk is its mean acceptance length L and (L - 1) / k
its acceptance rate (records.decode_acceptance leaves out the prefill chunk and the last one, which
max_tokens or a stop may cut). vLLM's own figures are server-wide counters only; per request, the
mean is not biased toward long completions.

That holds only if nothing between the engine and the client merges chunks (a coalescing server,
``--stream-interval``-style batching, or a buffering proxy). So every figure is self-checked: the
baseline must stream exactly 1.0 token per decode chunk, the speculative service at most k + 1;
otherwise the figures are marked unreliable with the reason and never used silently. A step whose
text is empty (a character split over two byte-level tokens, the end-of-sequence token) is a chunk
of its own with its token (specbench.load.native.StreamState), so it never reads as coalescing.
Records stored before that (issue 34) kept such a token in the next chunk: a baseline of theirs that
streamed accented or CJK text fails the check.

Pure functions: records in, figures out. Every figure names its ``source``: "stream" here,
"metrics" for the /metrics counters (specbench.acceptance); ``cross_check`` shows both.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from specbench.analysis import stats
from specbench.results.records import COUNT_FROM_FINAL_USAGE, COUNT_FROM_USAGE, RequestRecord

SOURCE_STREAM = "stream"
SOURCE_METRICS = "metrics"
HISTOGRAM_BIN = 0.5  # tokens per chunk: histogram bins [1.0, 1.5), [1.5, 2.0), ...


@dataclass(frozen=True)
class StreamAcceptance:
    """One request: mean acceptance length (tokens per decode chunk) and rate ((length - 1) / k)."""

    length: float
    rate: float | None  # None when k is unknown or 0
    chunks: int  # decode chunks averaged
    max_chunk_tokens: int


@dataclass(frozen=True)
class Reliability:
    ok: bool
    reason: str = ""


@dataclass(frozen=True)
class ClassAcceptance:
    """Pooled stream acceptance of one group of requests (a prompt class, a test case)."""

    source: str
    requests: int  # requests with a stream figure
    mean_acceptance_length: stats.Interval
    acceptance_rate: stats.Interval
    histogram: dict[str, int] = field(default_factory=dict)  # bin lower edge -> requests

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def per_request(record: RequestRecord, k: int | None) -> StreamAcceptance | None:
    """The request's stream acceptance; None for a failed request, fewer than three content chunks,
    or token counts not taken from the stream's usage (a re-tokenized chunk text is not exact)."""
    if not record.ok or record.token_count_source != COUNT_FROM_USAGE:
        return None
    decode = record.chunk_tokens[1:-1]
    if not decode:
        return None
    length = math.fsum(decode) / len(decode)
    return StreamAcceptance(length, _rate(length, k), len(decode), max(decode))


UNAVAILABLE = "unavailable"


def why_unavailable(records: Sequence[RequestRecord], who: str) -> str:
    """Why none of ``records`` (one service's) has a stream figure, starting with "unavailable":
    the most telling reason first (a server sending usage only at the end, no usage at all, short)."""
    ok = [r for r in records if r.ok]
    if not ok:
        return f"{UNAVAILABLE}: {who} has no successful request"
    if any(r.token_count_source == COUNT_FROM_FINAL_USAGE for r in ok):
        return (
            f"{UNAVAILABLE}: {who} sends usage only on the last chunk (vLLM without continuous_usage_stats): "
            "the tokens of each chunk are unknown"
        )
    if not any(r.token_count_source == COUNT_FROM_USAGE for r in ok):
        return f"{UNAVAILABLE}: {who} sends no usage in the stream: tokens were counted afterwards, not exact per chunk"
    return f"{UNAVAILABLE}: {who} has no request with 3+ content chunks and usage-counted tokens"


def _rate(length: float | None, k: int | None) -> float | None:
    return None if length is None or not k else (length - 1.0) / k


def self_check(records_baseline: Sequence[RequestRecord], records_spec: Sequence[RequestRecord], k: int | None) -> Reliability:
    """Whether stream-derived acceptance can be trusted for this pair of services.

    The baseline must stream exactly one token per decode chunk, the speculative service at most
    k + 1; the first request that breaks either is named in the reason."""
    base = [(r, a) for r in records_baseline if (a := per_request(r, 0)) is not None]
    spec = [(r, a) for r in records_spec if (a := per_request(r, k)) is not None]
    if not base:
        return Reliability(False, why_unavailable(records_baseline, "the baseline") + ": nothing to check the stream against")
    if not spec:
        return Reliability(False, why_unavailable(records_spec, "the speculative service"))
    for record, figures in base:
        if figures.max_chunk_tokens != 1:
            return Reliability(
                False,
                f"the baseline {record.variant} streamed {figures.max_chunk_tokens} tokens in one chunk "
                f"({record.test_case} #{record.request_index}; 1 expected): a server or proxy coalesces chunks",
            )
    if not k:
        return Reliability(False, "k (num_speculative_tokens) of the speculative service is unknown: k + 1 cannot be checked")
    for record, figures in spec:
        if figures.max_chunk_tokens > k + 1:
            return Reliability(
                False,
                f"{record.variant} streamed {figures.max_chunk_tokens} tokens in one chunk ({record.test_case} "
                f"#{record.request_index}; at most k + 1 = {k + 1}): a server or proxy coalesces chunks",
            )
    return Reliability(True)


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def pooled(records: Iterable[RequestRecord], k: int | None, seed: int = 0, **options: Any) -> tuple[stats.Interval, stats.Interval]:
    """Mean over requests (each request weighs the same) of the acceptance length, and the rate
    (L - 1) / k, each with its percentile-bootstrap CI (the rate's is the length's, mapped)."""
    lengths = [a.length for r in records if (a := per_request(r, k)) is not None]
    length = stats.bootstrap_ci((lengths,), _mean, seed=seed, **options) if lengths else stats.Interval(None)
    rate = stats.Interval(
        _rate(length.point, k), _rate(length.low, k), _rate(length.high, k), confidence=length.confidence, resamples=length.resamples
    )
    if rate.point is None:
        rate = stats.Interval(None, confidence=length.confidence)
    return length, rate


def histogram(records: Iterable[RequestRecord], k: int | None) -> dict[str, int]:
    """Requests per acceptance-length bin (lower edge as text, e.g. "2.5"), ascending."""
    counts: dict[float, int] = {}
    for record in records:
        figures = per_request(record, k)
        if figures is not None:
            edge = math.floor(figures.length / HISTOGRAM_BIN) * HISTOGRAM_BIN
            counts[edge] = counts.get(edge, 0) + 1
    return {f"{edge:g}": counts[edge] for edge in sorted(counts)}


def by_class(records: Iterable[RequestRecord], k: int | None, seed: int = 0, **options: Any) -> dict[str, ClassAcceptance]:
    """Pooled stream acceptance per prompt class, classes in order of first appearance."""
    groups: dict[str, list[RequestRecord]] = {}
    for record in records:
        groups.setdefault(record.prompt_class, []).append(record)
    result = {}
    for prompt_class, members in groups.items():
        length, rate = pooled(members, k, seed=stats.seed_for(str(seed), prompt_class), **options)
        counted = sum(1 for r in members if per_request(r, k) is not None)
        result[prompt_class] = ClassAcceptance(SOURCE_STREAM, counted, length, rate, histogram(members, k))
    return result


def figure(
    records_baseline: Sequence[RequestRecord], records_spec: Sequence[RequestRecord], k: int | None, seed: int = 0, **options: Any
) -> dict[str, Any]:
    """The stream figure of one speculative service over a group, in the shape of the /metrics
    figures (mean_acceptance_length, acceptance_rate) plus its CIs, the self-check and ``source``."""
    check = self_check(records_baseline, records_spec, k)
    length, rate = pooled(records_spec, k, seed=seed, **options)
    requests = sum(1 for r in records_spec if per_request(r, k) is not None)
    # No figure at all: the reason is the speculative service's own (e.g. usage only on the last
    # chunk), whatever the baseline's check says; mean and rate stay None, never 0.0.
    reason = check.reason if requests else why_unavailable(records_spec, "the speculative service")
    return {
        "source": SOURCE_STREAM,
        "reliable": check.ok,
        "reason": reason,
        "requests": requests,
        "mean_acceptance_length": length.point,
        "acceptance_rate": rate.point,
        "mean_acceptance_length_ci": length.to_dict(),
        "acceptance_rate_ci": rate.to_dict(),
        "histogram": histogram(records_spec, k),
    }


def cross_check(stream: Mapping[str, Any] | None, metrics: Mapping[str, Any] | None) -> dict[str, Any]:
    """Both sources side by side with their difference (stream - metrics), for the figures both have."""
    result: dict[str, Any] = {"stream": dict(stream) if stream else None, "metrics": dict(metrics) if metrics else None}
    for key in ("mean_acceptance_length", "acceptance_rate"):
        a = (stream or {}).get(key)
        b = (metrics or {}).get(key) if (metrics or {}).get("source") not in (None, "missing") else None
        result[f"{key}_difference"] = None if a is None or b is None else a - b
    return result


def usable(stream: Mapping[str, Any] | None) -> bool:
    """Whether a stream figure may stand in for missing /metrics (self-checked and measured)."""
    return bool(stream) and bool(stream.get("reliable")) and stream.get("mean_acceptance_length") is not None
