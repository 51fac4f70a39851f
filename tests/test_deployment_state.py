"""The dashboard's Deployment state row end to end (issue 36): the benchmark's readiness wait
publishes each service's state (outputs/readiness.py), the cost guard its node-hours, a staged sweep
its stage documents; the aggregation Lambda reads them back (against moto) into the row. The names
each publisher uses are the ones the row queries: these tests tie them."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import json
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from config import load_config
from config.sweep import first_job
from config.sweep_decision import decision_settings
from lambdas.aggregate import handler
from specbench.aws_retry import Retrier
from specbench.emulator.server import CLOCK, EmulatorServer, default_profiles
from specbench.load.endpoints import NotReadyError, wait_ready
from specbench.load.native import NativeEngine
from specbench.load.types import Endpoint, LoadSpec
from specbench.outputs import dashboard, deployment_state, sweep_next, sweep_report
from specbench.outputs import sweep_controller as controller
from specbench.outputs.readiness import ReadinessPublisher
from specbench.prompts.suite import DEFAULT_SUITE
from specbench.results.store import LocalStore, RunStore, S3Store
from specbench.runner import Runner, RunPlan
from tests import moto_aws, runs
from tests.sweep_data import store_points
from tests.test_sweep_next import ALL, CONTEXT

ROOT = Path(__file__).resolve().parents[1]
REGION, BUCKET, NAMESPACE, MODEL = "us-east-2", "specdecode-test-data", "Qwen/LLMPerf", "Qwen/Qwen3-32B"
SCALE = 0.1
DS = deployment_state


def settings(**changes) -> handler.Settings:
    return handler.Settings.from_env({**runs.handler_environment(BUCKET, REGION, resamples=100), **changes})


def scheduled(s3, cloudwatch, s: handler.Settings, now: datetime | None = None) -> dict:
    return handler.refresh({"source": "aws.events", "detail-type": "Scheduled Event"}, s, s3, cloudwatch, retrier=Retrier(), now=now)


def top_row(cloudwatch, s: handler.Settings) -> list[dict]:
    body = json.loads(cloudwatch.get_dashboard(DashboardName=s.dashboard_name)["DashboardBody"])
    assert dashboard.problems(s.dashboard_name, body) == []
    return body["widgets"][:5]


# --- the names: one place, and every publisher uses them -------------------------------------------


def test_the_datums_carry_the_names_and_dimensions_the_row_queries():
    at = datetime(2026, 11, 29, 11, tzinfo=timezone.utc)
    datums = DS.state_datums({"qwen-vllm": (DS.READY, 812.5), "qwen-sd-vllm": (DS.WAITING, float("nan"))}, at)
    published = {(d["MetricName"], json.dumps(d["Dimensions"])) for d in datums}
    queried = {
        (q["MetricStat"]["Metric"]["MetricName"], json.dumps(q["MetricStat"]["Metric"]["Dimensions"]))
        for _, q in DS.queries(NAMESPACE, "c", "ns", ["qwen-vllm", "qwen-sd-vllm"], 60)
        if q["MetricStat"]["Metric"]["Namespace"] == NAMESPACE
    }
    assert published <= queried and len(published) == 4
    assert {(d["MetricName"], d["Value"], d["Unit"]) for d in datums if d["Dimensions"][0]["Value"] == "qwen-vllm"} == {
        ("ServiceState", 1.0, "None"),
        ("ServiceWaitSeconds", 812.5, "Seconds"),
    }
    assert next(d["Value"] for d in datums if d["MetricName"] == DS.SERVICE_WAIT and d["Dimensions"][0]["Value"] == "qwen-sd-vllm") == 0.0
    # the graph's SEARCH names the same metric and dimension
    assert (
        f'{{"{NAMESPACE}",{DS.SERVICE_DIMENSION}}} MetricName="{DS.SERVICE_WAIT}"'
        in DS.wait_graph(dashboard_settings())["properties"]["metrics"][0][0]["expression"]
    )


def dashboard_settings() -> dashboard.DashboardSettings:
    return dashboard.DashboardSettings("SpecDecode-Benchmark", REGION, NAMESPACE, "specdecode-trn2", "specdecode", budget_node_hours=48.0)


def test_the_sweep_locations_are_the_sweeps_own():
    assert DS.SWEEPS_PREFIX == sweep_report.SWEEPS_PREFIX and DS.STAGES == sweep_next.STAGES


def cost_guard():
    """lambdas/cost_guard/handler.py as the Lambda runs it (its budget.py beside it on the path)."""
    sys.path.insert(0, str(ROOT / "lambdas" / "cost_guard"))
    spec = importlib.util.spec_from_file_location("cost_guard_handler", ROOT / "lambdas" / "cost_guard" / "handler.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.xdist_group("moto-ec2")  # one worker pays moto's first EC2 calls (tests/test_preflight.py)
def test_the_cost_guards_figures_reach_the_row(monkeypatch):
    """One check of the real guard against moto (a Neuron instance up two hours), then the Lambda's read."""
    guard = cost_guard()
    moto_aws.offline_environment(monkeypatch)
    # Without moto's ~1,300 default AMIs (read whenever a region's EC2 backend is made, here and at
    # the mock's reset; listing them cost ~1.5 s of CPU): the guard never reads the instance's image.
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    moto_aws.lend_session_to_moto()  # moto's EC2 backend, cheaply
    with moto_aws.mocked():
        s3, cloudwatch = moto_aws.bucket(BUCKET, REGION), moto_aws.client("cloudwatch", REGION)
        ec2 = moto_aws.client("ec2", REGION)
        image = ec2.register_image(Name="node", RootDeviceName="/dev/xvda")["ImageId"]
        tags = [{"Key": "eks:cluster-name", "Value": "specdecode-trn2"}, {"Key": "eks:nodegroup-name", "Value": "NeuronNodes-abc"}]
        ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1, TagSpecifications=[{"ResourceType": "instance", "Tags": tags}])
        launch = ec2.describe_instances()["Reservations"][0]["Instances"][0]["LaunchTime"]
        topic = moto_aws.client("sns", REGION).create_topic(Name="guard")["TopicArn"]
        s = guard.Settings(
            "specdecode-trn2", "NeuronNodes-abc", 1, 48.0, False, topic, BUCKET, "cost-guard/l.json", NAMESPACE, None, REGION
        )
        clients = {name: moto_aws.client(name, REGION) for name in ("ec2", "eks", "sns", "s3", "cloudwatch")}
        now = launch + timedelta(hours=2)
        summary = guard.run({"source": "aws.events"}, s, clients, now)
        assert summary["node_hours"] == pytest.approx(2.0) and summary["nodes_up"] == 1
        published = {m["MetricName"]: m["Dimensions"] for m in cloudwatch.list_metrics(Namespace=NAMESPACE)["Metrics"]}
        assert published == {
            DS.NODE_HOURS: [{"Name": DS.CLUSTER_DIMENSION, "Value": "specdecode-trn2"}],
            DS.NODES_UP: published[DS.NODES_UP],
        }
        figures = handler.state_figures(cloudwatch, settings(), now, Retrier())
        assert figures[(DS.NODE_HOURS, "")].value == pytest.approx(2.0) and figures[(DS.NODES_UP, "")].value == 1.0
        scheduled(s3, cloudwatch, settings(), now)
        text = top_row(cloudwatch, settings())[0]["properties"]["markdown"]
    assert "**Neuron node-hours: 2.0 of 48** (4% of budget.node_hours) · Neuron nodes up: 1" in text


# --- the publisher ---------------------------------------------------------------------------------


class Client:
    def __init__(self, error: Exception | None = None) -> None:
        self.calls: list[dict] = []
        self.error = error

    def put_metric_data(self, **kwargs):
        if self.error is not None:
            raise self.error
        self.calls.append(kwargs)


def published(client: Client, call: int) -> dict[str, tuple[float, float]]:
    """service -> (state, seconds) of one PutMetricData call."""
    data = client.calls[call]["MetricData"]
    value = {(d["MetricName"], d["Dimensions"][0]["Value"]): d["Value"] for d in data}
    return {svc: (value[(DS.SERVICE_STATE, svc)], value[(DS.SERVICE_WAIT, svc)]) for _, svc in value}


def test_the_publisher_sends_on_the_first_poll_each_change_and_once_a_minute():
    clock = [0.0]
    client = Client()
    publisher = ReadinessPublisher(NAMESPACE, client, clock=lambda: clock[0])

    def poll(at: float, statuses: dict, final: bool = False) -> None:
        clock[0] = at
        publisher(statuses, at, final)

    poll(0.0, {"a": "unreachable (ClientConnectorError)", "b": None})
    poll(30.0, {"a": "/health answered 503", "b": None})  # still waiting, within the minute: nothing
    poll(61.0, {"a": "unreachable (ClientConnectorError)", "b": None})
    poll(70.0, {"a": None, "b": None}, final=True)
    poll(71.0, {"a": None, "b": None}, final=True)  # the same final states again: nothing
    assert len(client.calls) == 3 and client.calls[0]["Namespace"] == NAMESPACE
    assert published(client, 0) == {"a": (DS.WAITING, 0.0), "b": (DS.READY, 0.0)}
    assert published(client, 1) == {"a": (DS.WAITING, 61.0), "b": (DS.READY, 0.0)}  # b keeps its time to ready
    assert published(client, 2) == {"a": (DS.READY, 70.0), "b": (DS.READY, 0.0)}


def test_a_timeout_or_another_model_is_failed():
    client = Client()
    publisher = ReadinessPublisher(NAMESPACE, client, clock=lambda: 0.0)
    publisher({"a": "serves ['Qwen/Qwen3-8B'], not 'Qwen/Qwen3-32B'", "b": "unreachable"}, 5.0, False)
    publisher({"a": "serves ['Qwen/Qwen3-8B'], not 'Qwen/Qwen3-32B'", "b": "unreachable"}, 900.0, True)
    assert published(client, 0) == {"a": (DS.FAILED, 5.0), "b": (DS.WAITING, 5.0)}
    assert published(client, 1) == {"a": (DS.FAILED, 900.0), "b": (DS.FAILED, 900.0)}


def test_a_refused_publish_is_said_once_and_never_stops_the_wait():
    said = []
    error = ClientError({"Error": {"Code": "AccessDenied", "Message": "not allowed"}}, "PutMetricData")
    publisher = ReadinessPublisher(NAMESPACE, Client(error), clock=lambda: 0.0, log=said.append)
    publisher({"a": "unreachable"}, 0.0, False)
    publisher({"a": None}, 3.0, True)
    assert publisher.failures == 2 and len(said) == 1
    assert said[0] == f"service states not published to CloudWatch {NAMESPACE}: AccessDenied: " + str(error)[:200]


def test_wait_ready_tells_its_observer_every_poll_and_the_end():
    profiles = default_profiles(time_scale=SCALE)
    late = dataclasses.replace(profiles["qwen-vllm"], ready_after_s=0.3)
    seen = []
    with EmulatorServer(late) as baseline, EmulatorServer(profiles["qwen-sd-vllm"]) as speculative:
        endpoints = [Endpoint("qwen-vllm", baseline.url), Endpoint("qwen-sd-vllm", speculative.url)]

        # Each observation with when it came (the emulator's clock): the last, the ready one, must come
        # 0.3 s after the late service started loading. wait_ready's elapsed figure counts from the
        # wait's start, after the service's, so it may be a little under 0.3 s. The service starts
        # loading here, not when its thread started: the first poll must find it loading on a busy machine too.
        def observe(*seen_now) -> None:
            seen.append((*seen_now, CLOCK()))

        ready_at = baseline.emulator.start_loading() + late.ready_after_s
        asyncio.run(wait_ready(endpoints, MODEL, 5.0, poll_s=0.1, log=lambda line: None, observe=observe))
        dead = [Endpoint("qwen-vllm", "http://127.0.0.1:9"), Endpoint("qwen-sd-vllm", speculative.url)]
        gave_up = []
        with pytest.raises(NotReadyError):
            asyncio.run(wait_ready(dead, MODEL, 0.2, poll_s=0.1, log=lambda line: None, observe=lambda *a: gave_up.append(a)))
    first, last = seen[0], seen[-1]
    assert first[0]["qwen-vllm"] == "/health answered 503" and first[0]["qwen-sd-vllm"] is None and first[2] is False
    assert last[0] == {"qwen-vllm": None, "qwen-sd-vllm": None} and last[2] is True and last[3] >= ready_at
    assert [a[1] for a in seen] == sorted(a[1] for a in seen) and not any(a[2] for a in seen[:-1])
    assert gave_up[-1][2] is True and gave_up[-1][0]["qwen-vllm"].startswith("unreachable") and gave_up[-1][1] >= 0.2


def test_the_benchmarks_wait_reaches_the_dashboard_row(tmp_path, monkeypatch):
    """Offline end to end: the Runner's readiness wait publishes to moto's CloudWatch while one
    emulated service starts late; the Lambda's refresh puts both services' states in the row."""
    moto_aws.offline_environment(monkeypatch)
    profiles = default_profiles(time_scale=SCALE)
    late = dataclasses.replace(profiles["qwen-vllm"], ready_after_s=0.5)
    with moto_aws.mocked(), EmulatorServer(late) as baseline, EmulatorServer(profiles["qwen-sd-vllm"]) as speculative:
        s3, cloudwatch = moto_aws.bucket(BUCKET, REGION), moto_aws.client("cloudwatch", REGION)
        endpoints = (Endpoint(runs.BASELINE, baseline.url), Endpoint(runs.SPECULATIVE, speculative.url))
        plan = RunPlan(endpoints, DEFAULT_SUITE.select(["json"]), LoadSpec(MODEL, 8, 2, 2, 10.0), 64, "native", 5.0)
        publisher = ReadinessPublisher.for_region(NAMESPACE, REGION)  # what the run command makes (boto3's client: moto's here)
        # The late service starts loading now, not before moto's set-up above (a few tenths of a second
        # on a busy machine): the benchmark's first poll must find it still loading.
        baseline.emulator.start_loading()
        result = asyncio.run(Runner(plan, NativeEngine(), RunStore(LocalStore(tmp_path), "r1"), progress=False, readiness=publisher).run())
        assert result.status == "completed" and publisher.calls == 2 and publisher.failures == 0  # first poll, then all ready
        listed = cloudwatch.list_metrics(Namespace=NAMESPACE, MetricName=DS.SERVICE_STATE)["Metrics"]
        assert sorted(m["Dimensions"][0]["Value"] for m in listed) == sorted([runs.BASELINE, runs.SPECULATIVE])
        out = scheduled(s3, cloudwatch, settings())
        text = top_row(cloudwatch, settings())[0]["properties"]["markdown"]
        waited = handler.state_figures(cloudwatch, settings(), datetime.now(timezone.utc), Retrier())
    assert out["deployment"]["services_reported"] == sorted([runs.BASELINE, runs.SPECULATIVE])
    assert waited[(DS.SERVICE_STATE, runs.BASELINE)].value == DS.READY  # the minute's highest state: ready
    assert 0.5 <= waited[(DS.SERVICE_WAIT, runs.BASELINE)].value < 5.0 and waited[(DS.SERVICE_WAIT, runs.SPECULATIVE)].value < 0.5
    rows = [line for line in text.replace("\\", "").splitlines() if line.startswith("| qwen")]
    assert len(rows) == 2 and all("| **ready** after " in row and "no figure (Container Insights" in row for row in rows)


# --- the sweep -------------------------------------------------------------------------------------


def test_a_staged_sweep_shows_its_stages_done_and_planned(monkeypatch):
    """Stage 1 stored and decided by sweep next's own function, stage 2 proposed with one point stored:
    the row's stage 1 planned points are the configured first Job's (config/sweep.py first_job)."""
    config = load_config(dict(item.split("=", 1) for item in CONTEXT[1::2]))
    strategy, points, hours = first_job(config)
    assert strategy == "staged" and points == 4
    moto_aws.offline_environment(monkeypatch)
    with moto_aws.mocked():
        s3 = moto_aws.bucket(BUCKET, REGION)
        store = S3Store(BUCKET, "results/", s3)
        store_points(store, "sw", [p for p in ALL if p.variant.is_baseline or p.variant.name in {"q17-k7", "q06-k6"}])
        inputs = controller.inputs_from_settings(decision_settings(config, 0.0))
        _, doc, _ = sweep_next.advance(store, sweep_report.load_sweep_folders(store, "sw"), "sw", inputs, resamples=200)
        proposed = doc["next_stage"]["points"]
        store_points(store, "sw", [p for p in ALL if p.point_id == proposed[0]])
        s3.put_object(Bucket=BUCKET, Key="results/sweeps/sw/stages/after-stage-9.json", Body=b"{")  # damaged: named, not used
        s = settings(SWEEP_STRATEGY=strategy, SWEEP_FIRST_JOB_POINTS=str(points), SWEEP_FIRST_JOB_NODE_HOURS=str(hours))
        (progress,) = handler.sweep_states(s3, s, datetime.now(timezone.utc), Retrier())
    one, two = progress.rows
    assert (progress.sweep_id, progress.strategy) == ("sw", "staged")
    assert (one.completed, one.planned, one.state, one.node_hours) == (4, 4, "done", doc["node_hours"]["stage_one"])
    assert set(one.variants) == {"baseline", "q17-k7", "q06-k6"} and "c1 " in one.decisions
    assert (two.stage, two.planned, two.completed, two.node_hours) == (2, len(proposed), 1, doc["node_hours"]["next_stage"])
    assert two.variants == tuple(v["name"] for v in doc["next_stage"]["variants"])
    assert two.state == f"partly measured (1 of {len(proposed)} stored)"
    assert progress.problems == (
        "stages/after-stage-9.json: not JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))",
    )
    assert progress.total.startswith(f"{doc['node_hours']['so_far']:.1f} node-hours planned so far (plan: expected")
