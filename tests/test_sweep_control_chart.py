"""The staged sweep's controller as the sweep chart builds it (charts/sweep_control.py), rendered
in-process (no CDK synth): only with sweep.strategy=staged, its Role, its settings (what `sweep next`
decides with), a restricted pod on the system nodes that alone asks for a service account token, its
egress (DNS, HTTPS, the Pod Identity agent), its failure policy, and the script its container runs."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
from netpol import Pod, allowed, connects, selects
from pss import highest_level, violations

from charts import benchmark, benchmark_spec, serving_plan
from charts import sweep_control as control
from charts.network import POD_IDENTITY_AGENT, network_policies
from charts.spec import SPECBENCH_DIR
from charts.sweep import sweep_objects, sweep_spec
from config import catalog, layout, load_config
from config.sweep import stage_one_variants
from config.sweep_decision import decision_settings
from conftest import BUCKET
from specbench import cli
from specbench.outputs import sweep_controller

Q17 = "Qwen/Qwen3-1.7B"
NS = "specdecode"
SWEEP = {
    "neuron_nodes.desired_size": 2,
    "neuron_nodes.max_size": 2,
    "sweep.variants": f"q17-k5:{Q17}:5,q17-k7:{Q17}:7,q06-k6:Qwen/Qwen3-0.6B:6",
    "sweep.strategy": "staged",
}


def build(**context):
    config = load_config({**SWEEP, **context}, {})
    plan = serving_plan(config, BUCKET)
    return config, sweep_objects(sweep_spec(config, plan, benchmark_spec(config, plan)))


@pytest.fixture(scope="module")
def staged():
    return build(**{"sweep.start_on_deploy": "true"})


def _named(objects, kind, name):
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def _controls(objects):
    """The controller's objects: the last ones of the chart, from its ServiceAccount on."""
    kinds = [(o["kind"], o["metadata"]["name"]) for o in objects]
    return objects[kinds.index(("ServiceAccount", control.NAME)) :]


def _control_job(objects):
    (job,) = [o for o in objects if o["kind"] == "Job" and o["metadata"]["name"].endswith(control.SUFFIX)]
    return job


def _container(pod_spec):
    (container,) = pod_spec["containers"]
    return container


def test_only_a_staged_sweep_has_a_controller(staged):
    _, grid = build(**{"sweep.strategy": "grid", "sweep.start_on_deploy": "true"})
    assert not [o for o in grid if control.NAME in o["metadata"]["name"]]
    _, objects = staged
    sweep_map = objects[0]["metadata"]["name"]  # specbench-sweep-<hash>, the sweep Job's name too
    digest = sweep_map.rsplit("-", 1)[1]
    controls = _controls(objects)
    assert not [o for o in objects[: -len(controls)] if control.NAME in o["metadata"]["name"]]
    assert [(o["kind"], o["metadata"]["name"]) for o in controls] == [
        ("ServiceAccount", control.NAME),
        ("Role", control.NAME),
        ("RoleBinding", control.NAME),
        ("ConfigMap", f"{control.NAME}-{digest}"),
        ("CronJob", control.NAME),
        ("Job", f"{sweep_map}-control"),  # after the sweep's Job, whose name is the sweep id
    ]
    assert _named(objects, "Job", sweep_map)["spec"]["completions"] == 4  # stage 1: baseline, two drafts' middles, baseline
    _, manual = build()  # sweep.start_on_deploy=false: the CronJob is the controller's template, no Job
    assert [o["kind"] for o in manual if control.NAME in o["metadata"]["name"]] == [
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "CronJob",
    ]
    cron = _named(manual, "CronJob", control.NAME)
    assert cron["spec"]["suspend"] is True and cron["spec"]["jobTemplate"]["spec"] == _control_job(objects)["spec"]


@pytest.mark.parametrize("version", catalog.SUPPORTED_KUBERNETES_VERSIONS)
def test_every_controller_object_passes_strict_schema_validation(staged, version):
    for obj in _controls(staged[1]):
        kubernetes_validate.validate(obj, f"{version}.0", strict=True)


def test_the_role_grants_create_and_read_of_jobs_and_binds_the_pods_account(staged):
    _, objects = staged
    role, binding = _named(objects, "Role", control.NAME), _named(objects, "RoleBinding", control.NAME)
    assert role["metadata"]["namespace"] == NS
    assert role["rules"] == [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "get", "list", "watch"]}]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": control.NAME, "namespace": NS}]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": control.NAME}
    assert not [o for o in objects if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    pod = _control_job(objects)["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == control.NAME


def test_the_settings_are_what_sweep_next_decides_with(staged):
    config, objects = staged
    data = _named(objects, "ConfigMap", f"{control.NAME}-{objects[0]['metadata']['name'].rsplit('-', 1)[1]}")["data"]
    assert data["requirements.txt"] == (SPECBENCH_DIR / "requirements.lock").read_text()  # the hash lock, installed with --require-hashes
    settings = json.loads(data["settings.json"])
    assert settings == {"sweep_decision": json.loads(json.dumps(decision_settings(config)))}
    inputs = sweep_controller.inputs_from_settings(settings["sweep_decision"])
    assert inputs == sweep_controller.inputs_from_settings(decision_settings(config))
    assert [v.name for v in inputs.stage_one] == [v.name for v in stage_one_variants(config)] and inputs.namespace == NS


def test_a_decision_setting_renames_the_sweep_and_its_controller(staged):
    _, objects = staged
    _, wider = build(**{"sweep.start_on_deploy": "true", "sweep.decision_margin": "0.05"})  # the pods' units are the same
    assert objects[0]["data"] == wider[0]["data"]
    assert _control_job(objects)["metadata"]["name"] != _control_job(wider)["metadata"]["name"]
    assert wider[0]["metadata"]["name"] != objects[0]["metadata"]["name"]  # a Job's pod template is immutable


def test_the_pod_is_restricted_guaranteed_on_the_system_nodes_and_alone_asks_for_a_token(staged):
    _, objects = staged
    pod = _control_job(objects)["spec"]["template"]["spec"]
    assert violations(pod, "restricted") == [] and highest_level(pod) == "restricted"
    container = _container(pod)
    assert container["resources"]["requests"] == container["resources"]["limits"] == {"cpu": control.CPU, "memory": control.MEMORY}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True and pod["securityContext"]["runAsUser"] == 10001
    assert pod["nodeSelector"] == {layout.NODE_POOL_LABEL: layout.SYSTEM_POOL} and "tolerations" not in pod
    assert pod["automountServiceAccountToken"] is True
    others = [
        template["spec"].get("automountServiceAccountToken")
        for o in objects
        if o["kind"] in ("Job", "CronJob") and o is not _control_job(objects) and o["metadata"]["name"] != control.NAME
        for template in [o["spec"]["jobTemplate"]["spec"]["template"] if o["kind"] == "CronJob" else o["spec"]["template"]]
    ]
    assert others and True not in others
    account = _named(objects, "ServiceAccount", control.NAME)
    assert "automountServiceAccountToken" not in account  # the pod asks for it; the default is to mount


def test_the_code_is_the_benchmarks_fetched_and_checked_the_same_way(staged):
    config, objects = staged
    plan = serving_plan(config, BUCKET)
    bench = benchmark.pod_template(benchmark_spec(config, plan))["spec"]["containers"][0]
    container = _container(_control_job(objects)["spec"]["template"]["spec"])
    code = {benchmark.BUNDLE_SHA256_ENV, benchmark.CODE_BUCKET_ENV, benchmark.CODE_KEY_ENV, benchmark.FETCH_ENV, "AWS_REGION"}
    assert [e for e in container["env"] if e["name"] in code] == [e for e in bench["env"] if e["name"] in code]
    assert container["image"] == bench["image"]
    assert benchmark.fetch_bundle() in container["command"][2] and "--require-hashes" in container["command"][2]


def test_the_job_retries_but_not_a_bad_name_or_settings_and_not_on_a_drain(staged):
    spec = _control_job(staged[1])["spec"]
    assert spec["backoffLimit"] == control.BACKOFF_LIMIT and spec["template"]["spec"]["restartPolicy"] == "Never"
    assert spec["podFailurePolicy"]["rules"] == [
        {"action": "FailJob", "onExitCodes": {"containerName": "control", "operator": "In", "values": [2]}},
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
    ]


# --- the egress policy --------------------------------------------------------------------------------

COREDNS = Pod(
    "coredns", "kube-system", {"k8s-app": "kube-dns"}, ip="172.20.0.10", namespace_labels={"kubernetes.io/metadata.name": "kube-system"}
)


def test_the_controller_reaches_dns_https_and_the_pod_identity_agent_only(staged):
    _, objects = staged
    policies = list(network_policies(NS, layout.SERVING_PORT))
    labels = _control_job(objects)["spec"]["template"]["metadata"]["labels"]
    pod = Pod("control", NS, labels, ip="10.0.2.60")
    egress = [p["metadata"]["name"] for p in policies if selects(p, pod) and "Egress" in p["spec"]["policyTypes"]]
    assert egress == [f"{control.NAME}-egress"]  # not the namespace-wide allow-all
    for protocol in ("UDP", "TCP"):
        assert allowed(policies, pod, "Egress", COREDNS.ip, 53, COREDNS, protocol)
    # The API server: its ClusterIP in either service CIDR EKS picks, or an endpoint ENI; S3; PyPI.
    for address in ("10.100.0.1", "172.20.0.1", "10.0.1.50", "52.219.100.1", "151.101.0.223"):
        assert allowed(policies, pod, "Egress", address, 443), address
    for agent in POD_IDENTITY_AGENT:
        assert allowed(policies, pod, "Egress", agent, 80)
    elsewhere = Pod("resolver", "default", {"k8s-app": "kube-dns"}, ip="10.0.3.3")
    assert not allowed(policies, pod, "Egress", elsewhere.ip, 53, elsewhere, "UDP")  # a look-alike in another namespace
    assert not allowed(policies, pod, "Egress", "8.8.8.8", 53, None, "UDP")
    assert not allowed(policies, pod, "Egress", "169.254.169.254", 80) and not allowed(policies, pod, "Egress", "169.254.169.254", 443)
    assert not allowed(policies, pod, "Egress", "fd00:ec2::254", 443)
    assert not allowed(policies, pod, "Egress", "52.219.100.1", 80)  # plain HTTP
    vllm = Pod("vllm", NS, {"app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": "qwen-vllm"}, ip="10.0.2.61")
    assert not connects(policies, pod, vllm, layout.SERVING_PORT)
    bench = Pod("bench", NS, {"app.kubernetes.io/name": "specbench", "specdecode/endpoint-client": "true"}, ip="10.0.2.62")
    assert not connects(policies, bench, pod, 8080)  # nothing reaches it


def test_every_other_pod_of_the_staged_sweep_keeps_the_namespace_wide_egress(staged):
    _, objects = staged
    policies = list(network_policies(NS, layout.SERVING_PORT))
    templates = [
        o["spec"]["jobTemplate"]["spec"]["template"] if o["kind"] == "CronJob" else o["spec"]["template"]
        for o in objects
        if o["kind"] in ("Job", "CronJob")
    ]
    for template in templates:
        pod = Pod("p", NS, template["metadata"].get("labels", {}))
        names = [p["metadata"]["name"] for p in policies if selects(p, pod) and "Egress" in p["spec"]["policyTypes"]]
        is_control = template["metadata"]["labels"] == control.LABELS
        assert names == ([f"{control.NAME}-egress"] if is_control else ["egress-except-instance-metadata"]), template["metadata"]


# --- the script ------------------------------------------------------------------------------------------


def _run_script(tmp_path: Path, staged, job_name: str) -> tuple[subprocess.CompletedProcess, list[list[str]]]:
    """The container's script under sh, with its environment (the Job's name as the Job controller
    sets the label) and a ``python`` that records its arguments instead of running."""
    container = _container(_control_job(staged[1])["spec"]["template"]["spec"])
    log = tmp_path / "calls.jsonl"
    fake = tmp_path / "bin" / "python"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\nexec {sys.executable} -c 'import json, sys; print(json.dumps(sys.argv[1:]))' \"$@\" >> {log}\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    env.update({control.CONTROL_JOB_ENV: job_name, "PATH": f"{fake.parent}:/usr/bin:/bin"})
    assert container["command"][:2] == ["sh", "-c"] and len(container["command"]) == 3
    done = subprocess.run(container["command"], env=env, capture_output=True, text=True, timeout=30)
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return done, calls


def test_the_script_installs_fetches_and_runs_sweep_control_for_its_jobs_sweep(tmp_path, staged):
    done, calls = _run_script(tmp_path, staged, "sweep-20261201-control")
    assert done.returncode == 0, done.stderr
    install, fetch, run = calls
    assert (
        install[:3] == ["-m", "pip", "install"]
        and "--require-hashes" in install
        and install[-2:] == ["-r", "/opt/specbench/requirements.txt"]
    )
    assert fetch[0] == "-c" and fetch[1] == benchmark.FETCH and fetch[-1] == benchmark.UNPACKED
    assert run[0] == benchmark.UNPACKED
    args = cli.parser().parse_args(run[1:])  # the command line the zip's CLI gets
    assert (args.command, args.sweep_command, args.sweep_id) == ("sweep", "control", "sweep-20261201")
    assert args.results == f"s3://{BUCKET}/results/" and args.settings == "/opt/specbench/settings.json"
    assert args.poll_seconds == control.POLL_SECONDS and args.region == "us-east-2"


@pytest.mark.parametrize("name", ["sweep-20261201", "-control"])
def test_a_job_not_named_after_its_sweep_is_refused_before_anything_runs(tmp_path, staged, name):
    done, calls = _run_script(tmp_path, staged, name)
    assert (done.returncode, calls) == (control.USAGE_EXIT, [])  # exit 2: the failure policy fails the Job
    assert done.stderr.startswith(f"specbench: sweep control: Job {name} is not named <sweep id>-control;") and done.stderr.count("\n") == 1


# --- the namespace's generic checks, on a staged sweep's dist ---------------------------------------------


@pytest.fixture(scope="module")
def staged_dist(tmp_path_factory):
    import yaml

    from charts.dist import write_dist

    config = load_config({**SWEEP, "sweep.start_on_deploy": "true"}, {})
    files = write_dist(config, BUCKET, tmp_path_factory.mktemp("staged-dist"))
    return config, {f.name: [o for o in yaml.safe_load_all(f.read_text()) if o] for f in files}


def test_the_generic_pod_security_and_network_policy_checks_cover_the_controller(staged_dist):
    """tests/test_pod_security.py's and tests/test_network_policies.py's checks over every pod of a
    staged sweep's dist, the controller's Job and its CronJob's template among them."""
    import test_network_policies as netpols
    import test_pod_security as pss_tests

    config, dist = staged_dist
    objects = [o for objects in dist.values() for o in objects]
    enforced = pss_tests._enforced(objects)
    pods = list(pss_tests._pods(objects))
    controllers = [name for name, _, pod in pods if pod.get("serviceAccountName") == control.NAME]
    assert sorted(controllers) == [f"CronJob/{control.NAME}", f"Job/{_control_job(objects)['metadata']['name']}"]
    for name, namespace, pod in pods:
        assert violations(pod, enforced[namespace]) == [], name
        if name in controllers:
            assert highest_level(pod) == "restricted", name
    netpod, policies = netpols.pods.__wrapped__(dist), netpols.policies.__wrapped__(dist)
    assert set(controllers) <= set(netpod)
    netpols.test_every_pod_the_charts_render_is_known(netpod, config)
    netpols.test_selectors_match_exactly_the_pods_they_mean(netpod, policies, config)
    netpols.test_no_pod_of_the_namespace_accepts_unsolicited_traffic(netpod, policies)
    for imds in ("169.254.169.254", "fd00:ec2::254"):
        netpols.test_no_pod_reaches_the_instance_metadata(netpod, policies, imds)
    for case in netpols.test_every_pod_keeps_what_it_needs.pytestmark[0].args[1]:
        netpols.test_every_pod_keeps_what_it_needs(netpod, policies, *case)
