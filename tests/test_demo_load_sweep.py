"""The load-sweep demo: against batching emulators the sweep analysis finds the crossover load where
the serving model puts it (within one load level), from the measured TPOTs alone."""

from __future__ import annotations

import importlib.util
import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def demo_module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("demo_load_sweep", ROOT / "scripts" / "demo_load_sweep.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["demo_load_sweep"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_the_model_puts_the_open_ended_crossover_inside_the_levels_and_structured_beyond():
    demo = demo_module()
    cross, level = demo.predicted("open-ended", demo.LEVELS)
    assert cross is not None and 8 < cross < 16 and level == 16
    assert demo.predicted("structured", demo.LEVELS) == (None, None)
    assert demo.level_distance(8, 16, demo.LEVELS) == 1 and demo.level_distance(None, 32, demo.LEVELS) == 1


def test_the_analysis_finds_the_crossover_the_model_predicts():
    """On the engine's virtual clock (the emulator's scheduling, exact timestamps): deterministic."""
    demo = demo_module()
    analysis, found = demo.sweep(time_scale=1.0, classes=list(demo.CASES), requests=16, resamples=300, simulated=True)
    by_class = {r.prompt_class: r for r in found}
    openended, structured = by_class["open-ended"], by_class["structured"]
    assert openended.predicted_level == 16 and openended.found_level is not None, openended
    assert demo.level_distance(openended.found_level, openended.predicted_level, demo.LEVELS) <= 1, openended
    assert structured.predicted is None and structured.found_level is None, structured  # pays at every load, as predicted
    cls = next(c for c in analysis.classes if c.prompt_class == "open-ended")
    crossing = next(c for c in cls.crossovers if c.kind == "concurrency")
    assert crossing.scale == "log"  # doubling levels: a crossing between two is interpolated on log load
    # Speedup and per-node throughput fall with the load for the speculative variant relative to the baseline.
    spec = sorted((p.load.value, p.speedup.point) for p in cls.load_points if p.speedup is not None)
    assert spec[0][1] > 1.5 and spec[-1][1] < 0.9


@pytest.mark.servers  # real-time loopback servers: scheduled first (tests/conftest.py)
def test_real_batching_servers_show_the_same_turn():
    """The same over loopback sockets with the native client (two levels): speculation pays less at
    32 in flight than at 1 on the servers' own schedule, the client's records are the servers'
    streams chunk for chunk, each chunk read after it was sent, and the analysis reads them.
    No wall-clock bound: a busy machine can starve the emulators until their steps run late and the
    sent speedups drift from the model's 1.66x and 0.83x (CPU, not the model, then sets the pace),
    but it cannot move the schedule the engine planned (steps back to back on deadlines,
    tests/test_emulator_batching.py) nor part the client from what was sent; where the crossing
    lies is checked on the virtual clock above (issue 24). How close the client's speedups come to
    the sent ones is a figure of the client's CPU, not a check: within 10% on an idle machine, 12-15%
    off at 32 streams at a load average of 8 (the last chunks of streams that end together are
    read late: make bench-chunk-lag, docs/performance.md)."""
    demo = demo_module()
    truth: dict = {}
    points = demo.measure(0.3, ["open-ended"], (1, 32), 6, truth)
    analysis = demo.analyze_sweep(
        points, sweep_id="test", metric=demo.TPOT, resamples=200, servers_per_node=demo.DEPLOYMENT.replicas_per_node
    )
    speedups = {p.load.value: p.speedup.point for p in analysis.classes[0].load_points if p.speedup is not None}

    def planned_tpot(t) -> float:  # type: ignore[no-untyped-def]
        return (t.planned_offsets_s[-1] - t.planned_offsets_s[0]) / (t.output_tokens - 1)

    def speedup(level: int, tpot) -> float:  # type: ignore[no-untyped-def]
        base, spec = ([tpot(t) for t in truth[name, level]] for name in (demo.BASELINE.name, demo.SPECULATIVE.name))
        return statistics.median(base) / statistics.median(spec)

    planned = {level: speedup(level, planned_tpot) for level in (1, 32)}
    assert planned[1] > 1.0 and planned[1] > 1.3 * planned[32], planned  # model: 1.66x and 0.83x
    # The analysis's speedups are the client's records' (median baseline TPOT / median speculative
    # TPOT). Not that the client sees the turn: at a load average of 10 the starved emulators sent
    # 1.39x at 1 and 1.34x at 32 in flight against 1.67x and 0.78x planned.
    for level in (1, 32):
        client = {p.variant.name: [r.time_per_output_token_s for r in p.records] for p in points if p.load.value == level}
        assert speedups[level] == pytest.approx(
            statistics.median(client[demo.BASELINE.name]) / statistics.median(client[demo.SPECULATIVE.name])
        )
    # Every record is its server's stream: same chunks, every chunk read after it was written
    # (one monotonic clock: the client's perf_counter stamps, the server's), TTFT and TPOT from them.
    for point in points:
        level = int(point.load.value)
        by_id = {t.request_id: t for t in truth[point.variant.name, level]}
        assert len(point.records) == max(6, level) and all(r.ok for r in point.records), point.name
        for r in point.records:
            t = by_id[f"demo-load-sweep-{point.variant.name}-{r.test_case}-{r.request_index}"]
            assert r.chunk_tokens == t.chunk_tokens and r.output_tokens == t.output_tokens, (point.name, r.request_index)
            read = [r.sent_monotonic_s + offset + 1e-6 for offset in r.chunk_times_s]  # offsets are stored to the microsecond
            written = [t.arrival_s + offset for offset in t.chunk_offsets_s]
            assert all(w <= x for w, x in zip(written, read, strict=True)), (point.name, r.request_index)
            assert r.time_per_output_token_s == pytest.approx((r.end_to_end_latency_s - r.ttft_s) / (r.output_tokens - 1), rel=1e-9)
            assert (
                r.ttft_s == pytest.approx(r.chunk_times_s[0], abs=2e-6)
                and t.arrival_s + t.e2e_s <= r.sent_monotonic_s + r.end_to_end_latency_s + 1e-6
            )
