"""The model-cache fill (specbench/model_cache/fill.py, run in the cluster from the code asset),
driven here with a fake Hub on local disk."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specbench.model_cache import fill

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

# Qwen3-32B's config.json, as far as pairing needs it (config/serving_stacks.py TARGET_GEOMETRY).
TARGET_CONFIG = {
    "architectures": ["Qwen3ForCausalLM"],
    "hidden_size": 5120,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
}
# An SGLang/SpecForge-style head with the target's geometry (as thoughtworks/Qwen3-32B-Eagle3 is recorded).
HEAD_CONFIG = {
    "architectures": ["LlamaForCausalLMEagle3"],
    "hidden_size": 5120,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
    "draft_vocab_size": 32000,
    "num_hidden_layers": 1,
}
# The speculators format (as RedHatAI/Qwen3-32B-speculator.eagle3 is recorded).
SPECULATORS_CONFIG = {
    "architectures": ["Eagle3Speculator"],
    "speculators_model_type": "eagle3",
    "draft_vocab_size": 32000,
    "transformer_layer_config": {
        **{k: v for k, v in HEAD_CONFIG.items() if k not in ("architectures", "draft_vocab_size")},
        "model_type": "llama",
    },
}
# An AngelSlim-style head: no head_dim (so hidden_size / heads = 80), pickled weights.
ANGELSLIM_CONFIG = {k: v for k, v in HEAD_CONFIG.items() if k != "head_dim"}
TARGET = "Qwen/Qwen3-32B"


class FakeHeadHub(FakeHub):
    """A head as a Hub repository: its config.json and its weights."""

    def __init__(self, revision: str = "rev1", config: dict | None = None, weights: str = "model.safetensors"):
        super().__init__(revision)
        self.files = {"config.json": json.dumps(config or HEAD_CONFIG).encode(), weights: b"h" * 300}

    def list_files(self, model):
        return self.revision, [(path, len(data)) for path, data in self.files.items()]

    def download(self, model, revision, path, scratch: Path) -> Path:
        self.downloads.append(path)
        local = scratch / path
        local.write_bytes(self.files[path])
        return local


@pytest.fixture
def cached_target(dirs):
    """The target's config.json already in the cache, as the Job leaves it before any head."""
    dest, scratch = dirs
    (dest / TARGET).mkdir(parents=True)
    (dest / TARGET / "config.json").write_text(json.dumps(TARGET_CONFIG))
    return dest, scratch


def _fill_head(dirs, hub, model="org/head"):
    dest, scratch = dirs
    return fill.fill_model(model, dest, scratch, hub.list_files, hub.download, eagle3_head=True, target=TARGET)


def test_a_head_gets_the_plugins_architecture_and_keeps_the_published_config(cached_target):
    dest, scratch = cached_target
    hub = FakeHeadHub()
    summary = _fill_head(cached_target, hub, "thoughtworks/Qwen3-32B-Eagle3")
    head = dest / "thoughtworks" / "Qwen3-32B-Eagle3"
    assert json.loads((head / "config.json").read_text()) == {**HEAD_CONFIG, "architectures": ["Eagle3LlamaForCausalLM"]}
    assert json.loads((head / fill.HUB_CONFIG).read_text()) == HEAD_CONFIG
    assert summary["eagle3_head"] == {
        "adapted": True,
        "architectures": ["Eagle3LlamaForCausalLM"],
        "published_architectures": ["LlamaForCausalLMEagle3"],
    }
    # A resumed fill of a new revision reuses the published copy instead of downloading config.json again.
    newer = FakeHeadHub("rev2")
    again = _fill_head(cached_target, newer, "thoughtworks/Qwen3-32B-Eagle3")
    assert newer.downloads == [] and again["reused"] == 2
    assert json.loads((head / "config.json").read_text())["architectures"] == ["Eagle3LlamaForCausalLM"]


@pytest.mark.parametrize(
    "config",
    [
        {**HEAD_CONFIG, "architectures": ["LlamaForCausalLM"]},  # looked up as Eagle3LlamaForCausalLM
        {**HEAD_CONFIG, "architectures": ["Eagle3LlamaForCausalLM"]},
        SPECULATORS_CONFIG,  # vLLM maps the speculators format itself
    ],
    ids=["LlamaForCausalLM", "Eagle3LlamaForCausalLM", "Eagle3Speculator"],
)
def test_a_head_the_plugin_resolves_already_is_left_alone(cached_target, config):
    dest, _ = cached_target
    summary = _fill_head(cached_target, FakeHeadHub(config=config))
    assert summary["eagle3_head"] == {"adapted": False, "architectures": config["architectures"]}
    assert not (dest / "org" / "head" / fill.HUB_CONFIG).exists()
    assert (dest / "org" / "head" / fill.MARKER).is_file()


@pytest.mark.parametrize(
    "config, weights, line",
    [
        (
            ANGELSLIM_CONFIG,
            "pytorch_model.bin",
            "head org/head cannot pair with Qwen/Qwen3-32B: head_dim: 80, the target's is 128; the plugin keeps the draft's "
            "layers in the target's KV-cache group (validate_same_kv_cache_group); weights: no SafeTensors file (found "
            "pytorch_model.bin); the plugin loads SafeTensors only",
        ),
        (
            {**HEAD_CONFIG, "architectures": ["Qwen3ForCausalLM"]},
            "model.safetensors",
            "head org/head cannot pair with Qwen/Qwen3-32B: architecture: Qwen3ForCausalLM would be looked up as "
            "Eagle3Qwen3ForCausalLM, which the plugin does not register (its EAGLE3 classes: Eagle3LlamaForCausalLM)",
        ),
        (
            {**HEAD_CONFIG, "architectures": ["Qwen3ForCausalLMEagle3"]},
            "model.safetensors",
            "head org/head cannot pair with Qwen/Qwen3-32B: architecture: Qwen3ForCausalLMEagle3 would be looked up as "
            "Eagle3Qwen3ForCausalLMEagle3, which the plugin does not register (its EAGLE3 classes: Eagle3LlamaForCausalLM)",
        ),
        (
            {**SPECULATORS_CONFIG, "transformer_layer_config": {**SPECULATORS_CONFIG["transformer_layer_config"], "model_type": "qwen3"}},
            "model.safetensors",
            "head org/head cannot pair with Qwen/Qwen3-32B: architecture: a speculators-format head of layer type 'qwen3': "
            "vLLM loads every speculators EAGLE3 head as Eagle3LlamaForCausalLM (a Llama layer), and this project refuses "
            "any layer type but llama",
        ),
        (
            {**HEAD_CONFIG, "num_key_value_heads": 4},
            "model.safetensors",
            "head org/head cannot pair with Qwen/Qwen3-32B: num_key_value_heads: 4, the target's is 8; the plugin keeps the "
            "draft's layers in the target's KV-cache group (validate_same_kv_cache_group)",
        ),
        (
            {**HEAD_CONFIG, "vocab_size": 128256, "hidden_size": 4096, "head_dim": 128},
            "model.safetensors",
            "head org/head cannot pair with Qwen/Qwen3-32B: hidden_size: 4096, the target's is 5120; the head reads the "
            "target's hidden states; vocab_size: 128256, the target's is 151936; the head proposes the target's token ids",
        ),
    ],
    ids=["angelslim-head-dim-and-bin", "qwen3-label", "qwen3-eagle3-label", "speculators-qwen3", "kv-heads", "hidden-and-vocab"],
)
def test_a_head_that_cannot_pair_fails_before_its_weights_are_fetched(cached_target, config, weights, line):
    dest, _ = cached_target
    hub = FakeHeadHub(config=config, weights=weights)
    with pytest.raises(fill.HeadMismatch) as err:
        _fill_head(cached_target, hub)
    assert str(err.value) == line
    assert hub.downloads == ["config.json"]  # the weights were never fetched
    assert not (dest / "org" / "head" / fill.MARKER).exists()  # the serving pods keep waiting


def test_a_head_without_the_targets_config_in_the_cache_fails(dirs):
    with pytest.raises(
        fill.HeadMismatch, match=r"^head org/head: target: the target's config.json is not in the cache \(Qwen/Qwen3-32B\)$"
    ):
        _fill_head(dirs, FakeHeadHub())


def test_a_target_model_is_never_adapted(dirs):
    dest, scratch = dirs
    hub = FakeHeadHub()
    summary = fill.fill_model("org/model", dest, scratch, hub.list_files, hub.download)
    assert "eagle3_head" not in summary
    assert json.loads((dest / "org" / "model" / "config.json").read_text()) == HEAD_CONFIG


class FakeRepoHub:
    """Several repositories: the target and heads, each its own files."""

    def __init__(self, repos: dict[str, dict[str, bytes]]):
        self.repos = repos
        self.downloads: list[tuple[str, str]] = []

    def __call__(self):
        return self.list_files, self.download

    def list_files(self, model):
        return "rev1", [(p, len(d)) for p, d in self.repos[model].items()]

    def download(self, model, revision, path, scratch: Path) -> Path:
        self.downloads.append((model, path))
        local = scratch / path
        local.write_bytes(self.repos[model][path])
        return local


def _repos(head_config: dict, weights: str = "model.safetensors") -> FakeRepoHub:
    return FakeRepoHub(
        {
            TARGET: {"config.json": json.dumps(TARGET_CONFIG).encode(), "model-00001-of-00001.safetensors": b"t" * 50},
            "org/head": {"config.json": json.dumps(head_config).encode(), weights: b"h" * 30},
        }
    )


def test_the_job_fills_the_target_first_then_passes_a_head_that_pairs(dirs, capsys):
    dest, scratch = dirs
    hub = _repos(HEAD_CONFIG)
    # The head is named first on the command line: the target is still filled before it.
    argv = ["--dest", str(dest), "--scratch", str(scratch), "--eagle3-head", "org/head", "--eagle3-target", TARGET, "org/head", TARGET]
    assert fill.main(argv, hub) == 0
    assert [m for m, _ in hub.downloads] == [TARGET, TARGET, "org/head", "org/head"]
    assert (dest / "org" / "head" / fill.MARKER).is_file() and (dest / TARGET / fill.MARKER).is_file()
    assert capsys.readouterr().err == ""


def test_the_job_stops_with_one_line_naming_the_head_and_the_field(dirs, capsys):
    dest, scratch = dirs
    hub = _repos(ANGELSLIM_CONFIG, "pytorch_model.bin")
    argv = ["--dest", str(dest), "--scratch", str(scratch), "--eagle3-head", "org/head", "--eagle3-target", TARGET, TARGET, "org/head"]
    assert fill.main(argv, hub) == fill.HEAD_MISMATCH
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("model-cache: head org/head cannot pair with Qwen/Qwen3-32B: head_dim: 80")
    assert ("org/head", "pytorch_model.bin") not in hub.downloads


def test_the_job_does_not_retry_a_head_mismatch():
    from charts.model_cache import HEAD_MISMATCH_EXIT_CODE, head_mismatch_rule

    assert HEAD_MISMATCH_EXIT_CODE == fill.HEAD_MISMATCH
    assert head_mismatch_rule()["onExitCodes"] == {"containerName": "fill", "operator": "In", "values": [fill.HEAD_MISMATCH]}


# --- the script and the catalogue agree ------------------------------------------------------------


def _config_of(g) -> dict:
    """A config.json with a catalogue entry's known facts (unknown ones left out)."""
    config = {"architectures": [g.architecture or "LlamaForCausalLMEagle3"]}
    for field in ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "vocab_size"):
        if getattr(g, field) is not None:
            config[field] = getattr(g, field)
    if g.architecture == "Eagle3Speculator":
        config = {
            "architectures": ["Eagle3Speculator"],
            "speculators_model_type": "eagle3",
            "transformer_layer_config": {**config, "model_type": "llama"},
        }
    return config


def test_the_script_and_the_catalogue_judge_every_known_head_alike():
    from config import serving_stacks

    assert {k: v for k, v in serving_stacks.PAIRING_REASONS.items() if k != "weight_format"} == fill.PAIRING_REASONS
    target = serving_stacks.TARGET_GEOMETRY[TARGET]
    target_config = _config_of(target)
    for head, g in serving_stacks.HEAD_GEOMETRY.items():
        synth = {field for field, _ in serving_stacks.pairing_problems(g, target)}
        weights = ["model.bin" if g.weight_format == serving_stacks.PICKLE else "model.safetensors"]
        config = _config_of(g)
        if g.vocab_size is None:  # unknown to the catalogue: give it the target's
            (config.get("transformer_layer_config") or config)["vocab_size"] = target.vocab_size
        if g.num_key_value_heads is None:
            (config.get("transformer_layer_config") or config)["num_key_value_heads"] = target.num_key_value_heads
        job = {line.split(":")[0] for line in fill.head_problems(config, target_config, weights)}
        assert {"weights" if f == "weight_format" else f for f in synth} == job, head
