"""Typed specs of the serving workloads, derived from the configuration.

One ``ServingSpec`` holds everything the services share (image, target model, tensor parallelism,
batch, context length, resources); every ``VllmServiceSpec`` wraps that same object and adds only
its name and, for a speculative variant, the draft model and k. Parity between the baseline and
the speculative services therefore holds by construction; tests/test_serving_charts.py proves it
on the rendered Deployments.

The settings a service implies that its compiled-artifact folder depends on (the stack's Neuron
flags, the speculative config, where models are mounted) are here too, beside the types: the
mapping to a container (charts/serving_stack.py) imports this module, and this module imports
nothing of it.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from config import ConfigError, PlatformConfig, Problem, catalog, layout, serving_stacks
from config.cost import price_choice
from config.sweep import enabled as sweep_enabled
from config.sweep import mix_weights, sweep_variants, user_variants
from config.validate import speculation_problems, suite_file_problems, tensor_parallel_problems
from config.variants import service_variants
from specbench import bundle
from specbench.analysis.cost import servers_per_node
from specbench.prompts.suite import load_suite


@dataclass(frozen=True)
class ServingSpec:
    """Settings every service shares; any change here changes all of them alike."""

    namespace: str
    image: str
    target_model: str
    tensor_parallel_size: int
    max_num_seqs: int
    max_model_len: int
    instance_type: str
    logical_nc_config: int
    speculation_method: str
    cpu: int
    memory_gib: int
    shm_gib: int
    startup_timeout_minutes: int
    # Empty: the default scheduler. Otherwise the Neuron scheduler extension's scheduler, which
    # allocates connected devices.
    scheduler_name: str = layout.NEURON_SCHEDULER_NAME
    port: int = layout.SERVING_PORT
    # The serving stack (config/serving_stacks.py); charts/serving_stack.py maps it to a container.
    stack: str = serving_stacks.REFERENCE_STACK

    @property
    def instance(self) -> catalog.TrainiumInstance:
        return catalog.TRAINIUM_INSTANCES[self.instance_type]

    @property
    def neuron_devices(self) -> int:
        return self.tensor_parallel_size // self.instance.logical_cores_per_device(self.logical_nc_config)


@dataclass(frozen=True)
class VllmServiceSpec:
    """One vLLM service: the shared spec, plus a speculator (a draft model or a trained head, as
    the stack's method says) and k for a speculative variant."""

    name: str
    serving: ServingSpec
    draft_model: str = ""
    num_speculative_tokens: int = 0
    # The target a trained head was trained for (config.variants.speculator_target).
    speculator_target: str = ""

    def __post_init__(self) -> None:
        s = self.serving
        problems = list(self._method_problems())
        if not problems:
            problems += speculation_problems(
                f"{self.name}.draft_model",
                f"{self.name}.num_speculative_tokens",
                self.draft_model,
                self.num_speculative_tokens,
                s.target_model,
                self.method,
                self.speculator_target,
            )
        instance = catalog.TRAINIUM_INSTANCES.get(s.instance_type)
        if instance is None or s.logical_nc_config not in instance.lnc_options:
            known = ", ".join(f"{t.name} at LNC {'/'.join(map(str, t.lnc_options))}" for t in catalog.TRAINIUM_INSTANCES.values())
            raise ConfigError(
                [
                    Problem(
                        f"{self.name}.instance_type",
                        f"{s.instance_type} at LNC={s.logical_nc_config}",
                        "is not a known Trainium shape",
                        known,
                    )
                ]
            )
        problems += tensor_parallel_problems(
            f"{self.name}.tensor_parallel_size", s.tensor_parallel_size, instance, s.logical_nc_config, bool(s.scheduler_name)
        )
        if problems:
            raise ConfigError(problems)

    def _method_problems(self) -> list[Problem]:
        s = self.serving
        stack = serving_stacks.STACKS.get(s.stack)
        if stack is None:
            return [Problem(f"{self.name}.stack", s.stack, "is not a serving stack", ", ".join(serving_stacks.STACKS))]
        if self.draft_model and s.speculation_method not in stack.method_ids:
            return [
                Problem(
                    f"{self.name}.speculation_method",
                    s.speculation_method,
                    f"is not supported by stack {s.stack}",
                    ", ".join(stack.method_ids),
                )
            ]
        return []

    @property
    def method(self) -> serving_stacks.SpeculationMethod:
        """The speculation method on this service's stack (the stack's default for a baseline)."""
        stack = serving_stacks.STACKS[self.serving.stack]
        return stack.method(self.serving.speculation_method) if self.speculative else stack.methods[0]

    @property
    def method_label(self) -> str:
        """What outputs call this service's method: the method's id, or ``none`` for a baseline."""
        return self.serving.speculation_method if self.speculative else "none"

    @property
    def speculative(self) -> bool:
        return bool(self.draft_model)

    @property
    def variant(self) -> str:
        return "speculative" if self.speculative else "baseline"

    def compile_settings(self) -> dict[str, Any]:
        """Every setting that changes the compiled Neuron graphs (and nothing else: the service's
        name, resources or probes do not)."""
        s = self.serving
        return {
            "image": s.image,
            "target_model": s.target_model,
            "instance_family": s.instance_type.split(".")[0],
            "tensor_parallel_size": s.tensor_parallel_size,
            "logical_nc_config": s.logical_nc_config,
            "max_num_seqs": s.max_num_seqs,
            "max_model_len": s.max_model_len,
            **compile_flags(self),
        }

    def artifacts_dir(self) -> str:
        """Compiled-artifact folder: readable name + hash of the compile settings, so a changed
        setting compiles afresh instead of loading stale graphs."""
        digest = settings_hash(self.compile_settings())
        name = _slug(self.serving.target_model)
        if self.speculative:
            name += f"-{_slug(self.draft_model)}-k{self.num_speculative_tokens}"
        return f"{layout.ARTIFACTS_MOUNT}/{name}-{digest}"

    def labels(self) -> dict[str, str]:
        return {
            **instance_labels(self.name),
            "specdecode/variant": self.variant,
            "specdecode/stack": self.serving.stack,
            "specdecode/method": self.method_label,
            "specdecode/model": label_value(self.serving.target_model),
            "specdecode/draft-model": label_value(self.draft_model) if self.speculative else "none",
            "specdecode/speculative-tokens": str(self.num_speculative_tokens),
        }

    def models(self) -> tuple[str, ...]:
        return (self.serving.target_model, self.draft_model) if self.speculative else (self.serving.target_model,)


# --- the settings a service spec implies (charts/serving_stack.py maps them to its container) ------


def model_path(model_id: str) -> str:
    """Where a model's weights appear in the serving pods (models/<org>/<name>/ in the bucket)."""
    return f"{layout.MODELS_MOUNT}/{model_id}"


def on_stack(serving: ServingSpec, stack: str, method: str = "") -> ServingSpec:
    """The shared spec moved to another stack: that stack's pinned image and the method (default:
    the stack's own), every other setting unchanged. For a cross-stack baseline and for sweeps."""
    definition = serving_stacks.STACKS[stack]
    return replace(serving, stack=stack, image=definition.image, speculation_method=method or definition.default_method)


def neuron_settings(spec: VllmServiceSpec) -> tuple[str, dict[str, Any]]:
    """The stack's Neuron settings flag and its JSON value."""
    if spec.serving.stack == serving_stacks.VLLM_NEURON_STACK:
        # vllm-neuron docs/guides/features-guide.md, "Enable speculative decoding (CLI)": Neuron settings go in
        # `--additional-config '{"neuron_config": {...}}'`, and on-device sampling (`on_device_sampling_config`,
        # exactly as shown there and in the Neuron 2.33.0 docs' vllm-neuron/docs/design/vllm/additional-config.md)
        # is required for on-device rejection sampling. Given to every service of
        # the stack alike, so the baseline samples as the speculative service does. Sampling is not
        # greedy-only there (its configuration reference shows a {"temperature": "0.7"} example); what is
        # greedy is the on-device rejection sampler of speculative decoding. The comparison runs at
        # temperature 0 so both services produce the same output (exactness is checked), and the
        # configuration rules require it on this stack.
        return "--additional-config", {"neuron_config": {"on_device_sampling_config": {"temperature": "0"}}}
    # The 0.9.1 image (Neuron's V0 fork): `--override-neuron-config`. The logical-core setting is
    # passed explicitly: NxD Inference's default differs between releases, and it must equal the
    # runtime's NEURON_LOGICAL_NC_CONFIG. Fused speculation (REFERENCE.md section 1).
    config: dict[str, Any] = {"save_sharded_checkpoint": True, "logical_nc_config": spec.serving.logical_nc_config}
    if spec.speculative:
        config["enable_fused_speculation"] = True
    return "--override-neuron-config", config


def speculative_config(spec: VllmServiceSpec) -> dict[str, Any] | None:
    """vLLM's ``--speculative-config`` of a speculative service; None for a baseline."""
    if not spec.speculative:
        return None
    s = spec.serving
    method = serving_stacks.STACKS[s.stack].method(s.speculation_method)
    config: dict[str, Any] = {
        "model": model_path(spec.draft_model),
        "num_speculative_tokens": spec.num_speculative_tokens,
        "method": method.vllm_method,
    }
    if s.stack == serving_stacks.REFERENCE_STACK:
        # The reference recipe also bounds the draft's context (REFERENCE.md section 1). The plugin's
        # documentation shows only method, model and num_speculative_tokens (features guide,
        # docs/design/speculation/speculative_decoding_design.md "Configuration Parameters"), and a
        # speculative config turns its async scheduling off by itself (features guide, note).
        config["max_model_len"] = s.max_model_len
    return config


def compile_flags(spec: VllmServiceSpec) -> dict[str, Any]:
    """The stack's flags that change the compiled graphs (for the artifact folder's hash). The
    reference stack's keys are the ones its hash always had, so its artifacts stay where they are."""
    flag, value = neuron_settings(spec)
    key = "override_neuron_config" if flag == "--override-neuron-config" else "additional_config"
    return {key: value, "speculative_config": speculative_config(spec)}


@dataclass(frozen=True)
class ModelCacheSpec:
    """The bucket-backed model cache: volumes for weights and compiled graphs, and the Job that
    copies weights from Hugging Face into it once."""

    namespace: str
    bucket_name: str
    region: str
    image: str
    models: tuple[str, ...]
    instance_type: str
    hf_token_secret_arn: str = ""
    aws_cli_image: str = ""
    # The cluster's version: the namespace's Pod Security labels are pinned to it.
    kubernetes_version: str = "1.35"
    # The vLLM pods' port: the namespace's network policy opens it to the benchmark only.
    serving_port: int = layout.SERVING_PORT
    # Models among ``models`` that are EAGLE3 heads: the fill script checks each against the target's
    # config.json (``eagle3_target``) and adapts its config.json.
    eagle3_heads: tuple[str, ...] = ()
    eagle3_target: str = ""
    # The specbench zip the Job runs its fill from (the benchmark's: one code asset), and where its
    # init container fetches it (the CDK asset's bucket and key, stacks/serving.py; charts.dist's
    # upload). The location is not hashed (tokens in the CDK app); the zip's sha256 is.
    bundle: bytes = b""
    code_bucket: str = ""
    code_key: str = ""


@dataclass(frozen=True)
class ServingPlan:
    model_cache: ModelCacheSpec
    services: tuple[VllmServiceSpec, ...]


def serving_plan(config: PlatformConfig, bucket_name: str) -> ServingPlan:
    """The model cache and every service the configuration asks for (baseline first)."""
    s, n = config.serving, config.neuron_nodes
    shared = ServingSpec(
        namespace=s.namespace,
        image=s.image,
        target_model=s.target_model,
        tensor_parallel_size=s.tensor_parallel_size,
        max_num_seqs=s.max_num_seqs,
        max_model_len=s.max_model_len,
        instance_type=n.instance_type,
        logical_nc_config=n.logical_nc_config,
        speculation_method=s.speculation_method,
        cpu=s.cpu_per_service,
        memory_gib=s.memory_gib_per_service,
        shm_gib=s.shm_gib,
        startup_timeout_minutes=s.startup_timeout_minutes,
        scheduler_name=layout.NEURON_SCHEDULER_NAME if config.addons.neuron_scheduler else "",
        stack=s.stack,
    )
    # A cross-stack baseline (config rules: only with serving.cross_stack) runs its own stack's image;
    # every other setting stays shared.
    baseline = shared if s.baseline_stack == s.stack else on_stack(shared, s.baseline_stack)
    base, *speculative = service_variants(s)
    services = (
        VllmServiceSpec(base.name, baseline),
        *(VllmServiceSpec(v.name, shared, v.draft_model, v.num_speculative_tokens, v.speculator_target) for v in speculative),
    )
    # A sweep's draft models are cached with the services' (its pods wait for them like the services).
    sweep_drafts = [v.draft_model for v in user_variants(config)] if sweep_enabled(config) else []
    models = tuple(dict.fromkeys([*(m for service in services for m in service.models()), *sweep_drafts]))
    stack = serving_stacks.STACKS[s.stack]
    sweep_heads = (
        [v.draft_model for v in user_variants(config) if stack.method(v.method).speculator == serving_stacks.TRAINED_HEAD]
        if sweep_enabled(config)
        else []
    )
    heads = tuple(
        dict.fromkeys(
            [*(v.draft_model for v in services if v.speculative and v.method.speculator == serving_stacks.TRAINED_HEAD), *sweep_heads]
        )
    )
    cache = ModelCacheSpec(
        namespace=s.namespace,
        bucket_name=bucket_name,
        region=config.env.region,
        image=s.image,
        models=models,
        instance_type=n.instance_type,
        hf_token_secret_arn=s.hf_token_secret_arn,
        aws_cli_image=s.aws_cli_image,
        kubernetes_version=config.cluster.kubernetes_version,
        serving_port=shared.port,
        eagle3_heads=heads,
        eagle3_target=s.target_model if heads else "",
        bundle=bundle.zipapp_bytes(),
    )
    return ServingPlan(cache, services)


# BenchmarkSpec's fields naming where the code is (left out of every hash).
CODE_LOCATION = ("code_bucket", "code_key")

# --- the benchmark ---------------------------------------------------------------------------------

SPECBENCH_DIR = Path(bundle.__file__).resolve().parent
# The services may still be compiling when the benchmark starts (first deploy): it waits their
# whole startup-probe budget, plus this margin for scheduling and the image pull.
READY_MARGIN_MINUTES = 15
# Beyond the suite itself: pip install at start, tokenizer download, result upload, metric publishing.
SETUP_SECONDS = 15 * 60
# A suite whose worst case exceeds a week is hung or misconfigured; the deadline is what reaps it.
MAX_SUITE_SECONDS = 7 * 24 * 3600


# pip needs git for a git+https requirement and the slim image has none; GitHub serves the same
# tree, pinned by the same full commit id, as an archive pip installs without git.
@dataclass(frozen=True)
class BenchmarkSpec:
    """The benchmark Job: what it runs against, with which load, and the files it gets.

    Everything is a plain value, so the Job's name can be a hash of the spec: a changed setting,
    suite, requirement or line of code is a new Job (Job pod templates are immutable)."""

    namespace: str
    image: str
    engine: str
    # (service name, URL), the baseline first: the benchmark compares every other one to it.
    endpoints: tuple[tuple[str, str], ...]
    model: str  # the served model name every request names
    input_tokens: int
    output_tokens: int
    concurrency: int
    requests: int
    temperature: float
    seed: int
    request_timeout_seconds: int
    ready_timeout_seconds: int
    active_deadline_seconds: int
    ttl_seconds_after_finished: int
    cpu: int
    memory_gib: int
    bucket_name: str
    region: str
    metrics_namespace: str
    run_on_deploy: bool
    requirements: str  # requirements.txt the pod pip-installs
    settings_json: str  # snapshot of the deployment, stored with every run
    bundle: bytes  # the specbench zip application
    suite_json: str = ""  # empty: the built-in reference suite
    enable_thinking: bool = False  # Qwen3 thinking mode of chat requests (benchmark.thinking_mode)
    max_consecutive_failures: int | None = None  # the native circuit breaker (None: specbench run's default)
    # Where the pod fetches ``bundle`` from: the CDK asset's bucket and key (stacks/serving.py, tokens
    # there) or charts.dist's upload. Not hashed: the bundle's sha256 is, and it decides the key.
    code_bucket: str = ""
    code_key: str = ""

    def __post_init__(self) -> None:
        problems = []
        if self.engine not in catalog.BENCHMARK_ENGINES:
            problems.append(Problem("benchmark.engine", self.engine, "is not a benchmark engine", ", ".join(catalog.BENCHMARK_ENGINES)))
        names = [name for name, _ in self.endpoints]
        if len(names) < 2 or len(set(names)) != len(names):
            problems.append(
                Problem("benchmark.endpoints", ",".join(names), "needs a baseline and another service", "2 or more distinct service names")
            )
        for key in ("input_tokens", "output_tokens", "concurrency", "requests", "request_timeout_seconds", "cpu", "memory_gib"):
            if getattr(self, key) < 1:
                problems.append(Problem(f"benchmark.{key}", getattr(self, key), "must be positive", ">= 1"))
        if self.active_deadline_seconds <= self.ready_timeout_seconds:
            problems.append(
                Problem(
                    "benchmark.active_deadline_seconds",
                    self.active_deadline_seconds,
                    "leaves no time to run once the services are ready",
                    f"> ready_timeout_seconds={self.ready_timeout_seconds}",
                )
            )
        if not self.bundle:
            problems.append(Problem("benchmark.bundle", "", "is empty", "the specbench zip application"))
        if problems:
            raise ConfigError(problems)

    @property
    def results_uri(self) -> str:
        return f"s3://{self.bucket_name}/{layout.RESULTS_PREFIX}"

    @property
    def dataset_cache_uri(self) -> str:
        return f"s3://{self.bucket_name}/{layout.DATASETS_PREFIX}"

    def digest(self) -> str:
        """8 hex digits naming the Job. The bucket is left out: in the CDK app it is a token whose
        text is not its value (and it changes only if the data stack is replaced)."""
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("bucket_name", "bundle", *CODE_LOCATION)}
        values["bundle_sha256"] = hashlib.sha256(self.bundle).hexdigest()
        return settings_hash(values)[:8]


def benchmark_spec(config: PlatformConfig, plan: ServingPlan) -> BenchmarkSpec:
    """The benchmark of a serving plan: every service of the plan (baseline first), the load and
    the suite from ``config.benchmark``, and derived timeouts."""
    b = config.benchmark
    problems = list(suite_file_problems("benchmark.suite_file", b.suite_file))
    if problems:
        raise ConfigError(problems)
    suite = load_suite(b.suite_file)
    shared = plan.services[0].serving
    ready = (shared.startup_timeout_minutes + READY_MARGIN_MINUTES) * 60
    return BenchmarkSpec(
        namespace=shared.namespace,
        image=b.image,
        engine=b.engine,
        endpoints=tuple((s.name, f"http://{s.name}:{s.serving.port}") for s in plan.services),
        model=shared.target_model,  # vllm serve --served-model-name
        input_tokens=b.input_tokens,
        output_tokens=b.output_tokens,
        concurrency=b.concurrent_requests,
        requests=b.requests_per_test_case,
        temperature=b.temperature,
        seed=b.seed,
        request_timeout_seconds=b.request_timeout_seconds,
        ready_timeout_seconds=ready,
        active_deadline_seconds=benchmark_deadline_seconds(
            ready, len(suite.test_cases), len(plan.services), b.requests_per_test_case, b.concurrent_requests, b.request_timeout_seconds
        ),
        ttl_seconds_after_finished=b.ttl_after_finished_hours * 3600,
        cpu=b.cpu,
        memory_gib=b.memory_gib,
        bucket_name=plan.model_cache.bucket_name,
        region=plan.model_cache.region,
        metrics_namespace=b.metrics_namespace,
        run_on_deploy=b.run_on_deploy,
        requirements=benchmark_requirements(b.engine),
        settings_json=json.dumps(
            settings_snapshot(config, plan, suite.name, [c.name for c in suite.test_cases], suite.to_dict().get("datasets")),
            indent=2,
            sort_keys=True,
        )
        + "\n",
        # The plan's zip (the model cache runs its fill from it): one build, one code asset.
        bundle=plan.model_cache.bundle or bundle.zipapp_bytes(),
        suite_json=json.dumps(suite.to_dict(), indent=2, sort_keys=True) + "\n" if b.suite_file else "",
        enable_thinking=b.thinking_mode,
        # Passed only when set to something else than the default: the default Job (and its hash) stay as they were.
        max_consecutive_failures=None if b.max_consecutive_failures == type(b)().max_consecutive_failures else b.max_consecutive_failures,
    )


def benchmark_deadline_seconds(
    ready_timeout: int, test_cases: int, services: int, requests: int, concurrency: int, request_timeout: int
) -> int:
    """The Job's activeDeadlineSeconds: the longest a run that is still making progress can take.

    Worst case: the services become ready at the very end of the wait; then every request of
    every test case runs into its timeout, in waves of ``concurrency`` requests, one service after
    another (an engine that drives the services at once only finishes sooner). That suite budget
    is capped at a week; SETUP_SECONDS covers installing, downloading and publishing.
    """
    waves = -(-requests // concurrency)
    suite = min(test_cases * services * waves * request_timeout, MAX_SUITE_SECONDS)
    return ready_timeout + SETUP_SECONDS + suite


def benchmark_requirements(engine: str) -> str:
    """What the pod pip-installs: for the native engine the hash lock of specbench/requirements.txt
    (``make lock``); for llmperf, requirements.txt plus requirements-llmperf.txt, without hashes
    (see charts.benchmark.install_and_run)."""
    if engine == "native":
        return (SPECBENCH_DIR / "requirements.lock").read_text()
    return "".join((SPECBENCH_DIR / name).read_text() for name in ("requirements.txt", "requirements-llmperf.txt"))


def settings_snapshot(
    config: PlatformConfig, plan: ServingPlan, suite_name: str, test_cases: list[str], datasets: dict[str, Any] | None = None
) -> dict[str, Any]:
    """What was deployed when a run was made: stored with every run, so results stay interpretable
    after the deployment changes."""
    # The speculative services' shared spec (a cross-stack baseline differs in stack and image only).
    shared, b = plan.services[-1].serving, config.benchmark
    cross = len({s.serving.stack for s in plan.services}) > 1
    snapshot = {
        "serving": {
            "stack": shared.stack,
            "comparison": "cross-stack" if cross else "same stack",
            "image": shared.image,
            "target_model": shared.target_model,
            "tensor_parallel_size": shared.tensor_parallel_size,
            "max_num_seqs": shared.max_num_seqs,
            "max_model_len": shared.max_model_len,
            "logical_nc_config": shared.logical_nc_config,
            "instance_type": shared.instance_type,
            "neuron_devices_per_service": shared.neuron_devices,
            "speculation_method": shared.speculation_method,
        },
        "variants": [
            {
                "name": s.name,
                "target_model": s.serving.target_model,
                "draft_model": s.draft_model,
                "num_speculative_tokens": s.num_speculative_tokens,
                "compiled_artifacts": s.artifacts_dir(),
                "stack": s.serving.stack,
                "method": s.method_label,
                "speculator": s.method.speculator if s.speculative else "none",
                "image": s.serving.image,
            }
            for s in plan.services
        ],
        "benchmark": {
            "engine": b.engine,
            "image": b.image,
            "suite": suite_name,
            "test_cases": test_cases,
            "input_tokens": b.input_tokens,
            "output_tokens": b.output_tokens,
            "concurrent_requests": b.concurrent_requests,
            "requests_per_test_case": b.requests_per_test_case,
            "temperature": b.temperature,
            "seed": b.seed,
            "request_timeout_seconds": b.request_timeout_seconds,
            "metrics_namespace": b.metrics_namespace,
        },
    }
    if config.env.profile:  # a rehearsal's outputs say so (specbench/analysis/aggregate.py rehearsal_note)
        snapshot["profile"] = config.env.profile
    # What the cost per million output tokens uses (specbench/analysis/cost.py): the node's price and
    # where it came from, how many servers of this size one node holds, and the goodput SLOs.
    cores = shared.instance.logical_cores(shared.logical_nc_config)
    price = price_choice(config)
    snapshot["cost"] = {
        "node_price_per_hour": price.per_hour or 0,
        "price_source": price.source,
        "instance_type": shared.instance_type,
        "logical_cores_per_node": cores,
        "servers_per_node": servers_per_node(cores, shared.tensor_parallel_size),
        "servers_per_node_source": f"{cores} logical cores per {shared.instance_type} at LNC={shared.logical_nc_config} "
        f"// TP {shared.tensor_parallel_size}",
        "slo": {"ttft_ms": config.sweep.slo_ttft_ms, "tpot_ms": config.sweep.slo_tpot_ms},
    }
    if price.entry is not None:  # the catalog's entry: its report says how old it is at the run
        snapshot["cost"]["price_entry"] = price.entry.to_dict()
    if datasets:  # a dataset-backed suite: each source, its revision, sha256 and licence, as the suite pins them
        snapshot["benchmark"]["datasets"] = datasets
    if sweep_enabled(config):  # only then: the default snapshot stays as it was
        s = config.sweep
        snapshot["sweep"] = {
            "variants": [v.to_dict() for v in sweep_variants(config)],
            "loads": {"concurrencies": list(s.concurrencies), "request_rates": list(s.request_rates)},
            "slo": {"ttft_ms": s.slo_ttft_ms, "tpot_ms": s.slo_tpot_ms},
            # The traffic mix sweep-report recommends the cheapest configuration for (specbench/analysis/sweep_mix.py).
            "class_weights": mix_weights(config),
        }
    return snapshot


def settings_hash(settings: dict[str, Any], bucket_name: str = "", code_location: tuple[str, str] = ("", "")) -> str:
    """Short, stable digest of a settings dict (key order does not matter). ``bucket_name``, where
    given, is hashed as a placeholder: in the CDK app the bucket's name is a token whose text
    (``${Token[TOKEN.812]}``) numbers it among every token the process made before it, so a hash
    over it would change with the app's construct order (a resource added elsewhere, an aws-cdk-lib
    upgrade) and rename objects whose content did not change; a sweep Job renamed on deploy is a new
    sweep, its node-hours spent again. ``code_location`` (the code asset's bucket and key, tokens too)
    likewise; the key is the asset's hash, so the code's sha256 stands for it."""
    text = json.dumps(settings, sort_keys=True)
    for value, placeholder in ((bucket_name, "<results bucket>"), *zip(code_location, ("<code bucket>", "<code key>"), strict=True)):
        if value:
            text = text.replace(value, placeholder)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def instance_labels(name: str) -> dict[str, str]:
    """The labels a Service selects its pods by (a Deployment's selector is immutable: keep it small)."""
    return {"app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": name}


def label_value(model_id: str) -> str:
    """A model id as a label value ('/' is not allowed there): Qwen/Qwen3-32B -> Qwen.Qwen3-32B."""
    return model_id.replace("/", ".")[:63].strip("-_.")


def _slug(model_id: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", model_id.split("/")[-1].lower()).strip("-")
