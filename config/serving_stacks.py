"""Serving stacks: which image serves the models, and which speculation methods it supports.

Pure data plus small pure functions (no CDK, no cdk8s), so the configuration rules, the charts
(charts/serving_stack.py maps a service to a container per stack) and the sweeps share one
definition. Every fact below is read from the stack's own documentation or source, cited inline;
none is verified on hardware by this project (README, "Which serving stack").
"""

from __future__ import annotations

from dataclasses import dataclass

REFERENCE_STACK = "nxdi-draft"
VLLM_NEURON_STACK = "vllm-neuron"

# What a method's speculator is: a plain smaller model of the target's family, or a head trained
# against one target model (its hidden states are the head's input).
DRAFT_MODEL = "draft model"
TRAINED_HEAD = "trained head"


@dataclass(frozen=True)
class SpeculationMethod:
    id: str
    speculator: str  # DRAFT_MODEL or TRAINED_HEAD
    vllm_method: str  # `method` in vLLM's --speculative-config
    k_min: int
    k_max: int
    doc: str


@dataclass(frozen=True)
class ServingStack:
    id: str
    title: str
    image: str  # pinned: the serving image of every service on this stack
    sdk: str
    engine: str
    methods: tuple[SpeculationMethod, ...]  # the first is the stack's default
    end_of_support: str
    verified: str  # what is known from hardware runs, and what only from documentation

    @property
    def method_ids(self) -> tuple[str, ...]:
        return tuple(m.id for m in self.methods)

    @property
    def default_method(self) -> str:
        return self.methods[0].id

    def method(self, method_id: str) -> SpeculationMethod:
        """The method, or KeyError if this stack does not support it."""
        for m in self.methods:
            if m.id == method_id:
                return m
        raise KeyError(method_id)

    def k_range(self, method_id: str) -> tuple[int, int]:
        """Inclusive (min, max) of num_speculative_tokens for a method on this stack."""
        m = self.method(method_id)
        return m.k_min, m.k_max


STACKS: dict[str, ServingStack] = {
    s.id: s
    for s in (
        ServingStack(
            id=REFERENCE_STACK,
            title="vLLM 0.9.1 (V0) with NxD Inference: draft model, fused speculation (the reference recipe)",
            # The reference run's image (../shared/REFERENCE.md section 1).
            image="public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.9.1-neuronx-py311-sdk2.26.1-ubuntu22.04",
            sdk="Neuron SDK 2.26.1",
            engine="vLLM 0.9.1 V0 (Neuron's fork) + NxD Inference",
            methods=(
                SpeculationMethod(
                    id="draft",
                    speculator=DRAFT_MODEL,
                    # Only a label on that image: NxD Inference runs a plain draft as fused draft-model
                    # speculation whenever a speculative config is present (REFERENCE.md section 5).
                    vllm_method="eagle",
                    # NxD Inference's tutorials use k=7 and the reference run tested 5..15 (REFERENCE.md section 1).
                    k_min=1,
                    k_max=15,
                    doc="a smaller model of the target's family proposes k tokens; draft and target compiled together",
                ),
            ),
            # "NxD Inference and NxD Core are legacy frameworks, announced end of support starting the Neuron 2.34
            # release" (awsdocs-neuron.readthedocs-hosted.com/en/latest/_sources/inference.rst, modified 2026-08-28).
            end_of_support="NxD Inference in maintenance since SDK 2.30; end of support announced starting SDK 2.34",
            verified="the reference write-up ran this recipe on trn2.48xlarge (its figures are secondary, REFERENCE.md section 2)",
        ),
        ServingStack(
            id=VLLM_NEURON_STACK,
            title="vLLM V1 with the vLLM-Neuron plugin: trained EAGLE3 head",
            # Neuron 2.33.0 docs, "Install PyTorch via Deep Learning Container" (date-modified 2026-10-16):
            # awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/setup/pytorch/dlc.html pulls exactly this tag.
            image="public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.29.0.1.2.0-neuronx-py314-sdk2.33.0-ubuntu26.04",
            sdk="Neuron SDK 2.33.0",
            engine="vLLM V1 + vllm-project/vllm-neuron plugin",
            methods=(
                SpeculationMethod(
                    id="eagle3",
                    speculator=TRAINED_HEAD,
                    vllm_method="eagle3",
                    # vllm-neuron docs/guides/features-guide.md: num_speculative_tokens "typically 3-7";
                    # docs/design/speculation/speculative_decoding_design.md: start at 3, "reduce to 2" when
                    # acceptance is low. Nothing documented outside 2..7.
                    k_min=2,
                    k_max=7,
                    doc="an EAGLE3 head trained for the target proposes k tokens from the target's hidden states",
                ),
                # DFlash (vllm_neuron/model/registry.py: DFlashDraftModel) is left out: Neuron shows it for
                # Qwen3-4B, Llama 3.1 8B and gpt-oss-20b only (examples/vllm_neuron/models/*/dflash), no
                # head for Qwen3-32B, and its k is fixed by the head (block size - 1).
            ),
            end_of_support="current stack (vllm-neuron 1.0 shipped with SDK 2.31); no end of support announced",
            verified="documentation only: no run on hardware by this project; whether a public Qwen3-32B EAGLE3 head loads "
            "on Neuron as published is confirmed by no source",
        ),
    )
}

# Public EAGLE3 heads and the target each was trained for (their Hugging Face model cards). A head
# not listed here needs `serving.speculator_head_target` set by hand.
KNOWN_HEADS: dict[str, str] = {
    "AngelSlim/Qwen3-32B_eagle3": "Qwen/Qwen3-32B",
    "RedHatAI/Qwen3-32B-speculator.eagle3": "Qwen/Qwen3-32B",
    "thoughtworks/Qwen3-32B-Eagle3": "Qwen/Qwen3-32B",
}


def stack_of_method(method_id: str) -> list[str]:
    """The stacks that support a method (for error messages)."""
    return [s.id for s in STACKS.values() if method_id in s.method_ids]
