"""Where speculation stops paying, offline, with a known answer: ``make demo-load-sweep``.

Two batching emulators in this process (specbench/emulator/server.py's continuous-batching engine,
step times from the serving model, specbench/analysis/serving_model.py): the baseline and one
draft-model variant of the same deployment. A profile that makes decode compute-bound early (low
compute efficiency, small overhead, max_num_seqs 32) puts the open-ended class's crossover inside
the measured loads, so the demo shows what the batch does to speculation: the speculative step
verifies k + 1 positions for every running sequence, and as the batch grows its cost catches up with
the tokens it saves. Every load level is a closed loop of the native client (specbench's own); the
sweep analysis (specbench/analysis/sweep.py) finds the crossover from the measured TPOTs alone, and
the script prints it beside the model's prediction. tests/test_demo_load_sweep.py asserts they agree
within one load level.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specbench.analysis import serving_model as sm  # noqa: E402
from specbench.analysis.sweep import CONCURRENCY, TPOT, Load, Point, SweepAnalysis, Variant, analyze_sweep  # noqa: E402
from specbench.emulator import server as em  # noqa: E402
from specbench.load.native import NativeEngine  # noqa: E402
from specbench.load.types import Endpoint, LoadSpec, PreparedCase  # noqa: E402
from specbench.prompts.suite import DEFAULT_SUITE  # noqa: E402
from specbench.results.records import COUNT_FROM_USAGE, RequestRecord  # noqa: E402

K = 3
DEPLOYMENT = sm.Deployment(method="draft", draft=sm.QWEN3_0_6B.name, k=K, max_num_seqs=32)
# 1 ms overhead + 3.9 ms of weights a step, 0.2 ms per processed token of the 32B target (6 % of the
# dense peak): memory-bound at batch 1, compute-bound from a few tens of tokens a step.
PROFILE = sm.Profile(overhead_s=0.001, bandwidth_efficiency=0.7, compute_efficiency=0.06, draft_overhead_s=0.00025)
LEVELS = (1, 2, 4, 8, 16, 32)
OUTPUT_TOKENS = 48
# The emulator's acceptance for these test cases' markers (default_profiles): open-ended 0.6, structured 0.9.
CASES = {
    "open-ended": ("cat-on-mat", "the cat sat on the mat. " * 3, 0.6),
    "structured": ("counting", "counting numbers from 1 " * 4, 0.9),
}
BASELINE = Variant("baseline")
SPECULATIVE = Variant(f"qwen3-0-6b-k{K}", sm.QWEN3_0_6B.name, K, "draft_model")


@dataclass(frozen=True)
class Found:
    prompt_class: str
    a: float
    predicted: float | None  # the model's crossover (clients in flight); None: pays at every load
    predicted_level: int | None  # the first measured level at or above it
    found_level: float | None  # the analysis's first level that does not pay
    text: str


def profiles(time_scale: float) -> dict[str, em.EmulatorProfile]:
    base = em.default_profiles(time_scale)["qwen-vllm"]
    common = dict(max_num_seqs=DEPLOYMENT.max_num_seqs, deployment=DEPLOYMENT, serving_profile=PROFILE, time_scale=time_scale)
    return {
        BASELINE.name: dataclasses.replace(base, **common),
        SPECULATIVE.name: dataclasses.replace(base, num_speculative_tokens=K, **common),
    }


def measure(
    time_scale: float,
    classes: Sequence[str],
    levels: Sequence[int],
    requests: int,
    truth: dict[tuple[str, int], list[em.TruthRecord]] | None = None,
) -> list[Point]:
    """Every (variant, level): a closed loop of ``max(requests, level)`` requests per class; ``truth``,
    when given, gets the servers' own records of each point's requests."""
    points = []
    for variant, profile in profiles(time_scale).items():
        with em.run_in_thread(profile) as server:
            for level in levels:
                before = len(server.truth)
                records = []
                for prompt_class in classes:
                    name, prompt, _ = CASES[prompt_class]
                    case = next(c for c in DEFAULT_SUITE.test_cases if c.name == name)
                    prepared = PreparedCase(case, prompt, em.count_tokens(prompt))
                    load = LoadSpec("Qwen/Qwen3-32B", OUTPUT_TOKENS, level, max(requests, level), 60.0, api="completions")
                    records += _run(server.url, variant, prepared, load)
                if truth is not None:
                    truth[variant, level] = list(server.truth[before:])
                v = BASELINE if variant == BASELINE.name else SPECULATIVE
                points.append(Point(f"{variant}-c{level}", v, Load(CONCURRENCY, level), 0, tuple(records)))
    return points


def simulate(classes: Sequence[str], levels: Sequence[int], requests: int) -> list[Point]:
    """The same sweep on the engine's virtual clock (em.simulate_closed_loop): no sockets, no
    scheduling noise, exact timestamps; what the analysis finds there is the engine's behaviour."""
    points = []
    for variant, profile in profiles(1.0).items():
        v = BASELINE if variant == BASELINE.name else SPECULATIVE
        for level in levels:
            records = []
            for prompt_class in classes:
                name, prompt, _ = CASES[prompt_class]
                truth, _ = em.simulate_closed_loop(profile, [prompt], level, max(requests, level), OUTPUT_TOKENS)
                records += [_record(t, variant, name, prompt_class, level) for t in truth]
            points.append(Point(f"{variant}-c{level}", v, Load(CONCURRENCY, level), 0, tuple(records)))
    return points


def _record(t: em.TruthRecord, variant: str, case: str, prompt_class: str, level: int) -> RequestRecord:
    record = RequestRecord("simulation", variant, case, prompt_class, "simulation", t.ordinal, t.arrival_s, load_level=f"c{level}")
    record.ttft_s, record.end_to_end_latency_s, record.time_per_output_token_s = t.ttft_s, t.e2e_s, t.time_per_output_token_s
    record.input_tokens, record.output_tokens, record.chunks = t.prompt_tokens, t.output_tokens, len(t.chunk_tokens)
    record.chunk_tokens, record.chunk_times_s, record.token_count_source = list(t.chunk_tokens), list(t.chunk_offsets_s), COUNT_FROM_USAGE
    return record


def _run(url: str, variant: str, prepared: PreparedCase, load: LoadSpec) -> list:  # type: ignore[type-arg]
    async def go():  # type: ignore[no-untyped-def]
        engine = NativeEngine()
        return await engine.run(Endpoint(variant, url), prepared, load, "demo-load-sweep", lambda record: None)

    return asyncio.run(go())


def predicted(prompt_class: str, levels: Sequence[int]) -> tuple[float | None, int | None]:
    _, prompt, a = CASES[prompt_class]
    workload = sm.Workload(em.count_tokens(prompt), OUTPUT_TOKENS)
    cross = sm.crossover_concurrency(DEPLOYMENT, PROFILE, a, workload)
    level = None if cross is None else next((c for c in levels if c >= cross), None)
    return cross, level


def found(analysis: SweepAnalysis, levels: Sequence[int]) -> list[Found]:
    result = []
    for cls in analysis.classes:
        crossing = next(c for c in cls.crossovers if c.kind == CONCURRENCY)
        cross, level = predicted(cls.prompt_class, levels)
        result.append(Found(cls.prompt_class, CASES[cls.prompt_class][2], cross, level, crossing.first_not_paying, crossing.text))
    return result


def level_distance(a: float | None, b: float | None, levels: Sequence[int]) -> int:
    """How many load levels apart two crossing levels are (None: beyond the last level)."""
    index = {level: i for i, level in enumerate(levels)}

    def at(value: float | None) -> int:
        return len(levels) if value is None else index[int(value)]

    return abs(at(a) - at(b))


def sweep(
    time_scale: float,
    classes: Sequence[str],
    levels: Sequence[int] = LEVELS,
    requests: int = 8,
    resamples: int = 400,
    simulated: bool = False,
    truth: dict[tuple[str, int], list[em.TruthRecord]] | None = None,
):
    """Measure (or simulate) every point, then the sweep analysis on TPOT; ``truth`` as in measure."""
    points = simulate(classes, levels, requests) if simulated else measure(time_scale, classes, levels, requests, truth)
    analysis = analyze_sweep(
        points, sweep_id="demo-load-sweep", metric=TPOT, resamples=resamples, servers_per_node=DEPLOYMENT.replicas_per_node
    )
    return analysis, found(analysis, levels)


def table(analysis: SweepAnalysis, time_scale: float) -> list[str]:
    lines = []
    for cls in analysis.classes:
        _, prompt, a = CASES[cls.prompt_class]
        workload = sm.Workload(em.count_tokens(prompt), OUTPUT_TOKENS)
        lines += [f"\n{cls.prompt_class} (a = {a}), TPOT in ms (x {time_scale:g} time scale), tokens/s per node:"]
        head = f"{'clients':>7} {'base TPOT':>9} {'model':>6} {'spec TPOT':>9} {'model':>6} {'speedup':>15} {'model':>6}"
        lines.append(head + f" {'base tok/s':>10} {'spec tok/s':>10}")
        by_load = {}
        for p in cls.load_points:
            by_load.setdefault(p.load.value, {})[p.variant] = p
        for level, pair in sorted(by_load.items()):
            base, spec = pair.get(BASELINE.name), pair.get(SPECULATIVE.name)
            if base is None or spec is None:
                continue
            mb = sm.predict(DEPLOYMENT.with_k(0), PROFILE, 0.0, int(level), workload).tpot_s * time_scale
            ms = sm.predict(DEPLOYMENT, PROFILE, a, int(level), workload).tpot_s * time_scale
            s = spec.speedup
            speed = f"{s.point:.2f} [{s.low:.2f}, {s.high:.2f}]" if s and s.known else "-"
            lines.append(
                f"{level:>7g} {base.tpot.p50 * 1e3:>9.2f} {mb * 1e3:>6.2f} {spec.tpot.p50 * 1e3:>9.2f} {ms * 1e3:>6.2f} "
                f"{speed:>15} {mb / ms:>6.2f} {base.tokens_per_s_per_node or 0:>10.0f} {spec.tokens_per_s_per_node or 0:>10.0f}"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--time-scale", type=float, default=0.5, help="emulated latencies x this (default: %(default)s)")
    parser.add_argument("--requests", type=int, default=12, help="requests per class and level, at least the level (default: %(default)s)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    levels = ", ".join(map(str, LEVELS))
    print(f"demo load sweep: baseline and {SPECULATIVE.name} at {levels} in flight, max_num_seqs {DEPLOYMENT.max_num_seqs}")
    analysis, results = sweep(args.time_scale, list(CASES), LEVELS, args.requests)
    print("\n".join(table(analysis, args.time_scale)))
    print("\ncrossover (found: the sweep analysis of the measurements; predicted: the serving model):")
    for r in results:
        model = "pays at every load" if r.predicted is None else f"~{r.predicted:.3g} in flight -> level {r.predicted_level}"
        print(f"  {r.prompt_class:<11} found: {r.text}; predicted: {model}")
    print(f"wall time {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
