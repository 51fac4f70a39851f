"""Serving charts: parity of the baseline and speculative services, strict Kubernetes schemas, the
node fit, and clear errors for bad specs. Rendered in-process with cdk8s (no CDK synth)."""

from __future__ import annotations

import dataclasses
import json

import kubernetes_validate
import pytest

from charts import VllmServiceSpec, code, serving_plan
from charts.dist import main as dist_main
from charts.model_cache import model_cache_objects
from charts.vllm import deployment
from config import ConfigError, capacity, catalog, layout, load_config
from conftest import BUCKET
from manifests import VARIANT_ANNOTATIONS, VARIANT_LABELS, differences, pod_requests, quantity


def _objects(dist):
    return [o for objects in dist.values() for o in objects]


def _find(dist, kind, name):
    (found,) = [o for o in _objects(dist) if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


# --- parity ---------------------------------------------------------------------------------------

POD = "spec.template.spec"
# Everything the speculative Deployment may differ in: its name and labels, the draft model and k
# (speculative config), the speculation method (fused speculation), its own compiled artifacts,
# and waiting for the draft's weights too.
ALLOWED_DEPLOYMENT_DIFFERENCES = {
    "metadata.name",
    *(f"{where}.labels.{label}" for where in ("metadata", "spec.template.metadata") for label in VARIANT_LABELS),
    *(f"{where}.annotations.{a}" for where in ("metadata", "spec.template.metadata") for a in VARIANT_ANNOTATIONS),
    "spec.selector.matchLabels.app.kubernetes.io/instance",
    *(f"{POD}.containers[vllm].args.--speculative-config.{k}" for k in ("model", "num_speculative_tokens", "max_model_len", "method")),
    f"{POD}.containers[vllm].args.--override-neuron-config.enable_fused_speculation",
    f"{POD}.containers[vllm].env[NEURON_COMPILED_ARTIFACTS].value",
    f"{POD}.initContainers[wait-for-model-cache].command",
}


def test_baseline_and_speculative_deployments_differ_only_in_speculation(dist, config):
    base = _find(dist, "Deployment", config.serving.baseline_service)
    spec = _find(dist, "Deployment", config.serving.speculative_service)
    assert differences(base, spec) == ALLOWED_DEPLOYMENT_DIFFERENCES


def test_parity_check_catches_any_other_difference(plan):
    base, speculative = plan.services[0], plan.services[1]
    for change in ({"max_num_seqs": 8}, {"image": base.serving.image + "-patched"}, {"cpu": 80}, {"tensor_parallel_size": 16}):
        drifted = dataclasses.replace(speculative, serving=dataclasses.replace(speculative.serving, **change))
        extra = differences(deployment(base), deployment(drifted)) - ALLOWED_DEPLOYMENT_DIFFERENCES
        assert extra, f"a drift in {change} went unnoticed"


def test_services_differ_only_in_name_and_labels(dist, config):
    base = _find(dist, "Service", config.serving.baseline_service)
    spec = _find(dist, "Service", config.serving.speculative_service)
    assert differences(base, spec) == {
        "metadata.name",
        *(f"metadata.labels.{label}" for label in VARIANT_LABELS),
        "spec.selector.app.kubernetes.io/instance",
    }


def test_speculative_service_runs_the_configured_draft_and_k(dist, config):
    container = _find(dist, "Deployment", config.serving.speculative_service)["spec"]["template"]["spec"]["containers"][0]
    args = container["args"]
    assert json.loads(args[args.index("--speculative-config") + 1]) == {
        "model": "/models/Qwen/Qwen3-1.7B",
        "num_speculative_tokens": 7,
        "max_model_len": 1024,
        "method": "eagle",
    }
    assert json.loads(args[args.index("--override-neuron-config") + 1]) == {
        "save_sharded_checkpoint": True,
        "logical_nc_config": 2,
        "enable_fused_speculation": True,
    }
    assert args[:2] == ["serve", "/models/Qwen/Qwen3-32B"]
    assert args[args.index("--served-model-name") + 1] == "Qwen/Qwen3-32B"
    assert args[args.index("--tensor-parallel-size") + 1] == "32"
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["VLLM_NEURON_FRAMEWORK"] == "neuronx-distributed-inference"
    assert env["NEURON_LOGICAL_NC_CONFIG"] == "2" and env["HF_HUB_OFFLINE"] == "1"


def test_every_variant_gets_its_own_deployment_service_and_artifacts(config):
    extra = load_config({"serving.extra_speculative_variants": "qwen-sd-k4:Qwen/Qwen3-1.7B:4", "neuron_nodes.max_size": 2}, {})
    plan = serving_plan(extra, BUCKET)
    assert [s.name for s in plan.services] == ["qwen-vllm", "qwen-sd-vllm", "qwen-sd-k4"]
    assert len({s.artifacts_dir() for s in plan.services}) == 3
    assert plan.services[2].serving is plan.services[0].serving  # one shared spec object
    assert deployment(plan.services[2])["metadata"]["labels"]["specdecode/speculative-tokens"] == "4"


# --- compiled artifacts ---------------------------------------------------------------------------


def test_artifacts_location_changes_with_every_compile_setting_and_only_those(plan):
    base = plan.services[1]
    seen = {base.artifacts_dir()}
    for change in (
        {"image": base.serving.image + "x"},
        {"tensor_parallel_size": 16},
        {"max_num_seqs": 8},
        {"max_model_len": 2048},
        {"logical_nc_config": 1, "tensor_parallel_size": 64},
        {"target_model": "Qwen/Qwen3-14B"},
    ):
        changed = dataclasses.replace(base, serving=dataclasses.replace(base.serving, **change)).artifacts_dir()
        assert changed not in seen, change
        seen.add(changed)
    for change in ({"num_speculative_tokens": 5}, {"draft_model": "Qwen/Qwen3-0.6B"}):
        changed = dataclasses.replace(base, **change).artifacts_dir()
        assert changed not in seen, change
        seen.add(changed)
    # Name and resources do not change the compiled graphs: same artifacts.
    same = dataclasses.replace(base, name="other", serving=dataclasses.replace(base.serving, cpu=60, memory_gib=500, shm_gib=64))
    assert same.artifacts_dir() == base.artifacts_dir()
    assert base.artifacts_dir().startswith("/neuron-artifacts/qwen3-32b-qwen3-1.7b-k7-")


# --- bad specs ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change, message",
    [
        ({"draft_model": "Qwen/Qwen3-1.7B", "num_speculative_tokens": 0}, "sweep.num_speculative_tokens=0: is missing: the draft model"),
        ({"num_speculative_tokens": 7}, "sweep.num_speculative_tokens=7: is set but there is no draft model"),
        (
            {"draft_model": "Qwen/Qwen3-1.7B", "num_speculative_tokens": 16},
            "sweep.num_speculative_tokens=16: is out of range; allowed: 1 to 15",
        ),
        ({"tensor_parallel_size": 30}, "sweep.tensor_parallel_size=30: is not a whole number of Neuron devices"),
    ],
)
def test_bad_specs_fail_with_the_field_named(plan, change, message):
    shared = plan.services[0].serving
    tp = change.pop("tensor_parallel_size", None)
    if tp:
        shared = dataclasses.replace(shared, tensor_parallel_size=tp)
    with pytest.raises(ConfigError) as err:
        VllmServiceSpec("sweep", shared, **change)
    assert str(err.value).startswith(f"config error: {message}")


# --- Kubernetes schemas ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", catalog.SUPPORTED_KUBERNETES_VERSIONS)
def test_every_object_passes_strict_schema_validation(dist, version):
    objects = _objects(dist)
    assert {o["kind"] for o in objects} == {
        "Namespace",
        "PersistentVolume",
        "PersistentVolumeClaim",
        "ServiceAccount",
        "ConfigMap",
        "Job",
        "CronJob",
        "Deployment",
        "Service",
        "NetworkPolicy",
    }
    for obj in objects:
        kubernetes_validate.validate(obj, f"{version}.0", strict=True)


def test_schema_validation_rejects_a_misspelt_field(dist, config):
    broken = json.loads(json.dumps(_find(dist, "Deployment", config.serving.baseline_service)))
    broken["spec"]["template"]["spec"]["containers"][0]["startupProbes"] = broken["spec"]["template"]["spec"]["containers"][0].pop(
        "startupProbe"
    )
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, "1.35.0", strict=True)


def test_hf_token_variant_passes_schema_validation(config):
    secret = "arn:aws:secretsmanager:us-east-2:123456789012:secret:hf/token-AbCdEf"
    cache = dataclasses.replace(serving_plan(config, BUCKET).model_cache, hf_token_secret_arn=secret)
    job = model_cache_objects(cache)[-1]
    kubernetes_validate.validate(job, "1.35.0", strict=True)
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "model-cache" and "automountServiceAccountToken" not in pod
    fetch, init = pod["initContainers"]
    assert fetch["name"] == "fetch-code" and init["name"] == "read-hf-token"
    assert {e["name"]: e["value"] for e in init["env"]} == {
        "SECRET": secret,
        "AWS_REGION": "us-east-2",
        "HOME": "/scratch",
        "TMPDIR": "/scratch",
    }
    assert {"name": "HF_TOKEN_PATH", "value": "/var/run/secrets/huggingface/token"} in pod["containers"][0]["env"]


# --- node fit -------------------------------------------------------------------------------------


def _neuron_pods(dist):
    """Pod specs of every workload placed on the Neuron node group."""
    for obj in _objects(dist):
        if obj["kind"] in ("Deployment", "Job") and "affinity" in obj["spec"]["template"]["spec"]:
            pod = obj["spec"]["template"]["spec"]
            terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            if {"key": layout.NODE_POOL_LABEL, "operator": "In", "values": [layout.NEURON_POOL]} in terms[0]["matchExpressions"]:
                yield obj["metadata"]["name"], pod


def test_both_services_and_the_cache_job_fit_one_node(dist, config):
    instance = catalog.TRAINIUM_INSTANCES[config.neuron_nodes.instance_type]
    pods = dict(_neuron_pods(dist))
    assert set(pods) >= {config.serving.baseline_service, config.serving.speculative_service}
    total = {"cpu": 0.0, "memory": 0.0, "aws.amazon.com/neuron": 0.0}
    for pod in pods.values():
        for key, value in pod_requests(pod).items():
            total[key] += value
    room = capacity.allocatable(instance)
    daemons = capacity.DAEMONSET_BUDGET
    assert total["aws.amazon.com/neuron"] == 16 <= room.neuron_devices
    assert total["cpu"] * 1000 + daemons.cpu_millis <= room.cpu_millis
    assert total["memory"] + daemons.memory_mib * 2**20 <= room.memory_mib * 2**20
    # Cores: each service's devices carry exactly its tensor-parallel ranks.
    lnc = config.neuron_nodes.logical_nc_config
    for name in (config.serving.baseline_service, config.serving.speculative_service):
        devices = pod_requests(pods[name])["aws.amazon.com/neuron"]
        assert devices * instance.logical_cores_per_device(lnc) == config.serving.tensor_parallel_size
    # Requests equal limits (Guaranteed QoS), and /dev/shm fits inside the memory limit.
    for pod in pods.values():
        for container in pod["containers"] + pod.get("initContainers", []):
            assert container["resources"]["requests"] == container["resources"]["limits"]
    vllm = pods[config.serving.speculative_service]
    shm = next(v for v in vllm["volumes"] if v["name"] == "dshm")
    assert quantity(shm["emptyDir"]["sizeLimit"]) < quantity(vllm["containers"][0]["resources"]["limits"]["memory"])


def test_allocatable_follows_the_eks_reservation_formula():
    trn2 = catalog.TRAINIUM_INSTANCES["trn2.48xlarge"]
    # 60 + 10 + 2*5 + 188*2.5 millicores; 255 + 11*737 + 100 MiB.
    assert capacity.kube_reserved(trn2) == capacity.Resources(cpu_millis=550, memory_mib=8462)
    assert capacity.allocatable(trn2) == capacity.Resources(cpu_millis=191450, memory_mib=2048 * 1024 - 8462, neuron_devices=16)


# --- pods -----------------------------------------------------------------------------------------


def test_serving_pods_are_placed_probed_and_stopped_gracefully(dist, config):
    dep = _find(dist, "Deployment", config.serving.baseline_service)
    assert dep["spec"]["strategy"] == {"type": "Recreate"}
    pod = dep["spec"]["template"]["spec"]
    assert pod["schedulerName"] == layout.NEURON_SCHEDULER_NAME
    assert pod["tolerations"] == [{"key": "aws.amazon.com/neuron", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]
    (vllm,) = pod["containers"]
    startup = vllm["startupProbe"]
    assert startup["httpGet"] == {"path": "/health", "port": "http"}
    assert startup["periodSeconds"] * startup["failureThreshold"] == config.serving.startup_timeout_minutes * 60
    assert vllm["readinessProbe"]["httpGet"]["path"] == vllm["livenessProbe"]["httpGet"]["path"] == "/health"
    assert vllm["lifecycle"]["preStop"]["exec"]["command"][0] == "sleep"
    assert pod["terminationGracePeriodSeconds"] > int(vllm["lifecycle"]["preStop"]["exec"]["command"][1])
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["dshm"]["emptyDir"]["medium"] == "Memory"
    assert volumes["models"]["persistentVolumeClaim"] == {"claimName": "model-weights", "readOnly": True}
    svc = _find(dist, "Service", config.serving.baseline_service)
    assert svc["spec"]["type"] == "ClusterIP" and svc["spec"]["ports"][0]["port"] == 8000


def test_services_wait_for_the_weights_they_load(dist, config):
    pod = _find(dist, "Deployment", config.serving.speculative_service)["spec"]["template"]["spec"]
    (wait,) = pod["initContainers"]
    assert "/models/Qwen/Qwen3-32B/.specdecode-complete" in wait["command"][2]
    assert "/models/Qwen/Qwen3-1.7B/.specdecode-complete" in wait["command"][2]


def test_bucket_volumes_are_static_and_confined_to_their_prefix(dist):
    for claim, prefix in (("model-weights", "models/"), ("neuron-artifacts", "neuron-artifacts/")):
        pv = _find(dist, "PersistentVolume", f"specdecode-{claim}")
        assert pv["spec"]["csi"] == {
            "driver": "s3.csi.aws.com",
            "volumeHandle": f"specdecode-{claim}",
            "volumeAttributes": {"bucketName": BUCKET},
        }
        assert f"prefix {prefix}" in pv["spec"]["mountOptions"] and "region us-east-2" in pv["spec"]["mountOptions"]
        assert pv["spec"]["claimRef"] == {"namespace": "specdecode", "name": claim}
        assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
        pvc = _find(dist, "PersistentVolumeClaim", claim)
        assert pvc["spec"]["volumeName"] == pv["metadata"]["name"] and pvc["spec"]["storageClassName"] == ""


def test_model_cache_job_fills_every_model_once(dist, plan):
    (job,) = [o for o in _objects(dist) if o["kind"] == "Job" and o["metadata"]["name"].startswith("model-cache-")]
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[-2:] == ["Qwen/Qwen3-32B", "Qwen/Qwen3-1.7B"]
    assert job["spec"]["backoffLimit"] >= 1 and job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    # The fill runs from the code asset its first init container fetched and checked (charts/code.py).
    assert command[:5] == ["python3", "-c", code.RUN_MODULE, code.ZIP, "specbench.model_cache.fill"]
    assert [c["name"] for c in job["spec"]["template"]["spec"]["initContainers"]] == ["fetch-code"]
    assert not [o for o in _objects(dist) if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "model-cache-script"]


# --- dist command ---------------------------------------------------------------------------------


def test_dist_writes_one_file_per_chart_in_apply_order(dist):
    assert list(dist) == ["0000-model-cache.k8s.yaml", "0001-qwen-vllm.k8s.yaml", "0002-qwen-sd-vllm.k8s.yaml", "0003-specbench.k8s.yaml"]
    assert dist["0000-model-cache.k8s.yaml"][0]["kind"] == "Namespace"


def test_dist_rejects_a_bad_bucket_name_and_bad_config(capsys):
    assert dist_main(["--bucket-name", "Not_A_Bucket"]) == 2
    assert "--bucket-name='Not_A_Bucket': is not an S3 bucket name" in capsys.readouterr().err
    assert dist_main(["--bucket-name", BUCKET, "-c", "serving.num_speculative_tokens=99"]) == 2
    assert "config error: serving.num_speculative_tokens=99: is out of range" in capsys.readouterr().err


def test_without_the_scheduler_extension_the_default_scheduler_places_pods():
    plan = serving_plan(load_config({"addons.neuron_scheduler": "false"}, {}), BUCKET)
    assert "schedulerName" not in deployment(plan.services[0])["spec"]["template"]["spec"]


def test_images_pinned_by_digest_reach_every_container_unchanged(tmp_path):
    """A digest (immutable, unlike a tag) is passed through as configured (charts/README.md says how
    to look one up)."""
    import yaml

    from charts.dist import write_dist

    digest = "sha256:" + "0123456789abcdef" * 4
    images = {
        "serving.image": f"public.ecr.aws/neuron/pytorch-inference-vllm-neuronx@{digest}",
        "serving.aws_cli_image": f"public.ecr.aws/aws-cli/aws-cli@{digest}",
        "benchmark.image": f"public.ecr.aws/docker/library/python@{digest}",
    }
    secret = "arn:aws:secretsmanager:us-east-2:123456789012:secret:hf/token-AbCdEf"
    config = load_config({**images, "serving.hf_token_secret_arn": secret}, {})
    seen = set()
    for path in write_dist(config, BUCKET, tmp_path):
        for obj in yaml.safe_load_all(path.read_text()):
            spec = (obj or {}).get("spec", {})
            template = spec.get("template") or spec.get("jobTemplate", {}).get("spec", {}).get("template")
            for container in (template or {}).get("spec", {}).get("initContainers", []) + (template or {}).get("spec", {}).get(
                "containers", []
            ):
                seen.add(container["image"])
    assert seen == set(images.values())
