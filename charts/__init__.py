"""cdk8s charts of the serving workloads: the model cache, one chart per vLLM service, the benchmark."""

from .benchmark import BenchmarkChart
from .build import ServingCharts, serving_charts
from .model_cache import ModelCacheChart
from .spec import BenchmarkSpec, ModelCacheSpec, ServingPlan, ServingSpec, VllmServiceSpec, benchmark_spec, serving_plan
from .vllm import VllmServiceChart

__all__ = [
    "BenchmarkChart",
    "BenchmarkSpec",
    "ModelCacheChart",
    "ModelCacheSpec",
    "ServingCharts",
    "ServingPlan",
    "ServingSpec",
    "VllmServiceChart",
    "VllmServiceSpec",
    "benchmark_spec",
    "serving_charts",
    "serving_plan",
]
