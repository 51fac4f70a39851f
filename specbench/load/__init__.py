"""Engines drive one test case's traffic at one endpoint and return a RequestRecord per request.

Both engines take the same prepared prompt and load, so the traffic is identical whichever runs:
``native`` (this package's asyncio streaming client) and ``llmperf`` (ray-project/llmperf's own
client through its library API; Python 3.10 with llmperf installed, see requirements-llmperf.txt).
Their shared types are in specbench.load.types.
"""

from __future__ import annotations

from specbench.load.types import Engine

APIS = ("chat", "completions")
ENGINES = ("native", "llmperf")


def make_engine(name: str) -> Engine:
    if name == "native":
        from specbench.load.native import NativeEngine

        return NativeEngine()
    if name == "llmperf":
        from specbench.load.llmperf_engine import LlmperfEngine

        return LlmperfEngine()
    raise ValueError(f"engine {name!r} is not known; allowed: {', '.join(ENGINES)}")
