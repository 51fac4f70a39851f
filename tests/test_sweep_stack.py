"""The sweep inside the platform stack: absent by default, applied after the benchmark when
configured (tests/conftest.py's variant configures one). Reads the session's synthesized templates."""

from __future__ import annotations

import json

from templates import direct_dependencies, props, resources

MANIFEST = "Custom::AWSCDK-EKS-KubernetesResource"


def _ids(template, prefix):
    return [lid for lid in resources(template, MANIFEST) if lid.startswith(prefix)]


def test_the_default_deployment_has_no_sweep(platform):
    assert _ids(platform, "EksClusterSweepChart") == []
    # The namespace's NetworkPolicies name the staged sweep controller's label (charts/network.py), always.
    assert "specbench-sweep" not in json.dumps(platform).replace("specbench-sweep-control", "")


def test_a_configured_sweep_is_applied_after_the_benchmark(variant_platform):
    (sweep,) = _ids(variant_platform, "EksClusterSweepChart")
    (benchmark,) = _ids(variant_platform, "EksClusterBenchmarkChart")
    assert benchmark in direct_dependencies(variant_platform, sweep)
    manifest = props(variant_platform["Resources"][sweep])["Manifest"]
    # The bucket's name is a token: the manifest is joined around it.
    separator, parts = manifest["Fn::Join"]
    tokens = [p for p in parts if not isinstance(p, str)]
    assert tokens and all(p["Fn::GetStackOutput"]["OutputName"].startswith("PublishOutputRefDataBucket") for p in tokens)
    objects = json.loads(separator.join(p if isinstance(p, str) else "BUCKET" for p in parts))
    # The sweep's objects, then (the variant's sweep is staged) its controller's (tests/test_sweep_control_stack.py).
    assert [o["kind"] for o in objects] == [
        "ConfigMap",
        "Job",
        "CronJob",
        "Job",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "CronJob",
        "Job",
    ]
    assert objects[1]["metadata"]["name"].startswith("hardware-facts-")  # before the sweep: its pod is placed first
    (client,) = [c for c in objects[3]["spec"]["template"]["spec"]["containers"] if c["name"] == "measure"]
    assert {"name": "SWEEP_RESULTS", "value": "s3://BUCKET/results/"} in client["env"]


def _stderr(assembly) -> str:
    assembly.wait()
    return assembly.outdir.with_name(assembly.outdir.name + ".stderr").read_text()


def test_synth_prints_the_plan_of_a_configured_sweep_and_nothing_otherwise(variant_assembly, cli_assembly):
    printed = _stderr(variant_assembly).splitlines()
    first = printed.index("sweep: 1 variant(s) + baseline (first and last wave) x 2 load level(s) [c1, c4] = 6 points in 3 pods")
    assert printed[first + 1] == "capacity: 8 Neuron devices per pod of 16 per node; 1 pod(s) at once on 1 node(s)"
    assert any(line.startswith("estimate: 3 wave(s), ") for line in printed[first:])
    assert any(line.startswith("start the sweep: kubectl -n <serving.namespace> create job") for line in printed[first:])
    assert "sweep" not in _stderr(cli_assembly)
