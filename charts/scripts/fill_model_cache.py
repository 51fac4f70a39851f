"""Fill the bucket-backed model cache: copy each model's files from the Hugging Face Hub into
``<dest>/<org>/<name>/``, one file at a time, then write a completion marker.

Runs in the model-cache Job, in the serving image (which ships huggingface_hub). Mountpoint for S3
takes whole new files written sequentially and cannot rename, while the Hub client downloads to a
temporary name and renames; so each file is downloaded to local scratch, copied, and deleted, and
at most one file sits on local disk at a time. Files already present with the right size are
skipped, so a failed Job resumes where it stopped. The marker is written last; the serving pods
wait for it.

EAGLE3 heads (``--eagle3-head``) are fetched like models, then their ``config.json`` is adapted so
the vLLM-Neuron plugin can resolve the architecture; the Hub's file is kept beside it as
``config.hub.json``. Why, and that it is unverified: ``NEURON_EAGLE3_ARCHITECTURE``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

MARKER = ".specdecode-complete"
HUB_CONFIG = "config.hub.json"  # a head's config.json as published, before adapt_eagle3_config
# The plugin's model registry names one EAGLE3 class (vllm-project/vllm-neuron
# vllm_neuron/model/registry.py: "Eagle3LlamaForCausalLM"). Its EagleProposer prepends "Eagle3" to a
# head's architecture unless present (docs/design/speculation/speculative_decoding_design.md), and
# upstream vLLM keeps an architecture that starts or ends with "Eagle3" as is
# (vllm/transformers_utils/configs/eagle.py). A head published as "LlamaForCausalLMEagle3" (the
# SGLang-style name public heads use) would therefore be looked up under a name the plugin does
# not register. Unverified on hardware: no source confirms that a renamed head then loads.
NEURON_EAGLE3_ARCHITECTURE = "Eagle3LlamaForCausalLM"
RENAMED_EAGLE3_ARCHITECTURES = ("LlamaForCausalLMEagle3",)
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


def adapt_eagle3_config(config: dict) -> dict | None:
    """The head's config with an architecture the plugin registers, or None when it needs no change."""
    architectures = config.get("architectures") or []
    renamed = [NEURON_EAGLE3_ARCHITECTURE if a in RENAMED_EAGLE3_ARCHITECTURES else a for a in architectures]
    return None if renamed == architectures else {**config, "architectures": renamed}


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
    (dest / "config.json").write_text(json.dumps(adapted, indent=2, sort_keys=True) + "\n")
    return {"adapted": True, "architectures": adapted["architectures"], "published_architectures": original.get("architectures")}


def fill_model(model: str, dest_root: Path, scratch: Path, list_files: ListFiles, download: Download, eagle3_head: bool = False) -> dict:
    """Copy one model into the cache; returns what was done (also written to the marker)."""
    dest = dest_root / model
    marker = dest / MARKER
    revision, files = list_files(model)
    if marker.is_file() and json.loads(marker.read_text()).get("revision") == revision:
        return {"model": model, "revision": revision, "copied": 0, "skipped": "complete"}
    copied = reused = 0
    total = 0
    for path, size in wanted_files(files):
        target = dest / path
        total += size
        if eagle3_head and path == "config.json" and (dest / HUB_CONFIG).is_file():
            target = dest / HUB_CONFIG  # adapted before: the published copy is what the Hub's size describes
        if target.is_file() and target.stat().st_size == size:
            reused += 1
            continue
        local = download(model, revision, path, scratch)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            target.unlink()  # a partial or older copy; S3 objects are replaced whole
        shutil.copyfile(local, target)
        local.unlink()
        copied += 1
        print(f"{model}: {path} ({size / 2**30:.2f} GiB)", flush=True)
    summary = {"model": model, "revision": revision, "copied": copied, "reused": reused, "bytes": total, "at": int(time.time())}
    if eagle3_head:
        summary["eagle3_head"] = adapt_head(dest)
    if marker.exists():
        marker.unlink()
    marker.write_text(json.dumps(summary, sort_keys=True))
    return summary


def _hub() -> tuple[ListFiles, Download]:
    from huggingface_hub import HfApi, hf_hub_download  # in the serving image, not in this project's env

    api = HfApi()

    def list_files(model: str) -> tuple[str, list[tuple[str, int]]]:
        info = api.model_info(model, files_metadata=True)
        return info.sha, [(f.rfilename, f.size or 0) for f in info.siblings or ()]

    def download(model: str, revision: str, path: str, scratch: Path) -> Path:
        return Path(hf_hub_download(model, path, revision=revision, local_dir=scratch))

    return list_files, download


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dest", type=Path, required=True, help="mounted models/ prefix of the bucket")
    parser.add_argument("--scratch", type=Path, required=True, help="local disk for one file at a time")
    parser.add_argument("--eagle3-head", action="append", default=[], help="a model that is an EAGLE3 head (repeatable)")
    parser.add_argument("models", nargs="+", help="Hugging Face model ids")
    args = parser.parse_args(argv)
    list_files, download = _hub()
    for model in args.models:
        print(json.dumps(fill_model(model, args.dest, args.scratch, list_files, download, model in args.eagle3_head)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
