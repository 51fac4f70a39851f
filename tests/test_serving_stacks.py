"""Serving stacks (config/serving_stacks.py, charts/serving_stack.py): each stack's container, its
rules, parity of the services on each stack, cross-stack comparisons only when asked for, and strict
Kubernetes schemas. Charts are rendered in-process with cdk8s (no CDK synth)."""

from __future__ import annotations

import dataclasses
import json

import kubernetes_validate
import pytest

from charts import serving_plan
from charts.dist import write_dist
from charts.serving_stack import service_container
from charts.spec import settings_snapshot
from charts.vllm import deployment
from config import ConfigError, catalog, load_config, serving_stacks
from conftest import BUCKET
from manifests import VARIANT_ANNOTATIONS, VARIANT_LABELS, differences

NEURON = serving_stacks.VLLM_NEURON_STACK
REFERENCE = serving_stacks.REFERENCE_STACK
POD = "spec.template.spec"
ARGS = f"{POD}.containers[vllm].args"
# What the speculative service may differ in on any stack: name, labels, its own compiled
# artifacts, waiting for the speculator's weights too, and the speculative config.
COMMON_DIFFERENCES = {
    "metadata.name",
    *(f"{where}.labels.{label}" for where in ("metadata", "spec.template.metadata") for label in VARIANT_LABELS),
    *(f"{where}.annotations.{a}" for where in ("metadata", "spec.template.metadata") for a in VARIANT_ANNOTATIONS),
    "spec.selector.matchLabels.app.kubernetes.io/instance",
    f"{POD}.containers[vllm].env[NEURON_COMPILED_ARTIFACTS].value",
    f"{POD}.initContainers[wait-for-model-cache].command",
}
ALLOWED_DIFFERENCES = {
    # Fused speculation is switched on in the Neuron override (REFERENCE.md section 1).
    REFERENCE: COMMON_DIFFERENCES
    | {f"{ARGS}.--speculative-config.{k}" for k in ("model", "num_speculative_tokens", "max_model_len", "method")}
    | {f"{ARGS}.--override-neuron-config.enable_fused_speculation"},
    # The plugin's speculative config has no max_model_len and its Neuron settings do not change.
    NEURON: COMMON_DIFFERENCES | {f"{ARGS}.--speculative-config.{k}" for k in ("model", "num_speculative_tokens", "method")},
}


def _config(**context: object):
    return load_config({k.replace("__", "."): v for k, v in context.items()}, {})


@pytest.fixture(scope="module", params=sorted(serving_stacks.STACKS))
def stack_dist(request, tmp_path_factory):
    """(stack, config, {kind/name: object}) of the dist/ YAML on each stack."""
    import yaml

    config = _config(serving__stack=request.param)
    files = write_dist(config, BUCKET, tmp_path_factory.mktemp(f"dist-{request.param}"))
    objects = [o for f in files for o in yaml.safe_load_all(f.read_text()) if o]
    return request.param, config, {f"{o['kind']}/{o['metadata']['name']}": o for o in objects}


# --- stack definitions ------------------------------------------------------------------------------


def test_each_stack_pins_its_image_and_methods():
    assert {s: (v.image, v.method_ids, v.k_range(v.default_method)) for s, v in serving_stacks.STACKS.items()} == {
        REFERENCE: ("public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.9.1-neuronx-py311-sdk2.26.1-ubuntu22.04", ("draft",), (1, 15)),
        NEURON: (
            "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.29.0.1.2.0-neuronx-py314-sdk2.33.0-ubuntu26.04",
            ("eagle3",),
            (2, 7),
        ),
    }
    with pytest.raises(KeyError):
        serving_stacks.STACKS[NEURON].k_range("draft")


def test_the_stack_sets_image_and_method_unless_given():
    config = _config(serving__stack=NEURON)
    assert (config.serving.image, config.serving.speculation_method, config.serving.baseline_stack) == (
        serving_stacks.STACKS[NEURON].image,
        "eagle3",
        NEURON,
    )
    assert config.serving.speculator_head_target == "Qwen/Qwen3-32B"
    assert _config().serving.speculation_method == "draft"


# --- rules --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "context, line",
    [
        (
            {"serving__stack": NEURON, "serving__speculation_method": "draft"},
            "serving.speculation_method='draft': is not supported by serving.stack=vllm-neuron (it runs on nxdi-draft); allowed: eagle3",
        ),
        (
            {"serving__speculation_method": "eagle3"},
            "serving.speculation_method='eagle3': is not supported by serving.stack=nxdi-draft (it runs on vllm-neuron); allowed: draft",
        ),
        (
            {"serving__stack": NEURON, "serving__num_speculative_tokens": 8},
            "serving.num_speculative_tokens=8: is out of range; allowed: 2 to 7",
        ),
        (
            {"serving__stack": NEURON, "serving__num_speculative_tokens": 1},
            "serving.num_speculative_tokens=1: is out of range; allowed: 2 to 7",
        ),
        (
            {"serving__stack": NEURON, "serving__target_model": "Qwen/Qwen3-14B"},
            "serving.speculator_head='RedHatAI/Qwen3-32B-speculator.eagle3': was trained for Qwen/Qwen3-32B, not for the target "
            "Qwen/Qwen3-14B; allowed: a head trained for Qwen/Qwen3-14B",
        ),
        (
            {"serving__stack": NEURON, "serving__speculator_head": "someone/my-head"},
            "serving.speculator_head='someone/my-head': is a head whose target model is unknown; allowed: "
            "RedHatAI/Qwen3-32B-speculator.eagle3 (for Qwen/Qwen3-32B), "
            "thoughtworks/Qwen3-32B-Eagle3 (for Qwen/Qwen3-32B), or set serving.speculator_head_target",
        ),
        (
            {"serving__stack": NEURON, "serving__speculator_head": "someone/my-head", "serving__speculator_head_target": "Qwen/Qwen3-8B"},
            "serving.speculator_head='someone/my-head': was trained for Qwen/Qwen3-8B, not for the target Qwen/Qwen3-32B; "
            "allowed: RedHatAI/Qwen3-32B-speculator.eagle3 (for Qwen/Qwen3-32B), "
            "thoughtworks/Qwen3-32B-Eagle3 (for Qwen/Qwen3-32B)",
        ),
        (
            {"serving__stack": NEURON, "serving__extra_speculative_variants": "qwen-e3-k9:thoughtworks/Qwen3-32B-Eagle3:9"},
            "serving.extra_speculative_variants=9: is out of range; allowed: 2 to 7",
        ),
        (
            {"serving__baseline_stack": NEURON},
            "serving.baseline_stack='vllm-neuron': differs from serving.stack=nxdi-draft: a cross-stack comparison, which "
            "must be asked for; allowed: nxdi-draft, or set serving.cross_stack=true",
        ),
        ({"serving__stack": "vllm"}, "serving.stack='vllm': is not a serving stack; allowed: nxdi-draft, vllm-neuron"),
        (
            {"serving__stack": NEURON, "benchmark__temperature": 0.7},
            "benchmark.temperature=0.7: is not 0: on serving stack vllm-neuron the speculative decoding's on-device rejection "
            "sampler is greedy, and the comparison needs the same output from both services; allowed: 0.0",
        ),
    ],
)
def test_bad_stack_settings_fail_with_one_line_naming_the_fields(context, line):
    with pytest.raises(ConfigError) as err:
        _config(neuron_nodes__max_size=2, **context)
    assert str(err.value) == f"config error: {line}"


def test_a_known_head_with_its_own_target_needs_no_more_settings():
    config = _config(
        serving__stack=NEURON, serving__extra_speculative_variants="qwen-e3-k3:thoughtworks/Qwen3-32B-Eagle3:3", neuron_nodes__max_size=2
    )
    assert config.serving.extra_speculative_variants == ("qwen-e3-k3:thoughtworks/Qwen3-32B-Eagle3:3",)


# --- the container of each stack ----------------------------------------------------------------------


def test_reference_container_is_the_reference_recipe():
    base, speculative = serving_plan(_config(), BUCKET).services
    container = service_container(speculative)
    assert container["image"] == "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.9.1-neuronx-py311-sdk2.26.1-ubuntu22.04"
    args = container["args"]
    assert json.loads(args[args.index("--speculative-config") + 1]) == {
        "model": "/models/Qwen/Qwen3-1.7B",
        "num_speculative_tokens": 7,
        "max_model_len": 1024,
        "method": "eagle",
    }
    assert [e["name"] for e in container["env"]] == [
        "VLLM_USE_V1",
        "VLLM_NEURON_FRAMEWORK",
        "NEURON_COMPILED_ARTIFACTS",
        "NEURON_LOGICAL_NC_CONFIG",
        "HF_HUB_OFFLINE",
    ]
    # Compiled artifacts stay where they were before stacks existed (same hash of the same settings).
    assert [s.artifacts_dir() for s in (base, speculative)] == [
        "/neuron-artifacts/qwen3-32b-ea42ddb0a764",
        "/neuron-artifacts/qwen3-32b-qwen3-1.7b-k7-64f16f97593f",
    ]


def test_vllm_neuron_container_has_only_documented_flags():
    base, speculative = serving_plan(_config(serving__stack=NEURON), BUCKET).services
    container = service_container(speculative)
    assert container["image"] == serving_stacks.STACKS[NEURON].image
    assert container["command"] == ["vllm"]
    assert container["args"] == [
        "serve",
        "/models/Qwen/Qwen3-32B",
        "--served-model-name",
        "Qwen/Qwen3-32B",
        "--tensor-parallel-size",
        "32",
        "--max-num-seqs",
        "4",
        "--max-model-len",
        "1024",
        "--port",
        "8000",
        "--additional-config",
        '{"neuron_config": {"on_device_sampling_config": {"temperature": "0"}}}',
        "--speculative-config",
        '{"method": "eagle3", "model": "/models/RedHatAI/Qwen3-32B-speculator.eagle3", "num_speculative_tokens": 7}',
    ]
    # No V0 switch and no NxD Inference framework variable: the plugin is V1 only.
    assert container["env"] == [
        {"name": "NEURON_COMPILED_ARTIFACTS", "value": speculative.artifacts_dir()},
        {"name": "NEURON_LOGICAL_NC_CONFIG", "value": "2"},
        {"name": "HF_HUB_OFFLINE", "value": "1"},
    ]
    assert "--speculative-config" not in service_container(base)["args"]
    assert speculative.artifacts_dir().startswith("/neuron-artifacts/qwen3-32b-qwen3-32b-speculator.eagle3-k7-")


def test_the_head_is_cached_like_a_model_and_marked_for_adaptation():
    cache = serving_plan(_config(serving__stack=NEURON), BUCKET).model_cache
    assert (cache.models, cache.eagle3_heads, cache.image) == (
        ("Qwen/Qwen3-32B", "RedHatAI/Qwen3-32B-speculator.eagle3"),
        ("RedHatAI/Qwen3-32B-speculator.eagle3",),
        serving_stacks.STACKS[NEURON].image,
    )
    assert serving_plan(_config(), BUCKET).model_cache.eagle3_heads == ()


def test_a_spec_rejects_a_method_its_stack_lacks():
    base, speculative = serving_plan(_config(), BUCKET).services
    with pytest.raises(ConfigError) as err:
        dataclasses.replace(speculative, serving=dataclasses.replace(speculative.serving, stack=NEURON))
    assert str(err.value) == "config error: qwen-sd-vllm.speculation_method='draft': is not supported by stack vllm-neuron; allowed: eagle3"


# --- parity on each stack -------------------------------------------------------------------------------


def test_services_on_each_stack_differ_only_in_speculation(stack_dist):
    stack, config, objects = stack_dist
    base = objects[f"Deployment/{config.serving.baseline_service}"]
    speculative = objects[f"Deployment/{config.serving.speculative_service}"]
    assert differences(base, speculative) == ALLOWED_DIFFERENCES[stack]
    assert base["metadata"]["labels"]["specdecode/stack"] == speculative["metadata"]["labels"]["specdecode/stack"] == stack


@pytest.mark.parametrize("stack", sorted(serving_stacks.STACKS))
def test_parity_check_on_each_stack_catches_any_other_difference(stack):
    base, speculative = serving_plan(_config(serving__stack=stack), BUCKET).services
    for change in ({"max_num_seqs": 8}, {"image": base.serving.image + "-patched"}, {"logical_nc_config": 1, "tensor_parallel_size": 64}):
        drifted = dataclasses.replace(speculative, serving=dataclasses.replace(speculative.serving, **change))
        assert differences(deployment(base), deployment(drifted)) - ALLOWED_DIFFERENCES[stack], f"{change} went unnoticed on {stack}"


@pytest.mark.parametrize("version", catalog.SUPPORTED_KUBERNETES_VERSIONS)
def test_every_object_on_each_stack_passes_strict_schema_validation(stack_dist, version):
    _, _, objects = stack_dist
    assert {key.split("/")[0] for key in objects} >= {"Deployment", "Service", "Job", "ConfigMap"}
    for obj in objects.values():
        kubernetes_validate.validate(obj, f"{version}.0", strict=True)


def test_the_fill_job_names_the_heads_it_adapts(stack_dist):
    stack, _, objects = stack_dist
    (job,) = [o for key, o in objects.items() if key.startswith("Job/model-cache-")]
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    expected = ["--eagle3-head", "RedHatAI/Qwen3-32B-speculator.eagle3", "--eagle3-target", "Qwen/Qwen3-32B"] if stack == NEURON else []
    assert command[command.index("/scratch") + 1 : -2] == expected


# --- cross-stack ----------------------------------------------------------------------------------------


def test_cross_stack_comparison_is_opt_in_and_labelled():
    config = _config(serving__stack=NEURON, serving__baseline_stack=REFERENCE, serving__cross_stack=True)
    plan = serving_plan(config, BUCKET)
    base, speculative = plan.services
    assert (base.serving.stack, base.serving.image) == (REFERENCE, serving_stacks.STACKS[REFERENCE].image)
    assert (speculative.serving.stack, speculative.serving.image) == (NEURON, serving_stacks.STACKS[NEURON].image)
    # Beyond speculation only what the stacks themselves change: image, Neuron settings flag and the V0 variables.
    extra = differences(deployment(base), deployment(speculative)) - ALLOWED_DIFFERENCES[NEURON]
    assert extra == {
        "metadata.labels.specdecode/stack",
        "spec.template.metadata.labels.specdecode/stack",
        f"{POD}.containers[vllm].image",
        f"{POD}.initContainers[wait-for-model-cache].image",
        f"{ARGS}.--override-neuron-config.save_sharded_checkpoint",
        f"{ARGS}.--override-neuron-config.logical_nc_config",
        f"{ARGS}.--additional-config.neuron_config.on_device_sampling_config.temperature",
        *(
            f"{POD}.containers[vllm].env[{name}].{field}"
            for name in ("VLLM_USE_V1", "VLLM_NEURON_FRAMEWORK")
            for field in ("name", "value")
        ),
    }
    snapshot = settings_snapshot(config, plan, "reference", ["a"])
    assert snapshot["serving"]["comparison"] == "cross-stack"
    assert [(v["name"], v["stack"], v["method"], v["speculator"]) for v in snapshot["variants"]] == [
        ("qwen-vllm", REFERENCE, "none", "none"),
        ("qwen-sd-vllm", NEURON, "eagle3", "trained head"),
    ]


def test_same_stack_runs_say_so():
    config = _config()
    snapshot = settings_snapshot(config, serving_plan(config, BUCKET), "reference", ["a"])
    assert (snapshot["serving"]["stack"], snapshot["serving"]["comparison"]) == (REFERENCE, "same stack")
    assert [(v["stack"], v["method"], v["speculator"]) for v in snapshot["variants"]] == [
        (REFERENCE, "none", "none"),
        (REFERENCE, "draft", "draft model"),
    ]


# --- outputs and the offline demo -----------------------------------------------------------------------


def _demo():
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("demo_script", Path(__file__).resolve().parents[1] / "scripts" / "demo.py")
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)  # type: ignore[union-attr]
    return demo


def test_three_way_demo_settings_name_each_services_stack_and_method():
    demo = _demo()
    config = _config()
    reference = settings_snapshot(config, serving_plan(config, BUCKET), "reference", ["counting"])
    settings = demo.three_way_settings(reference)
    assert [(v["name"], v["stack"], v["method"], v["draft_model"], v["num_speculative_tokens"]) for v in settings["variants"]] == [
        ("qwen-vllm", REFERENCE, "none", "", 0),
        ("qwen-sd-vllm", REFERENCE, "draft", "Qwen/Qwen3-1.7B", 7),
        ("qwen-eagle3-vllm", NEURON, "eagle3", "RedHatAI/Qwen3-32B-speculator.eagle3", 5),
    ]
    assert settings["serving"]["comparison"] == "cross-stack" and reference["serving"]["comparison"] == "same stack"


def test_cross_stack_runs_are_labelled_in_the_report_and_the_dashboard():
    from types import SimpleNamespace

    from specbench.analysis.aggregate import cross_stack_note
    from specbench.outputs.report import deployment_table

    variants = [
        {"name": "qwen-vllm", "draft_model": "", "stack": REFERENCE, "method": "none", "speculator": "none"},
        {
            "name": "qwen-e3",
            "draft_model": "h/x",
            "num_speculative_tokens": 5,
            "stack": NEURON,
            "method": "eagle3",
            "speculator": "trained head",
        },
    ]
    note = cross_stack_note({"variants": variants})
    assert note == (
        "CROSS-STACK comparison (qwen-vllm on nxdi-draft, qwen-e3 on vllm-neuron): image, engine and Neuron settings differ "
        "besides speculation, so a speedup is not speculation's alone."
    )
    assert cross_stack_note({"variants": [{**v, "stack": NEURON} for v in variants]}) == ""
    assert cross_stack_note({"variants": [{"name": "old", "draft_model": "a/b"}]}) == ""  # a run from before stacks
    rows = dict(deployment_table(SimpleNamespace(settings={"variants": variants})).rows)
    assert rows == {
        "service qwen-vllm": "baseline (no speculation); stack nxdi-draft",
        "service qwen-e3": "method eagle3, trained head h/x, k=5; stack vllm-neuron",
    }


def test_the_eagle3_emulator_exposes_v1_counters_per_position():
    import urllib.request

    from specbench.analysis.acceptance import parse_spec_decode

    with _demo().eagle3_emulator(time_scale=0.01) as url:
        body = {"model": "Qwen/Qwen3-32B", "prompt": "counting numbers from 1 2 3", "max_tokens": 40, "stream": True}
        request = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - loopback
            response.read()
        with urllib.request.urlopen(url + "/metrics", timeout=30) as response:  # noqa: S310 - loopback
            snapshot = parse_spec_decode(response.read().decode(), "Qwen/Qwen3-32B")
    assert snapshot.num_drafts and snapshot.num_draft_tokens == 5 * snapshot.num_drafts
    assert sorted(snapshot.accepted_per_pos) == [0, 1, 2, 3, 4]
    assert sum(snapshot.accepted_per_pos.values()) == snapshot.num_accepted_tokens


def test_the_variant_synth_deploys_the_vllm_neuron_stack(variant_platform, platform):
    """The variant app (tests/conftest.py) runs the second stack through the full CDK synth, cfn-lint and
    cdk-nag; its templates carry that stack's image and EAGLE3 head, the default app's do not."""
    variant, default = json.dumps(variant_platform), json.dumps(platform)
    assert serving_stacks.STACKS[NEURON].image in variant and serving_stacks.STACKS[NEURON].image not in default
    assert serving_stacks.STACKS[REFERENCE].image in default and serving_stacks.STACKS[REFERENCE].image not in variant
    assert "--eagle3-head" in variant and "--additional-config" in variant and "--override-neuron-config" not in variant


def test_an_image_other_than_the_stacks_pin_is_a_warning():
    from config.validate import config_warnings

    image = "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.9.1-neuronx-py311-sdk2.26.1-ubuntu22.04"
    config = _config(serving__stack=NEURON, serving__image=image, cluster__public_access_cidrs="198.51.100.7/32")
    assert config_warnings(config) == [
        f"serving.image={image}: not the image serving.stack=vllm-neuron pins ({serving_stacks.STACKS[NEURON].image}); its "
        'arguments and environment follow that stack\'s documentation (README, "Which serving stack")'
    ]
    assert config_warnings(_config(serving__stack=NEURON, cluster__public_access_cidrs="198.51.100.7/32")) == []


def test_a_shared_spec_moves_to_another_stack_with_only_stack_image_and_method_changed():
    from charts.serving_stack import on_stack

    shared = serving_plan(_config(), BUCKET).services[0].serving
    moved = on_stack(shared, NEURON)
    assert (moved.stack, moved.image, moved.speculation_method) == (NEURON, serving_stacks.STACKS[NEURON].image, "eagle3")
    assert dataclasses.replace(moved, stack=shared.stack, image=shared.image, speculation_method=shared.speculation_method) == shared


# --- the heads' geometry ---------------------------------------------------------------------------------

ANGELSLIM = "AngelSlim/Qwen3-32B_eagle3"
ANGELSLIM_REFUSED = (
    "cannot pair with Qwen/Qwen3-32B: head_dim is 80, the target's is 128: the plugin keeps the draft's layers in the "
    "target's KV-cache group (validate_same_kv_cache_group); weights are .bin, not SafeTensors: the plugin loads "
    "SafeTensors only; allowed: RedHatAI/Qwen3-32B-speculator.eagle3, thoughtworks/Qwen3-32B-Eagle3"
)


def test_every_known_head_records_its_geometry_and_says_what_was_not_read():
    assert set(serving_stacks.HEAD_GEOMETRY) == set(serving_stacks.KNOWN_HEADS)
    unread = {head: g.unverified for head, g in serving_stacks.HEAD_GEOMETRY.items()}
    assert unread == {
        ANGELSLIM: ("num_key_value_heads", "vocab_size", "architecture", "revision"),
        "RedHatAI/Qwen3-32B-speculator.eagle3": (),
        "thoughtworks/Qwen3-32B-Eagle3": ("vocab_size", "weight_format", "architecture"),
    }
    assert serving_stacks.TARGET_GEOMETRY["Qwen/Qwen3-32B"].unverified == ()


def test_only_heads_that_pair_with_the_target_are_chosen_from():
    target = serving_stacks.TARGET_GEOMETRY["Qwen/Qwen3-32B"]
    verdicts = {h: [f for f, _ in serving_stacks.pairing_problems(g, target)] for h, g in serving_stacks.HEAD_GEOMETRY.items()}
    assert verdicts == {
        ANGELSLIM: ["head_dim", "weight_format"],
        "RedHatAI/Qwen3-32B-speculator.eagle3": [],
        "thoughtworks/Qwen3-32B-Eagle3": [],
    }
    default = serving_stacks.DEFAULT_HEAD
    assert not verdicts[default] and serving_stacks.HEAD_GEOMETRY[default].unverified == ()


@pytest.mark.parametrize("head", ["RedHatAI/Qwen3-32B-speculator.eagle3", "thoughtworks/Qwen3-32B-Eagle3"])
def test_a_head_that_pairs_synthesizes(head):
    assert _config(serving__stack=NEURON, serving__speculator_head=head).serving.speculator_head == head


@pytest.mark.parametrize(
    "context, key",
    [
        ({"serving__speculator_head": ANGELSLIM}, "serving.speculator_head"),
        (
            {"serving__extra_speculative_variants": f"qwen-e3-k4:{ANGELSLIM}:4", "neuron_nodes__max_size": 2},
            "serving.extra_speculative_variants",
        ),
        ({"sweep__variants": f"e3-k5:{ANGELSLIM}:5", "neuron_nodes__max_size": 2, "neuron_nodes__desired_size": 2}, "sweep.variants"),
    ],
)
def test_synth_refuses_a_known_head_that_cannot_pair_in_one_line(context, key):
    with pytest.raises(ConfigError) as err:
        _config(serving__stack=NEURON, **context)
    assert str(err.value) == f"config error: {key}={ANGELSLIM!r}: {ANGELSLIM_REFUSED}"


def test_a_head_the_catalogue_does_not_know_is_left_to_the_model_cache_job():
    config = _config(serving__stack=NEURON, serving__speculator_head="someone/my-head", serving__speculator_head_target="Qwen/Qwen3-32B")
    assert serving_plan(config, BUCKET).model_cache.eagle3_heads == ("someone/my-head",)
