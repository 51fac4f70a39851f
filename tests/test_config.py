"""The typed configuration: defaults, coercion of context values, and every validation class."""

from __future__ import annotations

import pytest

from config import ConfigError, all_keys, catalog, load_config
from config.errors import echo
from config.loader import coerce
from config.model import OFFLINE_ACCOUNT, OFFLINE_REGION

# A context that is valid except for what a test changes.
BASE: dict[str, object] = {}


def problems(**context: object) -> list[str]:
    """The rendered problems for a context given as key__field=value (dots spelled __)."""
    ctx = {key.replace("__", "."): value for key, value in context.items()}
    with pytest.raises(ConfigError) as err:
        load_config(ctx, {})
    return [str(p) for p in err.value.problems]


def only_problem(**context: object) -> str:
    found = problems(**context)
    assert len(found) == 1, found
    return found[0]


def test_defaults_equal_the_reference_setup():
    config = load_config({}, {})
    assert (config.env.account, config.env.region) == (OFFLINE_ACCOUNT, OFFLINE_REGION)
    assert config.env.availability_zones == ("us-east-2a", "us-east-2b", "us-east-2c")
    assert config.neuron_nodes.instance_type == "trn2.48xlarge"
    assert config.neuron_nodes.availability_zone == "us-east-2a"
    assert config.neuron_nodes.logical_nc_config == 2
    s = config.serving
    assert (s.target_model, s.draft_model, s.num_speculative_tokens) == ("Qwen/Qwen3-32B", "Qwen/Qwen3-1.7B", 7)
    assert (s.tensor_parallel_size, s.max_num_seqs, s.max_model_len) == (32, 4, 1024)
    assert s.image == "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.9.1-neuronx-py311-sdk2.26.1-ubuntu22.04"
    b = config.benchmark
    assert (b.input_tokens, b.output_tokens, b.concurrent_requests, b.requests_per_test_case) == (64, 600, 4, 8)
    assert b.metrics_namespace == "Qwen/LLMPerf"
    assert (b.engine, b.suite_file, b.seed, b.temperature, b.request_timeout_seconds) == ("native", "", 11111, 0.0, 1200)
    assert (b.cpu, b.memory_gib, b.ttl_after_finished_hours, b.run_on_deploy) == (1, 4, 24, True)
    assert b.image == "public.ecr.aws/docker/library/python:3.10.19-slim"
    assert config.data.keep_bucket_on_destroy is True


def test_environment_supplies_account_and_region_and_derived_azs():
    config = load_config({}, {"CDK_DEFAULT_ACCOUNT": "210987654321", "CDK_DEFAULT_REGION": "ap-south-2"})
    assert config.env.account == "210987654321"
    assert config.env.availability_zones == ("ap-south-2a", "ap-south-2b", "ap-south-2c")
    assert config.neuron_nodes.availability_zone == "ap-south-2a"


def test_cli_fallback_region_without_credentials_is_ignored():
    """Offline, the CLI still sets CDK_DEFAULT_REGION=us-east-1 (its fallback) but no account."""
    config = load_config({}, {"CDK_DEFAULT_REGION": "us-east-1"})
    assert (config.env.account, config.env.region) == (OFFLINE_ACCOUNT, OFFLINE_REGION)


def test_context_beats_environment():
    config = load_config({"env.region": "us-east-2"}, {"CDK_DEFAULT_ACCOUNT": "210987654321", "CDK_DEFAULT_REGION": "eu-west-1"})
    assert config.env.region == "us-east-2"


def test_every_field_is_overridable_from_the_command_line_as_text():
    """Each key accepts a string (what `-c key=value` delivers) and keeps its type."""
    config = load_config(
        {
            "serving.tensor_parallel_size": "64",
            "neuron_nodes.max_size": "2",
            "data.keep_bucket_on_destroy": "false",
            "cluster.admin_principal_arns": "arn:aws:iam::123456789012:role/A, arn:aws:iam::123456789012:role/B",
            "env.availability_zones": '["us-east-2b", "us-east-2c"]',
        },
        {},
    )
    assert config.serving.tensor_parallel_size == 64
    assert config.data.keep_bucket_on_destroy is False
    assert config.cluster.admin_principal_arns == ("arn:aws:iam::123456789012:role/A", "arn:aws:iam::123456789012:role/B")
    assert config.env.availability_zones == ("us-east-2b", "us-east-2c")
    assert config.neuron_nodes.availability_zone == "us-east-2b"
    assert len(all_keys()) == len(set(all_keys())) >= 40


@pytest.mark.parametrize(
    "value, kind, expected",
    [
        ("8", int, 8),
        (8.0, int, 8),
        (" true ", bool, True),
        ("off", bool, False),
        ("a,b", tuple[str, ...], ("a", "b")),
        ("0.7", float, 0.7),
        (1, float, 1.0),
    ],
)
def test_coerce_accepts(value, kind, expected):
    assert coerce(value, kind) == expected


@pytest.mark.parametrize(
    "value, kind",
    [
        ("eight", int),
        (True, int),
        (8.5, int),
        ("maybe", bool),
        (3, str),
        ("[1, 2]", tuple[str, ...]),
        ("[x", tuple[str, ...]),
        ("warm", float),
        (False, float),
    ],
)
def test_coerce_rejects(value, kind):
    with pytest.raises(ValueError):
        coerce(value, kind)


def test_wrong_type_names_the_field_and_what_is_expected():
    assert only_problem(serving__max_num_seqs="four") == "serving.max_num_seqs='four': expected a whole number"
    assert only_problem(data__keep_bucket_on_destroy="perhaps") == "data.keep_bucket_on_destroy='perhaps': expected true or false"


def test_unknown_setting_suggests_the_closest_key():
    assert "did you mean serving.tensor_parallel_size?" in only_problem(serving__tensor_paralel_size="32")


def test_cdk_context_keys_are_not_mistaken_for_settings():
    load_config({"@aws-cdk/core:checkSecretUsage": True, "availability-zones:account=1:region=r": ["x"]}, {})


def test_all_problems_are_reported_at_once():
    found = problems(serving__max_num_seqs="x", serving__tensor_parallel_size=30, neuron_nodes__capacity_mode="spot")
    assert [p.split("=")[0] for p in found] == ["serving.max_num_seqs", "neuron_nodes.capacity_mode", "serving.tensor_parallel_size"]


def test_error_message_is_one_line_per_problem():
    with pytest.raises(ConfigError) as err:
        load_config({"serving.num_speculative_tokens": 0, "benchmark.output_tokens": 2000}, {})
    lines = str(err.value).splitlines()
    assert len(lines) == 2 and all(line.startswith("config error: ") for line in lines)


# --- tensor parallelism -------------------------------------------------------------------------


def test_tensor_parallelism_must_be_whole_devices():
    msg = only_problem(serving__tensor_parallel_size=30)
    assert msg.startswith("serving.tensor_parallel_size=30: is not a whole number of Neuron devices")
    assert "a multiple of 4 up to 64 on trn2.48xlarge at LNC=2" in msg


def test_tensor_parallelism_must_fit_one_node():
    assert "exceeds the 64 logical NeuronCores" in only_problem(serving__tensor_parallel_size=128)


def test_lnc1_doubles_the_logical_cores():
    config = load_config({"neuron_nodes.logical_nc_config": 1, "serving.tensor_parallel_size": 64}, {})
    assert config.serving.tensor_parallel_size == 64
    assert "a multiple of 8" in only_problem(neuron_nodes__logical_nc_config=1, serving__tensor_parallel_size=4)


def test_both_services_must_fit_the_node_group():
    msg = only_problem(serving__tensor_parallel_size=64)
    assert msg.startswith("neuron_nodes.max_size=1: fits 1 service(s) (1 per node: 16 devices, 90 vCPU, 900 GiB each), but 2 are")
    load_config({"serving.tensor_parallel_size": 64, "neuron_nodes.max_size": 2, "neuron_nodes.desired_size": 2}, {})


def test_lnc_must_be_supported_by_the_chip():
    assert only_problem(neuron_nodes__instance_type="trn1.32xlarge", neuron_nodes__logical_nc_config=2).startswith(
        "neuron_nodes.logical_nc_config=2: is not supported on trn1.32xlarge"
    )


# --- instance types -----------------------------------------------------------------------------


def test_non_trainium_accelerator_is_named_as_such():
    msg = only_problem(neuron_nodes__instance_type="inf2.48xlarge")
    assert "is an accelerator but not Trainium" in msg and "trn2.48xlarge" in msg


def test_unknown_instance_type():
    assert "is not an EC2 instance type" in only_problem(neuron_nodes__instance_type="trn9.huge")
    # m7i.xlarge exists in EC2, but it has no Neuron device shape in config/catalog.py.
    assert "is not a Trainium instance type whose Neuron shape is known" in only_problem(neuron_nodes__instance_type="m7i.xlarge")


def test_system_group_rejects_accelerators():
    assert "is an accelerator instance" in only_problem(system_nodes__instance_type="trn2.48xlarge")


# --- speculation and models ---------------------------------------------------------------------


@pytest.mark.parametrize("k", [16, -1])
def test_speculative_tokens_range(k):
    assert only_problem(serving__num_speculative_tokens=k) == f"serving.num_speculative_tokens={k}: is out of range; allowed: 1 to 15"


def test_draft_must_share_the_target_family():
    msg = only_problem(serving__draft_model="meta-llama/Llama-3.2-1B")
    assert "family 'Llama-3'" in msg and "'Qwen3'" in msg and "allowed: a smaller Qwen3 model" in msg


def test_draft_must_be_smaller_than_target():
    assert "is not smaller than the target (32B >= 32B)" in only_problem(serving__draft_model="Qwen/Qwen3-32B")


def test_model_ids_must_look_like_hugging_face_ids():
    assert "is not a Hugging Face model id" in problems(serving__target_model="qwen3")[0]


def test_unknown_speculation_method():
    assert only_problem(serving__speculation_method="medusa") == (
        "serving.speculation_method='medusa': is not supported by serving.stack=nxdi-draft; allowed: draft"
    )


@pytest.mark.parametrize(
    "model, family, size",
    [
        ("Qwen/Qwen3-32B", "Qwen3", 32.0),
        ("Qwen/Qwen3-1.7B", "Qwen3", 1.7),
        ("meta-llama/Llama-3.1-70B-Instruct", "Llama-3", 70.0),
        ("meta-llama/Llama-3.2-1B", "Llama-3", 1.0),
        ("acme/Widget-7B-Chat", "acme/Widget", 7.0),
        ("acme/tiny", "acme/tiny", None),
    ],
)
def test_model_family_and_size(model, family, size):
    assert catalog.model_family(model) == family
    assert catalog.model_size_billions(model) == size


def test_max_model_len_must_hold_the_benchmark():
    assert only_problem(serving__max_model_len=600) == (
        "serving.max_model_len=600: is shorter than benchmark input + output tokens (64 + 600); allowed: >= 664"
    )
    assert "serving.max_model_len" in only_problem(benchmark__output_tokens=2000)


def test_image_must_be_pinned():
    assert "pinned by tag or digest" in only_problem(serving__image="public.ecr.aws/neuron/vllm")
    load_config({"serving.image": "123456789012.dkr.ecr.us-east-2.amazonaws.com/vllm@sha256:" + "a" * 64}, {})


# --- capacity -----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["capacity-block", "reservation"])
def test_reserved_capacity_needs_its_id(mode):
    assert only_problem(neuron_nodes__capacity_mode=mode) == (
        f"neuron_nodes.capacity_reservation_id='': is required with capacity_mode={mode}; allowed: the reservation id, cr-<17 hex digits>"
    )


def test_reservation_id_format_and_on_demand_without_id():
    assert "is not a capacity reservation id" in only_problem(
        neuron_nodes__capacity_mode="reservation", neuron_nodes__capacity_reservation_id="reservation-1"
    )
    assert "is set but capacity_mode is on-demand" in only_problem(neuron_nodes__capacity_reservation_id="cr-0123456789abcdef0")


def test_unknown_capacity_mode():
    assert only_problem(neuron_nodes__capacity_mode="spot").endswith("allowed: on-demand, capacity-block, reservation")


def test_neuron_az_must_be_one_of_the_vpc_azs():
    assert only_problem(neuron_nodes__availability_zone="us-east-2d") == (
        "neuron_nodes.availability_zone='us-east-2d': is not one of env.availability_zones; allowed: us-east-2a, us-east-2b, us-east-2c"
    )


# --- environment, network, cluster --------------------------------------------------------------


def test_az_outside_the_region():
    found = problems(env__availability_zones="us-east-2a,us-west-2b")
    assert "env.availability_zones='us-west-2b': is not an availability zone of us-east-2; allowed: us-east-2a, us-east-2b, ..." in found


def test_vpc_needs_two_azs():
    assert "EKS needs subnets in at least two AZs" in only_problem(env__availability_zones="us-east-2a")


def test_account_and_region_format():
    assert only_problem(env__account="12345").startswith("env.account='12345': is not an AWS account id")
    assert problems(env__region="Ohio")[0].startswith("env.region='Ohio': is not an AWS region name")


@pytest.mark.parametrize(
    "arn, hint",
    [
        ("arn:aws:sts::123456789012:assumed-role/Admin/me", "not an assumed-role session"),
        ("arn:aws:iam::1234:role/Admin", "is not an IAM role or user ARN"),
        ("Admin", "is not an IAM role or user ARN"),
    ],
)
def test_malformed_admin_arns(arn, hint):
    assert hint in only_problem(cluster__admin_principal_arns=arn)


def test_valid_admin_arns_in_other_partitions():
    load_config({"cluster.admin_principal_arns": "arn:aws-us-gov:iam::123456789012:role/path/Admin"}, {})


def test_kubernetes_version_must_match_the_kubectl_layer():
    assert only_problem(cluster__kubernetes_version="1.30").endswith("allowed: 1.34, 1.35, 1.36")


def test_endpoint_mode_and_cidrs():
    assert only_problem(cluster__endpoint_access="public").endswith("allowed: public-and-private, private")
    assert "is not an IPv4 CIDR" in only_problem(cluster__public_access_cidrs="10.0.0.0/33")


def test_vpc_cidr_and_nat_gateways():
    assert "is not an IPv4 CIDR" in only_problem(network__vpc_cidr="10.0.0.300/16")
    assert "/16 to /20" in only_problem(network__vpc_cidr="10.0.0.0/24")
    assert only_problem(network__nat_gateways=4) == "network.nat_gateways=4: is out of range; allowed: 1 to 3"


def test_node_group_sizes():
    assert "must lie between min_size=2 and max_size=3" in only_problem(system_nodes__desired_size=5)
    assert "neuron_nodes.desired_size" in only_problem(neuron_nodes__min_size=2, neuron_nodes__max_size=2, neuron_nodes__desired_size=1)


def test_system_group_cannot_scale_to_zero():
    assert only_problem(system_nodes__min_size=0) == (
        "system_nodes.min_size=0: leaves CoreDNS and the add-ons nowhere to run; allowed: >= 1"
    )


def test_root_volume_limits():
    assert only_problem(neuron_nodes__root_volume_iops=20000).endswith("allowed: 3000 to 16000")
    assert only_problem(neuron_nodes__root_volume_gib=50).endswith("allowed: 100 to 16384")


def test_versions_and_namespaces():
    assert "helm pull needs one" in only_problem(addons__neuron_helm_chart_version="latest")
    assert "is not an EKS add-on version" in only_problem(addons__cloudwatch_observability_version="4.0")
    load_config({"addons.cloudwatch_observability_version": "v4.5.0-eksbuild.1"}, {})
    assert "not starting with AWS/" in only_problem(benchmark__metrics_namespace="AWS/EKS")


def test_log_retention_must_be_a_cloudwatch_period():
    assert only_problem(data__log_retention_days=10).startswith("data.log_retention_days=10: is not a CloudWatch Logs retention period")


def test_scheduler_extension_needs_a_connected_device_count():
    # 24 logical cores = 6 devices: a whole number, but not a set the Neuron scheduler can place.
    msg = only_problem(serving__tensor_parallel_size=24)
    assert msg.startswith("serving.tensor_parallel_size=24: needs 6 devices, a count the Neuron scheduler extension cannot place")
    assert msg.endswith("allowed: 4, 16, 32, 64 (or addons.neuron_scheduler=false)")
    load_config({"serving.tensor_parallel_size": 24, "addons.neuron_scheduler": "false"}, {})


# --- services: variants, names, resources ------------------------------------------------------


def test_extra_variants_each_need_their_own_devices():
    extra = {"serving.extra_speculative_variants": "qwen-sd-k4:Qwen/Qwen3-1.7B:4,qwen-sd-06b:Qwen/Qwen3-0.6B:7"}
    msg = only_problem(**{k.replace(".", "__"): v for k, v in extra.items()})
    assert msg.startswith("neuron_nodes.max_size=1: fits 2 service(s)")
    assert "but 4 are configured; allowed: >= 2" in msg
    load_config({**extra, "neuron_nodes.max_size": 2}, {})


@pytest.mark.parametrize(
    "text, problem",
    [
        ("qwen-sd-k4", "is not NAME:SPECULATOR:K"),
        ("qwen-sd-k4:Qwen/Qwen3-1.7B:four", "has K='four', not a whole number"),
        ("qwen-sd-k4:Qwen/Qwen3-1.7B:16", "is out of range; allowed: 1 to 15"),
        ("qwen-sd-k4:meta-llama/Llama-3.2-1B:4", "a draft must share the target's tokenizer"),
        ("qwen-sd-k4:Qwen/Qwen3-1.7B:0", "is missing: the draft model Qwen/Qwen3-1.7B needs a number of tokens"),
        ("Qwen_SD:Qwen/Qwen3-1.7B:4", "is not a Kubernetes Service name"),
        ("qwen-vllm:Qwen/Qwen3-1.7B:4", "names a service twice"),
    ],
)
def test_bad_extra_variants_are_named(text, problem):
    found = problems(serving__extra_speculative_variants=text, neuron_nodes__max_size=2)
    assert len(found) == 1 and found[0].startswith("serving.extra_speculative_variants=") and problem in found[0], found


def test_speculative_service_needs_a_draft():
    assert only_problem(serving__draft_model="") == (
        "serving.draft_model='': is empty; the speculative service needs a draft model; allowed: a smaller model of the target's family"
    )


def test_service_names_are_dns_labels():
    assert "is not a Kubernetes Service name" in only_problem(serving__speculative_service="qwen.sd")
    assert "names a service twice" in only_problem(serving__speculative_service="qwen-vllm")
    assert "is not a Kubernetes namespace name" in only_problem(serving__namespace="Spec_Decode")


def test_services_must_fit_a_node_in_cpu_and_memory():
    assert only_problem(serving__cpu_per_service=190) == (
        "serving.cpu_per_service=190: does not fit one trn2.48xlarge next to its daemons and the model-cache Job; allowed: <= 183"
    )
    assert "serving.memory_gib_per_service=2040: does not fit one trn2.48xlarge" in only_problem(serving__memory_gib_per_service=2040)
    # Two 95-vCPU services do not fit one node together: the node group must grow.
    assert only_problem(serving__cpu_per_service=95).startswith("neuron_nodes.max_size=1: fits 1 service(s) (1 per node")


def test_shm_must_fit_in_the_memory_limit():
    assert "must be at least 1 and below serving.memory_gib_per_service" in only_problem(serving__shm_gib=900)


def test_hf_token_secret_is_a_full_arn():
    msg = only_problem(serving__hf_token_secret_arn="hf/token")
    assert msg.startswith("serving.hf_token_secret_arn='hf/token': is not the full ARN of a Secrets Manager secret")
    load_config({"serving.hf_token_secret_arn": "arn:aws:secretsmanager:us-east-2:123456789012:secret:hf/token-AbCdEf"}, {})


def test_neuron_scheduler_image_follows_the_cluster_version():
    assert load_config({}, {}).addons.neuron_scheduler_image == "registry.k8s.io/kube-scheduler:v1.35.0"
    assert load_config({"cluster.kubernetes_version": "1.36"}, {}).addons.neuron_scheduler_image.endswith(":v1.36.0")
    digest = "registry.k8s.io/kube-scheduler@sha256:" + "a" * 64
    assert "is not an image reference pinned by tag" in only_problem(addons__neuron_scheduler_image=digest)


# --- benchmark ----------------------------------------------------------------------------------


def test_benchmark_engine_must_be_known():
    assert only_problem(benchmark__engine="foo") == "benchmark.engine='foo': is not a benchmark engine; allowed: native, llmperf"
    assert load_config({"benchmark.engine": "llmperf"}, {}).benchmark.engine == "llmperf"


def test_missing_suite_file_names_the_field(tmp_path):
    missing = tmp_path / "nope.json"
    assert only_problem(benchmark__suite_file=str(missing)) == (
        f"benchmark.suite_file={echo(str(missing))}: suite file {missing} does not exist; "
        "allowed: a JSON suite file as described in specbench/prompts/suite.py, or empty for the reference suite"
    )


def test_suite_file_is_validated_like_the_benchmark_validates_it(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"test_cases": [{"name": "a", "prompt_class": "creative", "text": "x"}]}')
    msg = only_problem(benchmark__suite_file=str(bad))
    assert msg.startswith(f"benchmark.suite_file={echo(str(bad))}: {bad}: test_cases[0].prompt_class: 'creative' is not allowed")
    not_json = tmp_path / "not.json"
    not_json.write_text("{")
    assert "not valid JSON" in only_problem(benchmark__suite_file=str(not_json))
    good = tmp_path / "good.json"
    good.write_text('{"test_cases": [{"name": "a", "prompt_class": "structured", "text": "x"}]}')
    assert load_config({"benchmark.suite_file": str(good)}, {}).benchmark.suite_file == str(good)


@pytest.mark.parametrize(
    "key, value, allowed",
    [
        ("temperature", "2.5", "0.0 to 2.0"),
        ("temperature", "2.5", "0.0 to 2.0"),  # nan: refused as a number (tests/test_config_inputs.py)
        ("seed", "-1", "0 to 4294967295"),
        ("request_timeout_seconds", "5", "10 to 7200"),
        ("cpu", "0", "1 to 16"),
        ("memory_gib", "128", "1 to 64"),
        ("ttl_after_finished_hours", "0", "1 to 720"),
        ("concurrent_requests", "0", "1 to 1024"),
    ],
)
def test_benchmark_ranges_name_the_field_and_the_allowed_values(key, value, allowed):
    assert only_problem(**{f"benchmark__{key}": value}).endswith(f"is out of range; allowed: {allowed}")
    assert only_problem(**{f"benchmark__{key}": value}).startswith(f"benchmark.{key}=")


def test_benchmark_types_and_image():
    assert only_problem(benchmark__temperature="warm") == "benchmark.temperature='warm': expected a number"
    assert only_problem(benchmark__run_on_deploy="sometimes") == "benchmark.run_on_deploy='sometimes': expected true or false"
    assert "is not an image reference pinned by tag or digest" in only_problem(benchmark__image="python")
    config = load_config({"benchmark.temperature": "0.6", "benchmark.run_on_deploy": "false"}, {})
    assert (config.benchmark.temperature, config.benchmark.run_on_deploy) == (0.6, False)


# --- results --------------------------------------------------------------------------------------


def test_results_defaults_and_text_values():
    r = load_config({}, {}).results
    assert (r.dashboard_name, r.refresh_minutes, r.lookback_hours) == ("SpecDecode-Benchmark", 15, 24)
    assert (r.draft_cost_ratio, r.bootstrap_resamples) == (0.1, 2000)
    r = load_config(
        {
            "results.dashboard_name": "My_Bench-2",
            "results.refresh_minutes": "1",
            "results.lookback_hours": "360",
            "results.draft_cost_ratio": "0.05",
            "results.bootstrap_resamples": 100000,
        },
        {},
    ).results
    assert (r.dashboard_name, r.refresh_minutes, r.lookback_hours, r.draft_cost_ratio, r.bootstrap_resamples) == (
        "My_Bench-2",
        1,
        360,
        0.05,
        100000,
    )


@pytest.mark.parametrize(
    "key, value, allowed",
    [
        ("refresh_minutes", "0", "1 to 1440"),
        ("refresh_minutes", "1441", "1 to 1440"),
        ("lookback_hours", "0", "1 to 360"),
        ("lookback_hours", "361", "1 to 360"),
        ("bootstrap_resamples", "99", "100 to 100000"),
        ("bootstrap_resamples", "100001", "100 to 100000"),
        ("draft_cost_ratio", "0", "greater than 0.0 and less than 1.0"),
        ("draft_cost_ratio", "1.0", "greater than 0.0 and less than 1.0"),
        ("draft_cost_ratio", "-0.1", "greater than 0.0 and less than 1.0"),
        ("draft_cost_ratio", "1e3", "greater than 0.0 and less than 1.0"),  # nan, inf: refused as numbers (test_config_inputs.py)
    ],
)
def test_results_ranges_name_the_field_and_the_allowed_values(key, value, allowed):
    message = only_problem(**{f"results__{key}": value})
    assert message.startswith(f"results.{key}=")
    assert message.endswith(f"is out of range; allowed: {allowed}")


@pytest.mark.parametrize("name", ["", "has space", "slash/name", "dots.name", "x" * 256])
def test_dashboard_name_follows_cloudwatch_rules(name):
    assert only_problem(results__dashboard_name=name) == (
        f"results.dashboard_name={echo(name)}: is not a CloudWatch dashboard name; allowed: 1-255 of A-Z a-z 0-9 - _"
    )
    assert load_config({"results.dashboard_name": "x" * 255}, {}).results.dashboard_name == "x" * 255


def test_results_types():
    assert only_problem(results__draft_cost_ratio="cheap") == "results.draft_cost_ratio='cheap': expected a number"
    assert only_problem(results__refresh_minutes="often") == "results.refresh_minutes='often': expected a whole number"
    assert (
        only_problem(results__dashbord_name="x")
        == "results.dashbord_name='x': is not a setting; allowed: did you mean results.dashboard_name?"
    )
