"""Typed specs of the serving workloads, derived from the configuration.

One ``ServingSpec`` holds everything the services share (image, target model, tensor parallelism,
batch, context length, resources); every ``VllmServiceSpec`` wraps that same object and adds only
its name and, for a speculative variant, the draft model and k. Parity between the baseline and
the speculative services therefore holds by construction; tests/test_serving_charts.py proves it
on the rendered Deployments.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from config import ConfigError, PlatformConfig, Problem, catalog, layout
from config.validate import speculation_problems, tensor_parallel_problems
from config.variants import service_variants

# The reference run's vLLM framework on Neuron (REFERENCE.md section 1).
NEURON_FRAMEWORK = "neuronx-distributed-inference"


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

    @property
    def instance(self) -> catalog.TrainiumInstance:
        return catalog.TRAINIUM_INSTANCES[self.instance_type]

    @property
    def neuron_devices(self) -> int:
        return self.tensor_parallel_size // self.instance.logical_cores_per_device(self.logical_nc_config)


@dataclass(frozen=True)
class VllmServiceSpec:
    """One vLLM service: the shared spec, plus a draft model and k for a speculative variant."""

    name: str
    serving: ServingSpec
    draft_model: str = ""
    num_speculative_tokens: int = 0

    def __post_init__(self) -> None:
        problems = list(
            speculation_problems(
                f"{self.name}.draft_model",
                f"{self.name}.num_speculative_tokens",
                self.draft_model,
                self.num_speculative_tokens,
                self.serving.target_model,
            )
        )
        s = self.serving
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

    @property
    def speculative(self) -> bool:
        return bool(self.draft_model)

    @property
    def variant(self) -> str:
        return "speculative" if self.speculative else "baseline"

    def override_neuron_config(self) -> dict[str, Any]:
        # The logical-core setting is passed explicitly: NxD Inference's default differs between
        # releases, and it must equal the runtime's NEURON_LOGICAL_NC_CONFIG.
        config: dict[str, Any] = {"save_sharded_checkpoint": True, "logical_nc_config": self.serving.logical_nc_config}
        if self.speculative:
            config["enable_fused_speculation"] = True
        return config

    def speculative_config(self) -> dict[str, Any] | None:
        if not self.speculative:
            return None
        return {
            "model": model_path(self.draft_model),
            "num_speculative_tokens": self.num_speculative_tokens,
            "max_model_len": self.serving.max_model_len,
            "method": self.serving.speculation_method,
        }

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
            "override_neuron_config": self.override_neuron_config(),
            "speculative_config": self.speculative_config(),
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
            "specdecode/model": label_value(self.serving.target_model),
            "specdecode/draft-model": label_value(self.draft_model) if self.speculative else "none",
            "specdecode/speculative-tokens": str(self.num_speculative_tokens),
        }

    def models(self) -> tuple[str, ...]:
        return (self.serving.target_model, self.draft_model) if self.speculative else (self.serving.target_model,)


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
    )
    services = tuple(VllmServiceSpec(v.name, shared, v.draft_model, v.num_speculative_tokens) for v in service_variants(s))
    models = tuple(dict.fromkeys(m for service in services for m in service.models()))
    cache = ModelCacheSpec(
        namespace=s.namespace,
        bucket_name=bucket_name,
        region=config.env.region,
        image=s.image,
        models=models,
        instance_type=n.instance_type,
        hf_token_secret_arn=s.hf_token_secret_arn,
        aws_cli_image=s.aws_cli_image,
    )
    return ServingPlan(cache, services)


def model_path(model_id: str) -> str:
    """Where a model's weights appear in the serving pods (models/<org>/<name>/ in the bucket)."""
    return f"{layout.MODELS_MOUNT}/{model_id}"


def settings_hash(settings: dict[str, Any]) -> str:
    """Short, stable digest of a settings dict (key order does not matter)."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]


def instance_labels(name: str) -> dict[str, str]:
    """The labels a Service selects its pods by (a Deployment's selector is immutable: keep it small)."""
    return {"app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": name}


def label_value(model_id: str) -> str:
    """A model id as a label value ('/' is not allowed there): Qwen/Qwen3-32B -> Qwen.Qwen3-32B."""
    return model_id.replace("/", ".")[:63].strip("-_.")


def _slug(model_id: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", model_id.split("/")[-1].lower()).strip("-")
