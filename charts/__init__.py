"""cdk8s charts of the serving workloads: the model cache and one chart per vLLM service."""

from .build import ServingCharts, serving_charts
from .model_cache import ModelCacheChart
from .spec import ModelCacheSpec, ServingPlan, ServingSpec, VllmServiceSpec, serving_plan
from .vllm import VllmServiceChart

__all__ = [
    "ModelCacheChart",
    "ModelCacheSpec",
    "ServingCharts",
    "ServingPlan",
    "ServingSpec",
    "VllmServiceChart",
    "VllmServiceSpec",
    "serving_charts",
    "serving_plan",
]
