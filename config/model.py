"""The typed configuration: the single source of every setting.

Each section is a frozen dataclass; each field carries its documentation (``doc``), which the
configuration table of docs/configuration.md is generated from (``python -m config.docs``). Defaults equal the
reference setup (../shared/REFERENCE.md section 1). A field whose default depends on another
field (the availability zones depend on the region) has ``derived`` set and an empty default;
the loader fills it in.

Context key of a field = ``<section>.<field>``, e.g. ``serving.tensor_parallel_size``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from . import serving_stacks

OFFLINE_ACCOUNT = "123456789012"
OFFLINE_REGION = "us-east-2"


def setting(default: Any, doc: str, *, derived: str = "") -> Any:
    """A configuration field: its default, one line of documentation, and how it is derived."""
    return field(default=default, metadata={"doc": doc, "derived": derived})


@dataclass(frozen=True)
class EnvSettings:
    profile: str = setting(
        "",
        "A named set of settings (config/profiles.py) that explicit settings still override: `rehearsal` (the same stacks, "
        "services, Job, Lambda, dashboard and report on two trn2.3xlarge nodes, one chip per service: Qwen3-8B with a "
        'Qwen3-0.6B draft at TP 4, a three-case suite; every output says rehearsal; README, "A rehearsal on one chip"); '
        "empty = the reference run's settings.",
    )
    account: str = setting(
        "",
        "AWS account to deploy to.",
        derived=f"`CDK_DEFAULT_ACCOUNT` (set by the CLI when credentials resolve), else `{OFFLINE_ACCOUNT}`",
    )
    region: str = setting(
        "",
        "AWS region to deploy to; it must offer your Trainium type.",
        derived=f"`CDK_DEFAULT_REGION` when an account resolved, else `{OFFLINE_REGION}`",
    )
    availability_zones: tuple[str, ...] = setting(
        (),
        "AZs the VPC spans (2 or 3: EKS needs two, the subnet layout of `network.vpc_cidr` holds three); "
        "must include `neuron_nodes.availability_zone`. "
        "Set it where a region's AZ letters are not a, b, c.",
        derived="`<region>a`, `<region>b`, `<region>c`",
    )


@dataclass(frozen=True)
class NetworkSettings:
    vpc_cidr: str = setting("10.40.0.0/16", "IPv4 CIDR of the VPC (/16 to /20; private subnets get a quarter each).")
    nat_gateways: int = setting(1, "NAT gateways for the private subnets (1 saves cost, one per AZ survives an AZ loss).")


@dataclass(frozen=True)
class ClusterSettings:
    name: str = setting("specdecode-trn2", "EKS cluster name; also names the log groups.")
    kubernetes_version: str = setting("1.35", "Kubernetes version (the kubectl layer is v1.35: 1.34 to 1.36 allowed).")
    endpoint_access: str = setting(
        "public-and-private", "API endpoint: `public-and-private` (public side limited to `public_access_cidrs`) or `private`."
    )
    public_access_cidrs: tuple[str, ...] = setting(
        ("0.0.0.0/0",),
        "Public IPv4 CIDRs allowed to reach the public API endpoint (authentication is still IAM); synth warns while it is "
        "`0.0.0.0/0`. Set your own, e.g. `198.51.100.7/32`.",
    )
    admin_principal_arns: tuple[str, ...] = setting(
        (), "IAM role or user ARNs given cluster-admin through EKS access entries (comma-separated on `-c`)."
    )
    require_restricted_endpoint: bool = setting(
        False,
        "Strict posture: refuse `0.0.0.0/0` (and `::/0`) in `public_access_cidrs` instead of warning about it at synth.",
    )


@dataclass(frozen=True)
class SystemNodeSettings:
    instance_type: str = setting("m7i.xlarge", "Instance type of the system node group (CoreDNS, add-ons, benchmark pod).")
    min_size: int = setting(2, "Minimum system nodes.")
    desired_size: int = setting(2, "Desired system nodes.")
    max_size: int = setting(3, "Maximum system nodes.")
    disk_size_gib: int = setting(50, "Root volume of a system node, GiB.")


@dataclass(frozen=True)
class NeuronNodeSettings:
    instance_type: str = setting("trn2.48xlarge", "Trainium instance type of the Neuron node group.")
    min_size: int = setting(0, "Minimum Neuron nodes (0 lets you scale to zero between runs).")
    desired_size: int = setting(1, "Desired Neuron nodes; both services fit one trn2.48xlarge at TP 32.")
    max_size: int = setting(1, "Maximum Neuron nodes.")
    root_volume_gib: int = setting(500, "gp3 root volume of a Neuron node, GiB (the serving image alone is ~20 GB).")
    root_volume_iops: int = setting(6000, "Provisioned IOPS of that gp3 volume (3000 to 16000): faster image pulls and cache reads.")
    root_volume_throughput_mibps: int = setting(500, "Provisioned throughput of that gp3 volume, MiB/s (125 to 1000).")
    capacity_mode: str = setting(
        "on-demand", "`on-demand`, `capacity-block` (Capacity Block for ML) or `reservation` (on-demand capacity reservation)."
    )
    capacity_reservation_id: str = setting(
        "", "Reservation id (`cr-...`) for `capacity-block` and `reservation`; must be empty for `on-demand`."
    )
    availability_zone: str = setting(
        "",
        "The one AZ the Neuron nodes run in: where your trn2 capacity (or reservation) is.",
        derived="first of `env.availability_zones`",
    )
    logical_nc_config: int = setting(2, "Logical NeuronCore config (LNC): physical cores per logical core (Trn2: 1 or 2).")
    scale_to_zero_after_run: bool = setting(
        True,
        "Once a benchmark run's results are stored (its `publish.json`), the cost guard sets this node group's desired size "
        "(and minimum) to 0; the services' pods then wait Pending (docs/cost-guard.md). Needs `min_size` 0.",
    )


@dataclass(frozen=True)
class ServingSettings:
    stack: str = setting(
        "nxdi-draft",
        "Serving stack of the speculative services (config/serving_stacks.py): `nxdi-draft` (the reference recipe: vLLM 0.9.1 "
        "V0 + NxD Inference, SDK 2.26.1, plain draft model, fused speculation) or `vllm-neuron` (vLLM V1 + the vLLM-Neuron "
        "plugin, SDK 2.33.0, trained EAGLE3 head; documentation only, not run on hardware here).",
    )
    baseline_stack: str = setting(
        "",
        "Serving stack of the baseline service; a stack other than `serving.stack` is a cross-stack comparison and needs "
        "`serving.cross_stack=true`.",
        derived="`serving.stack`",
    )
    cross_stack: bool = setting(
        False,
        "Allow the baseline on another stack than the speculative services (`serving.baseline_stack`); every output then "
        "labels the comparison cross-stack, since image, engine and Neuron settings differ besides speculation.",
    )
    target_model: str = setting("Qwen/Qwen3-32B", "Hugging Face id of the served (target) model.")
    speculation_method: str = setting(
        "",
        "How the speculative services speculate; one the stack supports: `draft` (a plain draft model, fused speculation; "
        "`nxdi-draft` only) or `eagle3` (a trained EAGLE3 head; `vllm-neuron` only).",
        derived="the stack's default: `draft` on `nxdi-draft`, `eagle3` on `vllm-neuron`",
    )
    draft_model: str = setting(
        "Qwen/Qwen3-1.7B", "Draft model of the speculative service under method `draft`; must share the target's tokenizer family."
    )
    speculator_head: str = setting(
        serving_stacks.DEFAULT_HEAD,
        "Trained EAGLE3 head of the speculative service under method `eagle3` (Hugging Face id); it must have been trained "
        "for `serving.target_model`, and a known head must match its geometry (head dim, KV heads, hidden size, vocabulary, "
        "SafeTensors; config/serving_stacks.py `HEAD_GEOMETRY`). The model cache checks the published `config.json` against "
        "the target's and gives it the architecture name the plugin registers, before anything compiles.",
    )
    speculator_head_target: str = setting(
        "",
        "Target model `serving.speculator_head` was trained for; must equal `serving.target_model`.",
        derived="the head's target for a known public head (config/serving_stacks.py `KNOWN_HEADS`), else empty (then set it)",
    )
    num_speculative_tokens: int = setting(
        7, "Tokens proposed per step (k); the method sets the range: 1 to 15 for `draft`, 2 to 7 for `eagle3`."
    )
    tensor_parallel_size: int = setting(32, "Tensor parallelism in logical NeuronCores; a whole number of devices.")
    max_num_seqs: int = setting(4, "Batch limit (vLLM `--max-num-seqs`).")
    max_model_len: int = setting(
        1024,
        "Context length (vLLM `--max-model-len`); at least benchmark input + output tokens. Synth refuses a length whose KV "
        "cache for `serving.max_num_seqs` sequences, with the weights, does not fit each service's ranks in HBM "
        '(docs/serving-model.md, "Ranking").',
    )
    image: str = setting(
        "",
        "Serving image of `serving.stack`, identical for every service on it; pinned by tag or digest. A cross-stack "
        "baseline runs its own stack's pinned image.",
        derived="the stack's pinned image (config/serving_stacks.py)",
    )
    namespace: str = setting("specdecode", "Kubernetes namespace of the services, the model cache and the benchmark.")
    baseline_service: str = setting("qwen-vllm", "Name of the baseline Deployment and Service (a DNS label).")
    speculative_service: str = setting("qwen-sd-vllm", "Name of the speculative Deployment and Service (a DNS label).")
    extra_speculative_variants: tuple[str, ...] = setting(
        (),
        "Further speculative services for sweeps, each `NAME:SPECULATOR:K` with the draft model (method `draft`) or the "
        "head (`eagle3`) as SPECULATOR (e.g. `qwen-sd-k5:Qwen/Qwen3-1.7B:5`); same stack and method; each needs its own "
        "Neuron devices.",
    )
    cpu_per_service: int = setting(90, "vCPUs requested (and limited to) per service.")
    memory_gib_per_service: int = setting(900, "Memory requested (and limited to) per service, GiB; includes `/dev/shm`.")
    shm_gib: int = setting(128, "Size of the in-memory `/dev/shm` of a service, GiB.")
    startup_timeout_minutes: int = setting(
        285, "Startup-probe budget: how long a first start (download-free, but compiling the Neuron graphs) may take."
    )
    hf_token_secret_arn: str = setting(
        "",
        "Full ARN of a Secrets Manager secret holding a Hugging Face token, for gated models; empty = anonymous downloads.",
    )
    aws_cli_image: str = setting(
        "public.ecr.aws/aws-cli/aws-cli:2.22.0",
        "AWS CLI image of the pods' init containers: every pod that runs project code fetches and checks the code asset "
        "with it; it also reads `hf_token_secret_arn` in the model-cache Job and moves the hardware facts.",
    )


@dataclass(frozen=True)
class BenchmarkSettings:
    engine: str = setting(
        "native",
        "`native` (specbench's own streaming client) or `llmperf` (ray-project/llmperf, as the reference run used it; "
        "installed from GitHub at start, needs Python 3.10).",
    )
    image: str = setting(
        "public.ecr.aws/docker/library/python:3.10.19-slim",
        "Stock Python image of the benchmark Job, pinned; it pip-installs `specbench/requirements*.txt` at start. "
        "Python 3.10: llmperf requires <3.11.",
    )
    suite_file: str = setting(
        "",
        "JSON suite file (format as `specbench/prompts/suites/reference.json`; dataset sources as "
        "`specbench/prompts/suites/classes.json`), relative to where you run cdk, or `builtin:classes` (Spec-Bench's six "
        "prompt classes, code and JSON from pinned public datasets); checked at synth. Empty = the built-in reference suite "
        "(8 test cases).",
    )
    thinking_mode: bool = setting(
        False,
        "Qwen3 thinking mode of every chat request, sent as `chat_template_kwargs.enable_thinking` (it changes what is "
        "generated and so the acceptance).",
    )
    input_tokens: int = setting(64, "Input tokens per request.")
    output_tokens: int = setting(600, "Output tokens per request.")
    concurrent_requests: int = setting(4, "Requests in flight per service.")
    requests_per_test_case: int = setting(8, "Completed requests per test case and service.")
    temperature: float = setting(0.0, "Sampling temperature of every request (0 = greedy, 0.0 to 2.0).")
    seed: int = setting(11111, "Random seed the benchmark passes on (llmperf's fixed seed), so reruns send the same prompts.")
    request_timeout_seconds: int = setting(1200, "Timeout of one request, seconds (the reference run's `--timeout`).")
    max_consecutive_failures: int = setting(
        8,
        "The circuit breaker (both engines): after this many failed requests of one service in a row, nothing more is sent to it "
        "this run (each recorded as `not_sent`; docs/benchmark.md#circuit-breaker); 0 never stops (0 to 100000).",
    )
    metrics_namespace: str = setting("Qwen/LLMPerf", "CloudWatch namespace of the benchmark metrics.")
    cpu: int = setting(1, "vCPUs requested (and limited to) by the benchmark pod, on a system node.")
    memory_gib: int = setting(4, "Memory requested (and limited to) by the benchmark pod, GiB (llmperf's Ray needs room).")
    ttl_after_finished_hours: int = setting(24, "Hours a finished benchmark Job and its pod (with its log) are kept.")
    run_on_deploy: bool = setting(
        True,
        "`cdk deploy` starts the benchmark Job once the services are applied; false creates only the rerun template (a suspended CronJob).",
    )


@dataclass(frozen=True)
class ResultsSettings:
    dashboard_name: str = setting("SpecDecode-Benchmark", "CloudWatch dashboard the aggregation Lambda writes (1-255 of A-Z a-z 0-9 - _).")
    refresh_minutes: int = setting(
        15, "Minutes between scheduled runs of the aggregation Lambda (1 to 1440); it also runs when a run's `publish.json` lands."
    )
    lookback_hours: int = setting(
        24, "Window of the dashboard's live CloudWatch widgets and of the Lambda's GetMetricData, hours (1 to 360)."
    )
    draft_cost_ratio: float = setting(
        0.1,
        "`c` in the speedup model `S = E / (k*c + 1)` (`E` tokens expected per target step, `k` proposed): cost of one "
        "draft step relative to one target step, for the dashboard's expected speedup (greater than 0, less than 1).",
    )
    bootstrap_resamples: int = setting(2000, "Bootstrap resamples of each speedup's 95% confidence interval (100 to 100000).")
    # None (left out): not set, the price catalog's entry (config/prices.py); 0: no price, said so; > 0: the user's price.
    node_price_per_hour: float | None = setting(
        None,
        "USD per hour of one Neuron node, for the cost per million output tokens in the report, dashboard and sweep-report "
        "(0 = no price: cost not computed; else your price, e.g. your Capacity Block's or on-demand rate, within the "
        "instance type's plausible range: $0.20 to $20 per Trainium chip-hour, 3.2 to 320 for a trn2.48xlarge). "
        "Recorded with every run, with its source.",
        derived="left out: the entry of the price catalog (`config/prices.py`) for `neuron_nodes.instance_type` in `env.region` "
        "with `neuron_nodes.capacity_mode` (trn2.48xlarge, us-east-2, on-demand: 14.56, seen 2026-12, unverified); "
        "none there: no price, and every report says so",
    )


@dataclass(frozen=True)
class BudgetSettings:
    node_hours: float = setting(
        48.0,
        "Node-hour budget of the Neuron node group per deployment (0 = none, else up to 100000): once its nodes have run this long "
        "in total, the cost guard sets the desired size to 0 whatever the Jobs do, and notifies its SNS topic.",
    )
    check_minutes: int = setting(15, "Minutes between the cost guard's budget checks (5 to 60); also the most a node's count can lag.")
    notify_email: str = setting(
        "", "E-mail address subscribed to the cost guard's SNS topic (AWS sends a confirmation mail first); empty = no subscription."
    )


@dataclass(frozen=True)
class AddonSettings:
    neuron_helm_chart_version: str = setting("1.10.0", "Version of `oci://public.ecr.aws/neuron/neuron-helm-chart`.")
    neuron_scheduler: bool = setting(
        True, "Install the Neuron scheduler extension; the services then use it to get connected Neuron devices."
    )
    neuron_scheduler_image: str = setting(
        "",
        "kube-scheduler image the Neuron chart's second scheduler runs (the chart's own is v1.31, far outside "
        "the version skew kube-scheduler is supported at).",
        derived="`registry.k8s.io/kube-scheduler:v<cluster.kubernetes_version>.0`",
    )
    # Defaults: versions seen ACTIVE on EKS 1.35 clusters in public deployments (stacks/addons/versions.py
    # cites each); list what your account offers with `aws eks describe-addon-versions` (README).
    cloudwatch_observability_version: str = setting(
        "v5.2.3-eksbuild.1",
        "Version of the `amazon-cloudwatch-observability` add-on (`v<x.y.z>-eksbuild.<n>`); its configuration keys "
        "are version-dependent, so it is pinned.",
    )
    mountpoint_s3_csi_version: str = setting(
        "v2.7.0-eksbuild.1",
        "Version of the `aws-mountpoint-s3-csi-driver` add-on (`v<x.y.z>-eksbuild.<n>`, v2 or later: only v2 accepts Pod Identity).",
    )
    vpc_cni_version: str = setting(
        "v1.21.1-eksbuild.7",
        "Version of the `vpc-cni` add-on (`v<x.y.z>-eksbuild.<n>`, v1.15.1 or later), installed with its network "
        "policy agent on so the app namespace's NetworkPolicies are enforced.",
    )


@dataclass(frozen=True)
class DataSettings:
    keep_bucket_on_destroy: bool = setting(
        True, "Keep the data bucket (weights, compiled artifacts, results) on `cdk destroy`; false empties and deletes it."
    )
    log_retention_days: int = setting(30, "Retention of every log group the stacks create (a CloudWatch Logs period).")


@dataclass(frozen=True)
class SweepSettings:
    # Off while `variants` is empty: nothing is synthesized and the templates are unchanged.
    variants: tuple[str, ...] = setting(
        (),
        "Speculative variants the sweep measures, each `NAME:DRAFT_MODEL:K` or `NAME:DRAFT_MODEL:K:METHOD` (method default "
        "`serving.speculation_method`); the baseline is always measured too, in the first and the last wave. Empty = no sweep.",
    )
    concurrencies: tuple[int, ...] = setting((1, 4), "Closed-loop load levels of every sweep variant: requests in flight (1 to 1024).")
    request_rates: tuple[float, ...] = setting(
        (),
        "Open-loop load levels of every sweep variant: Poisson arrivals, requests per second (greater than 0, up to 1000; native engine).",
    )
    suite: str = setting("", "JSON suite file of the sweep (format as `benchmark.suite_file`); empty = the benchmark's suite.")
    slo_ttft_ms: float = setting(2000.0, "Goodput SLO: time to first token of a request, ms (greater than 0).")
    slo_tpot_ms: float = setting(100.0, "Goodput SLO: time per output token of a request, ms (greater than 0).")
    start_on_deploy: bool = setting(
        False, "`cdk deploy` starts the sweep Job; false creates only its suspended CronJob (start it with `kubectl create job --from`)."
    )
    compile_minutes_per_variant: float = setting(
        120.0, "Plan estimate: first start of a variant whose graphs are not compiled yet (Neuron compilation), minutes."
    )
    start_minutes_per_variant: float = setting(
        15.0, "Plan estimate: start of a variant whose compiled graphs are in the bucket (weights and graphs loaded), minutes."
    )
    measure_minutes_per_point: float = setting(15.0, "Plan estimate: measuring one variant at one load level (the whole suite), minutes.")
    budget_node_hours: float = setting(48.0, "Synth refuses a sweep whose plan needs more Neuron node-hours than this (greater than 0).")
    pod_layout: str = setting(
        "server-container",
        "How a sweep pod holds its vLLM server: `server-container` (a regular container asks for the Neuron devices, the way "
        "the device plugin documents; a small supervisor stops it when the client signals it is done) or `sidecar` (a native "
        "sidecar, an init container with `restartPolicy: Always`: Kubernetes allocates devices to one and keeps them for it; "
        "how the Neuron scheduler extension handles its request is not documented).",
    )
    # The staged sweep (issue 27; specbench/sweep/staged.py, docs/sweeps.md#staged).
    strategy: str = setting(
        "grid",
        "`grid`: measure every variant at every load; `staged`: the baseline and one k per draft first, then stage after stage the "
        "configurations the model cannot rule out (`specbench sweep next`), until the decision at each load is made; in the cluster a "
        "controller Job (`sweep control`) creates each stage's Job (docs/sweeps.md).",
    )
    class_weights: tuple[str, ...] = setting(
        (),
        "The traffic mix the staged decision optimises, `CLASS:WEIGHT` per prompt class of the sweep's suite (each "
        "weight a plain number from 0 to 1e6: they are relative); "
        "empty = the suite's `class_weights`, else equal weights.",
    )
    decision_margin: float = setting(
        0.02,
        "Staged stop rule: an unmeasured configuration whose predicted upper bound beats the best measured by less than this share "
        "of the objective is not worth a compilation (0 to 0.2; 0 = the bare rule).",
    )
    # Issue 37: TP variants (config/sweep.py, docs/sweeps.md#tensor-parallelism).
    tensor_parallel_sizes: tuple[int, ...] = setting(
        (),
        "Tensor parallel sizes (logical cores) the sweep measures every variant at, each with a baseline of its own: a TP "
        "variant is its own unit (its own compile, devices and cost; node-hours charged by device share). Each must be a device "
        "count the Neuron scheduler allocates (at LNC 2 on trn2.48xlarge: 4, 16, 32, 64) whose ranks hold the weights and KV "
        "cache in HBM. Empty = `serving.tensor_parallel_size` only; a list without it measures the variants only at the listed TPs "
        "(the services' baseline is measured always).",
    )


@dataclass(frozen=True)
class PlatformConfig:
    env: EnvSettings = field(default_factory=EnvSettings)
    network: NetworkSettings = field(default_factory=NetworkSettings)
    cluster: ClusterSettings = field(default_factory=ClusterSettings)
    system_nodes: SystemNodeSettings = field(default_factory=SystemNodeSettings)
    neuron_nodes: NeuronNodeSettings = field(default_factory=NeuronNodeSettings)
    serving: ServingSettings = field(default_factory=ServingSettings)
    benchmark: BenchmarkSettings = field(default_factory=BenchmarkSettings)
    results: ResultsSettings = field(default_factory=ResultsSettings)
    budget: BudgetSettings = field(default_factory=BudgetSettings)
    addons: AddonSettings = field(default_factory=AddonSettings)
    data: DataSettings = field(default_factory=DataSettings)
    sweep: SweepSettings = field(default_factory=SweepSettings)


def sections() -> dict[str, type]:
    """Section name -> its dataclass, in declaration order."""
    return {f.name: f.default_factory for f in fields(PlatformConfig)}  # type: ignore[misc]
