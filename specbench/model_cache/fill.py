"""Fill the bucket-backed model cache: copy each model's files from the Hugging Face Hub into
``<dest>/<org>/<name>/``, one file at a time, then write a completion marker.

Runs in the model-cache Job, in the serving image (which ships huggingface_hub, and none of the
benchmark's requirements: standard library only besides it), from the code asset the Job's init
container fetched and checked (charts/code.py ``RUN_MODULE``). Mountpoint for S3
takes whole new files written sequentially and cannot rename, while the Hub client downloads to a
temporary name and renames; so each file is downloaded to local scratch, copied, and deleted, and
at most one file sits on local disk at a time. Files already present with the right size are
skipped, so a failed Job resumes where it stopped. The marker is written last; the serving pods
wait for it.

EAGLE3 heads (``--eagle3-head``) are checked against the target's ``config.json`` (``--eagle3-target``,
filled first) as soon as their own ``config.json`` is in the cache, before their weights are copied
and long before anything compiles: the architecture name the plugin will look them up under, head
dim, KV heads, hidden size, vocabulary, SafeTensors present. A head that cannot pair fails the Job
with one line naming the head and the field (exit code ``HEAD_MISMATCH``, which the Job's pod
failure policy does not retry). A head that pairs gets the architecture name the plugin registers;
the Hub's file is kept beside it as ``config.hub.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from specbench import jsonfile

MARKER = ".specdecode-complete"
HUB_CONFIG = "config.hub.json"  # a head's config.json as published, before adapt_eagle3_config
HEAD_MISMATCH = 3  # the exit code of a head that cannot pair with the target (not retried)
# How the vLLM-Neuron plugin finds a head's class (vllm-project/vllm-neuron at 09006a4,
# vllm_neuron/vllm/spec_decode/eagle.py lines 303-305, EagleProposer.compile_and_load_draft_model): it
# takes the draft model config's architecture and, for method eagle3, prepends "Eagle3" unless the name
# already starts with it; the name must then be in its registry (line 309 raises ValueError otherwise;
# vllm_neuron/model/registry.py line 24 at 5528be7, get_models), whose only EAGLE3 class is
# Eagle3LlamaForCausalLM. So, for each label a public head carries:
# - "LlamaForCausalLM" -> looked up as "Eagle3LlamaForCausalLM": registered, kept as published;
# - "Eagle3LlamaForCausalLM": kept;
# - "LlamaForCausalLMEagle3" (SGLang/SpecForge style) -> would be "Eagle3LlamaForCausalLMEagle3":
#   renamed to "Eagle3LlamaForCausalLM" (the same one-layer Llama decoder head);
# - "Qwen3ForCausalLM", "Qwen3ForCausalLMEagle3" -> "Eagle3Qwen3ForCausalLM[Eagle3]": not registered,
#   and a Qwen3-style layer carries q_norm/k_norm weights the Llama head has no place for: refused;
# - "Eagle3Speculator" (the vllm-project/speculators format): upstream vLLM rewrites every such
#   EAGLE3 head to "Eagle3LlamaForCausalLM", whatever transformer_layer_config.model_type says
#   (vllm/transformers_utils/configs/speculators/algos.py update_eagle3 sets the architecture
#   unconditionally, vllm-project/vllm cfb173a; base.py checks only that the layer config exists),
#   so it is kept as published. Refusing a layer type other than "llama" is this project's own rule:
#   vLLM would build a Llama layer for it all the same (a Qwen3 layer's q_norm/k_norm have no place there).
# Unverified on hardware: no source confirms that a head then loads on Neuron.
NEURON_EAGLE3_ARCHITECTURE = "Eagle3LlamaForCausalLM"
REGISTERED_EAGLE3_ARCHITECTURES = (NEURON_EAGLE3_ARCHITECTURE,)
RENAMED_EAGLE3_ARCHITECTURES = {"LlamaForCausalLMEagle3": NEURON_EAGLE3_ARCHITECTURE}
SPECULATORS_LAYER_TYPES = {"llama": NEURON_EAGLE3_ARCHITECTURE}
# Why each geometry field must match the target's (config/serving_stacks.py PAIRING_REASONS says the same).
PAIRING_REASONS = {
    "head_dim": "the plugin keeps the draft's layers in the target's KV-cache group (validate_same_kv_cache_group)",
    "num_key_value_heads": "the plugin keeps the draft's layers in the target's KV-cache group (validate_same_kv_cache_group)",
    "hidden_size": "the head reads the target's hidden states",
    "vocab_size": "the head proposes the target's token ids",
}
# Not needed to serve: original (non-HF) checkpoints and git metadata.
_SKIPPED_PREFIXES = ("original/",)
_SKIPPED_NAMES = (".gitattributes",)
_PICKLE_SUFFIXES = (".bin", ".pt", ".pth")

ListFiles = Callable[[str], tuple[str, list[tuple[str, int]]]]  # model -> (revision, [(path, size)])
Download = Callable[[str, str, str, Path], Path]  # (model, revision, path, scratch) -> local file


def wanted_files(files: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
    """The files vLLM needs: safetensors weights when present (pickled weights only otherwise)."""
    files = [(p, s) for p, s in files if not p.startswith(_SKIPPED_PREFIXES) and p.split("/")[-1] not in _SKIPPED_NAMES]
    if any(p.endswith(".safetensors") for p, _ in files):
        files = [(p, s) for p, s in files if not p.endswith(_PICKLE_SUFFIXES)]
    return sorted(files)


class HeadMismatch(Exception):
    """A head that cannot pair with the target; str() is the one line the Job prints."""


def head_architecture(config: dict) -> tuple[str, str]:
    """(name to write into config.json, problem): the name is the published one when the plugin finds
    the head under it as is; the problem is empty unless the head cannot be registered."""
    if config.get("speculators_model_type") == "eagle3":
        published = (config.get("architectures") or ["?"])[0]
        layer_type = (config.get("transformer_layer_config") or {}).get("model_type", "")
        if layer_type in SPECULATORS_LAYER_TYPES:
            return published, ""
        return published, (
            f"architecture: a speculators-format head of layer type {layer_type!r}: vLLM loads every speculators "
            f"EAGLE3 head as {NEURON_EAGLE3_ARCHITECTURE} (a Llama layer), and this project refuses any layer type but llama"
        )
    architectures = config.get("architectures") or []
    if not architectures:
        return "", "architecture: config.json names no architectures"
    label = architectures[0]
    lookup = label if label.startswith("Eagle3") else f"Eagle3{label}"
    if lookup in REGISTERED_EAGLE3_ARCHITECTURES:
        return label, ""
    if label in RENAMED_EAGLE3_ARCHITECTURES:
        return RENAMED_EAGLE3_ARCHITECTURES[label], ""
    return label, (
        f"architecture: {label} would be looked up as {lookup}, which the plugin does not register "
        f"(its EAGLE3 classes: {', '.join(REGISTERED_EAGLE3_ARCHITECTURES)})"
    )


def geometry(config: dict) -> dict:
    """hidden_size, num_key_value_heads, head_dim, vocab_size of a model or head config.json. A
    speculators-format head keeps its layer's geometry under transformer_layer_config; a head without
    head_dim has hidden_size / num_attention_heads (transformers' default)."""
    layer = config.get("transformer_layer_config") or config
    hidden, heads = layer.get("hidden_size"), layer.get("num_attention_heads")
    head_dim = layer.get("head_dim") or (hidden // heads if isinstance(hidden, int) and isinstance(heads, int) and heads else None)
    return {
        "hidden_size": hidden,
        "num_key_value_heads": layer.get("num_key_value_heads") or heads,
        "head_dim": head_dim,
        "vocab_size": layer.get("vocab_size"),
    }


def head_problems(head_config: dict, target_config: dict, files: Iterable[str]) -> list[str]:
    """Every reason the head cannot pair with the target on the plugin, one "field: reason" each."""
    problems = []
    _, architecture_problem = head_architecture(head_config)
    if architecture_problem:
        problems.append(architecture_problem)
    head, target = geometry(head_config), geometry(target_config)
    for field in ("head_dim", "num_key_value_heads", "hidden_size", "vocab_size"):
        if head[field] is None:
            problems.append(f"{field}: missing from the head's config.json")
        elif head[field] != target[field]:
            problems.append(f"{field}: {head[field]}, the target's is {target[field]}; {PAIRING_REASONS[field]}")
    files = list(files)
    if not any(p.endswith(".safetensors") for p in files):
        pickled = [p for p in files if p.endswith(_PICKLE_SUFFIXES)]
        problems.append(f"weights: no SafeTensors file (found {', '.join(pickled) or 'none'}); the plugin loads SafeTensors only")
    return problems


def adapt_eagle3_config(config: dict) -> dict | None:
    """The head's config with an architecture the plugin registers, or None when it needs no change."""
    name, problem = head_architecture(config)
    architectures = config.get("architectures") or []
    if problem or not architectures or name == architectures[0]:
        return None
    return {**config, "architectures": [name, *architectures[1:]]}


def adapt_head(dest: Path) -> dict:
    """Adapt a cached head's config.json, keeping the Hub's file as HUB_CONFIG (whole files only:
    Mountpoint cannot edit a file in place)."""
    published = dest / HUB_CONFIG if (dest / HUB_CONFIG).is_file() else dest / "config.json"
    original = json.loads(published.read_text())
    adapted = adapt_eagle3_config(original)
    if adapted is None:
        return {"adapted": False, "architectures": original.get("architectures")}
    if published.name != HUB_CONFIG:
        shutil.copyfile(published, dest / HUB_CONFIG)
    (dest / "config.json").unlink()
    (dest / "config.json").write_text(jsonfile.dumps(adapted, indent=2, sort_keys=True) + "\n")
    return {"adapted": True, "architectures": adapted["architectures"], "published_architectures": original.get("architectures")}


def fill_model(
    model: str,
    dest_root: Path,
    scratch: Path,
    list_files: ListFiles,
    download: Download,
    eagle3_head: bool = False,
    target: str = "",
) -> dict:
    """Copy one model into the cache; returns what was done (also written to the marker). A head
    (``eagle3_head``) is checked against ``target``'s cached config.json as soon as its own config.json
    is in place, before any weight is copied; HeadMismatch names the head and every failing field."""
    dest = dest_root / model
    marker = dest / MARKER
    revision, files = list_files(model)
    if marker.is_file() and json.loads(marker.read_text()).get("revision") == revision:
        return {"model": model, "revision": revision, "copied": 0, "skipped": "complete"}
    copied = reused = 0
    total = 0
    wanted = wanted_files(files)
    if eagle3_head:  # config.json first: the head is judged before its weights are fetched
        wanted.sort(key=lambda f: f[0] != "config.json")
        if not any(p == "config.json" for p, _ in wanted):
            raise HeadMismatch(f"head {model}: config.json: the Hub lists none")
    for path, size in wanted:
        target_file = dest / path
        total += size
        if eagle3_head and path == "config.json" and (dest / HUB_CONFIG).is_file():
            target_file = dest / HUB_CONFIG  # adapted before: the published copy is what the Hub's size describes
        if target_file.is_file() and target_file.stat().st_size == size:
            reused += 1
        else:
            local = download(model, revision, path, scratch)
            target_file.parent.mkdir(parents=True, exist_ok=True)
            if target_file.exists():
                target_file.unlink()  # a partial or older copy; S3 objects are replaced whole
            shutil.copyfile(local, target_file)
            local.unlink()
            copied += 1
            print(f"{model}: {path} ({size / 2**30:.2f} GiB)", flush=True)
        if eagle3_head and path == "config.json":
            check_head(model, json.loads(target_file.read_text()), dest_root, target, [p for p, _ in files])
    summary = {"model": model, "revision": revision, "copied": copied, "reused": reused, "bytes": total, "at": int(time.time())}
    if eagle3_head:
        summary["eagle3_head"] = adapt_head(dest)
    if marker.exists():
        marker.unlink()
    marker.write_text(jsonfile.dumps(summary, sort_keys=True))
    return summary


def check_head(model: str, head_config: dict, dest_root: Path, target: str, files: list[str]) -> None:
    """HeadMismatch unless the head pairs with the target whose config.json is already cached."""
    target_config = dest_root / target / "config.json"
    if not target or not target_config.is_file():
        raise HeadMismatch(f"head {model}: target: the target's config.json is not in the cache ({target or 'no --eagle3-target'})")
    problems = head_problems(head_config, json.loads(target_config.read_text()), files)
    if problems:
        raise HeadMismatch(f"head {model} cannot pair with {target}: " + "; ".join(problems))


def _hub() -> tuple[ListFiles, Download]:
    from huggingface_hub import HfApi, hf_hub_download  # in the serving image, not in this project's env

    api = HfApi()

    def list_files(model: str) -> tuple[str, list[tuple[str, int]]]:
        info = api.model_info(model, files_metadata=True)
        return info.sha, [(f.rfilename, f.size or 0) for f in info.siblings or ()]

    def download(model: str, revision: str, path: str, scratch: Path) -> Path:
        return Path(hf_hub_download(model, path, revision=revision, local_dir=scratch))

    return list_files, download


def main(argv: list[str] | None = None, hub: Callable[[], tuple[ListFiles, Download]] | None = None) -> int:
    # A literal, not __doc__: the code asset's modules have their docstrings blanked (specbench/bundle.py).
    parser = argparse.ArgumentParser(description="fill the bucket-backed model cache from the Hugging Face Hub")
    parser.add_argument("--dest", type=Path, required=True, help="mounted models/ prefix of the bucket")
    parser.add_argument("--scratch", type=Path, required=True, help="local disk for one file at a time")
    parser.add_argument("--eagle3-head", action="append", default=[], help="a model that is an EAGLE3 head (repeatable)")
    parser.add_argument("--eagle3-target", default="", help="the target model every head must pair with")
    parser.add_argument("models", nargs="+", help="Hugging Face model ids")
    args = parser.parse_args(argv)
    list_files, download = (hub or _hub)()
    # The target (and every other plain model) first: a head is checked against its config.json.
    ordered = sorted(args.models, key=lambda m: m in args.eagle3_head)
    for model in ordered:
        try:
            summary = fill_model(model, args.dest, args.scratch, list_files, download, model in args.eagle3_head, args.eagle3_target)
        except HeadMismatch as mismatch:
            print(f"model-cache: {mismatch}", file=sys.stderr, flush=True)
            return HEAD_MISMATCH
        print(jsonfile.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
