"""The staged sweep against the full grid on known truths: ``make bench-staged-sweep``.

Six hidden truths (specbench/emulator/sweep_truth.py: per draft every class's acceptance and the
draft's cost) in the shape of the docs/sweeps.md sweep: drafts Qwen3-1.7B and Qwen3-0.6B, k = 3..9,
loads c1, c4 and 0.5 requests/s, the 8 classes of the classes suite, two Neuron slots, the plan's
default estimates. Each point is measured in-process on the batching emulator's engine (serving-model
step times, the emulator's acceptance sampling, a virtual clock), seeded by its configuration and
load, so both strategies see the same measurement of a point. Prints per truth the grid's and the
staged sweep's recommendation at each load, the stages, and the node-hours of each; exits 1 when a
staged decision is not the grid's (or one of its ties), or the node-hours break the issue's bounds
(at most a third of the grid's on average, never more than half).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specbench.emulator import sweep_truth  # noqa: E402
from specbench.sweep import staged  # noqa: E402


def _short(config: staged.Config) -> str:
    return "baseline" if config.is_baseline else f"{config.draft.rsplit('/', 1)[-1]} k={config.k}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--margin", type=float, default=sweep_truth.DEFAULT_MARGIN, help="sweep.decision_margin (share of the objective)")
    parser.add_argument("--node-price-per-hour", type=float, default=None, help="objective: mix cost per M tokens (default: speedup)")
    parser.add_argument("--requests", type=int, default=sweep_truth.Shape().requests, help="requests per class and point")
    args = parser.parse_args(argv)
    shape = sweep_truth.Shape(requests=args.requests)
    objective = staged.Objective({cls: 1.0 for cls in shape.classes}, args.node_price_per_hour)
    print(f"objective: mix-weighted {objective.kind} (equal class weights); decision margin {args.margin:.0%}")
    print("| truth | load | grid recommendation (ties) | staged recommendation | decided in stage | grid node-hours | staged node-hours |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    ratios, ok = [], True
    for truth in sweep_truth.truths():
        result = sweep_truth.compare(truth, objective, shape, args.margin)
        ratios.append(result.staged.node_hours / result.grid_node_hours)
        for load in shape.loads:
            grid, mine = result.grid[load], result.staged.decisions[load]
            ties = f" ({', '.join(_short(c) for c in grid.ties)})" if grid.ties else ""
            mark = "" if result.agrees[load] else " DIFFERS"
            ok &= result.agrees[load]
            hours = (f"{result.grid_node_hours:.2f}", f"{result.staged.node_hours:.2f}") if load == shape.loads[0] else ("", "")
            print(
                f"| {truth.name if load == shape.loads[0] else ''} | {load} | {_short(grid.best)}{ties} | {_short(mine.best)}{mark} | "
                f"{result.staged.decided_in.get(load, '-')} | {hours[0]} | {hours[1]} |"
            )
        stages = "; ".join(", ".join(_short(c) for c in stage) for stage in result.staged.stages)
        print(f"|  | stages | {stages} | class optima {'agree' if result.class_agrees else 'DIFFER'} |  |  |  |")
        ok &= result.class_agrees
    mean, worst = sum(ratios) / len(ratios), max(ratios)
    print(f"\nstaged / grid node-hours: mean {mean:.1%}, worst {worst:.1%} (bounds: a third on average, at most a half)")
    ok &= mean <= 1 / 3 and worst <= 0.5
    print("all staged decisions equal the grid's (or its ties)" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
