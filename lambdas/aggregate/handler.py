"""The aggregation Lambda: rebuilds the benchmark dashboard from the latest (or the named) run.

Invoked on a schedule, when a run's ``publish.json`` lands under the results prefix (EventBridge
"Object Created"), or by hand with ``{"run_id": "..."}``. One refresh:
    1. finds the run (from the event's object key, else the newest run id under the prefix);
    2. reads its stored records and acceptance figures from S3: exact statistics and bootstrap CIs;
    3. lists the benchmark's metrics in CloudWatch and reads their live p50/p90/p99 over the
       lookback window with GetMetricData, 500 queries per call;
    4. reads the deployment's state for the dashboard's top row: per service the benchmark Job's
       ServiceState and ServiceWaitSeconds and Container Insights' pod status, the cost guard's
       NeuronNodeHours and NeuronNodesUp (one GetMetricData call), and the newest sweeps' stage
       documents and points under sweeps/ (specbench/outputs/deployment_state.py);
    5. puts the dashboard (checked against CloudWatch's rules first);
    6. publishes the speedups as metrics, once per distinct result (results/<run>/aggregate.json
       records what was published, so a repeated refresh does not count a run twice).
Every AWS call goes through one Retrier: throttling and 5xx are retried with backoff, and the
calls are counted and returned.

Dependencies: the Lambda runtime's boto3, and the standard-library modules of specbench that the
stack packs next to this file.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from specbench.analysis import aggregate
from specbench.aws_retry import Retrier, error_code
from specbench.outputs import dashboard, deployment_state
from specbench.results import runfiles
from specbench.results.store import RunStore, S3Store, effective_status

log = logging.getLogger()
log.setLevel(logging.INFO)

UTC = timezone.utc  # noqa: UP017 - the same modules run on Python 3.10
MAX_QUERIES_PER_CALL = 500  # GetMetricData
MAX_DATUMS_PER_CALL = 1000  # PutMetricData
# CloudWatch accepts data points up to two weeks old; older runs get a dashboard but no speedup metrics.
MAX_METRIC_AGE = timedelta(days=14) - timedelta(hours=1)
# Live statistics per benchmark metric; metrics not listed are not read.
LIVE_STATISTICS: dict[str, tuple[str, ...]] = {
    "TTFT": ("p50", "p90", "p99"),
    "InterTokenLatency": ("p50", "p90", "p99"),
    "TimePerOutputToken": ("p50", "p90", "p99"),
    "EndToEndLatency": ("p50", "p90", "p99"),
    "OutputThroughput": ("p50",),
    "InputTokens": ("Average",),
    "OutputTokens": ("Average",),
    "TokensPerChunk": ("Average",),
    "Errors": ("Sum", "SampleCount"),
    "AcceptanceRate": ("Average",),
    "MeanAcceptanceLength": ("Average",),
}
SUMMARY_FILE = "aggregate.json"


@dataclass(frozen=True)
class Settings:
    bucket: str
    prefix: str
    dashboard_name: str
    metrics_namespace: str
    cluster_name: str
    serving_namespace: str
    baseline: str
    draft_cost_ratio: float
    lookback_hours: int
    bootstrap_resamples: int
    region: str
    # The deployment, for the top row: its services (baseline first), budget.node_hours (0: none),
    # env.profile, and its sweep: strategy (none, grid, staged), the first Job's points and node-hours.
    services: tuple[str, ...]
    budget_node_hours: float
    profile: str
    sweep_strategy: str
    sweep_first_job_points: int
    sweep_first_job_node_hours: float

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        """The stack sets every variable; a missing or malformed one names itself."""

        def get(name: str) -> str:
            value = env.get(name, "")
            if not value:
                raise ValueError(f"environment variable {name} is not set")
            return value

        def number(name: str, kind: type, low: float, high: float) -> Any:
            try:
                value = kind(get(name))
            except ValueError as error:
                raise ValueError(f"environment variable {name}={env.get(name)!r}: {error}") from error
            if not low <= value <= high:
                raise ValueError(f"environment variable {name}={value}: allowed {low} to {high}")
            return value

        def choice(name: str, allowed: tuple[str, ...]) -> str:
            value = get(name)
            if value not in allowed:
                raise ValueError(f"environment variable {name}={value!r}: allowed {', '.join(allowed)}")
            return value

        if "ENV_PROFILE" not in env:  # set by the stack, empty without a profile
            raise ValueError("environment variable ENV_PROFILE is not set")
        services = deployment_state.services_in(get("SERVICES").split(","))
        prefix = get("RESULTS_PREFIX")
        return cls(
            bucket=get("RESULTS_BUCKET"),
            prefix=prefix if prefix.endswith("/") else prefix + "/",
            dashboard_name=get("DASHBOARD_NAME"),
            metrics_namespace=get("METRICS_NAMESPACE"),
            cluster_name=get("CLUSTER_NAME"),
            serving_namespace=get("SERVING_NAMESPACE"),
            baseline=get("BASELINE_VARIANT"),
            draft_cost_ratio=number("DRAFT_COST_RATIO", float, 1e-9, 0.999999),
            lookback_hours=number("LOOKBACK_HOURS", int, 1, 360),
            bootstrap_resamples=number("BOOTSTRAP_RESAMPLES", int, 100, 100000),
            region=env.get("AWS_REGION") or get("AWS_DEFAULT_REGION"),
            services=services,
            budget_node_hours=number("BUDGET_NODE_HOURS", float, 0, 100000),
            profile=env["ENV_PROFILE"],
            sweep_strategy=choice("SWEEP_STRATEGY", (deployment_state.NO_SWEEP, deployment_state.GRID, deployment_state.STAGED)),
            sweep_first_job_points=number("SWEEP_FIRST_JOB_POINTS", int, 0, 100000),
            sweep_first_job_node_hours=number("SWEEP_FIRST_JOB_NODE_HOURS", float, 0, 1e7),
        )


def handler(event: Mapping[str, Any], context: Any = None) -> dict[str, Any]:
    settings = Settings.from_env(os.environ)
    result = refresh(event, settings, *make_clients(settings.region))
    log.info(json.dumps(result, sort_keys=True))
    return result


def make_clients(region: str) -> tuple[Any, Any]:
    """S3 and CloudWatch clients with botocore's retries off: the Retrier retries and counts every attempt."""
    import boto3
    from botocore.config import Config

    config = Config(retries={"mode": "standard", "total_max_attempts": 1}, connect_timeout=10, read_timeout=60)
    return boto3.client("s3", region_name=region, config=config), boto3.client("cloudwatch", region_name=region, config=config)


def refresh(
    event: Mapping[str, Any],
    settings: Settings,
    s3: Any,
    cloudwatch: Any,
    *,
    retrier: Retrier | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    started = time.perf_counter()
    now = now or datetime.now(UTC)
    retrier = retrier or Retrier()
    results = S3Store(settings.bucket, settings.prefix, _RetryingS3(s3, retrier))

    run_id = run_id_from_event(event, settings.prefix) or latest_run_id(s3, settings.bucket, settings.prefix, retrier)
    summary = files = None
    summary_error = ""
    if run_id:
        # Damaged lines and files are skipped and counted (files.skipped); the rest is used.
        files = runfiles.load_run(RunStore(results, run_id))
        for skipped in files.skipped[: runfiles.SHOWN_SKIPS]:
            log.warning("run %s: skipped %s", run_id, skipped)
        try:
            summary = summarize(files, settings)
        except Exception as error:  # noqa: BLE001 - a run's content must never stop the dashboard's refresh
            log.exception("run %s not summarized", run_id)
            summary, summary_error = None, f"{type(error).__name__}: {str(error)[:200]}"
    series = list_series(cloudwatch, settings.metrics_namespace, retrier)
    try:
        live = live_statistics(cloudwatch, settings.metrics_namespace, series, settings.lookback_hours, now, retrier)
        live_error = ""
    except (ClientError, BotoCoreError) as error:
        # Live figures only add to the stored run's exact ones: the dashboard is still worth putting.
        live, live_error = {}, f"{error_code(error)}: {str(error).splitlines()[0][:200]}"
        log.warning("GetMetricData failed, dashboard built without live figures: %s", live_error)
    facts = hardware_facts(results)
    deployment = read_deployment(s3, cloudwatch, settings, now, retrier)
    body = dashboard.body(summary, dashboard_settings(settings, series), live, facts, deployment)
    if summary_error:  # say so rather than "No data yet"
        body = dashboard.fallback_body(None, dashboard_settings(settings, series), [f"run {run_id} not summarized: {summary_error}"])
    problems = dashboard.problems(settings.dashboard_name, body)
    if problems:
        # Never put a body CloudWatch rejects, and never stop updating: say what broke instead.
        log.error("dashboard body breaks CloudWatch's rules: %s", "; ".join(problems[:10]))
        body = dashboard.fallback_body(summary, dashboard_settings(settings, series), problems)
        if dashboard.problems(settings.dashboard_name, body):  # only the dashboard name can break it: a setting
            raise ValueError("dashboard body breaks CloudWatch's rules: " + "; ".join(problems[:10]))
    response = retrier.call(
        "PutDashboard", cloudwatch.put_dashboard, DashboardName=settings.dashboard_name, DashboardBody=dashboard.to_json(body)
    )
    messages = response.get("DashboardValidationMessages") or []
    published = "no run"
    if summary is not None and files is not None and summary.completeness != aggregate.NO_DATA:
        published = publish_speedups(summary, settings, cloudwatch, RunStore(results, run_id), files.keys, now, retrier)
    return {
        "run_id": run_id or None,
        "completeness": summary.completeness if summary else aggregate.NO_DATA,
        "verdict": summary.verdict if summary else "No data yet.",
        "widgets": len(body["widgets"]),
        "hardware_facts": len(facts),
        "deployment": {
            "services_reported": sorted({service for (metric, service) in deployment.figures if metric == deployment_state.SERVICE_STATE}),
            "figures": len(deployment.figures),
            "sweeps": [sweep.sweep_id for sweep in deployment.sweeps],
            "error": deployment.error,
        },
        "live_series": len(series),
        "live_values": len(live),
        "live_error": live_error,
        "speedup_metrics": published,
        "summary_error": summary_error,
        "body_problems": problems[:10],
        "data_quality": {k: v for k, v in files.quality().items() if k != "skips"} if files is not None else {},
        "dashboard_validation_messages": messages,
        "aws_calls": dict(sorted(retrier.calls.items())),
        "aws_calls_total": retrier.total_calls,
        "retries": retrier.retries,
        "seconds": round(time.perf_counter() - started, 3),
    }


def summarize(files: runfiles.RunFiles, settings: Settings) -> aggregate.RunSummary | None:
    """The run's summary against the configured baseline; a run made with other service names (an
    import, a laptop run) is compared against the baseline it names itself, and one that names none
    is left out (None), with the reason logged."""
    variants = {record.variant for record in files.records}
    baseline = settings.baseline if settings.baseline in variants or not variants else None
    try:
        return aggregate.summarize_run(
            files.run,
            files.records,
            files.acceptance,
            baseline=baseline,
            draft_cost_ratio=settings.draft_cost_ratio,
            resamples=settings.bootstrap_resamples,
            data_quality=files.quality(),
        )
    except ValueError as error:
        log.warning("run not summarized: %s (it has no %s)", error, settings.baseline)
        return None


# --- which run -----------------------------------------------------------------------------------


def run_id_from_event(event: Mapping[str, Any], prefix: str) -> str:
    """The run named by a manual invocation or by an S3 "Object Created" event; "" for a schedule."""
    if isinstance(event.get("run_id"), str):
        return event["run_id"]
    key = ((event.get("detail") or {}).get("object") or {}).get("key", "")
    if key.startswith(prefix) and key.count("/") >= prefix.count("/") + 1:
        return key[len(prefix) :].split("/", 1)[0]
    return ""


# Folders under the results prefix that are not runs: the sweeps' and the hardware facts'.
NOT_RUNS = ("sweeps", dashboard.HARDWARE_FACTS_PREFIX.rstrip("/"))


def latest_run_id(s3: Any, bucket: str, prefix: str, retrier: Retrier) -> str:
    """The greatest run id under the prefix: run ids start with their UTC start time (YYYYmmddTHHMMSSZ)."""
    pages = _RetryingS3(s3, retrier).paginate(Bucket=bucket, Prefix=prefix, Delimiter="/")
    ids = (p["Prefix"][len(prefix) :].rstrip("/") for page in pages for p in page.get("CommonPrefixes", []))
    return max((i for i in ids if i not in NOT_RUNS), default="")


def hardware_facts(results: S3Store) -> list[dict[str, Any]]:
    """The hardware-facts Job's files (results/hardware-facts/<node>.json), as stored; one that does
    not parse is shown as such rather than dropped."""
    facts = []
    for key in results.keys(dashboard.HARDWARE_FACTS_PREFIX):
        if not key.endswith(".json"):
            continue
        node = key.rsplit("/", 1)[-1][: -len(".json")]
        try:
            loaded = json.loads(results.read_text(key))
            facts.append(loaded if isinstance(loaded, dict) else {"node": node, "error": "not a JSON object"})
        except ValueError as error:
            facts.append({"node": node, "error": f"not JSON ({error})"})
    return facts


class _RetryingS3:
    """The S3 calls specbench.results.store makes, through the Retrier (its paginator becomes explicit pages)."""

    def __init__(self, client: Any, retrier: Retrier) -> None:
        self.client, self.retrier = client, retrier

    def get_object(self, **kwargs: Any) -> Any:
        return self.retrier.call("GetObject", self.client.get_object, **kwargs)

    def put_object(self, **kwargs: Any) -> Any:
        return self.retrier.call("PutObject", self.client.put_object, **kwargs)

    def get_paginator(self, operation: str) -> Any:
        if operation != "list_objects_v2":
            raise ValueError(f"unexpected paginator {operation}")
        return self

    def paginate(self, **kwargs: Any) -> Any:
        token = None
        while True:
            page = self.retrier.call(
                "ListObjectsV2", self.client.list_objects_v2, **kwargs, **({"ContinuationToken": token} if token else {})
            )
            yield page
            token = page.get("NextContinuationToken")
            if not token:
                return


# --- live figures from CloudWatch -----------------------------------------------------------------

Series = tuple[str, str, str, str]  # (metric, variant, prompt class, test case)


def list_series(cloudwatch: Any, namespace: str, retrier: Retrier) -> list[Series]:
    """Every benchmark metric per test case in the namespace (the {Variant, PromptClass, TestCase} set)."""
    found = []
    token = None
    while True:
        kwargs = {"Namespace": namespace, "Dimensions": [{"Name": "TestCase"}], **({"NextToken": token} if token else {})}
        page = retrier.call("ListMetrics", cloudwatch.list_metrics, **kwargs)
        for metric in page.get("Metrics", []):
            dims = {d["Name"]: d["Value"] for d in metric.get("Dimensions", [])}
            if metric["MetricName"] in LIVE_STATISTICS and set(dims) == {"Variant", "PromptClass", "TestCase"}:
                found.append((metric["MetricName"], dims["Variant"], dims["PromptClass"], dims["TestCase"]))
        token = page.get("NextToken")
        if not token:
            return sorted(set(found))


def live_queries(namespace: str, series: list[Series], period_s: int) -> list[tuple[dashboard.LiveKey, dict[str, Any]]]:
    queries = []
    for metric, variant, prompt_class, case in series:
        dimensions = [{"Name": n, "Value": v} for n, v in (("Variant", variant), ("PromptClass", prompt_class), ("TestCase", case))]
        for stat in LIVE_STATISTICS[metric]:
            metric_id = {"Namespace": namespace, "MetricName": metric, "Dimensions": dimensions}
            query = {"Id": f"q{len(queries)}", "MetricStat": {"Metric": metric_id, "Period": period_s, "Stat": stat}, "ReturnData": True}
            queries.append(((variant, prompt_class, case, metric, stat), query))
    return queries


def live_window(lookback_hours: int, now: datetime) -> tuple[datetime, datetime, int]:
    """One period covering the window: CloudWatch rounds a start time down to the hour for periods of
    an hour or more, so the window starts on an hour and ends an hour later than ``now`` at most."""
    hour = now.replace(minute=0, second=0, microsecond=0)
    start = hour - timedelta(hours=lookback_hours - 1)
    return start, hour + timedelta(hours=1), lookback_hours * 3600


def live_statistics(
    cloudwatch: Any, namespace: str, series: list[Series], lookback_hours: int, now: datetime, retrier: Retrier
) -> dict[dashboard.LiveKey, float]:
    """GetMetricData over the window, at most 500 queries per call; a statistic without data is absent."""
    start, end, period = live_window(lookback_hours, now)
    queries = live_queries(namespace, series, period)
    key_of = {query["Id"]: key for key, query in queries}
    values: dict[dashboard.LiveKey, float] = {}
    for first in range(0, len(queries), MAX_QUERIES_PER_CALL):
        batch = [query for _, query in queries[first : first + MAX_QUERIES_PER_CALL]]
        token = None
        while True:
            kwargs = {"MetricDataQueries": batch, "StartTime": start, "EndTime": end, **({"NextToken": token} if token else {})}
            page = retrier.call("GetMetricData", cloudwatch.get_metric_data, **kwargs)
            for result in page.get("MetricDataResults", []):
                if result.get("Values"):
                    values[key_of[result["Id"]]] = float(result["Values"][0])
            token = page.get("NextToken")
            if not token:
                break
    return values


# --- the deployment's state (the dashboard's top row) -----------------------------------------------


def read_deployment(s3: Any, cloudwatch: Any, settings: Settings, now: datetime, retrier: Retrier) -> deployment_state.Deployment:
    """The services' states, the node-hours and the sweeps; what cannot be read is said in the row
    (the rest of the dashboard is still worth putting)."""
    figures: dict[deployment_state.Key, deployment_state.Figure] = {}
    sweeps: list[deployment_state.SweepProgress] = []
    errors = []
    try:
        figures = state_figures(cloudwatch, settings, now, retrier)
    except (ClientError, BotoCoreError) as error:
        errors.append(f"CloudWatch GetMetricData {error_code(error)}: {_first_line(error)}")
        log.warning("deployment state not read: %s", errors[-1])
    try:
        sweeps = sweep_states(s3, settings, now, retrier)
    except (ClientError, BotoCoreError) as error:
        errors.append(f"S3 {settings.prefix}{deployment_state.SWEEPS_PREFIX} {error_code(error)}: {_first_line(error)}")
        log.warning("sweeps not read: %s", errors[-1])
    return deployment_state.Deployment(
        now,
        settings.services,
        figures,
        tuple(sweeps),
        settings.sweep_strategy,
        settings.sweep_first_job_points,
        settings.sweep_first_job_node_hours,
        "; ".join(errors),
        deployment_state.window(settings.lookback_hours, now)[2],
    )


def _first_line(error: Exception) -> str:
    return (str(error).splitlines() or [""])[0][:160]


def state_figures(
    cloudwatch: Any, settings: Settings, now: datetime, retrier: Retrier
) -> dict[deployment_state.Key, deployment_state.Figure]:
    """The newest value of each of the row's figures in the window, at most 500 queries per call."""
    start, end, period = deployment_state.window(settings.lookback_hours, now)
    queries = deployment_state.queries(
        settings.metrics_namespace, settings.cluster_name, settings.serving_namespace, settings.services, period
    )
    key_of = {query["Id"]: key for key, query in queries}
    points: dict[str, tuple[list[datetime], list[float]]] = {}
    for first in range(0, len(queries), MAX_QUERIES_PER_CALL):
        batch = [{**query, "ReturnData": True} for _, query in queries[first : first + MAX_QUERIES_PER_CALL]]
        token = None
        while True:
            kwargs = {"MetricDataQueries": batch, "StartTime": start, "EndTime": end, **({"NextToken": token} if token else {})}
            page = retrier.call("GetMetricData", cloudwatch.get_metric_data, **kwargs)
            for result in page.get("MetricDataResults", []):
                times, values = points.setdefault(result["Id"], ([], []))
                times += result.get("Timestamps", [])
                values += result.get("Values", [])
            token = page.get("NextToken")
            if not token:
                break
    figures = {key_of[i]: deployment_state.latest(*points[i]) for i in points if i in key_of}
    return {key: figure for key, figure in figures.items() if figure is not None}


def sweep_states(s3: Any, settings: Settings, now: datetime, retrier: Retrier) -> list[deployment_state.SweepProgress]:
    """The newest sweeps under sweeps/ (by their newest object): each point's run.json and every
    stage document read; one that cannot be read is named, never taken for a stage or a point."""
    base = settings.prefix + deployment_state.SWEEPS_PREFIX
    objects: dict[str, dict[str, datetime]] = {}
    for page in _RetryingS3(s3, retrier).paginate(Bucket=settings.bucket, Prefix=base):
        for item in page.get("Contents", []):
            sweep, _, rest = item["Key"][len(base) :].partition("/")
            if rest:
                objects.setdefault(sweep, {})[rest] = item["LastModified"]
    newest = sorted(objects, key=lambda sweep: (max(objects[sweep].values()), sweep), reverse=True)[: deployment_state.MAX_SWEEPS_SHOWN]
    results = S3Store(settings.bucket, settings.prefix, _RetryingS3(s3, retrier))
    configured = (settings.sweep_strategy, settings.sweep_first_job_points, settings.sweep_first_job_node_hours)
    progress = []
    for sweep in newest:
        points, documents, problems = [], [], []
        for rest in sorted(objects[sweep]):
            folder, _, name = rest.partition("/")
            is_document = folder == deployment_state.STAGES.rstrip("/") and name.startswith(deployment_state.STAGE_DOCUMENT)
            if not (is_document and name.endswith(".json")) and name != "run.json":
                continue
            try:
                text = results.read_text(f"{deployment_state.SWEEPS_PREFIX}{sweep}/{rest}")
            except UnicodeDecodeError as error:
                problems.append(f"{rest}: not UTF-8 ({error.reason})")
                continue
            except ClientError as error:  # gone since the listing (a sweep being rewritten)
                if error_code(error) not in ("NoSuchKey", "404"):
                    raise
                continue
            found = deployment_state.parse_stage_document(text) if is_document else _sweep_point(text, folder, now)
            if isinstance(found, str):
                problems.append(f"{rest}: {found}")
            elif is_document:
                documents.append(found)
            else:
                points.append(found)
        progress.append(deployment_state.sweep_progress(sweep, points, documents, configured, problems, max(objects[sweep].values())))
    return progress


def _sweep_point(text: str, folder: str, now: datetime) -> deployment_state.PointRun | str:
    try:
        run = json.loads(text)
    except (ValueError, RecursionError) as error:
        return f"not JSON ({error})"
    sweep = run.get("sweep") if isinstance(run, dict) else None
    variant = (sweep.get("variant") or {}) if isinstance(sweep, dict) else {}
    if not isinstance(variant, dict) or not isinstance(variant.get("name"), str):
        return "run.json names no sweep point (sweep.variant.name)"
    return deployment_state.PointRun(folder, variant["name"], effective_status(run, None, now))


def dashboard_settings(settings: Settings, series: list[Series]) -> dashboard.DashboardSettings:
    return dashboard.DashboardSettings(
        name=settings.dashboard_name,
        region=settings.region,
        metrics_namespace=settings.metrics_namespace,
        cluster_name=settings.cluster_name,
        serving_namespace=settings.serving_namespace,
        lookback_hours=settings.lookback_hours,
        baseline=settings.baseline,
        discovered_cases={case: prompt_class for _, _, prompt_class, case in series},
        discovered_variants=sorted({variant for _, variant, _, _ in series}),
        budget_node_hours=settings.budget_node_hours,
        profile=settings.profile,
    )


# --- the speedups as metrics ---------------------------------------------------------------------


def publish_speedups(
    summary: aggregate.RunSummary,
    settings: Settings,
    cloudwatch: Any,
    run: RunStore,
    keys: list[str],
    now: datetime,
    retrier: Retrier,
) -> str:
    """PutMetricData of the run's speedups, unless this same result was published before."""
    summary_dict = summary.to_dict()
    digest = hashlib.sha256(json.dumps(summary_dict, sort_keys=True).encode()).hexdigest()
    previous = _previous_summary(run, keys)
    if previous.get("digest") == digest and previous.get("speedup_metrics") == "published":
        return "already published"
    timestamp = _run_time(summary) or now
    if summary.status == "running":
        # A growing run's speedups change; publishing each would average them in CloudWatch.
        state = "run in progress: published once it ends"
    elif now - timestamp > MAX_METRIC_AGE:
        state = "run older than CloudWatch accepts (two weeks)"
    else:
        datums = dashboard.speedup_datums(summary, timestamp)
        for first in range(0, len(datums), MAX_DATUMS_PER_CALL):
            retrier.call(
                "PutMetricData",
                cloudwatch.put_metric_data,
                Namespace=settings.metrics_namespace,
                MetricData=datums[first : first + MAX_DATUMS_PER_CALL],
            )
        state = "published" if datums else "nothing to publish"
    run.write(SUMMARY_FILE, json.dumps({"digest": digest, "speedup_metrics": state, "summary": summary_dict}, indent=1))
    return state


def _previous_summary(run: RunStore, keys: list[str]) -> dict[str, Any]:
    """What an earlier refresh published (aggregate.json); a damaged file is as good as none."""
    if SUMMARY_FILE not in keys:
        return {}
    try:
        previous = json.loads(run.read(SUMMARY_FILE))
    except (UnicodeDecodeError, ValueError, RecursionError):
        log.warning("%s/%s is damaged: the speedups are published again", run.run_id, SUMMARY_FILE)
        return {}
    return previous if isinstance(previous, dict) else {}


def _run_time(summary: aggregate.RunSummary) -> datetime | None:
    """The run's finish time (its start while it runs): the timestamp its speedups are published at."""
    for text in (summary.finished, summary.started):
        try:
            moment = datetime.fromisoformat(text)
        except (TypeError, ValueError):
            continue
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return None
