"""Known truths for the staged sweep: a sweep measured in-process on the batching emulator's engine.

A *truth* hides, per draft, every prompt class's acceptance and the draft's cost (the serving
model's ``draft_overhead_s``, per draft step). ``measure`` runs one configuration at every load on
the emulator's engine with a virtual clock (``server.simulate_closed_loop`` for requests in flight;
``simulate_open_loop`` below, the same ``Engine.schedule``/``complete``, for Poisson arrivals), one
prompt class after another as a suite's test cases run, and returns what the sweep's analysis would
read: per class the TPOT speedup against the baseline with its standard error, the position-0
acceptance (the /metrics figure) and the medians the SLOs check. Every point is seeded by its
configuration and load, so the grid and the staged sweep see the same measurements of a point.

``compare`` runs the full grid and the staged sweep on one truth and prices both with the sweep's
plan (specbench/sweep/plan.py's waves and estimates): scripts/bench_staged_sweep.py prints the table.
"""

from __future__ import annotations

import math
import random
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from specbench.analysis import serving_model as sm
from specbench.emulator import server
from specbench.sweep import staged
from specbench.sweep.plan import Estimates

# Spec-Bench's six classes, code and JSON: the 8 classes of the classes suite (prompts/suite.py).
CLASSES = ("multi-turn", "translation", "summarization", "qa", "math-reasoning", "rag", "code", "json")
DRAFTS = ("Qwen/Qwen3-1.7B", "Qwen/Qwen3-0.6B")
K_RANGE = tuple(range(3, 10))
LOADS = ("c1", "c4", "r0p5")  # the docs/sweeps.md sweep: 1 and 4 in flight, 0.5 requests/s
MAX_NUM_SEQS = 4
DEFAULT_MARGIN = 0.02  # config/model.py sweep.decision_margin's default


@dataclass(frozen=True)
class Truth:
    name: str
    acceptance: Mapping[str, Mapping[str, float]]  # draft -> class -> per-token acceptance
    draft_overhead_s: Mapping[str, float]  # draft -> seconds per draft step (the serving model's free parameter)


@dataclass(frozen=True)
class Shape:
    """The sweep's shape and the measurement's size."""

    drafts: tuple[str, ...] = DRAFTS
    ks: tuple[int, ...] = K_RANGE
    loads: tuple[str, ...] = LOADS
    classes: tuple[str, ...] = CLASSES
    requests: int = 8  # per class and point
    max_tokens: int = 300
    precompiled: tuple[staged.Config, ...] = (staged.BASELINE, staged.Config("Qwen/Qwen3-1.7B", 7, "draft"))  # the services' graphs
    slots: int = 2
    estimates: Estimates = Estimates(120.0, 15.0, 15.0)  # config/model.py's defaults

    def candidates(self) -> list[staged.Config]:
        return [staged.Config(d, k, "draft") for d in self.drafts for k in self.ks]


def _prompt(cls: str, i: int) -> str:
    return f"[{cls}] prompt {i}: " + " ".join(f"w{j}" for j in range(24))


def simulate_open_loop(
    profile: server.EmulatorProfile, prompts: Sequence[str], rate: float, requests: int, max_tokens: int, seed: int
) -> list[server.TruthRecord]:
    """Poisson arrivals at ``rate`` requests/s on the engine's virtual clock: the scheduling of
    ``server.simulate_closed_loop``, but each request arrives at its own time."""
    rng = random.Random(seed)
    arrivals, t = [], 0.0
    for _ in range(requests):
        t += rng.expovariate(rate)
        arrivals.append(t)
    engine = server.Engine(profile)
    records: list[server.TruthRecord] = []
    now, done_count = 0.0, 0

    def admit(until: float) -> None:
        while len(records) < requests and arrivals[len(records)] <= until:
            ordinal = len(records)
            text = prompts[ordinal % len(prompts)]
            tokens = server.count_tokens(text)
            p = profile.acceptance_for(text) if profile.speculative else None
            planned = min(max_tokens, profile.max_model_len - tokens)
            plan = server.plan_chunks(
                planned, 0.0, 0.0, profile.num_speculative_tokens, p or 0.0, random.Random(server.request_seed(profile.seed, text, ordinal))
            )
            record = server.TruthRecord(f"sim-{ordinal}", ordinal, "completions", arrivals[ordinal], tokens, planned, p)
            records.append(record)
            engine.waiting.append(server._Sequence(record, plan, None))  # the engine's own queue entry, as simulate_closed_loop builds it

    while done_count < requests:
        admit(now)
        stepped = server.simulate_step(engine, now)
        if stepped is None:
            now = max(now, arrivals[len(records)])
            continue
        now, done = stepped
        done_count += len(done)
    return records


def _profile(truth: Truth, config: staged.Config, seed: int) -> server.EmulatorProfile:
    deployment = sm.Deployment(max_num_seqs=MAX_NUM_SEQS)
    serving = sm.writeup_profile()
    if not config.is_baseline:
        deployment = replace(deployment, method="draft", draft=config.draft, k=config.k)
        serving = replace(serving, draft_overhead_s=truth.draft_overhead_s[config.draft])
    acceptance = tuple((f"[{cls}]", a) for cls, a in (truth.acceptance.get(config.draft) or {}).items())
    return server.EmulatorProfile(
        num_speculative_tokens=config.k,
        acceptance=acceptance,
        max_num_seqs=MAX_NUM_SEQS,
        deployment=deployment,
        serving_profile=serving,
        seed=seed,
    )


def _run(profile: server.EmulatorProfile, prompts: list[str], load: str, shape: Shape, seed: int) -> list[server.TruthRecord]:
    value = float(load[1:].replace("p", "."))
    if load.startswith("c"):
        records, _ = server.simulate_closed_loop(profile, prompts, int(value), shape.requests, shape.max_tokens)
        return records
    return simulate_open_loop(profile, prompts, value, shape.requests, shape.max_tokens, seed)


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    return ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2


def _median_se(values: Sequence[float]) -> float:
    """The median's standard error, 1.2533 sd / sqrt(n) (normal approximation)."""
    n = len(values)
    mean = math.fsum(values) / n
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / max(n - 1, 1))
    return 1.2533 * sd / math.sqrt(n)


def _seed(*parts: object) -> int:
    return zlib.crc32("\0".join(map(str, parts)).encode())


@dataclass(frozen=True)
class Measurement:
    per_load: dict[str, dict[str, list[server.TruthRecord]]]  # load -> class -> records


def simulate(truth: Truth, config: staged.Config, shape: Shape) -> Measurement:
    """One unit: the configuration at every load, class after class."""
    per_load: dict[str, dict[str, list[server.TruthRecord]]] = {}
    for load in shape.loads:
        seed = _seed(truth.name, config.label, load)
        profile = _profile(truth, config, seed)
        per_load[load] = {
            cls: _run(profile, [_prompt(cls, i) for i in range(shape.requests)], load, shape, _seed(seed, cls)) for cls in shape.classes
        }
    return Measurement(per_load)


def _tpots(records: Sequence[server.TruthRecord]) -> list[float]:
    return [t for r in records if (t := r.time_per_output_token_s) is not None]


def baseline_figures(base: Measurement) -> dict[str, dict[str, staged.BaseClass]]:
    out: dict[str, dict[str, staged.BaseClass]] = {}
    for load, classes in base.per_load.items():
        out[load] = {}
        for cls, records in classes.items():
            busy = max(r.arrival_s + (r.e2e_s or 0.0) for r in records) - min(r.arrival_s for r in records)
            tokens = sum(r.output_tokens for r in records)
            ttft = [r.ttft_s for r in records if r.ttft_s is not None]
            out[load][cls] = staged.BaseClass(tokens / busy if busy > 0 else None, _median(_tpots(records)), _median(ttft))
    return out


def class_measures(base: Measurement, point: Measurement) -> dict[str, dict[str, staged.ClassMeasure]]:
    """Per load and class: TPOT speedup (delta-method standard error of the ratio of medians) and
    the position-0 acceptance (share of steps whose first draft token was accepted), its binomial se."""
    out: dict[str, dict[str, staged.ClassMeasure]] = {}
    for load, classes in point.per_load.items():
        out[load] = {}
        for cls, records in classes.items():
            b, v = _tpots(base.per_load[load][cls]), _tpots(records)
            mb, mv = _median(b), _median(v)
            s = mb / mv
            se = s * math.sqrt((_median_se(b) / mb) ** 2 + (_median_se(v) / mv) ** 2)
            steps = [n for r in records for n in r.accepted_per_step]
            a = sum(1 for n in steps if n >= 1) / len(steps) if steps else None
            a_se = math.sqrt(max(a * (1 - a), 1e-4) / len(steps)) if a is not None else 0.0
            ttft = [r.ttft_s for r in records if r.ttft_s is not None]
            out[load][cls] = staged.ClassMeasure(s, max(se, 1e-4), a, a_se, mv, _median(ttft))
    return out


# --- grid against staged --------------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    truth: str
    grid: dict[str, staged.Decision]
    staged: staged.StagedResult
    grid_node_hours: float
    agrees: dict[str, bool]  # load -> staged best is the grid's best or one of its ties
    class_agrees: bool  # each class's measured optimum equals the grid's wherever the staged sweep measured it


def compare(truth: Truth, objective: staged.Objective, shape: Shape = Shape(), margin: float = DEFAULT_MARGIN) -> Comparison:
    cache: dict[staged.Config, Measurement] = {}

    def unit(config: staged.Config) -> Measurement:
        if config not in cache:
            cache[config] = simulate(truth, config, shape)
        return cache[config]

    base = unit(staged.BASELINE)
    baseline = baseline_figures(base)

    def measure(config: staged.Config) -> dict[str, dict[str, staged.ClassMeasure]]:
        return class_measures(base, unit(config))

    candidates = shape.candidates()
    grid_obs = staged.observe(baseline, {c: measure(c) for c in candidates})
    grid = {load: staged.decide(grid_obs, candidates, objective, load) for load in shape.loads}
    result = staged.run_staged(
        candidates,
        measure,
        baseline,
        objective,
        shape.loads,
        slots=shape.slots,
        precompiled=shape.precompiled,
        estimates=shape.estimates,
        margin=margin,
    )
    agrees = {}
    for load, d in grid.items():
        s = result.decisions[load].best
        agrees[load] = s == d.best or s in d.ties
    class_agrees = True
    for load in shape.loads:
        full, mine = staged.class_optima(grid_obs, load), staged.class_optima(result.observations, load)
        for cls, (config, _) in full.items():
            if config in result.measured and mine[cls][0] != config:
                class_agrees = False
    grid_hours = staged.grid_node_hours(candidates, len(shape.loads), shape.slots, shape.precompiled, shape.estimates)
    return Comparison(truth.name, grid, result, grid_hours, agrees, class_agrees)


def truths() -> list[Truth]:
    """Six hidden truths in the shape of the docs/sweeps.md sweep."""

    def flat(value: float, spread: float = 0.0) -> dict[str, float]:
        return {cls: min(max(value + spread * (i - 3.5) / 3.5, 0.05), 0.97) for i, cls in enumerate(CLASSES)}

    big, small = DRAFTS
    return [
        Truth("high acceptance, cheap drafts", {big: flat(0.9, 0.05), small: flat(0.82, 0.05)}, {big: 0.004, small: 0.002}),
        Truth("low acceptance", {big: flat(0.6, 0.1), small: flat(0.5, 0.1)}, {big: 0.005, small: 0.003}),
        Truth("expensive drafts", {big: flat(0.8, 0.08), small: flat(0.7, 0.08)}, {big: 0.012, small: 0.009}),
        Truth("optimum at the top edge (k = 9)", {big: flat(0.95, 0.02), small: flat(0.85, 0.05)}, {big: 0.001, small: 0.001}),
        Truth("optimum at the bottom edge (k = 3)", {big: flat(0.7, 0.05), small: flat(0.6, 0.05)}, {big: 0.006, small: 0.004}),
        Truth("the 0.6B draft never pays", {big: flat(0.85, 0.06), small: flat(0.2, 0.05)}, {big: 0.004, small: 0.02}),
    ]
