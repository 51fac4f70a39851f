"""Build a small Llama-style tokenizer where llmperf looks for its Llama-2 tokenizer, offline.

llmperf (ray-project/llmperf f1d6bed, token_benchmark_ray.py and src/llmperf/utils.py) loads
``LlamaTokenizerFast.from_pretrained("hf-internal-testing/llama-tokenizer")`` from the Hugging Face
Hub. With no Hub access (HF_HUB_OFFLINE=1), huggingface_hub resolves a repo id through its cache
layout: ``<cache>/models--<org>--<name>/refs/main`` names a snapshot folder under ``snapshots/``
(https://huggingface.co/docs/huggingface_hub/guides/manage-cache). This writes such a snapshot:
a BPE tokenizer trained on a little text with Llama's shape (Metaspace "▁" pre-tokenizer, byte
fallback, <unk> <s> </s>, BOS added by LlamaTokenizerFast's post-processor), so llmperf's counts
include a BOS as with the real one. Counts differ from the real Llama-2 tokenizer: for local runs only.

    python scripts/build_test_llama_tokenizer.py [--cache ~/.cache/huggingface/hub]

Needs ``tokenizers`` and ``transformers`` (in llmperf's environment).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

REPO_ID = "hf-internal-testing/llama-tokenizer"
REVISION = "0" * 40  # a made-up commit: the cache needs one, nothing checks it offline


def corpus() -> list[str]:
    words = " ".join(f"w{i}" for i in range(1200))
    text = "counting numbers from 1 hello world the cat sat on the mat Output valid JSON with fixed keys "
    text += "Write a simple Python function skeleton List numbers from one to twenty Shall I compare thee to a summer's day"
    return [words, text] * 4


def build(cache: Path) -> Path:
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    tokenizer.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tokenizer.pre_tokenizer = pre_tokenizers.Split("▁", behavior="merged_with_next")
    tokenizer.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
    trainer = trainers.BpeTrainer(vocab_size=2000, special_tokens=["<unk>", "<s>", "</s>", *byte_tokens], show_progress=False)
    tokenizer.train_from_iterator(corpus(), trainer)
    bos = ("<s>", tokenizer.token_to_id("<s>"))  # Llama-2's tokenizer.json prepends it the same way
    tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B", special_tokens=[bos])

    snapshot = cache / f"models--{REPO_ID.replace('/', '--')}" / "snapshots" / REVISION
    snapshot.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(snapshot / "tokenizer.json"))
    config = {"tokenizer_class": "LlamaTokenizer", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
              "add_bos_token": True, "add_eos_token": False, "model_max_length": 4096}  # fmt: skip
    (snapshot / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    (snapshot / "special_tokens_map.json").write_text(json.dumps({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}))
    refs = snapshot.parent.parent / "refs"
    refs.mkdir(exist_ok=True)
    (refs / "main").write_text(REVISION)
    return snapshot


def main() -> None:
    default = Path(os.environ.get("HF_HUB_CACHE") or Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=default, help="the Hugging Face hub cache (default: %(default)s)")
    cache = parser.parse_args().cache
    snapshot = build(cache)

    os.environ["HF_HUB_OFFLINE"] = "1"
    from transformers import LlamaTokenizerFast

    tokenizer = LlamaTokenizerFast.from_pretrained(REPO_ID, cache_dir=cache)
    ids = tokenizer.encode(" w1 w2 hello world")
    first = tokenizer.convert_ids_to_tokens(ids[:1])
    print(f"{snapshot}: {REPO_ID} loads offline; ' w1 w2 hello world' -> {len(ids)} tokens, the first {first}")


if __name__ == "__main__":
    main()
