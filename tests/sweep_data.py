"""Synthetic sweep points with a known truth: per class a per-token acceptance a, per draft a cost c,
so the standard model's optimum k is known; under load the speculative step slows faster than the
plain one, so speculation stops paying at a known load. Used by test_sweep_analysis.py and
scripts/bench_sweep.py."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from specbench.analysis.sweep import BASELINE, CONCURRENCY, Load, Point, Variant
from specbench.analysis.theory import expected_speedup
from specbench.results.records import RequestRecord

TARGET_STEP_S = 0.02
OUTPUT_TOKENS = 200


@dataclass(frozen=True)
class Truth:
    classes: dict[str, float]  # prompt class -> a
    drafts: dict[str, float]  # draft model -> c
    ks: tuple[int, ...]
    loads: tuple[Load, ...]
    # Step time x (1 + slowdown x load): batching hurts the speculative server more (its steps are longer).
    baseline_slowdown: float = 0.0
    speculative_slowdown: float = 0.0
    noise: float = 0.02  # lognormal sigma of every request's TPOT


def _load_factor(load: Load, slowdown: float) -> float:
    """1 with one request in flight: the model's step costs hold there."""
    return 1.0 + slowdown * max(load.value - 1.0, 0.0)


def synthetic_points(truth: Truth, requests: int = 8, seed: int = 1, waves: tuple[int, int] = (0, 1)) -> list[Point]:
    """Baseline at every load in the first and last wave, then every draft x k at every load."""
    rng = random.Random(seed)
    points = []
    clock = 1_700_000_000.0

    def make(variant: Variant, load: Load, wave: int, speedup_of: dict[str, float], slowdown: float) -> Point:
        nonlocal clock
        point_id = f"{variant.name}-{load.label}"
        records = []
        for prompt_class, speedup in speedup_of.items():
            for index in range(requests):
                tpot = TARGET_STEP_S / speedup * _load_factor(load, slowdown) * math.exp(rng.gauss(0, truth.noise))
                ttft = 0.05 * _load_factor(load, slowdown)
                e2e = ttft + tpot * (OUTPUT_TOKENS - 1)
                record = RequestRecord(point_id, variant.name, f"{prompt_class}-case", prompt_class, "native", index, clock)
                record.ttft_s, record.time_per_output_token_s, record.end_to_end_latency_s = ttft, tpot, e2e
                record.output_tokens, record.output_throughput_tps = OUTPUT_TOKENS, OUTPUT_TOKENS / e2e
                records.append(record)
                clock += e2e / max(load.value, 1.0)
        acceptance = {} if variant.is_baseline else dict(truth.classes)
        return Point(point_id + (f"-w{wave}" if variant.is_baseline else ""), variant, load, wave, tuple(records), acceptance, "synthetic")

    for load in truth.loads:
        ones = {prompt_class: 1.0 for prompt_class in truth.classes}
        points.append(make(Variant(BASELINE), load, waves[0], ones, truth.baseline_slowdown))
    for draft, c in truth.drafts.items():
        for k in truth.ks:
            variant = Variant(f"{draft.lower().replace('.', '-')}-k{k}", draft, k, "draft_model")
            speedups = {prompt_class: expected_speedup(a, k, c) for prompt_class, a in truth.classes.items()}
            for load in truth.loads:
                points.append(make(variant, load, waves[0], speedups, truth.speculative_slowdown))
    for load in truth.loads:
        ones = {prompt_class: 1.0 for prompt_class in truth.classes}
        points.append(make(Variant(BASELINE), load, waves[1], ones, truth.baseline_slowdown))
    return points


def bench_truth(classes: int = 8, drafts: Sequence[str] = ("Qwen3-0.6B", "Qwen3-1.7B")) -> Truth:
    """The issue's bench sweep: 2 drafts x 7 k x 3 loads x 8 classes."""
    return Truth(
        classes={f"class-{i}": 0.5 + 0.45 * i / max(classes - 1, 1) for i in range(classes)},
        drafts={name: 0.05 + 0.05 * index for index, name in enumerate(drafts)},
        ks=(1, 2, 3, 5, 7, 9, 11),
        loads=(Load(CONCURRENCY, 1), Load(CONCURRENCY, 4), Load(CONCURRENCY, 16)),
        baseline_slowdown=0.02,
        speculative_slowdown=0.1,
    )


def store_points(store, sweep_id: str, points: Sequence[Point]) -> None:  # type: ignore[no-untyped-def]
    """Each point as ``specbench run --sweep-point`` stores it: ``sweeps/<id>/<point>/run.json`` with
    its ``sweep`` object, records per test case, and /metrics acceptance figures (position 0 = a)."""
    for point in points:
        base = f"sweeps/{sweep_id}/{point.point_id}/"
        v = point.variant
        sweep = {
            "sweep_id": sweep_id,
            "point_id": point.point_id,
            "wave": point.wave,
            "variant": {"name": v.name, "draft_model": v.draft_model, "k": v.k, "method": v.method},
            "load": {"kind": point.load.kind, "value": point.load.value},
        }
        cases = sorted({(r.test_case, r.prompt_class) for r in point.records})
        run = {"status": "completed", "sweep": sweep, "plan": {"suite": {"test_cases": [{"name": c, "prompt_class": k} for c, k in cases]}}}
        store.write_text(base + "run.json", json.dumps(run))
        for case, prompt_class in cases:
            lines = "".join(r.to_json() + "\n" for r in point.records if r.test_case == case)
            store.write_text(f"{base}records/{case}.jsonl", lines)
            if prompt_class in point.acceptance:
                figures = {v.name: {"source": "counters", "per_position": [point.acceptance[prompt_class]]}}
                store.write_text(f"{base}acceptance/{case}.json", json.dumps(figures))
