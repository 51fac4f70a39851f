"""What one dashboard refresh costs: AWS calls (against the minimum the API limits allow) and the
handler's time, for the reference suite's shape: 8 test cases x 2 services x the benchmark's metrics.

S3, ListMetrics, PutDashboard and PutMetricData are moto (in-process); GetMetricData, whose
percentiles moto cannot answer, is a stub that answers every query. Run: ``make bench-aggregation``.
Figures go in the README ("Performance").
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402

from lambdas.aggregate import handler  # noqa: E402
from specbench.analysis import aggregate  # noqa: E402
from specbench.aws_retry import Retrier  # noqa: E402
from specbench.outputs import dashboard, publish  # noqa: E402
from specbench.results import runfiles  # noqa: E402
from specbench.results.store import RunStore, S3Store  # noqa: E402
from tests import runs  # noqa: E402

REGION, BUCKET, NAMESPACE = "us-east-2", "specdecode-bench-data", "Qwen/LLMPerf"
CASES = tuple(
    runs.Case(name, prompt_class, speedup, a)
    for name, prompt_class, speedup, a in (
        ("counting", "structured", 3.0, 0.9),
        ("list-numbers", "structured", 2.9, 0.9),
        ("json", "structured", 2.6, 0.87),
        ("hello-world", "structured", 2.7, 0.88),
        ("single-letter", "structured", 3.1, 0.93),
        ("shakespeare", "open-ended", 1.3, 0.5),
        ("cat-on-mat", "open-ended", 1.5, 0.6),
        ("python-skeleton", "open-ended", 1.4, 0.55),
    )
)


class AnsweringCloudWatch:
    """moto, except GetMetricData: every query gets one value (what CloudWatch returns for a series with data)."""

    def __init__(self, client) -> None:
        self.client = client

    def __getattr__(self, name: str):
        return getattr(self.client, name)

    def get_metric_data(self, MetricDataQueries, **_):  # noqa: N803 - boto3's parameter name
        if len(MetricDataQueries) > 500:
            raise ValueError("more than 500 queries in one GetMetricData call")
        return {"MetricDataResults": [{"Id": q["Id"], "Values": [1.0], "StatusCode": "Complete"} for q in MetricDataQueries]}


def main() -> None:
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION=REGION)  # noqa: S105
    env = runs.handler_environment(BUCKET, REGION, resamples=2000)
    settings = handler.Settings.from_env(env)
    now = datetime(2026, 11, 29, 11, 0, tzinfo=timezone.utc)
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
        cloudwatch = AnsweringCloudWatch(boto3.client("cloudwatch", region_name=REGION))
        store = RunStore(S3Store(BUCKET, "results/", s3), "20261129T100000Z-bench0")
        runs.write_run(store, cases=CASES, requests=8)
        publish.publish_run(store, NAMESPACE, REGION, client=cloudwatch.client)
        timings, outcomes = [], []
        for attempt in range(4):
            retrier = Retrier()
            event = {"run_id": store.run_id} if attempt else {"source": "aws.events", "detail-type": "Scheduled Event"}
            started = time.perf_counter()
            outcomes.append(handler.refresh(event, settings, s3, cloudwatch, retrier=retrier, now=now))
            timings.append(time.perf_counter() - started)
        series = handler.list_series(cloudwatch, NAMESPACE, Retrier())
        pages = cloudwatch.get_paginator("list_metrics").paginate(Namespace=NAMESPACE, Dimensions=[{"Name": "TestCase"}])
        listed = len({repr(sorted(m.items())) for page in pages for m in page["Metrics"]})
        queries = len(handler.live_queries(NAMESPACE, series, 86400))
        body = cloudwatch.get_dashboard(DashboardName=settings.dashboard_name)["DashboardBody"]
        summarizing = time.perf_counter()
        summary = _summary(settings, store)
        summarizing = time.perf_counter() - summarizing
        speedup_datums = len(dashboard.speedup_datums(summary, now))

    first, repeat = outcomes[0], outcomes[1]
    metrics = sorted({s[0] for s in series})
    print(f"shape: {len(CASES)} test cases x 2 services, {len(metrics)} metrics -> {len(series)} series (acceptance: speculative only)")
    print(
        f"ListMetrics: {listed} distinct metrics carry a TestCase -> minimum {math.ceil(listed / 500)} page(s); "
        "moto lists a metric once per stored datum, so it pages more than CloudWatch does"
    )
    print(f"live statistics: {queries} GetMetricData queries -> minimum {math.ceil(queries / 500)} call(s)")
    print(f"first refresh (schedule): {first['aws_calls_total']} AWS calls {first['aws_calls']}")
    print(f"repeat refresh (same run): {repeat['aws_calls_total']} AWS calls {repeat['aws_calls']}")
    minimum_s3 = 1 + 1 + 1 + 2 * len(CASES)  # list runs, list the run folder, run.json, records + acceptance per case
    print(f"S3 minimum for the stored layout: {minimum_s3} calls to read (+1 GET, +1 PUT of aggregate.json)")
    print(f"speedup metrics: {speedup_datums} datums -> minimum {math.ceil(speedup_datums / 1000)} PutMetricData call(s)")
    print(f"dashboard: {first['widgets']} widgets, body {len(body)} bytes")
    print(f"handler time: median {statistics.median(timings):.2f} s of {len(timings)} ({', '.join(f'{t:.2f}' for t in timings)})")
    print(f"of which reading the run and summarizing it (bootstrap included): {summarizing:.2f} s")


def _summary(settings, store):
    files = runfiles.load_run(store)
    return aggregate.summarize_run(files.run, files.records, files.acceptance, resamples=settings.bootstrap_resamples)


if __name__ == "__main__":
    main()
