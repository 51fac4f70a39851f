"""Per-request benchmark values as CloudWatch custom metrics, published so CloudWatch keeps percentiles.

Every value goes out raw, as ``Values``/``Counts`` arrays (a StatisticSet would lose p50/p90/p99),
under two dimension sets: {Variant, PromptClass, TestCase} and {Variant, PromptClass}, so a
dashboard can show a prompt class without listing its test cases.

PutMetricData limits (CloudWatch API reference): at most 1000 datums and 1 MB per request, at most
150 distinct values per datum's ``Values``; NaN and +-Inf are rejected, and so are magnitudes outside
2^-359..2^359 (8.515920e-109..1.174271e+108; the reference now says -2^360..2^360, we keep the
narrower range both versions accept). Zero is fine.

Request size is computed with botocore's own serializer for the protocol botocore actually uses.
For CloudWatch, botocore 1.44's service model lists ``smithy-rpc-v2-cbor``, ``json`` and ``query``,
and botocore picks the first it prefers: ``json`` (awsJson1_0, ``json.dumps`` with its default
separators). We size the uncompressed body: botocore gzips PutMetricData bodies of 10 KB and more,
which only makes the request on the wire smaller.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from itertools import chain
from operator import attrgetter
from typing import Any

import boto3
import botocore.session
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from botocore.serialize import create_serializer

from specbench.analysis.acceptance import Acceptance
from specbench.aws_retry import RETRYABLE_CODES, backoff_delay, error_code, is_retryable  # noqa: F401 - RETRYABLE_CODES re-exported
from specbench.results.records import RequestRecord

log = logging.getLogger(__name__)

UTC = timezone.utc  # noqa: UP017 - datetime.UTC is Python 3.11+; the benchmark Job runs 3.10

MAX_DATUMS_PER_REQUEST = 1000
MAX_VALUES_PER_DATUM = 150
MAX_REQUEST_BYTES = 1_048_576
SMALLEST_MAGNITUDE = 2.0**-359  # 8.515920e-109
LARGEST_MAGNITUDE = 2.0**359  # 1.174271e+108
MAX_DIMENSION_VALUE_LENGTH = 1024

# --- what is published --------------------------------------------------------------------------


@dataclass(frozen=True)
class MetricSpec:
    name: str
    unit: str
    source: str | Callable[[RequestRecord], float | None]  # a RequestRecord attribute, or a function of the record
    ok_only: bool = True  # a failed request's latencies and token counts are partial: leave them out

    def value_of(self, record: RequestRecord) -> float | None:
        if self.ok_only and not record.ok:
            return None
        return getattr(record, self.source) if isinstance(self.source, str) else self.source(record)


def _error_flag(record: RequestRecord) -> int:
    # Sum = failed requests, SampleCount = all requests, Average = error rate.
    return 0 if record.ok else 1


METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("TTFT", "Seconds", "ttft_s"),
    MetricSpec("InterTokenLatency", "Seconds", "inter_token_latency_s"),
    MetricSpec("TimePerOutputToken", "Seconds", "time_per_output_token_s"),
    MetricSpec("EndToEndLatency", "Seconds", "end_to_end_latency_s"),
    MetricSpec("OutputThroughput", "Count/Second", "output_throughput_tps"),
    MetricSpec("InputTokens", "Count", "input_tokens"),
    MetricSpec("OutputTokens", "Count", "output_tokens"),
    MetricSpec("TokensPerChunk", "Count", "tokens_per_chunk"),
    MetricSpec("Errors", "Count", _error_flag, ok_only=False),
)

# Acceptance measured from the stream, per request (records.acceptance_length), published only for
# test cases whose stream passed its self-check (analysis.stream_acceptance.self_check); its own name
# keeps its source apart from the /metrics figures below.
STREAM_ACCEPTANCE = MetricSpec("StreamAcceptanceLength", "Count", "acceptance_length")

ACCEPTANCE_METRICS = (("AcceptanceRate", "None", "acceptance_rate"), ("MeanAcceptanceLength", "Count", "mean_acceptance_length"))

Dimensions = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class SkippedValue:
    """A value CloudWatch would reject, left out of the datums and reported instead."""

    metric: str
    value: float
    reason: str
    variant: str
    test_case: str
    run_id: str = ""
    request_index: int | None = None


def dimension_sets(variant: str, prompt_class: str, test_case: str) -> tuple[Dimensions, Dimensions]:
    """The two dimension sets every value is published under. Raises ValueError on a value CloudWatch rejects."""
    full = (("Variant", variant), ("PromptClass", prompt_class), ("TestCase", test_case))
    for name, value in full:
        _check_dimension_value(name, value)
    return full, full[:2]


def _check_dimension_value(name: str, value: str) -> None:
    # CloudWatch: 1..1024 ASCII characters, no control characters, not only whitespace.
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_DIMENSION_VALUE_LENGTH:
        raise ValueError(f"dimension {name}={value!r}: CloudWatch wants 1..{MAX_DIMENSION_VALUE_LENGTH} characters, not only blanks")
    if not value.isascii() or not value.isprintable():
        raise ValueError(f"dimension {name}={value!r}: CloudWatch accepts printable ASCII only")


_PLAIN_NUMBERS = (float, int)


def value_problem(value: Any) -> str:
    """Why CloudWatch would reject this value ("" if it would not)."""
    if type(value) in _PLAIN_NUMBERS and (value == 0 or SMALLEST_MAGNITUDE <= abs(value) <= LARGEST_MAGNITUDE):
        return ""  # the common case, checked first: NaN and Inf fail both comparisons
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"not a number ({type(value).__name__})"
    if isinstance(value, float) and not math.isfinite(value):
        return "not finite"
    if value == 0 or SMALLEST_MAGNITUDE <= abs(value) <= LARGEST_MAGNITUDE:
        return ""  # a float or int subclass in range
    return "out of CloudWatch's range"


def record_time(record: RequestRecord) -> datetime:
    return datetime.fromtimestamp(record.started_at, tz=UTC)


def _utc(moment: datetime | float) -> datetime:
    if not isinstance(moment, datetime):
        return datetime.fromtimestamp(moment, tz=UTC)
    # Naive means UTC here, as botocore reads it.
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _check_resolution(storage_resolution: int) -> None:
    if storage_resolution not in (1, 60):
        raise ValueError(f"StorageResolution must be 1 or 60, not {storage_resolution}")


@dataclass
class _Bucket:
    """Values of one metric from one (variant, prompt class, test case), and its earliest request."""

    values: list[float] = field(default_factory=list)
    first: datetime | None = None


def build_datums(
    records: Iterable[RequestRecord],
    *,
    timestamp_of: Callable[[RequestRecord], datetime] = record_time,
    storage_resolution: int = 60,
    metrics: Sequence[MetricSpec] = METRICS,
    skipped: list[SkippedValue] | None = None,
) -> list[dict[str, Any]]:
    """PutMetricData datums for ``records``: one group per (metric, dimension set), its distinct
    values with their counts, split into datums of at most 150 values; timestamp = the group's
    earliest request. Values CloudWatch rejects (NaN, Inf, out of range) are left out, appended to
    ``skipped`` when given, and logged."""
    _check_resolution(storage_resolution)
    buckets: dict[tuple[str, str, str], list[_Bucket]] = {}
    rejected: list[SkippedValue] = []
    readers = [attrgetter(spec.source) if isinstance(spec.source, str) else spec.source for spec in metrics]
    for record in records:
        key = (record.variant, record.prompt_class, record.test_case)
        row = buckets.get(key)
        if row is None:
            dimension_sets(*key)  # fail on a bad dimension value before any work
            row = buckets[key] = [_Bucket() for _ in metrics]
        when: datetime | None = None
        ok = record.ok
        for spec, read, bucket in zip(metrics, readers, row, strict=True):
            if spec.ok_only and not ok:
                continue
            value = read(record)
            if value is None:
                continue
            # value_problem's common case inlined: this loop runs once per value (a million for 100k requests).
            if not (type(value) in _PLAIN_NUMBERS and (value == 0 or SMALLEST_MAGNITUDE <= abs(value) <= LARGEST_MAGNITUDE)):
                problem = value_problem(value)
                if problem:
                    where = (record.variant, record.test_case, record.run_id, record.request_index)
                    rejected.append(SkippedValue(spec.name, value, problem, *where))
                    continue
            when = when or _utc(timestamp_of(record))
            bucket.values.append(value)
            if bucket.first is None or when < bucket.first:
                bucket.first = when
    if rejected:
        log.warning("left out %d values CloudWatch would reject (NaN, Inf or out of range)", len(rejected))
        if skipped is not None:
            skipped.extend(rejected)
    return _group_datums(buckets, metrics, storage_resolution)


def _group_datums(
    buckets: dict[tuple[str, str, str], list[_Bucket]], metrics: Sequence[MetricSpec], storage_resolution: int
) -> list[dict[str, Any]]:
    # A test case's bucket feeds its own group and its prompt class's group.
    groups: dict[tuple[int, Dimensions], list[_Bucket]] = {}
    for key, row in buckets.items():
        for index, bucket in enumerate(row):
            if bucket.values:
                for dimensions in dimension_sets(*key):
                    groups.setdefault((index, dimensions), []).append(bucket)
    datums: list[dict[str, Any]] = []
    for (index, dimensions), members in groups.items():
        counts = Counter(chain.from_iterable(bucket.values for bucket in members))
        first = min(bucket.first for bucket in members if bucket.first is not None)
        values = sorted(counts)
        spec = metrics[index]
        datums += _datums(spec.name, spec.unit, dimensions, values, [counts[v] for v in values], first, storage_resolution)
    return datums


def _datums(
    name: str,
    unit: str,
    dimensions: Dimensions,
    values: list[float],
    counts: list[int],
    timestamp: datetime,
    storage_resolution: int,
) -> list[dict[str, Any]]:
    return [
        {
            "MetricName": name,
            "Dimensions": [{"Name": key, "Value": value} for key, value in dimensions],
            "Timestamp": timestamp,
            "Values": values[start : start + MAX_VALUES_PER_DATUM],
            "Counts": counts[start : start + MAX_VALUES_PER_DATUM],
            "Unit": unit,
            "StorageResolution": storage_resolution,
        }
        for start in range(0, len(values), MAX_VALUES_PER_DATUM)
    ]


def acceptance_datums(
    variant: str,
    test_case: str,
    prompt_class: str,
    acceptance: Acceptance | Mapping[str, Any],
    timestamp: datetime | float,
    *,
    storage_resolution: int = 60,
) -> list[dict[str, Any]]:
    """``AcceptanceRate`` (ratio 0..1) and ``MeanAcceptanceLength`` of one test case, under both
    dimension sets. A value that is missing (None) publishes nothing: absent is not 0.
    ``acceptance`` is an Acceptance or its stored form (``Acceptance.to_dict()``, as in acceptance/*.json)."""
    figures = acceptance if isinstance(acceptance, Mapping) else acceptance.to_dict()
    _check_resolution(storage_resolution)
    sets = dimension_sets(variant, prompt_class, test_case)
    when = _utc(timestamp)
    datums: list[dict[str, Any]] = []
    for name, unit, attribute in ACCEPTANCE_METRICS:
        value = figures.get(attribute)
        if value is None or value_problem(value):
            continue
        for dimensions in sets:
            datums += _datums(name, unit, dimensions, [value], [1], when, storage_resolution)
    return datums


# Per (variant, prompt class) and load level of a run: what a node delivers while busy and what a
# million output tokens cost at the run's node price (specbench/analysis/cost.py); no cost without a price.
THROUGHPUT_METRICS = (("OutputTokensPerSecondPerNode", "Count/Second"), ("CostPerMillionOutputTokens", "None"))


def throughput_datums(
    variant: str,
    prompt_class: str,
    tokens_per_s_per_node: float | None,
    cost_per_million: float | None,
    timestamp: datetime | float,
    *,
    storage_resolution: int = 60,
) -> list[dict[str, Any]]:
    """``OutputTokensPerSecondPerNode`` and ``CostPerMillionOutputTokens`` (USD) under {Variant,
    PromptClass}; a figure that is None (not measured, no price) publishes nothing: absent is not 0."""
    _check_resolution(storage_resolution)
    dimensions = dimension_sets(variant, prompt_class, prompt_class)[1]
    when = _utc(timestamp)
    datums: list[dict[str, Any]] = []
    for (name, unit), value in zip(THROUGHPUT_METRICS, (tokens_per_s_per_node, cost_per_million), strict=True):
        if value is not None and not value_problem(value):
            datums += _datums(name, unit, dimensions, [value], [1], when, storage_resolution)
    return datums


# --- request size, exactly as botocore writes it ---------------------------------------------------


@functools.lru_cache(maxsize=1)
def _put_metric_data() -> tuple[Any, Any]:
    service = botocore.session.get_session().get_service_model("cloudwatch")
    protocol = service.resolved_protocol  # what clients use; metadata["protocol"] says smithy-rpc-v2-cbor
    if protocol != "json":
        # The per-datum sizing below relies on JSON's additive layout; query and CBOR encode differently.
        raise RuntimeError(f"botocore {botocore.__version__} sends CloudWatch requests as {protocol!r}; sizing supports 'json'")
    return create_serializer(protocol, include_validation=False), service.operation_model("PutMetricData")


def request_body(namespace: str, datums: Sequence[dict[str, Any]]) -> bytes:
    """The PutMetricData body botocore would send (before its gzip compression)."""
    serializer, operation = _put_metric_data()
    return serializer.serialize_to_request({"Namespace": namespace, "MetricData": list(datums)}, operation)["body"]


def request_size(namespace: str, datums: Sequence[dict[str, Any]]) -> int:
    return len(request_body(namespace, datums))


@functools.lru_cache(maxsize=1)
def _layout() -> tuple[int, int]:
    """(body size with no datum, bytes between two datums), both measured on botocore's output."""
    empty = request_size("", [])
    one = request_size("", [{}])
    return empty, request_size("", [{}, {}]) - 2 * one + empty


def datum_size(datum: dict[str, Any], skeleton_sizes: dict[str, int] | None = None) -> int:
    """Bytes one datum adds to a request body, not counting the separator before it.

    Fast path: botocore serializes the datum with empty ``Values``/``Counts`` (it writes dimensions,
    names and the timestamp), and the number arrays are added as ``json.dumps`` writes them, which is
    what botocore's JSON serializer does with finite numbers. NaN, Inf or non-JSON numbers (botocore
    writes NaN as a string, converts Decimal) take the slow path through botocore for the whole datum.
    ``skeleton_sizes`` memoizes skeletons by ``repr``: the datums of one group differ only in their arrays.
    """
    skeleton = {key: ([] if key in ("Values", "Counts") else value) for key, value in datum.items()}
    memo = {} if skeleton_sizes is None else skeleton_sizes
    memo_key = repr(skeleton)  # equal reprs of these builtin values mean equal JSON
    size = memo.get(memo_key)
    if size is None:
        size = memo[memo_key] = _alone(skeleton)
    for key in ("Values", "Counts"):
        if key in datum:
            try:
                text = json.dumps(datum[key])  # a size, as botocore writes it (NaN too): nothing is written here
            except TypeError:
                return _alone(datum)
            if "N" in text or "I" in text:  # NaN, Infinity: never in a finite number's JSON
                return _alone(datum)
            size += len(text) - 2
    return size


def _alone(datum: dict[str, Any]) -> int:
    return request_size("", [datum]) - _layout()[0]


def metric_identity(datum: dict[str, Any]) -> tuple[Any, ...]:
    """What CloudWatch calls one metric: the name and the dimensions."""
    return (datum["MetricName"], *sorted((d["Name"], d["Value"]) for d in datum.get("Dimensions", ())))


def batch_datums(
    datums: Sequence[dict[str, Any]],
    namespace: str,
    *,
    max_datums: int = MAX_DATUMS_PER_REQUEST,
    max_bytes: int = MAX_REQUEST_BYTES,
) -> list[list[dict[str, Any]]]:
    """Greedy batches of at most ``max_datums`` datums, ``max_bytes`` of body, and 150 values per
    metric: the API allows "up to 150 values per metric with one PutMetricData request", so two
    datums of one metric (a group split at 150 values) never share a call.

    Datums are taken in order of their metric's occurrence (every metric's first datum, then every
    second one, ...), which keeps the input order when no metric repeats and makes the number of
    calls the larger of what the bytes need and what the most-split metric needs.

    body(batch) = body(no datum) + sum(datum sizes) + separators: each datum is sized once.
    """
    occurrence: dict[tuple[Any, ...], int] = {}
    ordered = []
    for position, datum in enumerate(datums):
        identity = metric_identity(datum)
        occurrence[identity] = occurrence.get(identity, -1) + 1
        ordered.append((occurrence[identity], position, identity, datum))
    ordered.sort(key=lambda item: (item[0], item[1]))

    base = request_size(namespace, [])
    separator = _layout()[1]
    batches: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    values_in_current: dict[tuple[Any, ...], int] = {}
    used = base
    skeleton_sizes: dict[str, int] = {}
    for _, _, identity, datum in ordered:
        count = len(datum.get("Values", ())) or 1
        if count > MAX_VALUES_PER_DATUM:
            raise ValueError(f"{datum['MetricName']}: {count} values in one datum, CloudWatch takes {MAX_VALUES_PER_DATUM}")
        size = datum_size(datum, skeleton_sizes)
        if base + size > max_bytes:
            raise ValueError(f"{datum['MetricName']}: one datum makes a {base + size}-byte request, over {max_bytes}")
        full = len(current) >= max_datums or used + separator + size > max_bytes
        if current and (full or values_in_current.get(identity, 0) + count > MAX_VALUES_PER_DATUM):
            batches.append(current)
            current, used, values_in_current = [], base, {}
        used += size + (separator if current else 0)
        current.append(datum)
        values_in_current[identity] = values_in_current.get(identity, 0) + count
    if current:
        batches.append(current)
    return batches


# --- publishing --------------------------------------------------------------------------------------


def make_client(region: str, session: boto3.session.Session | None = None) -> Any:
    """A CloudWatch client with botocore's own retries off (``total_max_attempts=1``, one attempt):
    ``publish`` does the backoff, and two retry layers would multiply the attempts and the wait."""
    config = Config(retries={"mode": "standard", "total_max_attempts": 1}, connect_timeout=10, read_timeout=60)
    return (session or boto3).client("cloudwatch", region_name=region, config=config)


@dataclass(frozen=True)
class FailedBatch:
    """A batch that did not go out, with everything needed to publish it again later."""

    index: int
    datums: list[dict[str, Any]]
    error_code: str
    message: str
    attempts: int
    retryable: bool  # True: transient errors until attempts ran out; False: CloudWatch refused it

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; the ISO 8601 timestamps are accepted by put_metric_data as they are."""
        return {
            "index": self.index,
            "error_code": self.error_code,
            "message": self.message,
            "attempts": self.attempts,
            "retryable": self.retryable,
            "datums": [jsonable_datum(d) for d in self.datums],
        }


@dataclass(frozen=True)
class PublishReport:
    namespace: str
    batches: int
    calls: int  # PutMetricData calls made, retries included
    retries: int
    datums_published: int
    values_published: int  # observations: the sum of the published datums' Counts
    failed: tuple[FailedBatch, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def datums_failed(self) -> int:
        return sum(len(batch.datums) for batch in self.failed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "batches": self.batches,
            "calls": self.calls,
            "retries": self.retries,
            "datums_published": self.datums_published,
            "values_published": self.values_published,
            "datums_failed": self.datums_failed,
            "failed": [batch.to_dict() for batch in self.failed],
        }


def jsonable_datum(datum: dict[str, Any]) -> dict[str, Any]:
    timestamp = datum.get("Timestamp")
    return {**datum, "Timestamp": timestamp.isoformat()} if isinstance(timestamp, datetime) else dict(datum)


def observations(datum: dict[str, Any]) -> int:
    if "Counts" in datum:
        return int(sum(datum["Counts"]))
    return len(datum["Values"]) if "Values" in datum else 1


def publish(
    client: Any,
    namespace: str,
    datums: Sequence[dict[str, Any]],
    *,
    sleep: Callable[[float], None] = time.sleep,
    max_attempts: int = 8,
    base_delay_s: float = 0.5,
    max_delay_s: float = 20.0,
    rng: random.Random | None = None,
) -> PublishReport:
    """PutMetricData for every batch; throttling, 5xx and connection errors are retried with backoff
    up to ``max_attempts`` calls per batch, other errors are not. Every batch that still failed is in
    the report with its datums. Give it a client from ``make_client`` (botocore retries off)."""
    if max_attempts < 1:
        raise ValueError("max_attempts must be at least 1")
    rng = rng or random.Random()
    batches = batch_datums(datums, namespace)
    calls = retries = datums_published = values_published = 0
    failed: list[FailedBatch] = []
    for index, batch in enumerate(batches):
        for attempt in range(1, max_attempts + 1):
            calls += 1
            try:
                client.put_metric_data(Namespace=namespace, MetricData=batch)
            except (ClientError, BotoCoreError) as error:
                retryable = is_retryable(error)
                if retryable and attempt < max_attempts:
                    retries += 1
                    sleep(backoff_delay(attempt, base_delay_s, max_delay_s, rng))
                    continue
                log.error("PutMetricData batch %d (%d datums) failed after %d attempts: %s", index, len(batch), attempt, error)
                failed.append(FailedBatch(index, batch, error_code(error), str(error), attempt, retryable))
            else:
                datums_published += len(batch)
                values_published += sum(observations(d) for d in batch)
            break
    return PublishReport(namespace, len(batches), calls, retries, datums_published, values_published, tuple(failed))
