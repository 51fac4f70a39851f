"""The model-cache fill script (runs in the cluster), driven here with a fake Hub on local disk."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from charts.model_cache import SCRIPT

spec = importlib.util.spec_from_file_location("fill_model_cache", SCRIPT)
fill = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fill)  # type: ignore[union-attr]

FILES = {
    "config.json": b"{}",
    "model-00001-of-00002.safetensors": b"a" * 1000,
    "model-00002-of-00002.safetensors": b"b" * 700,
    "tokenizer.json": b"tok",
    "original/consolidated.pth": b"x" * 5000,
    "pytorch_model.bin": b"y" * 3000,
    ".gitattributes": b"*",
}


class FakeHub:
    def __init__(self, revision: str = "rev1"):
        self.revision = revision
        self.downloads: list[str] = []
        self.on_disk_during_copy: list[int] = []

    def list_files(self, model):
        return self.revision, [(path, len(data)) for path, data in FILES.items()]

    def download(self, model, revision, path, scratch: Path) -> Path:
        assert revision == self.revision
        self.downloads.append(path)
        local = scratch / path
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_bytes(FILES[path])
        self.on_disk_during_copy.append(sum(1 for p in scratch.rglob("*") if p.is_file()))
        return local


@pytest.fixture
def dirs(tmp_path):
    dest, scratch = tmp_path / "models", tmp_path / "scratch"
    scratch.mkdir()
    return dest, scratch


def test_copies_only_what_vllm_needs_then_marks_complete(dirs):
    dest, scratch = dirs
    hub = FakeHub()
    summary = fill.fill_model("Qwen/Qwen3-32B", dest, scratch, hub.list_files, hub.download)
    model = dest / "Qwen" / "Qwen3-32B"
    assert sorted(p.name for p in model.iterdir()) == sorted(
        ["config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "tokenizer.json", fill.MARKER]
    )
    assert (model / "model-00002-of-00002.safetensors").read_bytes() == FILES["model-00002-of-00002.safetensors"]
    marker = json.loads((model / fill.MARKER).read_text())
    assert marker["revision"] == "rev1" and marker["copied"] == 4 and marker["bytes"] == 1000 + 700 + 2 + 3
    assert summary["copied"] == 4
    assert max(hub.on_disk_during_copy) == 1 and not any(p.is_file() for p in scratch.rglob("*"))


def test_a_complete_model_is_skipped_and_a_new_revision_refilled(dirs):
    dest, scratch = dirs
    fill.fill_model("Qwen/Qwen3-32B", dest, scratch, FakeHub().list_files, FakeHub().download)
    again = FakeHub()
    assert fill.fill_model("Qwen/Qwen3-32B", dest, scratch, again.list_files, again.download)["skipped"] == "complete"
    assert again.downloads == []
    newer = FakeHub("rev2")
    summary = fill.fill_model("Qwen/Qwen3-32B", dest, scratch, newer.list_files, newer.download)
    assert summary["revision"] == "rev2" and summary["reused"] == 4 and summary["copied"] == 0


def test_an_interrupted_fill_resumes_and_replaces_partial_files(dirs):
    dest, scratch = dirs
    model = dest / "Qwen" / "Qwen3-32B"
    model.mkdir(parents=True)
    (model / "model-00001-of-00002.safetensors").write_bytes(b"a" * 1000)  # complete
    (model / "model-00002-of-00002.safetensors").write_bytes(b"b" * 10)  # cut short
    hub = FakeHub()
    summary = fill.fill_model("Qwen/Qwen3-32B", dest, scratch, hub.list_files, hub.download)
    assert "model-00001-of-00002.safetensors" not in hub.downloads
    assert "model-00002-of-00002.safetensors" in hub.downloads
    assert (model / "model-00002-of-00002.safetensors").stat().st_size == 700
    assert summary["reused"] == 1 and summary["copied"] == 3


def test_pickled_weights_are_kept_when_there_are_no_safetensors():
    assert fill.wanted_files([("pytorch_model.bin", 3), ("config.json", 1)]) == [("config.json", 1), ("pytorch_model.bin", 3)]


# --- EAGLE3 heads ---------------------------------------------------------------------------------

HEAD_CONFIG = {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 5120, "num_hidden_layers": 1}


class FakeHeadHub(FakeHub):
    """A head as a Hub repository: a config.json with the SGLang-style architecture name."""

    def __init__(self, revision: str = "rev1", config: dict | None = None):
        super().__init__(revision)
        self.files = {"config.json": json.dumps(config or HEAD_CONFIG).encode(), "model.safetensors": b"h" * 300}

    def list_files(self, model):
        return self.revision, [(path, len(data)) for path, data in self.files.items()]

    def download(self, model, revision, path, scratch: Path) -> Path:
        self.downloads.append(path)
        local = scratch / path
        local.write_bytes(self.files[path])
        return local


def test_a_head_gets_the_plugins_architecture_and_keeps_the_published_config(dirs):
    dest, scratch = dirs
    hub = FakeHeadHub()
    summary = fill.fill_model("AngelSlim/Qwen3-32B_eagle3", dest, scratch, hub.list_files, hub.download, eagle3_head=True)
    head = dest / "AngelSlim" / "Qwen3-32B_eagle3"
    assert json.loads((head / "config.json").read_text()) == {**HEAD_CONFIG, "architectures": ["Eagle3LlamaForCausalLM"]}
    assert json.loads((head / fill.HUB_CONFIG).read_text()) == HEAD_CONFIG
    assert summary["eagle3_head"] == {
        "adapted": True,
        "architectures": ["Eagle3LlamaForCausalLM"],
        "published_architectures": ["LlamaForCausalLMEagle3"],
    }
    # A resumed fill of a new revision reuses the published copy instead of downloading config.json again.
    newer = FakeHeadHub("rev2")
    again = fill.fill_model("AngelSlim/Qwen3-32B_eagle3", dest, scratch, newer.list_files, newer.download, eagle3_head=True)
    assert newer.downloads == [] and again["reused"] == 2
    assert json.loads((head / "config.json").read_text())["architectures"] == ["Eagle3LlamaForCausalLM"]


def test_a_head_the_plugin_resolves_already_is_left_alone(dirs):
    dest, scratch = dirs
    hub = FakeHeadHub(config={"architectures": ["LlamaForCausalLM"]})
    summary = fill.fill_model("org/head", dest, scratch, hub.list_files, hub.download, eagle3_head=True)
    assert summary["eagle3_head"] == {"adapted": False, "architectures": ["LlamaForCausalLM"]}
    assert not (dest / "org" / "head" / fill.HUB_CONFIG).exists()


def test_a_target_model_is_never_adapted(dirs):
    dest, scratch = dirs
    hub = FakeHeadHub()
    summary = fill.fill_model("org/model", dest, scratch, hub.list_files, hub.download)
    assert "eagle3_head" not in summary
    assert json.loads((dest / "org" / "model" / "config.json").read_text()) == HEAD_CONFIG
