"""Fill the bucket-backed model cache: copy each model's files from the Hugging Face Hub into
``<dest>/<org>/<name>/``, one file at a time, then write a completion marker.

Runs in the model-cache Job, in the serving image (which ships huggingface_hub). Mountpoint for S3
takes whole new files written sequentially and cannot rename, while the Hub client downloads to a
temporary name and renames; so each file is downloaded to local scratch, copied, and deleted, and
at most one file sits on local disk at a time. Files already present with the right size are
skipped, so a failed Job resumes where it stopped. The marker is written last; the serving pods
wait for it.
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


def fill_model(model: str, dest_root: Path, scratch: Path, list_files: ListFiles, download: Download) -> dict:
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
    parser.add_argument("models", nargs="+", help="Hugging Face model ids")
    args = parser.parse_args(argv)
    list_files, download = _hub()
    for model in args.models:
        print(json.dumps(fill_model(model, args.dest, args.scratch, list_files, download)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
