"""Publishing per-request values to CloudWatch: datums, exact request sizes, batching, retries.

The real PutMetricData path runs against moto in-process; throttling and failure sequences use
botocore's Stubber or a fake client. Nothing reaches AWS.
"""

from __future__ import annotations

import json
import math
import random
from datetime import datetime, timedelta, timezone

import botocore.session
import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import EndpointConnectionError
from botocore.stub import Stubber

from specbench.analysis.acceptance import Acceptance
from specbench.outputs import cloudwatch as cw
from specbench.results.records import RequestRecord
from tests import moto_aws

UTC = timezone.utc  # noqa: UP017 - datetime.UTC is Python 3.11+; the code must run on 3.10
NAMESPACE = "SpecBench/Test"
REGION = "us-east-1"
# Recent (moto keeps what it is given, CloudWatch only takes the last two weeks) and on a minute boundary.
T0 = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=30)


@pytest.fixture
def aws_env(monkeypatch):
    """Fake credentials and a region, so no client can find real ones."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.fixture
def moto_client(aws_env):
    with moto_aws.mocked():  # make_client's boto3.client uses the shared session: models loaded once
        yield cw.make_client(REGION)


def record(i: int, *, variant="qwen-sd-vllm", test_case="counting", prompt_class="structured", ok=True, **values) -> RequestRecord:
    fields = {
        "ttft_s": (50 + i) / 1000,
        "end_to_end_latency_s": (900 + i) / 100,
        "inter_token_latency_s": 0.03,
        "time_per_output_token_s": 0.015,
        "tokens_per_chunk": 2.5,
        "output_throughput_tps": 66.0,
        "input_tokens": 64,
        "output_tokens": 600,
    }
    if not ok:  # a timed-out stream: llmperf's record keeps what it had
        fields = {"ttft_s": 0.05, "end_to_end_latency_s": 1200.0, "output_tokens": 17}
    fields.update(values)
    return RequestRecord(
        run_id="run-1",
        variant=variant,
        test_case=test_case,
        prompt_class=prompt_class,
        engine="async",
        request_index=i,
        started_at=T0.timestamp() + i,
        error_code=None if ok else -1,
        **fields,
    )


def dims(*, variant="qwen-sd-vllm", prompt_class="structured", test_case: str | None = "counting") -> tuple:
    pairs = [("Variant", variant), ("PromptClass", prompt_class)] + ([("TestCase", test_case)] if test_case else [])
    return tuple(pairs)


def index(datums: list[dict]) -> dict[tuple, list[dict]]:
    out: dict[tuple, list[dict]] = {}
    for datum in datums:
        key = (datum["MetricName"], tuple((d["Name"], d["Value"]) for d in datum["Dimensions"]))
        out.setdefault(key, []).append(datum)
    return out


def tiny_datum(i: int) -> dict:
    return {
        "MetricName": "TTFT",
        "Dimensions": [{"Name": "Variant", "Value": f"v{i}"}],
        "Timestamp": T0,
        "Values": [float(i)],
        "Counts": [1],
    }


# --- the metric table and datums --------------------------------------------------------------------


def test_metric_table_names_units_and_sources():
    table = {spec.name: (spec.unit, spec.source if isinstance(spec.source, str) else "function") for spec in cw.METRICS}
    assert table == {
        "TTFT": ("Seconds", "ttft_s"),
        "InterTokenLatency": ("Seconds", "inter_token_latency_s"),
        "TimePerOutputToken": ("Seconds", "time_per_output_token_s"),
        "EndToEndLatency": ("Seconds", "end_to_end_latency_s"),
        "OutputThroughput": ("Count/Second", "output_throughput_tps"),
        "InputTokens": ("Count", "input_tokens"),
        "OutputTokens": ("Count", "output_tokens"),
        "TokensPerChunk": ("Count", "tokens_per_chunk"),
        "Errors": ("Count", "function"),
    }
    for spec in cw.METRICS:  # every attribute named exists on the record
        assert spec.value_of(record(1)) is not None


def test_every_value_goes_under_both_dimension_sets_and_failures_count_only_as_errors():
    records = [record(i) for i in range(3)] + [record(3, ok=False)]

    datums = index(cw.build_datums(records))

    by_case, by_class = dims(), dims(test_case=None)
    assert set(datums) == {(spec.name, d) for spec in cw.METRICS for d in (by_case, by_class)}
    for d in (by_case, by_class):
        (ttft,) = datums[("TTFT", d)]
        assert ttft["Values"] == [0.05, 0.051, 0.052]  # the failed request's partial TTFT is left out
        assert ttft["Counts"] == [1, 1, 1]
        assert (ttft["Unit"], ttft["StorageResolution"]) == ("Seconds", 60)
        (errors,) = datums[("Errors", d)]
        assert (errors["Values"], errors["Counts"]) == ([0, 1], [3, 1])  # Sum 1 error, SampleCount 4 requests
        (tokens,) = datums[("OutputTokens", d)]
        assert (tokens["Values"], tokens["Counts"]) == ([600], [3])


def test_timestamp_is_the_earliest_request_of_the_group_in_utc():
    records = [record(5, test_case="a"), record(2, test_case="a"), record(1, test_case="b")]
    datums = index(cw.build_datums(records))
    assert datums[("TTFT", dims(test_case="a"))][0]["Timestamp"] == T0 + timedelta(seconds=2)
    assert datums[("TTFT", dims(test_case="b"))][0]["Timestamp"] == T0 + timedelta(seconds=1)
    by_class = datums[("TTFT", dims(test_case=None))][0]["Timestamp"]
    assert by_class == T0 + timedelta(seconds=1)
    assert by_class.utcoffset() == timedelta(0)


def test_a_datum_holds_150_distinct_values_and_the_151st_starts_another():
    at_limit = index(cw.build_datums([record(i) for i in range(150)]))
    assert [len(d["Values"]) for d in at_limit[("TTFT", dims())]] == [150]

    over = index(cw.build_datums([record(i) for i in range(151)]))
    for d in (dims(), dims(test_case=None)):
        split = over[("TTFT", d)]
        assert [len(datum["Values"]) for datum in split] == [150, 1]
        assert sum(sum(datum["Counts"]) for datum in split) == 151
        assert sorted(v for datum in split for v in datum["Values"]) == sorted((50 + i) / 1000 for i in range(151))


def test_repeated_values_are_counted_not_repeated():
    records = [record(i, ttft_s=0.25 if i % 3 else 0.5) for i in range(600)]
    (ttft,) = index(cw.build_datums(records))[("TTFT", dims())]
    assert (ttft["Values"], ttft["Counts"]) == ([0.25, 0.5], [400, 200])


def test_values_cloudwatch_rejects_are_skipped_and_reported():
    records = [
        record(0, ttft_s=float("nan")),
        record(1, end_to_end_latency_s=float("inf")),
        record(2, output_throughput_tps=1e200),
        record(3, tokens_per_chunk=1e-200),
        record(4, ttft_s=0.0, tokens_per_chunk=cw.SMALLEST_MAGNITUDE, output_throughput_tps=cw.LARGEST_MAGNITUDE),
    ]
    skipped: list[cw.SkippedValue] = []

    datums = index(cw.build_datums(records, skipped=skipped))

    assert [(s.metric, s.request_index, s.reason) for s in skipped] == [
        ("TTFT", 0, "not finite"),
        ("EndToEndLatency", 1, "not finite"),
        ("OutputThroughput", 2, "out of CloudWatch's range"),
        ("TokensPerChunk", 3, "out of CloudWatch's range"),
    ]
    assert datums[("TTFT", dims())][0]["Values"] == [0.0, 0.051, 0.052, 0.053]  # 0 is a valid value
    assert sum(datums[("EndToEndLatency", dims())][0]["Counts"]) == 4
    assert cw.LARGEST_MAGNITUDE in datums[("OutputThroughput", dims())][0]["Values"]
    assert all(math.isfinite(v) for datum in datums.values() for d in datum for v in d["Values"])


def test_value_problem_bounds():
    assert [cw.value_problem(v) for v in (0, 1, -2.5, 8.6e-109, -1.17e108)] == [""] * 5
    assert cw.value_problem(8.5e-109) == cw.value_problem(1.2e108) == cw.value_problem(10**400) == "out of CloudWatch's range"
    assert cw.value_problem(float("-inf")) == "not finite"
    assert cw.value_problem(True).startswith("not a number")


@pytest.mark.parametrize("bad", ["", "   ", "x" * 1025, "café", "tab\there"])
def test_dimension_values_cloudwatch_rejects_fail_early(bad):
    with pytest.raises(ValueError, match="dimension PromptClass"):
        cw.build_datums([record(0, prompt_class=bad)])


def test_storage_resolution_is_a_parameter():
    datums = cw.build_datums([record(0)], storage_resolution=1)
    assert {d["StorageResolution"] for d in datums} == {1}
    with pytest.raises(ValueError, match="StorageResolution"):
        cw.build_datums([record(0)], storage_resolution=30)


# --- acceptance ---------------------------------------------------------------------------------------


def test_acceptance_datums_under_both_dimension_sets():
    acceptance = Acceptance(source="counters", acceptance_rate=0.625, mean_acceptance_length=5.375)

    datums = index(cw.acceptance_datums("qwen-sd-vllm", "counting", "structured", acceptance, T0))

    for d in (dims(), dims(test_case=None)):
        (rate,) = datums[("AcceptanceRate", d)]
        (length,) = datums[("MeanAcceptanceLength", d)]
        assert (rate["Values"], rate["Counts"], rate["Unit"], rate["Timestamp"]) == ([0.625], [1], "None", T0)
        assert (length["Values"], length["Unit"]) == ([5.375], "Count")
    assert len(datums) == 4


def test_missing_acceptance_publishes_nothing():
    missing = Acceptance(source="missing", reason="baseline")
    assert cw.acceptance_datums("qwen-vllm", "counting", "structured", missing, T0) == []
    gauges_only = Acceptance(source="gauges", acceptance_rate=0.7)  # V0: no mean acceptance length
    published = cw.acceptance_datums("qwen-sd-vllm", "counting", "structured", gauges_only, T0.timestamp())
    assert {d["MetricName"] for d in published} == {"AcceptanceRate"}
    assert published[0]["Timestamp"] == T0


# --- exact request sizes and batching ---------------------------------------------------------------


def varied_datums(n: int, seed: int = 7) -> list[dict]:
    """Awkward JSON on purpose: exponents, ints, negatives, escaped characters, microsecond timestamps."""
    rng = random.Random(seed)
    datums = []
    for i in range(n):
        values = [
            rng.choice([rng.random(), rng.randint(0, 10**6), -rng.random() * 1e100, 8.6e-109, 0, 1e-7]) for _ in range(rng.randint(1, 150))
        ]
        datums.append(
            {
                "MetricName": rng.choice(["TTFT", "OutputThroughput"]),
                "Dimensions": [{"Name": "Variant", "Value": 'quote " and \\ backslash'}, {"Name": "TestCase", "Value": f"case {i}"}],
                "Timestamp": T0 + timedelta(microseconds=rng.randint(0, 10**7)),
                "Values": values,
                "Counts": [rng.randint(1, 3) for _ in values],
                "Unit": "Seconds",
                "StorageResolution": rng.choice([1, 60]),
            }
        )
    return datums


def test_botocore_sends_put_metric_data_as_json():
    service = botocore.session.get_session().get_service_model("cloudwatch")
    # The service model lists CBOR first, but botocore's own preference picks JSON.
    assert "smithy-rpc-v2-cbor" in service.metadata["protocols"]
    assert service.resolved_protocol == "json"


def test_computed_sizes_equal_the_body_the_client_sends(moto_client):
    bodies: list[tuple[bytes, dict]] = []
    moto_client.meta.events.register(
        "before-call.cloudwatch.PutMetricData", lambda params, **_: bodies.append((params["body"], params["headers"]))
    )
    datums = varied_datums(60)
    batches = cw.batch_datums(datums, NAMESPACE, max_datums=20)

    report = cw.publish(moto_client, NAMESPACE, datums)
    for batch in batches:
        moto_client.put_metric_data(Namespace=NAMESPACE, MetricData=batch)

    assert report.ok and report.calls == 1
    base, separator = cw.request_size(NAMESPACE, []), 2
    for (body, headers), batch in zip(bodies, [datums, *batches], strict=True):
        assert headers["Content-Type"] == "application/x-amz-json-1.0"
        assert body == cw.request_body(NAMESPACE, batch)  # botocore's own serializer, as the client runs it
        assert len(body) == base + sum(cw.datum_size(d) for d in batch) + separator * (len(batch) - 1)


def test_datum_size_matches_botocore_for_values_it_writes_differently():
    """NaN is written as the string "NaN", Decimal converted: the slow path serializes those whole."""
    from decimal import Decimal

    for values in ([float("nan"), 1.5], [float("inf")], [Decimal("0.125"), 2]):
        datum = {"MetricName": "TTFT", "Timestamp": T0, "Values": values, "Counts": [1] * len(values)}
        assert cw.datum_size(datum) == cw.request_size("ns", [datum]) - cw.request_size("ns", [])


@pytest.mark.parametrize(("n", "sizes"), [(999, [999]), (1000, [1000]), (1001, [1000, 1])])
def test_batches_split_at_1000_datums(n, sizes):
    datums = [tiny_datum(i) for i in range(n)]
    batches = cw.batch_datums(datums, NAMESPACE)
    assert [len(b) for b in batches] == sizes
    assert [d for b in batches for d in b] == datums


def test_batches_split_at_one_megabyte():
    long = "x" * 1024
    # 30 dimensions (CloudWatch's most) of 1024 characters and 150 values: ~35 KB a datum, 80 of them
    # three batches, two of them full. The checks below serialize each megabyte with botocore, whose
    # cost is per number: 3 dimensions and 600 datums made the same batches at five times the CPU.
    datums = [
        {
            "MetricName": "EndToEndLatency",
            "Dimensions": [{"Name": f"D{k:02}", "Value": f"{i}-{long}"[:1024]} for k in range(30)],
            "Timestamp": T0,
            "Values": [9.0 + i + j / 1000 for j in range(150)],
            "Counts": [1] * 150,
            "Unit": "Seconds",
        }
        for i in range(80)
    ]

    batches = cw.batch_datums(datums, NAMESPACE)

    assert len(batches) >= 3 and all(len(b) < 1000 for b in batches)  # bytes split, not the count; two full batches
    assert [d for b in batches for d in b] == datums
    for batch, following in zip(batches, batches[1:], strict=False):
        assert cw.request_size(NAMESPACE, batch) <= cw.MAX_REQUEST_BYTES
        assert cw.request_size(NAMESPACE, [*batch, following[0]]) > cw.MAX_REQUEST_BYTES  # greedy: it was full
    assert cw.request_size(NAMESPACE, batches[-1]) <= cw.MAX_REQUEST_BYTES


def test_batching_sizes_each_datum_once():
    """Many datums per group (150 values each): botocore serializes one skeleton per group, never a
    whole batch per datum added. (Speed at 100k requests is scripts/bench_client.py's figure.)"""
    rng = random.Random(3)
    arrays = [[rng.random() for _ in range(150)] for _ in range(64)]  # distinct enough; generating 1.8M floats costs more than batching
    datums = [
        {
            "MetricName": f"M{g % 9}",
            "Dimensions": [{"Name": "Variant", "Value": f"v{g % 2}"}, {"Name": "TestCase", "Value": f"case-{g}"}],
            "Timestamp": T0,
            "Values": arrays[(g + k) % 64],
            "Counts": [1] * 150,
            "Unit": "Seconds",
            "StorageResolution": 60,
        }
        for g in range(36)
        for k in range(12)
    ]
    cw.batch_datums([tiny_datum(0)], NAMESPACE)  # botocore's model and the layout constants, loaded once per process
    calls = []
    real = cw.request_size

    def counting(namespace, batch):
        calls.append(len(batch))
        return real(namespace, batch)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cw, "request_size", counting)
        batches = cw.batch_datums(datums, NAMESPACE)

    assert sum(map(len, batches)) == len(datums) == 432
    assert len(calls) <= 36 + 1 and max(calls) <= 1  # one per distinct skeleton, plus the empty request


def test_a_datum_over_150_values_is_refused():
    datum = {**tiny_datum(0), "Values": list(range(151)), "Counts": [1] * 151}
    with pytest.raises(ValueError, match="151 values"):
        cw.batch_datums([datum], NAMESPACE)


# --- publishing against moto ----------------------------------------------------------------------------


def metric_data(client, name: str, dimensions: tuple, stats: list[str]) -> dict[str, list[float]]:
    queries = [
        {
            "Id": f"q{i}",
            "MetricStat": {
                "Metric": {"Namespace": NAMESPACE, "MetricName": name, "Dimensions": [{"Name": k, "Value": v} for k, v in dimensions]},
                "Period": 3600,
                "Stat": stat,
            },
        }
        for i, stat in enumerate(stats)
    ]
    result = client.get_metric_data(MetricDataQueries=queries, StartTime=T0 - timedelta(minutes=5), EndTime=T0 + timedelta(minutes=55))
    return {stats[int(r["Id"][1:])]: r["Values"] for r in result["MetricDataResults"]}


def test_publish_delivers_every_value_with_its_dimensions(moto_client):
    records = [
        record(i, variant=variant, test_case=case, ok=i != 3)
        for variant in ("qwen-vllm", "qwen-sd-vllm")
        for case in ("counting", "json-keys")
        for i in range(6)
    ]
    datums = cw.build_datums(records)

    report = cw.publish(moto_client, NAMESPACE, datums)

    assert report.ok and (report.batches, report.calls, report.retries) == (1, 1, 0)
    assert report.datums_published == len(datums)
    assert report.values_published == sum(sum(d["Counts"]) for d in datums)
    listed = {
        (m["MetricName"], frozenset((d["Name"], d["Value"]) for d in m["Dimensions"]))
        for page in moto_client.get_paginator("list_metrics").paginate(Namespace=NAMESPACE)
        for m in page["Metrics"]
    }
    expected_dims = {
        frozenset(dims(variant=v, test_case=c)) for v in ("qwen-vllm", "qwen-sd-vllm") for c in ("counting", "json-keys", None)
    }
    assert listed == {(spec.name, d) for spec in cw.METRICS for d in expected_dims}

    ttfts = [(50 + i) / 1000 for i in range(6) if i != 3]
    by_case = metric_data(moto_client, "TTFT", dims(variant="qwen-vllm"), ["SampleCount", "Sum", "Average"])
    assert by_case["SampleCount"] == [5.0]
    assert by_case["Sum"] == [pytest.approx(sum(ttfts))]
    assert by_case["Average"] == [pytest.approx(sum(ttfts) / 5)]
    by_class = metric_data(moto_client, "TTFT", dims(variant="qwen-vllm", test_case=None), ["SampleCount", "Sum"])
    assert by_class == {"SampleCount": [10.0], "Sum": [pytest.approx(2 * sum(ttfts))]}
    errors = metric_data(moto_client, "Errors", dims(variant="qwen-sd-vllm", test_case=None), ["Sum", "SampleCount", "Average"])
    assert errors == {"Sum": [2.0], "SampleCount": [12.0], "Average": [pytest.approx(2 / 12)]}


def test_acceptance_values_arrive_too(moto_client):
    acceptance = Acceptance(source="counters", acceptance_rate=0.625, mean_acceptance_length=5.375)
    report = cw.publish(moto_client, NAMESPACE, cw.acceptance_datums("qwen-sd-vllm", "counting", "structured", acceptance, T0))
    assert report.ok and report.values_published == 4
    assert metric_data(moto_client, "AcceptanceRate", dims(), ["Average", "SampleCount"]) == {"Average": [0.625], "SampleCount": [1.0]}
    assert metric_data(moto_client, "MeanAcceptanceLength", dims(test_case=None), ["Maximum"]) == {"Maximum": [5.375]}


@pytest.mark.xfail(strict=True, reason="moto 5.2.5 has no percentile statistics: remove this mark when it gains them")
def test_moto_computes_percentiles(moto_client):
    cw.publish(moto_client, NAMESPACE, cw.build_datums([record(i) for i in range(100)]))
    assert metric_data(moto_client, "TTFT", dims(), ["p90"]) == {"p90": [pytest.approx(0.05 + 0.089, abs=0.002)]}


# --- retries and failures -------------------------------------------------------------------------------


def stubbed(client, *errors: tuple[str, int]) -> Stubber:
    stubber = Stubber(client)
    for code, status in errors:
        if code:
            stubber.add_client_error("put_metric_data", service_error_code=code, http_status_code=status)
        else:
            stubber.add_response("put_metric_data", {})
    stubber.activate()
    return stubber


def test_throttling_and_server_errors_are_retried_with_growing_jittered_backoff(aws_env):
    client = cw.make_client(REGION)
    sequence = [
        ("Throttling", 400),
        ("ThrottlingException", 400),
        ("RequestLimitExceeded", 400),
        ("SlowDown", 429),
        ("InternalFailure", 500),
        ("ServiceUnavailable", 503),
        ("", 200),
    ]
    stubber = stubbed(client, *sequence)
    sleeps: list[float] = []

    report = cw.publish(client, NAMESPACE, [tiny_datum(0)], sleep=sleeps.append, rng=random.Random(1))

    stubber.assert_no_pending_responses()
    assert report.ok and (report.calls, report.retries, report.datums_published) == (7, 6, 1)
    assert len(sleeps) == 6
    for attempt, slept in enumerate(sleeps, start=1):
        full = min(20.0, 0.5 * 2 ** (attempt - 1))
        assert full / 2 <= slept <= full
    assert len(set(sleeps)) == 6  # jittered


def test_validation_errors_are_not_retried_and_the_batch_is_kept(aws_env):
    client = cw.make_client(REGION)
    datums = [tiny_datum(i) for i in range(1001)]  # two batches: 1000 + 1
    stubber = stubbed(client, ("InvalidParameterValue", 400), ("", 200))
    sleeps: list[float] = []

    report = cw.publish(client, NAMESPACE, datums, sleep=sleeps.append)

    stubber.assert_no_pending_responses()
    assert (report.batches, report.calls, report.retries, sleeps) == (2, 2, 0, [])
    assert (report.datums_published, report.values_published, report.datums_failed) == (1, 1, 1000)
    (failed,) = report.failed
    assert (failed.index, failed.error_code, failed.attempts, failed.retryable) == (0, "InvalidParameterValue", 1, False)
    assert failed.datums == datums[:1000]
    assert not report.ok


def test_retries_stop_at_max_attempts_and_the_batch_is_kept(aws_env):
    client = cw.make_client(REGION)
    stubber = stubbed(client, *[("Throttling", 400)] * 3)
    sleeps: list[float] = []

    report = cw.publish(client, NAMESPACE, [tiny_datum(0)], sleep=sleeps.append, max_attempts=3)

    stubber.assert_no_pending_responses()
    assert (report.calls, report.retries, len(sleeps), report.datums_published) == (3, 2, 2, 0)
    (failed,) = report.failed
    assert (failed.error_code, failed.attempts, failed.retryable) == ("Throttling", 3, True)


def test_connection_errors_are_retried():
    class FlakyClient:
        def __init__(self):
            self.calls = 0

        def put_metric_data(self, **_):
            self.calls += 1
            if self.calls < 3:
                raise EndpointConnectionError(endpoint_url="https://monitoring.us-east-1.amazonaws.com")

    client = FlakyClient()
    report = cw.publish(client, NAMESPACE, [tiny_datum(0)], sleep=lambda _: None)
    assert (client.calls, report.retries, report.ok) == (3, 2, True)


def test_a_failed_batch_saved_as_json_can_be_published_later(moto_client):
    datums = cw.build_datums([record(i) for i in range(5)])
    stubber = stubbed(moto_client, ("InvalidParameterValue", 400))
    first = cw.publish(moto_client, NAMESPACE, datums)
    stubber.deactivate()

    saved = json.loads(json.dumps(first.to_dict()))
    assert saved["datums_failed"] == len(datums) and saved["failed"][0]["error_code"] == "InvalidParameterValue"
    again = cw.publish(moto_client, NAMESPACE, saved["failed"][0]["datums"])

    assert again.ok and again.datums_published == len(datums)
    assert metric_data(moto_client, "TTFT", dims(), ["SampleCount"]) == {"SampleCount": [5.0]}


def test_make_client_turns_botocore_retries_off(aws_env, monkeypatch):
    """One HTTP send per call, so publish's backoff is the only one. A handler answers every send with
    a 503; the endpoint points at a closed local port in case it ever did not."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    client = cw.make_client(REGION)
    sends = []

    class Raw:
        def stream(self, **_):
            yield b'{"__type": "ServiceUnavailable", "message": "busy"}'

    def unavailable(request, **_):
        sends.append(request.url)
        return AWSResponse(request.url, 503, {"x-amzn-query-error": "ServiceUnavailable;Receiver"}, Raw())

    client.meta.events.register("before-send.cloudwatch.PutMetricData", unavailable)

    assert client.meta.config.retries == {"mode": "standard", "total_max_attempts": 1}
    report = cw.publish(client, NAMESPACE, [tiny_datum(0)], sleep=lambda _: None, max_attempts=4)

    assert len(sends) == 4 == report.calls  # botocore added no attempt of its own
    assert report.failed[0].error_code == "ServiceUnavailable"


def test_two_datums_of_one_metric_never_share_a_call():
    """A group of 400 distinct values is three datums of one metric: three calls, each carrying one of
    them beside every other metric's datums (150 values per metric and request)."""
    big = [{"MetricName": "TTFT", "Dimensions": [{"Name": "Variant", "Value": "v"}], "Timestamp": T0,
            "Values": [float(i + 150 * part) for i in range(150 if part < 2 else 100)], "Counts": [1] * (150 if part < 2 else 100)}
           for part in range(3)]  # fmt: skip
    others = [tiny_datum(i) for i in range(5)]
    batches = cw.batch_datums(big + others, NAMESPACE)
    assert len(batches) == 3
    for batch in batches:
        assert sum(1 for d in batch if d["MetricName"] == "TTFT" and d.get("Dimensions") == big[0]["Dimensions"]) == 1
    assert sorted(map(id, (d for b in batches for d in b))) == sorted(map(id, big + others))  # nothing lost or doubled
