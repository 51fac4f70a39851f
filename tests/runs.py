"""Synthetic stored runs for the aggregation, dashboard and handler tests: the files a benchmark
run writes (run.json, records/<case>.jsonl, acceptance/<case>.json), with known speedups."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from specbench.results.records import RequestRecord
from specbench.results.store import RunStore

BASELINE, SPECULATIVE = "qwen-vllm", "qwen-sd-vllm"
TARGET_STEP_S = 0.045
OUTPUT_TOKENS = 600


def wait_for(condition: Callable[[], object], limit_s: float = 60.0) -> bool:
    """Poll a condition, bounded (never a timing assertion: the bound only stops a hung test)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def handler_environment(bucket: str, region: str, resamples: int) -> dict[str, str]:
    """The aggregation Lambda's environment as the stack sets it on the defaults (and AWS_REGION)."""
    return {
        "RESULTS_BUCKET": bucket,
        "RESULTS_PREFIX": "results/",
        "DASHBOARD_NAME": "SpecDecode-Benchmark",
        "METRICS_NAMESPACE": "Qwen/LLMPerf",
        "CLUSTER_NAME": "specdecode-trn2",
        "SERVING_NAMESPACE": "specdecode",
        "BASELINE_VARIANT": BASELINE,
        "DRAFT_COST_RATIO": "0.1",
        "LOOKBACK_HOURS": "24",
        "BOOTSTRAP_RESAMPLES": str(resamples),
        "SERVICES": f"{BASELINE},{SPECULATIVE}",
        "BUDGET_NODE_HOURS": "48.0",
        "ENV_PROFILE": "",
        "SWEEP_STRATEGY": "none",
        "SWEEP_FIRST_JOB_POINTS": "0",
        "SWEEP_FIRST_JOB_NODE_HOURS": "0.0",
        "AWS_REGION": region,
    }


@dataclass(frozen=True)
class Case:
    name: str
    prompt_class: str
    speedup: float  # true time-per-output-token speedup of the speculative service
    a: float  # per-token acceptance, for the acceptance figures


CASES: tuple[Case, ...] = (
    Case("counting", "structured", 3.0, 0.9),
    Case("json", "structured", 2.5, 0.87),
    Case("shakespeare", "open-ended", 1.1, 0.5),
    Case("cat-on-mat", "open-ended", 1.2, 0.6),
)


def records_for(case: Case, run_id: str, requests: int, started_at: float, seed: int = 7, errors: int = 0) -> list[RequestRecord]:
    rng = random.Random(f"{seed}-{case.name}")
    records = []
    for variant, speedup in ((BASELINE, 1.0), (SPECULATIVE, case.speedup)):
        for index in range(requests):
            record = RequestRecord(run_id, variant, case.name, case.prompt_class, "native", index, started_at + index)
            if index < errors:
                record.error_code, record.error_msg = 500, "injected"
            else:
                tpot = TARGET_STEP_S / speedup * rng.uniform(0.97, 1.03)
                ttft = 0.05 * rng.uniform(0.95, 1.05)
                e2e = ttft + (OUTPUT_TOKENS - 1) * tpot
                per_chunk = 1.0 if variant == BASELINE else min(8.0, 1.0 + case.a * 6)
                record.ttft_s, record.time_per_output_token_s, record.end_to_end_latency_s = ttft, tpot, e2e
                record.inter_token_latency_s = e2e / (OUTPUT_TOKENS / per_chunk)
                record.tokens_per_chunk, record.output_tokens, record.input_tokens = per_chunk, OUTPUT_TOKENS, 64
                record.output_throughput_tps = OUTPUT_TOKENS / e2e
                record.output_sha256 = "same"
            records.append(record)
    return records


def acceptance_for(case: Case, k: int = 7) -> dict[str, dict]:
    drafts = 100.0
    accepted = drafts * sum(case.a ** (i + 1) for i in range(k))
    return {
        BASELINE: {"source": "missing", "reason": "no spec-decode metrics"},
        SPECULATIVE: {
            "source": "counters",
            "drafts": drafts,
            "draft_tokens": drafts * k,
            "accepted_tokens": accepted,
            "acceptance_rate": accepted / (drafts * k),
            "mean_acceptance_length": 1 + accepted / drafts,
            "per_position": [case.a ** (i + 1) for i in range(k)],
        },
    }


def deployment(k: int = 7) -> dict:
    return {
        "serving": {"target_model": "Qwen/Qwen3-32B", "tensor_parallel_size": 32, "max_num_seqs": 4, "max_model_len": 1024},
        "variants": [
            {"name": BASELINE, "target_model": "Qwen/Qwen3-32B", "draft_model": None, "num_speculative_tokens": None},
            {"name": SPECULATIVE, "target_model": "Qwen/Qwen3-32B", "draft_model": "Qwen/Qwen3-1.7B", "num_speculative_tokens": k},
        ],
    }


def write_run(
    store: RunStore,
    *,
    cases: Sequence[Case] = CASES,
    planned: Sequence[Case] | None = None,
    requests: int = 8,
    status: str = "completed",
    started: str = "2026-11-29T10:00:00+00:00",
    finished: str = "2026-11-29T10:30:00+00:00",
    started_at: float = 1_795_000_000.0,
    errors: int = 0,
) -> dict:
    """Write a run with ``cases`` stored (``planned`` defaults to them: pass more to make it partial)."""
    planned = list(planned or cases)
    run = {
        "run_id": store.run_id,
        "status": status,
        "started": started,
        "finished": finished,
        "plan": {
            "endpoints": [{"name": BASELINE, "url": "http://qwen-vllm:8000"}, {"name": SPECULATIVE, "url": "http://qwen-sd-vllm:8000"}],
            "suite": {
                "name": "reference",
                "test_cases": [{"name": c.name, "text": c.name, "prompt_class": c.prompt_class} for c in planned],
            },
            "load": {"model": "Qwen/Qwen3-32B", "max_tokens": OUTPUT_TOKENS, "concurrency": 4, "requests": requests, "temperature": 0.0},
            "input_tokens": 64,
            "engine": "native",
            "deployment": deployment(),
        },
    }
    for case in cases:
        records = records_for(case, store.run_id, requests, started_at, errors=errors)
        store.write(f"records/{case.name}.jsonl", "".join(r.to_json() + "\n" for r in records))
        store.write(f"acceptance/{case.name}.json", json.dumps(acceptance_for(case)))
    store.write("run.json", json.dumps(run))
    return run


def emulated_run_args(baseline, speculative, results, *extra: str) -> list[str]:
    """``specbench run`` against the two in-process emulators (baseline first), into ``results``."""
    endpoints = ["--endpoint", f"{BASELINE}={baseline.url}", "--endpoint", f"{SPECULATIVE}={speculative.url}"]
    return ["run", *endpoints, "--results", str(results), "--no-progress", "--ready-timeout", "5", *extra]


def dashboard_settings(**changes: object):  # type: ignore[no-untyped-def]
    """The default deployment's dashboard settings (specbench/outputs/dashboard.py), with ``changes``."""
    from specbench.outputs import dashboard

    defaults = {
        "name": "SpecDecode-Benchmark",
        "region": "us-east-2",
        "metrics_namespace": "Qwen/LLMPerf",
        "cluster_name": "specdecode-trn2",
        "serving_namespace": "specdecode",
        "lookback_hours": 24,
        "baseline": BASELINE,
    }
    return dashboard.DashboardSettings(**{**defaults, **changes})
