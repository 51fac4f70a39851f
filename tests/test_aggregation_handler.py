"""The aggregation Lambda's handler against moto (S3, ListMetrics, PutDashboard, PutMetricData) and,
for the percentile queries moto cannot answer, a CloudWatch client stubbed with botocore's Stubber."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import boto3
import pytest
from botocore.stub import Stubber

from lambdas.aggregate import handler
from specbench.aws_retry import Retrier
from specbench.outputs import dashboard, deployment_state, publish
from specbench.results.store import RunStore, S3Store
from tests import moto_aws, runs

REGION = "us-east-2"
BUCKET = "specdecode-test-data"
NAMESPACE = "Qwen/LLMPerf"
NOW = datetime(2026, 11, 29, 11, 0, tzinfo=timezone.utc)
ENV = runs.handler_environment(BUCKET, REGION, resamples=100)  # the floor: no check here reads an interval's width


SETTINGS = handler.Settings.from_env(ENV)
# The client whose GetMetricData a Stubber answers: one for the module, its Stubber made per test.
STUBBED = moto_aws.session().client("cloudwatch", region_name=REGION)


class CloudWatch:
    """moto for everything but GetMetricData, which goes to a stubbed client."""

    def __init__(self, moto_client, stubbed_client) -> None:
        self.moto, self.stubbed = moto_client, stubbed_client

    def __getattr__(self, name: str):
        return getattr(self.stubbed if name == "get_metric_data" else self.moto, name)


@pytest.fixture
def aws(monkeypatch):
    moto_aws.offline_environment(monkeypatch)
    with moto_aws.mocked():
        s3 = moto_aws.bucket(BUCKET, REGION)
        stubber = Stubber(STUBBED)
        stubber.activate()
        try:
            yield s3, CloudWatch(moto_aws.client("cloudwatch", REGION), STUBBED), stubber
        finally:
            stubber.deactivate()  # the next test's Stubber starts from no queued responses


def run_store(s3, run_id: str) -> RunStore:
    return RunStore(S3Store(BUCKET, "results/", s3), run_id)


def stored_run(s3, cloudwatch, run_id="20261129T100000Z-aaaaaa", **options) -> RunStore:
    """A run as the Job leaves it: files in S3, metrics in CloudWatch, publish.json last."""
    store = run_store(s3, run_id)
    # 4 requests per test case and service: moto's ListMetrics compares every stored value with every other.
    runs.write_run(store, **{"requests": 4, **options})
    report = publish.publish_run(store, NAMESPACE, REGION, client=cloudwatch.moto)
    assert report.ok
    return store


def empty_live(stubber, calls=1) -> None:
    """Empty answers to a refresh's GetMetricData calls: with a run, its live figures' then the
    Deployment state row's (one each); with no metric listed, the row's alone."""
    for _ in range(calls):
        stubber.add_response("get_metric_data", {"MetricDataResults": []})


ROW = 5  # the Deployment state row's widgets, on top


def header(body: dict) -> str:
    """The run's header: the first widget under the Deployment state row."""
    return body["widgets"][ROW]["properties"]["markdown"]


def refresh(event, s3, cloudwatch, **kwargs):
    return handler.refresh(event, SETTINGS, s3, cloudwatch, retrier=kwargs.pop("retrier", Retrier(sleep=lambda s: None)), now=NOW, **kwargs)


def put_body(cloudwatch) -> dict:
    return json.loads(cloudwatch.moto.get_dashboard(DashboardName=SETTINGS.dashboard_name)["DashboardBody"])


def publish_event(run_id: str) -> dict:
    return {"source": "aws.s3", "detail-type": "Object Created", "detail": {"object": {"key": f"results/{run_id}/publish.json"}}}


def test_the_shared_moto_clients_start_every_mock_from_an_empty_account():
    """tests/moto_aws.py shares one session and its clients between tests: the state must not be shared."""
    s3 = moto_aws.client("s3", REGION)
    with moto_aws.mocked():
        s3.create_bucket(Bucket="left-behind", CreateBucketConfiguration={"LocationConstraint": REGION})
        assert boto3.DEFAULT_SESSION is moto_aws.session()  # boto3.client in the code under test uses it too
        assert [b["Name"] for b in boto3.client("s3", region_name=REGION).list_buckets()["Buckets"]] == ["left-behind"]
    assert boto3.DEFAULT_SESSION is not moto_aws.session()
    with moto_aws.mocked():
        assert s3.list_buckets()["Buckets"] == []


def test_no_data_yet(aws):
    s3, cloudwatch, stubber = aws
    empty_live(stubber)  # the row's
    result = refresh({"source": "aws.events", "detail-type": "Scheduled Event"}, s3, cloudwatch)
    body = put_body(cloudwatch)
    assert result["completeness"] == "no data" and result["run_id"] is None
    assert "No data yet" in header(body)
    assert dashboard.problems(SETTINGS.dashboard_name, body) == []
    # no benchmark metric listed, so no live figure to query: one listing each of runs, hardware facts, sweeps
    # and metrics, the Deployment state row's one GetMetricData, the dashboard
    assert result["aws_calls"] == {"GetMetricData": 1, "ListMetrics": 1, "ListObjectsV2": 3, "PutDashboard": 1}
    assert result["deployment"] == {"services_reported": [], "figures": 0, "sweeps": [], "error": ""}
    assert result["hardware_facts"] == 0 and "Hardware facts" not in json.dumps(body)
    stubber.assert_no_pending_responses()


def test_hardware_facts_in_the_bucket_get_a_text_widget_and_are_never_taken_for_a_run(aws):
    s3, cloudwatch, stubber = aws
    facts = {"node": "ip-10-0-2-1", "node_devices": 8, "requested_devices": 8, "layout": "server-container", "problems": ["devices: x"]}
    s3.put_object(Bucket=BUCKET, Key="results/hardware-facts/ip-10-0-2-1.json", Body=json.dumps(facts).encode())
    s3.put_object(Bucket=BUCKET, Key="results/hardware-facts/broken.json", Body=b"{")
    s3.put_object(Bucket=BUCKET, Key="results/sweeps/sweep-a/p/run.json", Body=b"{}")
    empty_live(stubber)
    result = refresh({"source": "aws.events", "detail-type": "Scheduled Event"}, s3, cloudwatch)
    assert result["run_id"] is None and result["hardware_facts"] == 2  # neither folder is a run
    (widget,) = [w for w in put_body(cloudwatch)["widgets"] if "Hardware facts" in w["properties"].get("markdown", "")]
    text = widget["properties"]["markdown"]
    assert "`ip-10-0-2-1` (**contradicts the project's assumptions: sweeps stop**): 8 devices" in text and "- broken: not JSON" in text


def test_a_landed_run_builds_the_dashboard_and_publishes_speedups_once(aws):
    s3, cloudwatch, stubber = aws
    store = stored_run(s3, cloudwatch)
    empty_live(stubber, 4)  # two refreshes, each its live figures and the row
    first = refresh(publish_event(store.run_id), s3, cloudwatch)
    body = put_body(cloudwatch)
    assert first["completeness"] == "complete" and first["speedup_metrics"] == "published"
    assert first["verdict"].startswith("Speculative decoding, end-to-end: structured")
    assert (
        first["widgets"] == len(body["widgets"]) == ROW + 16 + 2 * 2
    )  # 3 acceptance widgets: /metrics rate and length, stream length; a cost table and graph per class
    assert "counting (structured)" in body["widgets"][ROW + 1]["properties"]["markdown"]
    # 4 test cases: run folder, hardware facts and sweeps listed once each, run.json + 4 records + 4 acceptance
    # files read, summary written; live figures and the row read with one GetMetricData each
    assert first["aws_calls"] == {
        "GetMetricData": 2,
        "GetObject": 9,
        "ListMetrics": first["aws_calls"]["ListMetrics"],
        "ListObjectsV2": 3,
        "PutDashboard": 1,
        "PutMetricData": 1,
        "PutObject": 1,
    }
    speedups = cloudwatch.moto.list_metrics(Namespace=NAMESPACE, MetricName="Speedup")["Metrics"]
    assert {"Name": "TestCase", "Value": "counting"} in [d for m in speedups for d in m["Dimensions"]]
    summary = json.loads(store.read("aggregate.json"))
    assert summary["speedup_metrics"] == "published" and summary["summary"]["run_id"] == store.run_id

    again = refresh(publish_event(store.run_id), s3, cloudwatch)
    assert again["speedup_metrics"] == "already published" and "PutMetricData" not in again["aws_calls"]
    assert put_body(cloudwatch) == body  # idempotent
    stubber.assert_no_pending_responses()


def test_schedule_picks_the_newest_run(aws):
    s3, cloudwatch, stubber = aws
    stored_run(s3, cloudwatch, "20261128T090000Z-older1")
    stored_run(s3, cloudwatch, "20261129T100000Z-newer2", cases=runs.CASES[:2])
    empty_live(stubber, 2)
    result = refresh({"source": "aws.events", "detail-type": "Scheduled Event"}, s3, cloudwatch)
    assert result["run_id"] == "20261129T100000Z-newer2"


def test_a_running_partial_run_is_shown_partial_and_not_published(aws):
    s3, cloudwatch, stubber = aws
    store = stored_run(s3, cloudwatch, cases=runs.CASES[:1], planned=runs.CASES, status="running", finished="")
    empty_live(stubber, 2)
    result = refresh({"run_id": store.run_id}, s3, cloudwatch)
    assert result["completeness"] == "partial" and result["speedup_metrics"].startswith("run in progress")
    assert "**PARTIAL DATA**" in header(put_body(cloudwatch))
    assert cloudwatch.moto.list_metrics(Namespace=NAMESPACE, MetricName="Speedup")["Metrics"] == []


def test_a_run_older_than_cloudwatch_accepts_gets_a_dashboard_but_no_metrics(aws):
    s3, cloudwatch, stubber = aws
    store = stored_run(s3, cloudwatch, started="2026-11-01T10:00:00+00:00", finished="2026-11-01T11:00:00+00:00")
    empty_live(stubber, 2)
    result = refresh({"run_id": store.run_id}, s3, cloudwatch)
    assert result["speedup_metrics"] == "run older than CloudWatch accepts (two weeks)" and "PutMetricData" not in result["aws_calls"]


def test_a_run_id_with_nothing_stored_writes_nothing_into_the_bucket(aws):
    s3, cloudwatch, stubber = aws
    empty_live(stubber)
    result = refresh(publish_event("20261129T100000Z-nosuch"), s3, cloudwatch)
    assert result["completeness"] == "no data" and result["speedup_metrics"] == "no run"
    assert "PutObject" not in result["aws_calls"] and s3.list_objects_v2(Bucket=BUCKET).get("KeyCount") == 0


def test_a_run_of_other_service_names_is_compared_against_its_own_baseline(aws):
    """A run made from a laptop with endpoint names of its own: its first endpoint is the baseline."""
    s3, cloudwatch, stubber = aws
    store = run_store(s3, "20261129T100000Z-laptop")
    run = runs.write_run(store, cases=runs.CASES[:1], requests=4)
    renamed = {runs.BASELINE: "base", runs.SPECULATIVE: "spec"}
    for key in store.keys("records/"):
        store.write(
            key,
            "".join(
                line.replace(f'"{old}"', f'"{new}"') + "\n"
                for line in store.read(key).splitlines()
                for old, new in renamed.items()
                if f'"variant":"{old}"' in line
            ),
        )
    run["plan"]["endpoints"] = [{"name": "base", "url": "http://b"}, {"name": "spec", "url": "http://s"}]
    run["plan"]["deployment"] = {}
    store.write("run.json", json.dumps(run))
    empty_live(stubber, 2)
    result = refresh({"run_id": store.run_id}, s3, cloudwatch)
    assert result["completeness"] == "complete" and result["verdict"].startswith("Speculative decoding, end-to-end: structured")
    summary = json.loads(store.read("aggregate.json"))["summary"]
    assert (summary["baseline"], summary["speculative"]) == ("base", ["spec"])
    # counting's true per-token speedup is 3.0 (tests/runs.py)
    assert summary["test_cases"][0]["comparisons"][0]["speedups"]["TimePerOutputToken"]["point"] == pytest.approx(3.0, rel=0.05)


def live_response(queries, value_of) -> dict:
    return {"MetricDataResults": [{"Id": q["Id"], "Label": q["Id"], "StatusCode": "Complete", "Values": [value_of(q)]} for q in queries]}


def test_live_percentiles_are_batched_at_500_queries_and_fill_the_table(aws):
    """No stored run, metrics in CloudWatch only. Per test case, each service has 18 statistics
    (p50/p90/p99 of 4 latencies, throughput p50, 3 averages, errors Sum and SampleCount) and the
    speculative one 2 acceptance averages: 38. The reference suite's 8 test cases need 304 queries
    (one call); 16 need 608: two calls, 500 + 108."""
    s3, cloudwatch, stubber = aws
    series = [
        (metric, variant, "structured", f"case-{i:02d}")
        for i in range(16)
        for variant in (runs.BASELINE, runs.SPECULATIVE)
        for metric in handler.LIVE_STATISTICS
        if variant == runs.SPECULATIVE or not metric.startswith(("Acceptance", "MeanAcceptance"))
    ]
    queries = [query for _, query in handler.live_queries(NAMESPACE, series, 24 * 3600)]
    assert len(queries) == 16 * (2 * 18 + 2) == 608

    def value_of(query):  # baseline 3x slower than the speculative service on every metric
        dims = {d["Name"]: d["Value"] for d in query["MetricStat"]["Metric"]["Dimensions"]}
        return 3.0 if dims["Variant"] == runs.BASELINE else 1.0

    start, end, period = handler.live_window(24, NOW)
    assert (start, end, period) == (datetime(2026, 11, 28, 12, tzinfo=timezone.utc), datetime(2026, 11, 29, 12, tzinfo=timezone.utc), 86400)
    for batch in (queries[:500], queries[500:]):
        stubber.add_response(
            "get_metric_data", live_response(batch, value_of), {"MetricDataQueries": batch, "StartTime": start, "EndTime": end}
        )
    values = handler.live_statistics(cloudwatch, NAMESPACE, series, 24, NOW, Retrier(sleep=lambda s: None))
    stubber.assert_no_pending_responses()
    assert len(values) == 608
    assert values[(runs.BASELINE, "structured", "case-03", "TTFT", "p99")] == 3.0

    settings = handler.dashboard_settings(SETTINGS, series)
    table = dashboard.speedup_markdown(None, settings, values)
    assert table.count("| 3.00x | 3.00x | 3.00x | 3.00x |") == 16


def test_throttling_is_retried_and_counted(aws):
    s3, cloudwatch, stubber = aws
    series = [("TTFT", runs.BASELINE, "structured", "counting")]
    stubber.add_client_error("get_metric_data", "Throttling", "Rate exceeded", 400)
    stubber.add_client_error("get_metric_data", "InternalServiceFault", "oops", 500)
    stubber.add_response("get_metric_data", {"MetricDataResults": []})
    waits = []
    retrier = Retrier(sleep=waits.append)
    assert handler.live_statistics(cloudwatch, NAMESPACE, series, 24, NOW, retrier) == {}
    assert retrier.calls == {"GetMetricData": 3} and retrier.retries == 2
    # exponential backoff from 0.5 s with jitter between half and all of it: 0.25-0.5 s, then 0.5-1 s
    assert len(waits) == 2 and 0.25 <= waits[0] <= 0.5 <= waits[1] <= 1.0


def test_a_refused_live_read_still_puts_the_dashboard(aws):
    s3, cloudwatch, stubber = aws
    store = stored_run(s3, cloudwatch)
    stubber.add_client_error("get_metric_data", "AccessDenied", "not allowed", 403)
    stubber.add_client_error("get_metric_data", "AccessDenied", "not allowed", 403)  # the row's read too
    result = refresh({"run_id": store.run_id}, s3, cloudwatch)
    assert "AccessDenied" in result["live_error"] and result["aws_calls"]["GetMetricData"] == 2 and result["retries"] == 0
    assert result["deployment"]["error"].startswith("CloudWatch GetMetricData AccessDenied")
    assert (
        "**Not everything could be read:** CloudWatch GetMetricData AccessDenied"
        in put_body(cloudwatch)["widgets"][0]["properties"]["markdown"]
    )
    assert result["completeness"] == "complete" and put_body(cloudwatch)["widgets"]


@pytest.mark.parametrize(
    ("event", "run_id"),
    [
        ({"run_id": "r-1"}, "r-1"),
        ({"detail": {"object": {"key": "results/20261129T100000Z-abc/publish.json"}}}, "20261129T100000Z-abc"),
        ({"detail": {"object": {"key": "models/x/publish.json"}}}, ""),
        ({"detail": {"object": {"key": "results/publish.json"}}}, ""),
        ({"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}, ""),
    ],
)
def test_run_id_from_event(event, run_id):
    assert handler.run_id_from_event(event, "results/") == run_id


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"RESULTS_BUCKET": ""}, "RESULTS_BUCKET is not set"),
        ({"DRAFT_COST_RATIO": "abc"}, "DRAFT_COST_RATIO='abc'"),
        ({"DRAFT_COST_RATIO": "1.5"}, "DRAFT_COST_RATIO=1.5: allowed"),
        ({"LOOKBACK_HOURS": "0"}, "LOOKBACK_HOURS=0: allowed 1 to 360"),
        ({"BOOTSTRAP_RESAMPLES": "5"}, "BOOTSTRAP_RESAMPLES=5: allowed"),
        ({"SERVICES": ""}, "SERVICES is not set"),
        ({"BUDGET_NODE_HOURS": "-1"}, "BUDGET_NODE_HOURS=-1.0: allowed 0 to 100000"),
        ({"SWEEP_STRATEGY": "random"}, "SWEEP_STRATEGY='random': allowed none, grid, staged"),
        ({"SWEEP_FIRST_JOB_POINTS": "2.5"}, "SWEEP_FIRST_JOB_POINTS='2.5'"),
    ],
)
def test_settings_name_the_bad_variable(change, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        handler.Settings.from_env({**ENV, **change})


def test_the_profile_variable_may_be_empty_but_must_be_set():
    assert handler.Settings.from_env({**ENV, "ENV_PROFILE": "rehearsal"}).profile == "rehearsal"
    with pytest.raises(ValueError, match="ENV_PROFILE is not set"):
        handler.Settings.from_env({k: v for k, v in ENV.items() if k != "ENV_PROFILE"})


def test_the_row_reads_each_service_and_the_cost_guard_in_one_call(aws):
    """The Job's and Container Insights' figures per service and the cost guard's, newest value of
    each: the query asked for is exactly deployment_state.queries, Maximum per minute over the lookback."""
    s3, cloudwatch, stubber = aws
    start, end, period = deployment_state.window(24, NOW)
    planned = deployment_state.queries(NAMESPACE, "specdecode-trn2", "specdecode", SETTINGS.services, period)
    assert (len(planned), period) == (2 * 5 + 2, 60) and SETTINGS.services == (runs.BASELINE, runs.SPECULATIVE)
    answers = {
        ("ServiceState", runs.BASELINE): 1,
        ("ServiceWaitSeconds", runs.BASELINE): 600,
        ("ServiceState", runs.SPECULATIVE): 0,
        ("ServiceWaitSeconds", runs.SPECULATIVE): 1500,
        ("pod_status_running", runs.SPECULATIVE): 1,
        ("NeuronNodeHours", ""): 3.5,
        ("NeuronNodesUp", ""): 1,
    }
    at = NOW - timedelta(minutes=1)
    results = [
        {
            "Id": q["Id"],
            "Label": q["Id"],
            "StatusCode": "Complete",
            "Timestamps": [at, at - timedelta(minutes=9)],
            "Values": [answers[key], 0.0],
        }
        for key, q in planned
        if key in answers
    ]
    queries = [{**q, "ReturnData": True} for _, q in planned]
    stubber.add_response(
        "get_metric_data", {"MetricDataResults": results}, {"MetricDataQueries": queries, "StartTime": start, "EndTime": end}
    )
    result = refresh({"source": "aws.events", "detail-type": "Scheduled Event"}, s3, cloudwatch)
    stubber.assert_no_pending_responses()
    text = put_body(cloudwatch)["widgets"][0]["properties"]["markdown"].replace("\\", "")
    assert f"| {runs.BASELINE} | **ready** after 10 min (10:59 UTC, 1 min ago) | no figure" in text
    assert f"| {runs.SPECULATIVE} | **waiting** 25 min: not answering yet" in text and "running, not ready" in text
    assert "**Neuron node-hours: 3.5 of 48** (7% of budget.node_hours) · Neuron nodes up: 1" in text
    assert result["deployment"]["services_reported"] == [runs.SPECULATIVE, runs.BASELINE] and result["deployment"]["figures"] == 7


def test_settings_from_env():
    assert SETTINGS.prefix == "results/" and SETTINGS.draft_cost_ratio == 0.1 and SETTINGS.region == REGION
