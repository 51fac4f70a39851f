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
    # How many waiting requests one prefill step admits: None = as many as there are free slots
    # (max_num_seqs); the serving model and the emulator admit by it (specbench/analysis/serving_model.py
    # ``admitted``; the emulator's profiles carry the same value, tests/test_prefill_admission.py pins it).
    max_prefills_per_batch: int | None = None
    # The instance families (the part of an EC2 type before the dot) the stack's documentation names;
    # `specbench predict --rank` refuses a candidate on any other (specbench/analysis/candidates.py).
    instance_families: tuple[str, ...] = ()

    def runs_on(self, instance_type: str) -> bool:
        return instance_type.partition(".")[0] in self.instance_families

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
            # The Neuron docs' inference-legacy/index.rst (date-modified 2026-08-28): "NxD Inference and the
            # inference-context NxD Core documentation in this section are legacy and are announced end of support
            # on Trn2 and Trn3 starting the Neuron 2.34 release"; the end-of-support announcement of 2026-10-16
            # (about/announcements/neuron2.x/announce-eos-nxdi-nxd-core-inference) says the same.
            end_of_support="NxD Inference in maintenance since SDK 2.30; end of support announced starting SDK 2.34",
            verified="the reference write-up ran this recipe on trn2.48xlarge (its figures are secondary, REFERENCE.md section 2)",
            # No limit below the free slots: NxD Inference's vLLM V0 integration leaves scheduling to vLLM
            # ("input processing, scheduling and output processing follow the default vLLM behavior", Neuron
            # docs, libraries/nxd-inference/developer_guides/vllm-user-guide), and vLLM V0's default scheduler
            # "prioritizes prefills and doesn't batch prefill and decode to the same batch" (vLLM docs,
            # Optimization and Tuning, Chunked Prefill: docs/source/performance/optimization.md;
            # docs.vllm.ai/en/v0.4.2/models/performance.html): every waiting request that fits a free slot
            # prefills in the next step (its token budget, max_num_batched_tokens, is not modelled).
            max_prefills_per_batch=None,
            # "Supported AWS instances: Inf2, Trn1/Trn1n, Trn2" (Neuron docs, vLLM User Guide for NxD Inference,
            # libraries/nxd-inference/developer_guides/vllm-user-guide-v1, as of Neuron SDK 2.26.1).
            instance_families=("inf2", "trn1", "trn1n", "trn2"),
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
            # One prefill per step: NeuronScheduler.__init__ sets `self.max_prefills_per_batch: int = 1`
            # ("Prefill batch size limit (currently 1, may expand in future)", vllm_neuron/vllm/core/scheduler.py
            # as public copies of the current plugin show it, e.g. AWShtokoyo/vllm-neuron 8e6b66a; its
            # can_schedule: "max 1 prefill at a time"), and the plugin's scheduler design page
            # (vllm-neuron/docs/design/vllm/neuron-scheduler, "Current Limitation: Only 1 Prefill Per Batch")
            # says it "processes only one prefill request per iteration" and that decode requests are hidden
            # during each prefill iteration. The release-0.2.x scheduler already capped it (vllm-project/
            # vllm-neuron a5ef7c8, vllm_neuron/core/scheduler.py ContinuousBatchingNeuronScheduler.can_schedule:
            # max_prompt_batch_size = 1). A prompt longer than a compiled bucket prefills over several steps
            # (chunked): not modelled.
            max_prefills_per_batch=1,
            # "This document is relevant for: Trn2, Trn3" (Neuron 2.33.0 docs, vllm-neuron/docs/getting-started/
            # setup-guide: "install and configure the vLLM Neuron plugin on AWS Trn2 or Trn3 instances").
            instance_families=("trn2", "trn3"),
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

SAFETENSORS = "safetensors"
PICKLE = "bin"
# The fields a head must share with its target on the vLLM-Neuron plugin, and why. The reasons are
# read from the plugin's source (vllm-project/vllm-neuron, commit 09006a4 and the recipes):
# - head_dim and num_key_value_heads: EagleProposer.validate_same_kv_cache_group
#   (vllm_neuron/vllm/spec_decode/eagle.py line 281) asserts that the draft's layers share the target's
#   KV-cache group, whose page shape is KV heads x head dim; the Qwen3 recipe
#   (docs/model-recipes/qwen3.md, Limitations) says "BF16 and head_dim=128 only".
# - hidden_size: the head reads the target's hidden states (EagleProposer builds its input as
#   3 x the hidden size, and compile_and_load_draft_model overrides the draft's hidden_size with
#   the target's, which only pads a smaller one: a head trained on another width reads garbage).
# - vocab_size: the head's token ids are the target's (its draft vocabulary maps into them).
# - weights: the plugin's models load SafeTensors checkpoints only (vllm_neuron/model/qwen3/model.py
#   imports vllm_neuron.utils.checkpoints.SafetensorsCheckpoint; no pickle loader is imported).
PAIRING_REASONS: dict[str, str] = {
    "head_dim": "the plugin keeps the draft's layers in the target's KV-cache group (validate_same_kv_cache_group)",
    "num_key_value_heads": "the plugin keeps the draft's layers in the target's KV-cache group (validate_same_kv_cache_group)",
    "hidden_size": "the head reads the target's hidden states",
    "vocab_size": "the head proposes the target's token ids",
    "weight_format": "the plugin loads SafeTensors only",
}


@dataclass(frozen=True)
class ModelGeometry:
    """What a model's (or head's) config.json says, as far as pairing a head with a target needs.

    None means the fact could not be read from a public source; the field's name is then listed in
    `unverified` and the pairing check skips it at synth (the model-cache Job checks the real
    config.json before anything compiles, specbench/model_cache/fill.py)."""

    hidden_size: int | None
    num_attention_heads: int | None
    num_key_value_heads: int | None
    head_dim: int | None
    vocab_size: int | None  # the target vocabulary (a head's draft vocabulary may be smaller)
    weight_format: str | None  # SAFETENSORS or PICKLE
    architecture: str | None  # the label in config.json `architectures`
    revision: str | None  # the Hub commit the facts were read at
    source: str  # where each fact was read
    draft_vocab_size: int | None = None

    @property
    def unverified(self) -> tuple[str, ...]:
        facts = ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "vocab_size", "weight_format")
        return tuple(f for f in (*facts, "architecture", "revision") if getattr(self, f) is None)


# Targets whose geometry is known. Qwen/Qwen3-32B at 9216db5 (the revision public code pins with its
# config's sha256, e.g. a Qwen3-32B EAGLE3 benchmark's TARGET_REVISION): hidden 5120, 64 query heads,
# 8 KV heads x 128 (the plugin's own Qwen3 model, vllm_neuron/model/qwen3/model.py: "Reference model:
# Qwen/Qwen3-32B (dense, 64Q/8KV GQA, head_dim=128"), vocabulary 151936 (RedHatAI's speculator config
# names it as its verifier's vocab_size), 17 SafeTensors shards.
TARGET_GEOMETRY: dict[str, ModelGeometry] = {
    "Qwen/Qwen3-32B": ModelGeometry(
        hidden_size=5120,
        num_attention_heads=64,
        num_key_value_heads=8,
        head_dim=128,
        vocab_size=151936,
        weight_format=SAFETENSORS,
        architecture="Qwen3ForCausalLM",
        revision="9216db5781bf21249d130ec9da846c4624c16137",
        source="vllm-neuron docs/model-recipes/qwen3.md and model/qwen3/model.py; public pins of config.json at 9216db5",
    ),
}

# Each known head's config.json as far as public copies show it. Nothing here was read from the Hub
# itself (out of reach from where this project is built); what no public copy shows is None.
HEAD_GEOMETRY: dict[str, ModelGeometry] = {
    # Tencent/AngelSlim issue 5: the published heads set head_dim = hidden_size / num_attention_heads
    # ("to fit sglang/vllm"), 80 for Qwen3-32B's 5120 / 64, and a later comment says vLLM then cannot
    # allocate the KV cache (the draft's page size differs). A public SGLang-based project reports it
    # "has 80-wide attention heads (the model has 128) and crashed SGLang". Public loader code reads its
    # weights as pytorch_model.bin (use_safetensors=False). Its published revision, KV heads,
    # vocabulary and architecture label were not read (AngelSlim's training config for new heads,
    # angelslim/compressor/speculative/train/configs/qwen3-32b-eagle3.json, says head_dim 128: not
    # what the published head has).
    "AngelSlim/Qwen3-32B_eagle3": ModelGeometry(
        hidden_size=5120,
        num_attention_heads=64,
        num_key_value_heads=None,
        head_dim=80,
        vocab_size=None,
        weight_format=PICKLE,
        architecture=None,
        revision=None,
        source="Tencent/AngelSlim issue 5; public reports of its 80-wide heads and pytorch_model.bin",
    ),
    # A public speculative-decoding project validates this head at dc84fe7 against its config.json's
    # sha256 (eaeecf9f...) before loading: architectures ["Eagle3Speculator"] (the speculators format:
    # vLLM loads every speculators EAGLE3 head as Eagle3LlamaForCausalLM, whatever its layer type,
    # vllm/transformers_utils/configs/speculators/algos.py update_eagle3 at vllm-project/vllm cfb173a;
    # refusing a head whose transformer_layer_config.model_type is not "llama" is this project's own
    # rule, specbench/model_cache/fill.py), transformer_layer_config
    # hidden 5120, 64 heads, 8 KV heads, head_dim 128, vocab_size 151936; draft_vocab_size 32000; one
    # model.safetensors of 3,121,274,856 bytes.
    "RedHatAI/Qwen3-32B-speculator.eagle3": ModelGeometry(
        hidden_size=5120,
        num_attention_heads=64,
        num_key_value_heads=8,
        head_dim=128,
        vocab_size=151936,
        weight_format=SAFETENSORS,
        architecture="Eagle3Speculator",
        revision="dc84fe7ff1db31efa824776f49c141fc8195eb47",
        source="public preflight of the pinned config.json (sha256 eaeecf9f0c63...) and model.safetensors",
        draft_vocab_size=32000,
    ),
    # Public code pins ba10360 (config sha256 47c995bf...) and builds the head from its config:
    # hidden 5120, 64 query heads, 8 KV heads x 128 ("uses the target model's explicit 64Q/8KV x 128
    # geometry"), intermediate 25600, draft_vocab_size 32000; a public SGLang-based project reports
    # that it works where AngelSlim's crashed. Its target vocab_size, architecture label and weight
    # format were not read.
    "thoughtworks/Qwen3-32B-Eagle3": ModelGeometry(
        hidden_size=5120,
        num_attention_heads=64,
        num_key_value_heads=8,
        head_dim=128,
        vocab_size=None,
        weight_format=None,
        architecture=None,
        revision="ba10360e72cc5208048695e713c2d45781921013",
        source="public code pinning config.json at ba10360 (sha256 47c995bf777e...)",
        draft_vocab_size=32000,
    ),
}

# The default head of the vllm-neuron stack: the only known head with every pairing fact read at a
# pinned revision, every one matching Qwen3-32B, in the format vLLM itself maps to the plugin's
# registered Eagle3LlamaForCausalLM. AngelSlim's fails on head_dim (80) and weights (.bin).
DEFAULT_HEAD = "RedHatAI/Qwen3-32B-speculator.eagle3"


def pairing_problems(head: ModelGeometry, target: ModelGeometry) -> list[tuple[str, str]]:
    """(field, reason) for every fact that stops the head pairing with the target on the plugin.
    A fact unknown on either side is not judged here (the model-cache Job checks it)."""
    found: list[tuple[str, str]] = []
    for field in ("head_dim", "num_key_value_heads", "hidden_size", "vocab_size"):
        h, t = getattr(head, field), getattr(target, field)
        if h is not None and t is not None and h != t:
            found.append((field, f"{field} is {h}, the target's is {t}: {PAIRING_REASONS[field]}"))
    if head.weight_format is not None and head.weight_format != SAFETENSORS:
        found.append(("weight_format", f"weights are .{head.weight_format}, not SafeTensors: {PAIRING_REASONS['weight_format']}"))
    return found


def stack_of_method(method_id: str) -> list[str]:
    """The stacks that support a method (for error messages)."""
    return [s.id for s in STACKS.values() if method_id in s.method_ids]
