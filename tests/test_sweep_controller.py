"""The staged sweep's in-cluster controller (issue 36) against a loopback stand-in of the Kubernetes
Jobs API: a driver "runs" each created stage Job by storing its points (a known truth, as
tests/test_sweep_next.py) and marking it Complete. The controller ends with the decision
``sweep next`` makes on the same points, never creates a stage twice, and continues after SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from charts.sweep_control import NAME as CONTROL
from charts.sweep_control import control_rbac
from config.sweep_decision import decision_settings
from specbench import cli
from specbench.commands import checkout
from specbench.outputs import sweep_controller as controller
from specbench.outputs.stage_job import STAGE_UNITS_ENV
from specbench.results.store import LocalStore
from specbench.sweep.jobs_api import JobsApi, JobsApiError, job_state
from specbench.sweep.staged import RESAMPLES
from tests.jobs_standin import COMPLETE, JobsStandIn
from tests.sweep_data import store_points
from tests.test_sweep_next import ALL, CONTEXT

ROOT = Path(__file__).resolve().parents[1]
NS, TOKEN, SWEEP = "specdecode", "t0ken", "sw"
STAGE_ONE = {"q17-k7", "q06-k6"}  # config/sweep.py stage_one_variants for CONTEXT (test_sweep_next)


def first_job() -> dict:
    """Stage 1 as the API returns it: the CronJob's Job with the labels and selector the system adds."""
    uid = {"batch.kubernetes.io/controller-uid": "u-1", "batch.kubernetes.io/job-name": SWEEP, "controller-uid": "u-1", "job-name": SWEEP}
    sweep_id = {"name": "SWEEP_ID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['batch.kubernetes.io/job-name']"}}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": SWEEP, "namespace": NS, "uid": "u-1", "labels": {"app.kubernetes.io/name": "specbench-sweep", **uid}},
        "spec": {
            "completionMode": "Indexed",
            "completions": 4,
            "parallelism": 2,
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}},
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": "specbench-sweep", **uid}},
                "spec": {"initContainers": [{"name": "vllm", "env": []}], "containers": [{"name": "client", "env": [sweep_id]}]},
            },
        },
        "status": COMPLETE,
    }


class StandIn(JobsStandIn):
    """The Jobs API on 127.0.0.1 (tests/jobs_standin.py: GET/POST of one namespace's Jobs, 409
    AlreadyExists, 401 without the token) whose created Jobs run at once (``run``)."""

    def __init__(self, store: LocalStore, catalogue: list[str], hold_posts: bool = False, ttl: bool = False):
        super().__init__(NS, TOKEN, [first_job()], on_create=self.run, hold_posts=hold_posts, ttl=ttl)
        self.store, self.catalogue = store, catalogue
        self.start()

    def run(self, job: dict) -> None:
        """The driver: the stage's pods measure their units (catalogue index i -> variant i - 1) and finish."""
        env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
        names = {self.catalogue[int(i) - 1] for i in env[STAGE_UNITS_ENV].split(",")}
        assert env["SWEEP_ID"] == SWEEP
        store_points(self.store, SWEEP, [p for p in ALL if not p.variant.is_baseline and p.variant.name in names])
        job["status"] = COMPLETE


@pytest.fixture
def settings():
    args = cli.parser().parse_args(["sweep", "next", "--sweep-id", SWEEP, "--results", ".", *CONTEXT])
    return decision_settings(checkout.checkout_config(args), 0.0)


def _stage_one(store: LocalStore) -> None:
    store_points(store, SWEEP, [p for p in ALL if p.variant.is_baseline or p.variant.name in STAGE_ONE])


def _sweep_next_docs(tmp_path: Path) -> list[dict]:
    """``sweep next`` by hand: decide, store the proposed stage's points, again, to the end."""
    store = LocalStore(tmp_path)
    _stage_one(store)
    docs = []
    for _ in range(12):
        code = cli.main(["sweep", "next", "--sweep-id", SWEEP, "--results", str(tmp_path), "--node-price-per-hour", "0", *CONTEXT])
        assert code == 0
        docs.append(json.loads((tmp_path / f"sweeps/{SWEEP}/stages/after-stage-{len(docs) + 1}.json").read_text()))
        names = {v["name"] for v in docs[-1]["next_stage"]["variants"]}
        if not names:
            return docs
        store_points(store, SWEEP, [p for p in ALL if p.variant.name in names])
    raise AssertionError("sweep next did not finish")


@pytest.fixture(scope="module")
def expected(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """``sweep next``'s documents, made once: four tests compare with them and none changes them
    (its decisions bootstrap: ~0.15 s of CPU each time it is made)."""
    return _sweep_next_docs(tmp_path_factory.mktemp("by-hand"))


def _comparable(doc: dict) -> dict:
    """A document without where it was stored (the command names the results folder)."""
    return {**doc, "next_stage": {k: v for k, v in doc["next_stage"].items() if k != "command"}}


def _stored_docs(root: Path) -> list[dict]:
    files = sorted((root / f"sweeps/{SWEEP}/stages").glob("after-stage-*.json"), key=lambda p: int(p.stem.rsplit("-", 1)[1]))
    return [json.loads(p.read_text()) for p in files]


def _account(tmp_path: Path) -> Path:
    account = tmp_path / "account"
    account.mkdir()
    (account / "token").write_text(TOKEN + "\n")
    (account / "namespace").write_text(NS)
    return account


def test_the_settings_round_trip_into_the_inputs_sweep_next_decides_with(settings):
    inputs = controller.inputs_from_settings(json.loads(json.dumps(settings)))
    assert [v.name for v in inputs.variants][:2] == ["q17-k3", "q17-k4"] and inputs.slots == 2 and inputs.namespace == NS
    assert {v.name for v in inputs.stage_one} == STAGE_ONE and inputs.objective.price_per_node_hour is None
    for key, bad in (("slots", "2"), ("variants", []), ("objective", {"weights": {}})):
        with pytest.raises(controller.ControlError, match=f"settings.{key}"):
            controller.inputs_from_settings({**settings, key: bad})


def test_the_controller_reaches_sweep_nexts_decision_creating_each_stage_once(tmp_path, settings, expected):
    store = LocalStore(tmp_path / "cluster")
    _stage_one(store)
    stand_in = StandIn(store, [v["name"] for v in settings["variants"]])
    api = JobsApi(stand_in.url, NS, TOKEN)
    lines: list[str] = []
    outcome = controller.run(api, store, SWEEP, controller.inputs_from_settings(settings), poll_s=0.01, max_steps=200, log=lines.append)
    assert outcome.state == controller.DONE, lines
    got = _stored_docs(tmp_path / "cluster")
    assert [_comparable(d) for d in got] == [_comparable(d) for d in expected] and len(got) >= 2
    assert stand_in.created == [f"{SWEEP}-s{d['next_stage']['stage']}" for d in expected[:-1]] and not stand_in.conflicts
    made = stand_in.jobs[f"{SWEEP}-s2"]
    assert made["metadata"]["labels"] == {"app.kubernetes.io/name": "specbench-sweep"}  # the system's labels left to the system
    assert made["spec"]["template"]["metadata"]["labels"] == {"app.kubernetes.io/name": "specbench-sweep"}
    (role,) = [o for o in control_rbac(NS) if o["kind"] == "Role"]
    assert stand_in.verbs <= set(role["rules"][0]["verbs"])  # the controller needs no more than its Role grants
    # Run again on the finished sweep: nothing more is created.
    assert (
        controller.run(api, store, SWEEP, controller.inputs_from_settings(settings), poll_s=0.01, max_steps=5, log=lines.append).state
        == "done"
    )
    assert len(stand_in.created) == len(expected) - 1


def test_finished_jobs_deleted_by_their_ttl_neither_stop_nor_repeat_a_stage(tmp_path, settings, expected):
    store = LocalStore(tmp_path / "cluster")
    _stage_one(store)
    stand_in = StandIn(store, [v["name"] for v in settings["variants"]], ttl=True)
    outcome = controller.run(
        JobsApi(stand_in.url, NS, TOKEN), store, SWEEP, controller.inputs_from_settings(settings), poll_s=0.01, log=lambda _: None
    )
    assert outcome.state == controller.DONE, outcome.message
    assert [_comparable(d) for d in _stored_docs(tmp_path / "cluster")] == [_comparable(d) for d in expected]
    assert stand_in.created == [f"{SWEEP}-s{d['next_stage']['stage']}" for d in expected[:-1]] and SWEEP not in stand_in.jobs
    assert json.loads(store.read_text(controller.template_key(SWEEP)))["metadata"]["uid"] == "u-1"  # stage 2 was made from it


def test_the_budget_stops_the_sweep_before_a_stage_over_it(tmp_path, settings):
    store = LocalStore(tmp_path)
    _stage_one(store)
    stand_in = StandIn(store, [v["name"] for v in settings["variants"]])
    tight = {**settings, "budget_node_hours": settings["plan"]["stage_one"] + 1e-6}  # stage 1 fits, nothing more
    outcome = controller.run(
        JobsApi(stand_in.url, NS, TOKEN), store, SWEEP, controller.inputs_from_settings(tight), poll_s=0.01, log=lambda _: None
    )
    assert outcome.state == controller.BUDGET and "over sweep.budget_node_hours" in outcome.message
    assert stand_in.created == [] and len(_stored_docs(tmp_path)) == 1


def test_a_failed_stage_job_stops_the_controller(tmp_path, settings):
    store = LocalStore(tmp_path)
    store_points(store, SWEEP, [p for p in ALL if p.variant.is_baseline])  # stage 1's variants never stored
    stand_in = StandIn(store, [v["name"] for v in settings["variants"]])
    stand_in.jobs[SWEEP]["status"] = {"conditions": [{"type": "Failed", "status": "True"}]}
    outcome = controller.run(
        JobsApi(stand_in.url, NS, TOKEN), store, SWEEP, controller.inputs_from_settings(settings), poll_s=0.01, log=lambda _: None
    )
    assert outcome.state == controller.FAILED and f"Job {SWEEP} failed" in outcome.message and not _stored_docs(tmp_path)


def test_the_api_client_speaks_the_jobs_api_and_keeps_the_token_off_plain_http(tmp_path):
    stand_in = StandIn(LocalStore(tmp_path), ["a"])
    assert job_state(JobsApi(stand_in.url, NS, TOKEN).get(SWEEP)) == "complete" and JobsApi(stand_in.url, NS, TOKEN).get("nope") is None
    with pytest.raises(JobsApiError, match="401"):
        JobsApi(stand_in.url, NS, "wrong").get(SWEEP)
    assert JobsApi(stand_in.url, NS, TOKEN).create({"metadata": {"name": SWEEP}}) is False  # 409: already started
    with pytest.raises(ValueError, match="--api-url"):
        JobsApi("http://kubernetes.default.svc", NS, TOKEN)
    assert job_state({"status": {"conditions": [{"type": "Complete", "status": "False"}]}}) == "running"


# The controller as the pod runs it, but SIGKILLing itself right after its first step's line: a kill
# between two steps at exactly that point, whatever the machine's load (a kill sent by the test after
# reading the line could land a step later on a busy machine).
KILL_AFTER_FIRST_STEP = """
import os, signal, sys
from specbench.outputs import sweep_controller as c
run = c.run
def first_step_then_kill(*args, **kwargs):
    log = kwargs["log"]
    def logged(line):
        log(line)
        if "every decision is made" not in line:
            os.kill(os.getpid(), signal.SIGKILL)
    return run(*args, **{**kwargs, "log": logged})
c.run = first_step_then_kill
sys.exit(c.main_control(sys.argv[1:]))
"""


def _controller(tmp_path: Path, stand_in: StandIn, settings_file: Path, kill_after_first_step: bool = False) -> subprocess.Popen:
    argv = [
        *("--sweep-id", SWEEP, "--results", str(tmp_path / "cluster"), "--settings", str(settings_file)),
        *("--api-url", stand_in.url, "--account", str(tmp_path / "account"), "--poll-seconds", "0.05", "--max-steps", "400"),
    ]
    code = "import sys; from specbench.outputs.sweep_controller import main_control; sys.exit(main_control(sys.argv[1:]))"
    if kill_after_first_step:
        code = KILL_AFTER_FIRST_STEP
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", code, *argv], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_sigkill_between_any_two_steps_and_inside_a_create_loses_nothing_and_repeats_nothing(tmp_path, settings, expected):
    store = LocalStore(tmp_path / "cluster")
    _stage_one(store)
    _account(tmp_path)
    settings_file = tmp_path / "settings.json"
    settings_file.write_text(json.dumps({"sweep_decision": settings}))
    stand_in = StandIn(store, [v["name"] for v in settings["variants"]])
    kills, finished, did = 0, None, []
    for _ in range(40):  # each run is killed right after its first step: a kill between every pair of steps
        process = _controller(tmp_path, stand_in, settings_file, kill_after_first_step=True)
        line = process.stdout.readline()
        process.wait(timeout=60)
        if process.returncode == -signal.SIGKILL:
            assert line.startswith("sweep control: ") and "every decision is made" not in line, line
            kills += 1
            did.append(line.split(": ", 1)[1].split(":")[0].strip())
        if process.returncode == 0:
            finished = process
            break
        assert process.returncode == -signal.SIGKILL, process.stderr.read()
    # decide after stage 1, create stage 2's Job, decide after it, ...: every step once, then done
    assert finished is not None and kills == 2 * len(expected) - 1, did
    assert did[:2] == ["decided after stage 1", f"created job {SWEEP}-s2 (stage 2)"]
    assert [_comparable(d) for d in _stored_docs(tmp_path / "cluster")] == [_comparable(d) for d in expected]
    assert stand_in.created == [f"{SWEEP}-s{d['next_stage']['stage']}" for d in expected[:-1]]


def test_sigkill_while_the_create_is_in_flight(tmp_path, settings):
    store = LocalStore(tmp_path / "cluster")
    _stage_one(store)
    _account(tmp_path)
    settings_file = tmp_path / "settings.json"
    settings_file.write_text(json.dumps(settings))
    stand_in = StandIn(store, [v["name"] for v in settings["variants"]], hold_posts=True)
    process = _controller(tmp_path, stand_in, settings_file)
    assert stand_in.posted.wait(60), process.stderr.read() if process.poll() is not None else "no POST"
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    stand_in.hold_posts = False
    again = _controller(tmp_path, stand_in, settings_file)
    assert again.stdout.readline().strip() == f"sweep control: waiting for job {SWEEP}-s2 (stage 2)"  # found, not created again
    stand_in.run(stand_in.jobs[f"{SWEEP}-s2"])  # its pods run and store their points
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    assert stand_in.created == [f"{SWEEP}-s2"] and not stand_in.conflicts
    assert "every decision is made" in out


def test_the_controllers_role_grants_create_and_read_of_jobs_in_its_namespace_only():
    account, role, binding = control_rbac(NS)
    assert account == {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": account["metadata"]}
    assert account["metadata"]["name"] == CONTROL and account["metadata"]["namespace"] == NS
    assert role["kind"] == "Role" and role["metadata"]["namespace"] == NS  # a Role: this namespace, never a ClusterRole
    assert role["rules"] == [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "get", "list", "watch"]}]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": CONTROL}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": CONTROL, "namespace": NS}]
    assert binding["metadata"]["namespace"] == NS


def test_bad_settings_or_flags_are_one_line_and_exit_2(tmp_path, settings, capsys):
    _account(tmp_path)
    bad = tmp_path / "settings.json"
    bad.write_text(json.dumps({"sweep_decision": {**settings, "slots": "2"}}))
    common = ["--sweep-id", SWEEP, "--results", str(tmp_path), "--account", str(tmp_path / "account"), "--api-url", "http://127.0.0.1:9"]
    assert controller.main_control([*common, "--settings", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("specbench: sweep control: settings.slots: expected int") and err.count("\n") == 1
    assert controller.main_control([*common, "--settings", str(tmp_path / "none.json")]) == 2
    with pytest.raises(SystemExit) as exit_:
        controller.main_control([*common, "--settings", str(bad), "--poll-seconds", "0"])
    assert exit_.value.code == 2 and "--poll-seconds" in capsys.readouterr().err


def test_the_controller_runs_on_the_pods_code_alone():
    """The pod has the package and its requirements, no config/ and no report libraries."""
    code = (
        "import sys; import specbench.outputs.sweep_controller, specbench.outputs.sweep_report; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('config', 'matplotlib', 'numpy', 'charts')); "
        "sys.exit(', '.join(bad) or None)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def _to_stage_two(tmp_path: Path, settings: dict, store: LocalStore) -> tuple[StandIn, JobsApi, list[str]]:
    """Decide after stage 1 and create stage 2's Job, whose points the driver stores: the Job, the API, those points."""
    stand_in = StandIn(store, [v["name"] for v in settings["variants"]])
    api, inputs = JobsApi(stand_in.url, NS, TOKEN), controller.inputs_from_settings(settings)
    assert controller.step(api, store, SWEEP, inputs, SWEEP, RESAMPLES)[0].startswith("decided after stage 1")
    assert controller.step(api, store, SWEEP, inputs, SWEEP, RESAMPLES)[0] == f"created job {SWEEP}-s2 (stage 2)"
    return stand_in, api, json.loads(store.read_text(f"sweeps/{SWEEP}/stages/after-stage-1.json"))["next_stage"]["points"]


def test_points_still_being_written_are_waited_for_not_decided_on(tmp_path, settings):
    """A pod's point folder appears, run.json "running", as soon as its run starts: while the stage's
    Job runs, the controller waits (it decided, and stopped the sweep with "stage 2 has not finished")."""
    store = LocalStore(tmp_path)
    _stage_one(store)
    stand_in, api, points = _to_stage_two(tmp_path, settings, store)
    stand_in.set_status(f"{SWEEP}-s2", {})  # its pods still run
    for point in points:
        run = json.loads(store.read_text(f"sweeps/{SWEEP}/{point}/run.json"))
        store.write_text(f"sweeps/{SWEEP}/{point}/run.json", json.dumps({**run, "status": "running"}))
    did, outcome = controller.step(api, store, SWEEP, controller.inputs_from_settings(settings), SWEEP, RESAMPLES)
    assert (did, outcome) == (f"waiting for job {SWEEP}-s2 (stage 2)", None)
    assert not (tmp_path / f"sweeps/{SWEEP}/stages/after-stage-2.json").exists()


class _StaleListing(LocalStore):
    """A listing of the sweep's folders taken while a pod finished: its last file (the last test
    case's acceptance) not listed yet, its run.json, read after, already "completed"."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.hidden = ""

    def keys(self, prefix: str = "") -> list[str]:
        found, hidden = super().keys(prefix), self.hidden
        if hidden and prefix == f"sweeps/{SWEEP}/":
            self.hidden = ""  # once: a later listing sees what is stored
            return [key for key in found if key != hidden]
        return found


def test_the_decision_reads_the_points_again_after_they_finished(tmp_path, settings, expected):
    """The step's first read may list a point's files before its last ones were written and read its
    run.json "completed" after: the decision is made on a read taken after, so it is sweep next's."""
    store = _StaleListing(tmp_path / "cluster")
    _stage_one(store)
    _, api, points = _to_stage_two(tmp_path, settings, store)
    store.hidden = store.keys(f"sweeps/{SWEEP}/{points[0]}/acceptance/")[-1]
    did, outcome = controller.step(api, store, SWEEP, controller.inputs_from_settings(settings), SWEEP, RESAMPLES)
    assert did.startswith("decided after stage 2") and outcome is None and not store.hidden
    assert _comparable(_stored_docs(tmp_path / "cluster")[1]) == _comparable(expected[1])
