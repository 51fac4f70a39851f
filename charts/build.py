"""Every serving chart of a plan in one cdk8s app: the model cache first, then one chart per service."""

from __future__ import annotations

from dataclasses import dataclass

import cdk8s

from .model_cache import ModelCacheChart
from .spec import ServingPlan
from .vllm import VllmServiceChart


@dataclass(frozen=True)
class ServingCharts:
    model_cache: ModelCacheChart
    services: tuple[VllmServiceChart, ...]


def serving_charts(app: cdk8s.App, plan: ServingPlan) -> ServingCharts:
    cache = ModelCacheChart(app, "model-cache", plan.model_cache)
    services = []
    for spec in plan.services:
        chart = VllmServiceChart(app, spec.name, spec)
        chart.add_dependency(cache)  # namespace and volumes first
        services.append(chart)
    return ServingCharts(cache, tuple(services))
