"""The serving namespace's NetworkPolicies, evaluated as data against every pod template the charts
render: only client pods (the benchmark) reach the vLLM port, every pod of the namespace is
isolated for ingress, and no pod reaches the node's instance metadata while the Pod Identity agent,
DNS, the services and the internet stay reachable."""

from __future__ import annotations

import dataclasses

import kubernetes_validate
import pytest
from netpol import Pod, allowed, connects, matches, selects

from charts import serving_plan
from charts.network import CLIENT_LABEL, IMDS_CIDRS, POD_IDENTITY_AGENT, SWEEP_CONTROL
from charts.vllm import deployment
from config import catalog, layout, load_config
from conftest import BUCKET

NAMESPACE = "specdecode"
PORT = layout.SERVING_PORT


def _objects(dist):
    return [o for objects in dist.values() for o in objects]


def _pod_templates(dist):
    """(kind/name, template) of every pod the charts can create."""
    for obj in _objects(dist):
        kind, spec = obj["kind"], obj.get("spec", {})
        if kind in ("Deployment", "Job"):
            yield f"{kind}/{obj['metadata']['name']}", obj["metadata"]["namespace"], spec["template"]
        elif kind == "CronJob":
            yield f"{kind}/{obj['metadata']['name']}", obj["metadata"]["namespace"], spec["jobTemplate"]["spec"]["template"]


@pytest.fixture(scope="module")
def pods(dist):
    return {
        name: Pod(name, namespace, template["metadata"].get("labels", {}), ip=f"10.0.2.{i + 10}")
        for i, (name, namespace, template) in enumerate(_pod_templates(dist))
    }


@pytest.fixture(scope="module")
def policies(dist):
    return [o for o in _objects(dist) if o["kind"] == "NetworkPolicy"]


def _by_name(policies, name):
    (policy,) = [p for p in policies if p["metadata"]["name"] == name]
    return policy


def test_every_pod_the_charts_render_is_known(pods, config):
    assert {name.split("/")[0] for name in pods} == {"Deployment", "Job", "CronJob"}
    deployments = {name for name in pods if name.startswith("Deployment/")}
    assert deployments == {f"Deployment/{config.serving.baseline_service}", f"Deployment/{config.serving.speculative_service}"}
    assert {p.namespace for p in pods.values()} == {NAMESPACE}


def test_policies_are_applied_with_the_namespace_before_any_pod(dist):
    first = next(iter(dist.values()))
    kinds = [o["kind"] for o in first]
    assert kinds[:5] == ["Namespace", "NetworkPolicy", "NetworkPolicy", "NetworkPolicy", "NetworkPolicy"]
    assert all(o["kind"] != "NetworkPolicy" for objects in list(dist.values())[1:] for o in objects)


@pytest.mark.parametrize("version", catalog.SUPPORTED_KUBERNETES_VERSIONS)
def test_policies_pass_strict_schema_validation(policies, version):
    assert len(policies) == 4
    for policy in policies:
        kubernetes_validate.validate(policy, f"{version}.0", strict=True)


def test_selectors_match_exactly_the_pods_they_mean(pods, policies, config):
    serving = _by_name(policies, "vllm-from-endpoint-clients")
    targets = {name for name, pod in pods.items() if selects(serving, pod)}
    assert targets == {f"Deployment/{config.serving.baseline_service}", f"Deployment/{config.serving.speculative_service}"}
    (client_peer,) = serving["spec"]["ingress"][0]["from"]
    clients = {name for name, pod in pods.items() if matches(client_peer["podSelector"], pod.labels)}
    benchmark = {name for name, pod in pods.items() if pod.labels.get("app.kubernetes.io/name") == "specbench"}
    assert benchmark and clients == benchmark  # the Job and the rerun CronJob's template
    assert {n for n, pod in pods.items() if selects(_by_name(policies, "default-deny-ingress"), pod)} == set(pods)
    # Egress: every pod by the namespace-wide policy but the staged sweep's controller, by its own (a
    # pod of a staged sweep's dist; tests/test_sweep_control_chart.py runs these tests on one).
    controller = {n for n, pod in pods.items() if pod.labels.get("app.kubernetes.io/name") == SWEEP_CONTROL}
    assert {n for n, pod in pods.items() if selects(_by_name(policies, "egress-except-instance-metadata"), pod)} == set(pods) - controller
    assert {n for n, pod in pods.items() if selects(_by_name(policies, f"{SWEEP_CONTROL}-egress"), pod)} == controller


def test_only_the_benchmark_reaches_the_serving_port(pods, policies, config):
    vllm = pods[f"Deployment/{config.serving.speculative_service}"]
    bench = next(p for name, p in pods.items() if name.startswith("Job/specbench-"))
    cache = next(p for name, p in pods.items() if name.startswith("Job/model-cache-"))
    assert connects(policies, bench, vllm, PORT)
    assert not connects(policies, bench, vllm, PORT + 1)  # another port of the pod
    assert not connects(policies, cache, vllm, PORT)
    other_vllm = pods[f"Deployment/{config.serving.baseline_service}"]
    assert not connects(policies, other_vllm, vllm, PORT)
    # The benchmark's pod without its client label, and the label from another namespace.
    unlabelled = dataclasses.replace(bench, labels={k: v for k, v in bench.labels.items() if k != CLIENT_LABEL})
    assert not connects(policies, unlabelled, vllm, PORT)
    elsewhere = dataclasses.replace(bench, namespace="default", ip="10.0.3.3")
    assert not allowed(policies, vllm, "Ingress", elsewhere.ip, PORT, elsewhere)
    # Nothing outside the cluster's pods (a node's neighbour, a load balancer) either.
    assert not allowed(policies, vllm, "Ingress", "10.0.9.9", PORT)


def test_no_pod_of_the_namespace_accepts_unsolicited_traffic(pods, policies):
    bench = next(p for name, p in pods.items() if name.startswith("Job/specbench-"))
    for name, pod in pods.items():
        if pod is not bench:
            assert not connects(policies, pod, bench, 8080), name
        assert not allowed(policies, pod, "Ingress", "10.0.9.9", 22), name


@pytest.mark.parametrize("imds", ["169.254.169.254", "fd00:ec2::254"])
def test_no_pod_reaches_the_instance_metadata(pods, policies, imds):
    assert {c.split("/")[0] for c in IMDS_CIDRS} == {"169.254.169.254", "fd00:ec2::254"}
    for name, pod in pods.items():
        assert not allowed(policies, pod, "Egress", imds, 80), name


# The cluster DNS Service's ClusterIP as the VPC CNI's agent sees it: its controller adds the ClusterIP
# of a Service whose selector a rule's pod selector matches (charts/network.py sweep_control_egress),
# so a rule naming CoreDNS's pods admits it as it admits the pods.
COREDNS = Pod("coredns", "kube-system", {"k8s-app": "kube-dns"}, ip="172.20.0.10")


@pytest.mark.parametrize(
    "address, port, peer, protocol",
    [
        (POD_IDENTITY_AGENT[0], 80, None, "TCP"),  # the Pod Identity agent: every pod's AWS credentials
        (POD_IDENTITY_AGENT[1], 80, None, "TCP"),
        (COREDNS.ip, 53, COREDNS, "UDP"),  # the cluster DNS Service
        (COREDNS.ip, 53, COREDNS, "TCP"),
        ("52.216.1.1", 443, None, "TCP"),  # S3, Secrets Manager, CloudWatch, the Hugging Face Hub, PyPI
        ("10.0.5.5", 8000, None, "TCP"),  # a vLLM pod (not for the sweep controller: below)
    ],
)
def test_every_pod_keeps_what_it_needs(pods, policies, address, port, peer, protocol):
    for name, pod in pods.items():
        if port == PORT and pod.labels.get("app.kubernetes.io/name") == SWEEP_CONTROL:
            assert not allowed(policies, pod, "Egress", address, port, peer, protocol), name  # it needs no service
            continue
        assert allowed(policies, pod, "Egress", address, port, peer, protocol), name


def test_the_evaluator_is_not_vacuous(pods):
    """Without the policies, everything connects: the tests above would fail."""
    a, b = list(pods.values())[:2]
    assert connects([], a, b, PORT) and allowed([], a, "Egress", "169.254.169.254", 80)


def test_every_speculative_variant_is_protected_too(policies):
    """Sweep variants (serving.extra_speculative_variants) carry the same pod label as the two
    services, so the same policy covers them."""
    config = load_config({"serving.extra_speculative_variants": "qwen-sd-k4:Qwen/Qwen3-1.7B:4", "neuron_nodes.max_size": 2}, {})
    serving = _by_name(policies, "vllm-from-endpoint-clients")
    for spec in serving_plan(config, BUCKET).services:
        pod = Pod(spec.name, NAMESPACE, deployment(spec)["spec"]["template"]["metadata"]["labels"])
        assert selects(serving, pod), spec.name
