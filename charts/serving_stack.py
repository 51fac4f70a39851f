"""One place that maps a service spec to its vLLM container on its serving stack: image, command,
arguments and environment. The Deployments (charts/vllm.py), the parity tests and the sweeps all
use it. The flags that also name the compiled-artifact folder (``neuron_settings``,
``speculative_config``, ``compile_flags``) are read with the spec types in charts/spec.py, below
this module: spec.py never imports it.

Only flags the stack's own documentation or source shows are set; each is cited where it is set.
Stacks and their methods: config/serving_stacks.py.
"""

from __future__ import annotations

import json
from typing import Any

from config import serving_stacks

# The spec types and the settings they imply sit below, in spec.py (which imports nothing of this
# module); the neuron and speculative flags are re-exported for the callers that read them here.
from .spec import VllmServiceSpec, compile_flags, model_path, neuron_settings, on_stack, speculative_config

__all__ = ["compile_flags", "model_path", "neuron_settings", "on_stack", "speculative_config"]

# The reference run's vLLM framework on Neuron (REFERENCE.md section 1).
NEURON_FRAMEWORK = "neuronx-distributed-inference"


def service_container(spec: VllmServiceSpec) -> dict[str, Any]:
    """The vLLM container of a service on its stack (without probes, resources and mounts, which
    every stack shares: charts/vllm.py)."""
    return {"image": spec.serving.image, "command": ["vllm"], "args": vllm_args(spec), "env": vllm_env(spec)}


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
