"""A small sweep offline, with a known answer: ``make demo-sweep``.

Emulated servers (``specbench emulate``, one process each): the baseline and one speculative server
per k, all with the same draft cost c. The emulator's acceptance per prompt (specbench.emulator
default_profiles) gives each class its per-token acceptance a, so the standard model's optimum k
per class is known beforehand: with c = 0.15, structured prompts (a = 0.9) peak at k = 8 and
open-ended ones (a = 0.6) at k = 2. Every point is a normal ``specbench run`` stored under
``<out>/results/sweeps/<sweep id>/<point id>/`` with the ``sweep`` object in its run.json (as
``specbench run --sweep-point`` writes it in the cluster); the baseline runs first and last. Then
``specbench sweep-report`` analyses it, and the script prints the recovered optima beside the truth.
``simulate`` measures the same points on the emulator engine's virtual clock (no sockets, exact
timestamps, what tests/test_demo_sweep.py checks the recovery on: no machine load moves it).

These emulators batch, but with fixed step times (no serving model): latencies do not grow with the
batch, so no crossover shows here; ``make demo-load-sweep`` (scripts/demo_load_sweep.py) shows one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specbench import cli  # noqa: E402
from specbench.analysis.sweep import CONCURRENCY, RATE, Load, SweepAnalysis, Variant  # noqa: E402
from specbench.analysis.theory import best_k  # noqa: E402
from specbench.emulator.process import emulate_processes, free_ports  # noqa: E402

DRAFT_COST = 0.15
# A price of its own (the ap-south-2 Capacity Block offer of config/prices.py), two TP-32 servers per trn2.48xlarge.
NODE_PRICE, SERVERS_PER_NODE = 35.76, 2
DRAFT_MODEL = "Qwen/Qwen3-1.7B"  # a label: the emulator has no draft model
# The emulator's acceptance for these test cases' markers (specbench.emulator.default_profiles).
CLASSES = {"structured": ("counting", 0.9), "open-ended": ("cat-on-mat", 0.6)}
KS = (1, 2, 4, 8, 12)
LOADS = (Load(CONCURRENCY, 1), Load(RATE, 4))


@dataclass(frozen=True)
class Recovered:
    prompt_class: str
    a: float
    true_k: int
    measured_best: int | None
    indistinguishable: list[int]
    model_k: int | None
    fitted_c: float | None
    measured_a: float | None


def truth() -> dict[str, int]:
    """The standard model's optimum k per class for the emulator's a and c."""
    return {name: best_k(a, DRAFT_COST)[0] for name, (_, a) in CLASSES.items()}


@contextlib.contextmanager
def emulators(time_scale: float, ks: Sequence[int], timeout_s: float = 60.0) -> Iterator[dict[str, str]]:
    """The baseline and one speculative emulator per k, each its own process on a free port."""
    ports = free_ports(1 + len(ks))
    common = ["--time-scale", str(time_scale)]
    commands = {"baseline": ([*common, "--only", "baseline", "--baseline-port", str(ports[0])], ports[0])}
    for k, port in zip(ks, ports[1:], strict=True):
        args = [*common, "--only", "speculative", "--speculative-port", str(port), "--speculative-k", str(k)]
        commands[f"k{k}"] = ([*args, "--draft-cost-ratio", str(DRAFT_COST)], port)
    with emulate_processes(commands, timeout_s) as urls:
        yield urls


def point_plan(ks: Sequence[int], loads: Sequence[Load], repeat_baseline: bool = True) -> list[tuple[Variant, Load, int]]:
    """Wave 0: the baseline at every load; wave 1: every k at every load; wave 2: the baseline again
    (what the drift check compares; a test of the optimum alone can leave it out)."""
    base = Variant("baseline")
    spec = [Variant(f"qwen3-1-7b-k{k}", DRAFT_MODEL, k, "draft_model") for k in ks]
    last = [(base, load, 2) for load in loads] if repeat_baseline else []
    return [(base, load, 0) for load in loads] + [(v, load, 1) for v in spec for load in loads] + last


def run_point(results: Path, sweep_id: str, url: str, variant: Variant, load: Load, wave: int, requests: int, tokens: int) -> str:
    point_id = f"{variant.name}-{load.label}" + (f"-w{wave}" if variant.is_baseline else "")
    args = ["run", "--endpoint", f"{variant.name}={url}", "--results", str(results / "sweeps" / sweep_id), "--run-id", point_id]
    args += [arg for case, _ in CLASSES.values() for arg in ("--test-case", case)]
    args += ["--requests", str(requests), "--output-tokens", str(tokens), "--no-publish", "--no-progress", "--ready-timeout", "30"]
    args += ["--concurrency", format(load.value, "g")] if load.kind == CONCURRENCY else ["--request-rate", format(load.value, "g")]
    # The sweep object the cluster's pods record (specbench run --sweep-id/--sweep-point, sweep-common contract).
    v = {"name": variant.name, "draft_model": variant.draft_model or "", "k": variant.k or 0, "method": variant.method or ""}
    point = {"point_id": point_id, "wave": wave, "variant": v, "load": {"kind": load.kind, "value": load.value}}
    args += ["--sweep-id", sweep_id, "--sweep-point", json.dumps(point)]
    with contextlib.redirect_stdout(open(os.devnull, "w")):  # noqa: SIM115 - closed with the process
        code = cli.main(args)
    if code != 0:
        raise RuntimeError(f"point {point_id}: specbench run exited with {code}")
    return point_id


def recovered(analysis: SweepAnalysis, load_label: str) -> list[Recovered]:
    found = []
    known = truth()
    for cls in analysis.classes:
        rec = cls.recommendations.get(load_label)
        curve = cls.curves.get(load_label, [None])[0]
        model = curve.model_optimum if curve else None
        ties = sorted(int(name.rsplit("k", 1)[1]) for name in (rec.indistinguishable if rec else []))
        found.append(
            Recovered(
                cls.prompt_class,
                CLASSES[cls.prompt_class][1],
                known[cls.prompt_class],
                rec.k if rec else None,
                ties,
                model[0] if model else None,
                curve.c if curve else None,
                curve.a if curve else None,
            )
        )
    return found


def sweep(
    out: Path,
    time_scale: float,
    requests: int,
    tokens: int,
    sweep_id: str = "demo-sweep",
    resamples: int = 1000,
    loads: Sequence[Load] = LOADS,
    repeat_baseline: bool = True,
    ks: Sequence[int] = KS,
    charts: bool = True,
) -> list[Recovered]:
    results = out / "results"
    with emulators(time_scale, ks) as urls:
        for variant, load, wave in point_plan(ks, loads, repeat_baseline):
            url = urls["baseline" if variant.is_baseline else f"k{variant.k}"]
            point = run_point(results, sweep_id, url, variant, load, wave, requests, tokens)
            print(f"  {point:<24} wave {wave}", flush=True)
    report = ["sweep-report", "--results", str(results), "--sweep-id", sweep_id, "--out", str(out / "sweep-report")]
    report += ["--metric", "tpot", "--resamples", str(resamples), "--slo-tpot-ms", str(45 * time_scale * 0.8)]
    # The deployment's price and servers per node (the points here run without a settings snapshot).
    report += ["--node-price-per-hour", str(NODE_PRICE), "--servers-per-node", str(SERVERS_PER_NODE)]
    report += [] if charts else ["--no-charts"]
    if cli.main(report) != 0:
        raise RuntimeError("specbench sweep-report failed")
    analysis = json.loads((out / "sweep-report" / "sweep-analysis.json").read_text())
    print_costs(analysis)
    return recovered(_rebuild(analysis), loads[0].label)


def simulate(
    time_scale: float, requests: int, tokens: int, resamples: int = 1000, loads: Sequence[Load] = LOADS, repeat_baseline: bool = True
) -> list[Recovered]:
    """The sweep on the emulator engine's virtual clock: the profiles ``specbench emulate`` serves
    for each point (default_profiles with the point's k and DRAFT_COST), the same scheduling and
    seeded plans (server.simulate_closed_loop; sweep_truth.simulate_open_loop for a rate), every
    timestamp exact; then the sweep analysis on TPOT, as ``sweep-report --metric tpot`` runs it."""
    from specbench.analysis import cost
    from specbench.analysis.sweep import TPOT, Point, Slo, analyze_sweep
    from specbench.emulator import server as em
    from specbench.emulator.sweep_truth import simulate_open_loop
    from specbench.prompts.suite import DEFAULT_SUITE
    from specbench.results.records import COUNT_FROM_USAGE, RequestRecord

    baseline, speculative = em.default_profiles(time_scale).values()
    cases = {c.name: c for c in DEFAULT_SUITE.test_cases}
    points = []
    for variant, load, wave in point_plan(KS, loads, repeat_baseline):
        profile = baseline if variant.is_baseline else em.with_speculation(speculative, variant.k, DRAFT_COST)
        point_id = f"{variant.name}-{load.label}" + (f"-w{wave}" if variant.is_baseline else "")
        records = []
        for prompt_class, (name, _) in CLASSES.items():
            text = cases[name].text
            if load.kind == CONCURRENCY:
                truth, _ = em.simulate_closed_loop(profile, [text], int(load.value), requests, tokens)
            else:
                truth = simulate_open_loop(profile, [text], load.value, requests, tokens, seed=wave)
            for t in truth:
                r = RequestRecord(point_id, variant.name, name, prompt_class, "simulation", t.ordinal, t.arrival_s, load_level=load.label)
                r.ttft_s, r.end_to_end_latency_s, r.time_per_output_token_s = t.ttft_s, t.e2e_s, t.time_per_output_token_s
                r.input_tokens, r.output_tokens, r.chunks = t.prompt_tokens, t.output_tokens, len(t.chunk_tokens)
                r.chunk_tokens, r.chunk_times_s, r.token_count_source = list(t.chunk_tokens), list(t.chunk_offsets_s), COUNT_FROM_USAGE
                records.append(r)
        points.append(Point(point_id, variant, load, wave, tuple(records)))
    analysis = analyze_sweep(
        points,
        sweep_id="demo-sweep",
        metric=TPOT,
        slo=Slo(tpot_ms=45 * time_scale * 0.8),
        resamples=resamples,
        servers_per_node=SERVERS_PER_NODE,
        price=cost.NodePrice(NODE_PRICE, "demo"),
    )
    return recovered(analysis, loads[0].label)


def print_costs(analysis: dict) -> None:
    """Per class and load: tokens/s per node and cost per million output tokens, baseline and the best variant, 95% CIs."""
    from specbench.analysis.stats import Interval, format_interval

    print(f"\ncost per million output tokens at ${NODE_PRICE}/node-hour, {SERVERS_PER_NODE} servers per node:")
    print(f"{'class':<11} {'load':<22} {'service':<16} {'tokens/s per node':<24} cost per M tokens")
    for cls in analysis["classes"]:
        for lp in cls["load_points"]:
            per_node = format_interval(Interval(**lp["per_node"]), unit="", digits=1)
            money = format_interval(Interval(**lp["cost_per_million"]), unit="", digits=2)
            load = Load(lp["load"]["kind"], lp["load"]["value"]).describe()
            print(f"{cls['prompt_class']:<11} {load:<22} {lp['variant']:<16} {per_node:<24} ${money}")


def _rebuild(data: dict) -> SweepAnalysis:
    """Just enough of the stored analysis (sweep-analysis.json) to read the recovered optima back."""
    from types import SimpleNamespace as NS

    classes = []
    for cls in data["classes"]:
        curves = {
            label: [NS(model_optimum=d["model_optimum"], c=d["c"], a=d["a"]) for d in drafts] for label, drafts in cls["curves"].items()
        }
        recs = {label: NS(k=r["k"], indistinguishable=r["indistinguishable"]) for label, r in cls["recommendations"].items()}
        classes.append(NS(prompt_class=cls["prompt_class"], curves=curves, recommendations=recs))
    return NS(classes=classes)  # type: ignore[return-value]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="demo-sweep-output")
    parser.add_argument("--time-scale", type=float, default=0.1, help="emulated latencies x this (default: %(default)s)")
    parser.add_argument("--requests", type=int, default=8, help="requests per test case and point (default: %(default)s)")
    parser.add_argument("--output-tokens", type=int, default=120, help="max_tokens of every request (default: %(default)s)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    started = time.perf_counter()
    points = point_plan(KS, LOADS)
    print(f"demo sweep: {len(points)} points ({len(KS)} values of k x {len(LOADS)} loads, the baseline in the first and last wave)")
    found = sweep(out, args.time_scale, args.requests, args.output_tokens)
    print(f"\nrecovered at {LOADS[0].describe()} (emulator truth: c = {DRAFT_COST}):")
    header = ("class", "a", "true k", "measured best", "indistinguishable", "model k", "fitted c", "measured a")
    widths = (11, 5, 6, 13, 17, 7, 8, 10)

    def line(values: Sequence[object]) -> str:
        return " ".join(f"{v!s:<{w}}" if i == 0 else f"{v!s:>{w}}" for i, (v, w) in enumerate(zip(values, widths, strict=True)))

    print(line(header))
    for r in found:
        ties = ",".join(map(str, r.indistinguishable)) or "-"
        fitted_c = f"{r.fitted_c:.3f}" if r.fitted_c is not None else "n/a"
        measured_a = f"{r.measured_a:.3f}" if r.measured_a is not None else "n/a"
        print(line((r.prompt_class, r.a, r.true_k, r.measured_best, ties, r.model_k, fitted_c, measured_a)))
    print(f"report: {out / 'sweep-report' / 'sweep-report.md'}; wall time {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
