"""One place that maps a service spec to its vLLM container on its serving stack: image, command,
arguments and environment. The Deployments (charts/vllm.py), the compiled-artifact hash
(charts/spec.py), the parity tests and the sweeps all use it.

Only flags the stack's own documentation or source shows are set; each is cited where it is set.
Stacks and their methods: config/serving_stacks.py.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

from config import layout, serving_stacks

if TYPE_CHECKING:  # spec.py imports this module
    from .spec import ServingSpec, VllmServiceSpec

# The reference run's vLLM framework on Neuron (REFERENCE.md section 1).
NEURON_FRAMEWORK = "neuronx-distributed-inference"


def service_container(spec: VllmServiceSpec) -> dict[str, Any]:
    """The vLLM container of a service on its stack (without probes, resources and mounts, which
    every stack shares: charts/vllm.py)."""
    return {"image": spec.serving.image, "command": ["vllm"], "args": vllm_args(spec), "env": vllm_env(spec)}


def on_stack(serving: ServingSpec, stack: str, method: str = "") -> ServingSpec:
    """The shared spec moved to another stack: that stack's pinned image and the method (default:
    the stack's own), every other setting unchanged. For a cross-stack baseline and for sweeps."""
    definition = serving_stacks.STACKS[stack]
    return dataclasses.replace(serving, stack=stack, image=definition.image, speculation_method=method or definition.default_method)


def model_path(model_id: str) -> str:
    """Where a model's weights appear in the serving pods (models/<org>/<name>/ in the bucket)."""
    return f"{layout.MODELS_MOUNT}/{model_id}"


def vllm_args(spec: VllmServiceSpec) -> list[str]:
    """``vllm serve`` arguments; clients address the model by its Hugging Face id."""
    s = spec.serving
    args = [
        "serve",
        model_path(s.target_model),
        "--served-model-name",
        s.target_model,
        "--tensor-parallel-size",
        str(s.tensor_parallel_size),
        "--max-num-seqs",
        str(s.max_num_seqs),
        "--max-model-len",
        str(s.max_model_len),
        "--port",
        str(s.port),
    ]
    flag, value = neuron_settings(spec)
    args += [flag, json.dumps(value, sort_keys=True)]
    speculative = speculative_config(spec)
    if speculative:
        args += ["--speculative-config", json.dumps(speculative, sort_keys=True)]
    return args


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


def vllm_env(spec: VllmServiceSpec) -> list[dict[str, str]]:
    s = spec.serving
    env = []
    if s.stack == serving_stacks.REFERENCE_STACK:
        # The 0.9.1 Neuron image serves through vLLM's V0 engine with NxD Inference (as Neuron's
        # speculative decoding tutorial runs it). The plugin stack has neither: V1 only.
        env += [{"name": "VLLM_USE_V1", "value": "0"}, {"name": "VLLM_NEURON_FRAMEWORK", "value": NEURON_FRAMEWORK}]
    env += [
        # Compiled graphs load from (or are saved to) this folder on both stacks; the plugin documents
        # it in docs/guides/features-guide.md, "Pre-compiled model artifacts".
        {"name": "NEURON_COMPILED_ARTIFACTS", "value": spec.artifacts_dir()},
        # A Neuron Runtime variable, whatever the framework ("Logical NeuronCore configuration",
        # awsdocs-neuron.readthedocs-hosted.com/en/latest/general/arch/neuron-features/logical-neuroncore-config.html).
        {"name": "NEURON_LOGICAL_NC_CONFIG", "value": str(s.logical_nc_config)},
        # Weights come from the bucket-backed cache only; never from the Hub at serving time.
        {"name": "HF_HUB_OFFLINE", "value": "1"},
    ]
    return env


def compile_flags(spec: VllmServiceSpec) -> dict[str, Any]:
    """The stack's flags that change the compiled graphs (for the artifact folder's hash). The
    reference stack's keys are the ones its hash always had, so its artifacts stay where they are."""
    flag, value = neuron_settings(spec)
    key = "override_neuron_config" if flag == "--override-neuron-config" else "additional_config"
    return {key: value, "speculative_config": speculative_config(spec)}
