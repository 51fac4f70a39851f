"""Every chart of a plan in one cdk8s app: the model cache first, then one chart per service, then
the benchmark, then a configured sweep."""

from __future__ import annotations

from dataclasses import dataclass

import cdk8s

from .benchmark import BenchmarkChart
from .model_cache import ModelCacheChart
from .spec import BenchmarkSpec, ServingPlan
from .sweep import SweepChart, SweepSpec
from .vllm import VllmServiceChart


@dataclass(frozen=True)
class ServingCharts:
    model_cache: ModelCacheChart
    services: tuple[VllmServiceChart, ...]
    benchmark: BenchmarkChart | None = None
    sweep: SweepChart | None = None


def serving_charts(
    app: cdk8s.App, plan: ServingPlan, benchmark: BenchmarkSpec | None = None, sweep: SweepSpec | None = None
) -> ServingCharts:
    cache = ModelCacheChart(app, "model-cache", plan.model_cache)
    services = []
    for spec in plan.services:
        chart = VllmServiceChart(app, spec.name, spec)
        chart.add_dependency(cache)  # namespace and volumes first
        services.append(chart)
    bench = None
    if benchmark is not None:
        bench = BenchmarkChart(app, "specbench", benchmark)
        bench.add_dependency(*services)  # the services it measures first; the benchmark waits until they are ready
    swept = None
    if sweep is not None:
        if bench is None:
            raise ValueError("a sweep needs the benchmark: its pods use the benchmark's ConfigMap and service account")
        swept = SweepChart(app, "sweep", sweep)
        swept.add_dependency(bench)
    return ServingCharts(cache, tuple(services), bench, swept)
