"""Issue 36's acceptance, end to end and offline: ``specbench sweep control`` against a loopback
Jobs API whose Jobs really run, every stage's pods measuring batching emulators.

The sweep is synth's (charts/sweep.py from a configuration: its ConfigMap and CronJob, the
benchmark's settings, the controller's settings from charts/sweep_control.py), the first Job is
what ``kubectl create job --from=cronjob/specbench-sweep`` makes of the CronJob, and every Job's
pods run here (tests/sweep_pods.py): the pod's launcher starts the unit's server, ``specbench
emulate`` with the unit's k and the draft's cost standing in for vLLM, and the pod's own point
runner stores every point in S3 (a moto server), as in the cluster. The known truth is the
emulator's: each prompt class's acceptance a (its marker's, specbench/emulator/server.py
default_profiles) and the draft's cost c (``--draft-cost-ratio``), which fix the best k under the
standard model. The controller, a subprocess as its pod runs it, must end with the documents
``specbench sweep next`` writes by hand on the same points, stage after stage, deciding on the
truth's best; then, killed with SIGKILL after each of its steps and with a create in flight and
started again each time (its pods storing the same measurements again), it must create no stage
twice and write the same documents.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import boto3
import pytest

from charts import code, sweep_control
from charts.benchmark import BUNDLE_SHA256_ENV, code_config_map
from charts.dist import cdk_context
from charts.spec import benchmark_spec, serving_plan
from charts.sweep import LOCALHOST, sweep_objects, sweep_spec
from charts.sweep import NAME as SWEEP_CRONJOB
from config import load_config
from specbench.analysis.theory import expected_speedup
from specbench.emulator import server as em
from specbench.sweep import staged
from tests.code_fetch import moto_server
from tests.jobs_standin import FAILED, JobsStandIn
from tests.moto_aws import FAKE_CREDENTIALS
from tests.sweep_pods import Node

ROOT = Path(__file__).resolve().parents[1]
NS, TOKEN, SWEEP = "specdecode", "t0ken", "sw"
RESULTS = "results/"  # the results prefix synth gives the pods (benchmark.results_uri)
PREFIX = f"{RESULTS}sweeps/{SWEEP}/"
STAGES = "stages/"
BUCKET, REGION = "specdecode-data-bucket", "us-east-2"
Q17 = "Qwen/Qwen3-1.7B"
KS = (1, 2, 3, 8)
# The truth: the draft's cost (the emulator's --draft-cost-ratio) and each class's acceptance, the
# emulator's for the suite's two prompts (0.9 and 0.87): k = 8 costs 37 % less per token than the
# next best, k = 3, under the standard model (truth_best); k = 3 is the middle k stage 1 measures.
DRAFT_COST = {Q17: 0.02}
SUITE = {
    "name": "two-classes",
    "test_cases": [
        {"name": "counting", "prompt_class": "structured", "text": "counting numbers from 1 "},
        {"name": "json", "prompt_class": "json", "text": "Output valid JSON with fixed keys "},
    ],
}
# Emulated latencies x 0.2: a baseline step of 9 ms, a request at k = 8 about 70 ms (a client held off
# the CPU that long reads every chunk at once: TPOT 0, a record the sweep refuses as damaged).
TIME_SCALE = 0.2
CONTEXT = {
    "neuron_nodes.desired_size": "2",
    "neuron_nodes.max_size": "2",
    "sweep.variants": ",".join(f"q17-k{k}:{Q17}:{k}" for k in KS),
    "sweep.concurrencies": "1",
    "sweep.strategy": "staged",
    "benchmark.requests_per_test_case": "3",
    "benchmark.output_tokens": "40",
}


def emulator(variant: dict, port: int) -> list[str]:
    """The unit's server: ``specbench emulate`` with the variant's k and its draft's cost."""
    argv = [sys.executable, "-m", "specbench", "emulate", "--time-scale", str(TIME_SCALE)]
    if not variant["draft_model"]:
        return [*argv, "--only", "baseline", "--baseline-port", str(port)]
    k, cost = str(variant["k"]), str(DRAFT_COST[variant["draft_model"]])
    return [*argv, "--only", "speculative", "--speculative-port", str(port), "--speculative-k", k, "--draft-cost-ratio", cost]


def truth_best(settings: dict) -> str:
    """The variant the standard model picks with the emulator's a and each draft's c, for the mix."""
    speculative = em.default_profiles(TIME_SCALE)["qwen-sd-vllm"]
    a = {case["prompt_class"]: speculative.acceptance_for(case["text"]) for case in SUITE["test_cases"]}
    objective = staged.Objective(settings["objective"]["weights"], settings["objective"]["price_per_node_hour"])

    def value(v: dict) -> float:
        speedups = {cls: expected_speedup(a[cls], v["k"], DRAFT_COST[v["draft_model"]]) for cls in a}
        return objective.value(speedups, {cls: staged.BaseClass(1.0) for cls in a})  # the baseline's tokens/s: one per class

    ranked = sorted(settings["variants"], key=value, reverse=True)
    assert value(ranked[0]) > 1.1 * value(ranked[1]), "the truth must be identifiable: its best clearly ahead"
    return f"{ranked[0]['draft_model']} k={ranked[0]['k']}"


@dataclasses.dataclass
class Sweep:
    """What synth made of the configuration, and where the test's cluster keeps things."""

    root: Path
    context: dict[str, str]
    settings: dict
    config_maps: dict[str, dict[str, str]]
    cronjob: dict
    server: str
    bundle: bytes
    moto_url: str

    def env(self) -> dict[str, str]:
        """boto3 pointed at moto (AWS_ENDPOINT_URL, read by botocore for every client) with moto's fake keys."""
        creds = {key.upper(): value for key, value in FAKE_CREDENTIALS.items()}
        return {"AWS_ENDPOINT_URL": self.moto_url, "AWS_DEFAULT_REGION": REGION, "AWS_EC2_METADATA_DISABLED": "true", **creds}

    def first_job(self) -> dict:
        """``kubectl create job sw --from=cronjob/specbench-sweep`` (kubernetes/kubectl pkg/cmd/create/
        create_job.go, ``createJobFromCronJob``: the jobTemplate's labels and spec, the instantiate
        annotation, the CronJob as owner) as the API server stores it: with a controller-uid selector and
        the labels it adds to the Job and its pods."""
        template = self.cronjob["spec"]["jobTemplate"]
        uid = {
            "batch.kubernetes.io/controller-uid": "u-1",
            "batch.kubernetes.io/job-name": SWEEP,
            "controller-uid": "u-1",
            "job-name": SWEEP,
        }
        spec = copy.deepcopy(template["spec"])
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}}
        spec["template"]["metadata"]["labels"].update(uid)
        owner = {"apiVersion": "batch/v1", "kind": "CronJob", "name": self.cronjob["metadata"]["name"], "uid": "cj-1"}
        metadata = {
            "name": SWEEP,
            "namespace": NS,
            "uid": "u-1",
            "labels": {**template["metadata"]["labels"], **uid},
            "annotations": {"cronjob.kubernetes.io/instantiate": "manual"},
            "ownerReferences": [owner],
        }
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": spec}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("emulated-sweep")
    (root / "suite.json").write_text(json.dumps(SUITE))
    context = {**CONTEXT, "sweep.suite": str(root / "suite.json")}
    config = load_config({**cdk_context([]), **context}, {})
    plan = serving_plan(config, BUCKET)
    bench = benchmark_spec(config, plan)
    spec = sweep_spec(config, plan, bench)
    objects = sweep_objects(spec)
    maps = {o["metadata"]["name"]: o["data"] for o in [*objects, code_config_map(bench)] if o["kind"] == "ConfigMap"}
    (cronjob,) = [o for o in objects if o["kind"] == "CronJob" and o["metadata"]["name"] == SWEEP_CRONJOB]
    # The controller's settings as synth wrote them for its pod (charts/sweep_control.py).
    (settings,) = [json.loads(data[sweep_control.SETTINGS]) for name, data in maps.items() if name.startswith(f"{sweep_control.NAME}-")]
    server = f"http://{LOCALHOST}:{spec.units[0].service.serving.port}"
    for url in moto_server():
        yield Sweep(root, context, settings, maps, cronjob, server, bench.bundle, url)


def _s3(sweep: Sweep):  # type: ignore[no-untyped-def]
    return boto3.session.Session(**FAKE_CREDENTIALS).client("s3", region_name=REGION, endpoint_url=sweep.moto_url)


def _fresh_bucket(sweep: Sweep):  # type: ignore[no-untyped-def]
    """moto's state reset, the results bucket made again; its client."""
    urllib.request.urlopen(urllib.request.Request(f"{sweep.moto_url}/moto-api/reset", method="POST"), timeout=10).read()
    s3 = _s3(sweep)
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
    return s3


def _objects(s3, prefix: str) -> dict[str, bytes]:  # type: ignore[no-untyped-def]
    keys = [
        o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix) for o in page.get("Contents", [])
    ]
    return {key[len(prefix) :]: s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() for key in keys}


def _documents(objects: dict[str, bytes]) -> list[dict]:
    """The stage documents among a sweep's objects, in stage order."""
    found = {int(k.rsplit("-", 1)[1][: -len(".json")]): json.loads(v) for k, v in objects.items() if k.startswith(f"{STAGES}after-stage-")}
    return [found[n] for n in sorted(found)]


def _stored_documents(s3, prefix: str) -> list[dict]:  # type: ignore[no-untyped-def]
    """The stage documents stored under a sweep's ``prefix``: only its stages/ folder read, not every point's files again."""
    return _documents({STAGES + key: body for key, body in _objects(s3, prefix + STAGES).items()})


class Pods(Node):
    """The node of the test's cluster; with ``recorded`` (a sweep's stored objects), a pod whose every
    point is recorded stores those bytes instead of measuring again (the kill runs: the same
    measurements, so exactly the same documents are expected)."""

    def __init__(self, sweep: Sweep, root: Path, recorded: dict[str, bytes] | None = None) -> None:
        def fetch_code(container: dict, host) -> None:  # type: ignore[no-untyped-def]
            """The fetch-code init container's outcome (tests/test_pod_code.py runs its script): the zip, its sha256 checked."""
            expected = {e["name"]: e.get("value") for e in container["env"]}[BUNDLE_SHA256_ENV]
            assert hashlib.sha256(sweep.bundle).hexdigest() == expected
            host(code.ZIP).write_bytes(sweep.bundle)

        # The client polls the server's /health every SWEEP_POLL_SECONDS (5 in the pod); the launcher looks
        # at it and the signal folder every --poll seconds (1): both shortened, nothing else changed.
        env = {**sweep.env(), "SWEEP_POLL_SECONDS": "0.05"}
        super().__init__(
            root, sweep.config_maps, sweep.server, emulator, env, args={"vllm": ["--poll", "0.05"]}, init={code.FETCH_CONTAINER: fetch_code}
        )
        self.sweep, self.recorded, self.replayed = sweep, recorded or {}, []

    def run_pod(self, job: dict, index: int) -> int:
        points = self._points(job, index)
        if points and all(any(k.startswith(f"{p}/") for k in self.recorded) for p in points):
            s3 = _s3(self.sweep)
            for key, body in self.recorded.items():
                if key.split("/", 1)[0] in points:
                    s3.put_object(Bucket=BUCKET, Key=PREFIX + key, Body=body)
            self.replayed.append(f"{job['metadata']['name']}-{index}")
            return 0
        return super().run_pod(job, index)

    def _points(self, job: dict, index: int) -> list[str]:
        """The point ids the pod's unit measures: its completion index through SWEEP_STAGE_UNITS into units.json."""
        (units_map,) = [d["units.json"] for d in self.config_maps.values() if "units.json" in d]
        containers = job["spec"]["template"]["spec"]["containers"]
        env = {e["name"]: e.get("value") for c in containers for e in c.get("env", [])}
        unit = json.loads(units_map)[int(env["SWEEP_STAGE_UNITS"].split(",")[index])]
        return [p["point_id"] for p in unit["points"]]


class Cluster:
    """The Jobs API stand-in with the sweep's first Job in it, each Job's pods run on ``pods`` in a
    thread of their own. ``gated``: a Job's pods wait (the Job running, nothing stored) until ``finish(name)``."""

    def __init__(self, sweep: Sweep, pods: Pods, hold_posts: bool = False, gated: bool = False) -> None:
        self.sweep, self.pods, self.gated = sweep, pods, gated
        self.api = JobsStandIn(NS, TOKEN, [sweep.first_job()], on_create=self.run, hold_posts=hold_posts)
        self.gates: dict[str, threading.Event] = {}
        self.errors: list[str] = []

    def run(self, job: dict) -> None:
        name = job["metadata"]["name"]
        gate = self.gates.setdefault(name, threading.Event())
        if not self.gated:
            gate.set()

        def pods() -> None:
            gate.wait(300)
            try:
                status = self.pods.run_job(job)
            except Exception as error:  # noqa: BLE001 - the Job fails, the test says why
                self.errors.append(f"job {name}: {type(error).__name__}: {error}")
                status = FAILED
            self.api.set_status(name, status)

        threading.Thread(target=pods, daemon=True).start()

    def finish(self, name: str) -> None:
        self.gates.setdefault(name, threading.Event()).set()

    def __enter__(self) -> Cluster:
        self.api.start()
        self.run(self.api.jobs[SWEEP])  # the sweep's first Job, started by hand (docs/sweeps.md)
        return self

    def __exit__(self, *exc: object) -> None:
        self.pods.stop()  # a pod still running (the test failed): its processes end here
        for gate in self.gates.values():
            gate.set()
        self.api.__exit__(*exc)


class Controller:
    """``specbench sweep control`` as the controller's pod runs it (its settings file, its service
    account's token and namespace), polling every ``poll_s``; its output lines as they come."""

    def __init__(self, sweep: Sweep, root: Path, url: str, poll_s: float = 0.1) -> None:
        settings, account = root / "settings.json", root / "account"
        settings.write_text(json.dumps(sweep.settings))
        account.mkdir(exist_ok=True)
        (account / "token").write_text(TOKEN + "\n")
        (account / "namespace").write_text(NS)
        argv = [sys.executable, "-m", "specbench", "sweep", "control", "--sweep-id", SWEEP, "--results", f"s3://{BUCKET}/{RESULTS}"]
        argv += ["--settings", str(settings), "--api-url", url, "--account", str(account), "--poll-seconds", str(poll_s)]
        env = {**_environ(), **sweep.env()}
        self.process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:  # type: ignore[union-attr]
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def next_line(self, timeout_s: float) -> str | None:
        """The next line; "" when none came within the time; None at the end of its output."""
        try:
            return self.lines.get(timeout=timeout_s)
        except queue.Empty:
            return ""

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def finish(self) -> tuple[list[str], str]:
        lines = []
        while (line := self.next_line(300)) is not None:
            assert line != "", "the controller printed nothing for 300 s"
            lines.append(line)
        self.process.wait(timeout=30)
        return lines, self.process.stderr.read()  # type: ignore[union-attr]


def _environ() -> dict[str, str]:
    """This environment without what would point the subprocesses elsewhere: another account's region, an endpoint."""
    drop = {"CDK_DEFAULT_ACCOUNT", "CDK_DEFAULT_REGION", "AWS_PROFILE", "AWS_ENDPOINT_URL"}
    return {k: v for k, v in os.environ.items() if k not in drop} | {"PYTHONPATH": str(ROOT)}


@dataclasses.dataclass(frozen=True)
class Measured:
    """An uninterrupted controller's sweep: what it stored, what it printed, the Jobs it created."""

    objects: dict[str, bytes]  # under results/sweeps/<id>/
    lines: list[str]
    posts: dict[str, int]
    pods: list[str]

    @property
    def documents(self) -> list[dict]:
        return _documents(self.objects)


def _measure(sweep: Sweep, root: Path) -> Measured:
    """The sweep run to its end by one controller, its pods measuring the emulators."""
    root.mkdir()
    s3 = _fresh_bucket(sweep)
    pods = Pods(sweep, root)
    with Cluster(sweep, pods) as cluster:
        # Each poll lists and reads every stored point (60 s apart in the cluster): here once a second,
        # not to take the CPU the pods measure with (a stage's pods run for seconds: a few polls each).
        controller = Controller(sweep, root, cluster.api.url, poll_s=1.0)
        try:
            lines, err = controller.finish()
        finally:
            if controller.process.poll() is None:  # the test failed first
                controller.kill()
        posts = dict(cluster.api.posts)
    assert not cluster.errors, cluster.errors
    assert lines and lines[-1].startswith(f"sweep control: sweep {SWEEP}: every decision is made"), (lines[-5:], err)
    return Measured(_objects(s3, PREFIX), lines, posts, pods.pods)


def _comparable(doc: dict) -> dict:
    """A document without where it was stored (the next stage's command names the results folder)."""
    return {**doc, "next_stage": {k: v for k, v in doc["next_stage"].items() if k != "command"}}


def _by_hand(sweep: Sweep, objects: dict[str, bytes], root: Path) -> list[dict]:
    """``specbench sweep next`` as a person runs it from a checkout: stage 1's points stored, decide,
    the proposed stage's points stored (the same bytes the controller's stages stored), again, to the end."""
    s3, prefix = _s3(sweep), "by-hand/"
    proposed = {p for doc in _documents(objects) for p in doc["next_stage"]["points"]}
    points = {key.split("/", 1)[0] for key in objects if not key.startswith(STAGES)}
    stage = points - proposed  # the first Job's points: every point no decision proposed
    argv = [sys.executable, "-m", "specbench", "sweep", "next", "--sweep-id", SWEEP, "--results", f"s3://{BUCKET}/{prefix}"]
    argv += [arg for key, value in sweep.context.items() for arg in ("-c", f"{key}={value}")]
    docs: list[dict] = []
    for _ in range(len(points)):
        for key, body in objects.items():
            if key.split("/", 1)[0] in stage:
                s3.put_object(Bucket=BUCKET, Key=f"{prefix}sweeps/{SWEEP}/{key}", Body=body)
        done = subprocess.run(argv, cwd=root, env={**_environ(), **sweep.env()}, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        docs = _stored_documents(s3, f"{prefix}sweeps/{SWEEP}/")
        stage = set(docs[-1]["next_stage"]["points"])
        if not stage:
            assert "every decision is made" in done.stdout
            return docs
    raise AssertionError(f"sweep next did not finish: {docs[-1]['next_stage']}")


# One test: the kill runs replay the uninterrupted sweep's measurements (as two tests they would need
# one worker, an xdist_group, or each worker would measure the sweep again).
@pytest.mark.servers  # real-time loopback servers: scheduled first (tests/conftest.py)
def test_the_controller_ends_with_sweep_nexts_decision_on_emulated_stages_even_killed_between_steps(sweep, tmp_path):
    measured = _measure(sweep, tmp_path / "measured")
    docs = measured.documents
    assert len(docs) >= 2, "at least one stage after the first: a Job the controller created"
    # Every stage a Job, each created once: the first by hand, the others by the controller.
    stages = [f"{SWEEP}-s{d['next_stage']['stage']}" for d in docs[:-1]]
    assert measured.posts == dict.fromkeys(stages, 1)
    assert {p.rsplit("-", 1)[0] for p in measured.pods} == {SWEEP, *stages}
    # The same documents as sweep next by hand on the same points, stage after stage.
    _fresh_bucket(sweep)
    by_hand = _by_hand(sweep, measured.objects, tmp_path)
    assert [_comparable(d) for d in docs] == [_comparable(d) for d in by_hand]
    # And the truth's best configuration, measured (the pods measured what the emulators served).
    (decision,) = docs[-1]["decisions"].values()
    best = truth_best(sweep.settings["sweep_decision"])
    assert decision["made"] and best in (decision["best"], *decision["ties"]), decision
    never = {e["config"] for e in decision["estimates"] if not e["measured"]}
    assert never and best not in never  # the staged sweep left configurations unmeasured, the best not among them
    _killed_between_steps(sweep, measured, tmp_path / "killed")


def _killed_between_steps(sweep: Sweep, measured: Measured, root: Path) -> None:
    """Each run of the controller is killed (SIGKILL) right after a step it has not been killed after
    before (waiting for a Job, deciding, waiting for the Job it created), or with its first create in
    flight (the Job stored and started, the answer never heard: the state a kill right after the create
    also leaves, since the controller keeps no state of its own), and started again, until it ends.
    The pods store the uninterrupted sweep's measurements again: the same documents are expected."""
    root.mkdir()
    s3 = _fresh_bucket(sweep)
    pods = Pods(sweep, root, measured.objects)
    killed: list[str] = []
    with Cluster(sweep, pods, hold_posts=True, gated=True) as cluster:
        for _ in range(12):
            controller = Controller(sweep, root, cluster.api.url)
            while True:
                if cluster.api.posted.is_set() and cluster.api.hold_posts:
                    controller.kill()
                    killed.append("create in flight")
                    cluster.api.hold_posts = False
                    cluster.run(cluster.api.jobs[cluster.api.created[-1]])  # the Job exists: its pods run
                    break
                line = controller.next_line(0.05)
                if line is None:  # it ended by itself
                    break
                said = line.removeprefix("sweep control: ")
                step = said.split(": ")[0]  # "decided after stage 1: <where>": the step without where
                if said != line and step not in killed and "every decision is made" not in said:
                    controller.kill()
                    killed.append(step)
                    if step.startswith("waiting for job "):  # seen running once: now its Job may finish
                        cluster.finish(step.split()[3])
                    break
            controller.process.wait(timeout=30)
            if controller.process.returncode == 0:
                break
            assert controller.process.returncode == -signal.SIGKILL, controller.process.stderr.read()
        else:
            raise AssertionError(f"the controller did not finish: killed after {killed}")
    expected = [f"waiting for job {SWEEP} (stage 1)", "decided after stage 1"]
    for stage in range(2, len(measured.documents) + 1):  # each later stage: created, waited for, decided after
        expected += ["create in flight" if stage == 2 else f"created job {SWEEP}-s{stage} (stage {stage})"]
        expected += [f"waiting for job {SWEEP}-s{stage} (stage {stage})", f"decided after stage {stage}"]
    assert killed == expected
    assert dict(cluster.api.posts) == measured.posts and not cluster.api.conflicts  # every stage created once
    assert [_comparable(d) for d in _stored_documents(s3, PREFIX)] == [_comparable(d) for d in measured.documents]
    assert sorted(pods.replayed) == sorted(measured.pods)  # the same measurements as the uninterrupted sweep
