#!/usr/bin/env python3
"""Benchmark-client figures for the README: how right and how cheap the measuring instrument is.

    make bench-client     # or: .venv/bin/python scripts/bench_client.py [--tokens N] [--repeats N]

1. Accuracy: the native engine against the emulator's ground truth (the emulator in its own
   process at full time scale: 45 ms target steps, k=7 speculation), at 4 and at 64 streams in
   flight (half on each emulated service). Median absolute error of TTFT and of time per output
   token; target: within max(1 ms, 2 %) of the truth.
2. Client CPU: process CPU seconds of the client per 1000 tokens received, in the same runs.
3. Publishing: PutMetricData calls per 1000 requests for the default suite (8 test cases x 2
   services), against the minimum the API limits allow (values per datum, datums and bytes per
   call), and the time to build and batch them for 100,000 requests.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specbench.emulator.process import emulators_in_subprocess, fetch_truth  # noqa: E402
from specbench.load.native import NativeEngine  # noqa: E402
from specbench.load.types import Endpoint, LoadSpec  # noqa: E402
from specbench.outputs import cloudwatch  # noqa: E402
from specbench.prompts.suite import DEFAULT_SUITE  # noqa: E402
from specbench.results.records import RequestRecord  # noqa: E402
from specbench.results.store import RunStore  # noqa: E402
from specbench.runner import Runner, RunPlan  # noqa: E402


class MemoryStore:
    location = "memory"

    def __init__(self) -> None:
        self.data: dict[str, str] = {}

    def write_text(self, key: str, text: str) -> None:
        self.data[key] = text

    def read_text(self, key: str) -> str:
        return self.data[key]

    def keys(self, prefix: str = "") -> list[str]:
        return sorted(k for k in self.data if k.startswith(prefix))


def accuracy(streams: int, tokens: int, repeats: int) -> dict[str, float]:
    """Run ``repeats`` waves of ``streams`` requests (half per service) and compare with the truth."""
    per_endpoint = max(1, streams // 2)
    with emulators_in_subprocess(time_scale=1.0) as urls:
        plan = RunPlan(
            tuple(Endpoint(name, url) for name, url in urls.items()),
            DEFAULT_SUITE.select(["counting"]),
            LoadSpec("Qwen/Qwen3-32B", tokens, per_endpoint, per_endpoint * repeats, 120.0),
            64,
            "native",
            30.0,
        )
        # Client CPU of the whole run: the traffic, plus prompt sizing and /metrics reads (small).
        cpu_start = time.process_time()
        result = asyncio.run(Runner(plan, NativeEngine(), RunStore(MemoryStore(), "bench"), progress=False).run())
        cpu_engine = time.process_time() - cpu_start
        truth = {t["request_id"]: t for url in urls.values() for t in fetch_truth(url)}
    ttft_abs, ttft_rel, tpot_abs, tpot_rel, transit, delivery = [], [], [], [], [], []
    received = 0
    for record in result.records:
        if not record.ok:
            continue
        t = truth[f"bench-{record.variant}-counting-{record.request_index}"]
        ttft_abs.append(abs(record.ttft_s - t["ttft_s"]))
        ttft_rel.append(ttft_abs[-1] / t["ttft_s"])
        tpot_abs.append(abs(record.time_per_output_token_s - t["time_per_output_token_s"]))
        tpot_rel.append(tpot_abs[-1] / t["time_per_output_token_s"])
        received += record.output_tokens or 0
        # Where the TTFT difference arises (one clock, CLOCK_MONOTONIC, in both processes):
        # transit = request written by the client -> server handler starts (server-side queueing);
        # delivery = first chunk written by the server -> timestamped by the client (client-side lag).
        transit.append(t["arrival_s"] - record.sent_monotonic_s)
        delivery.append(record.sent_monotonic_s + record.ttft_s - (t["arrival_s"] + t["ttft_s"]))
    return {
        "requests": len(ttft_abs),
        "errors": sum(1 for r in result.records if not r.ok),
        "ttft_truth_ms": statistics.median(truth_value["ttft_s"] for truth_value in truth.values()) * 1000,
        "ttft_ms": statistics.median(ttft_abs) * 1000,
        "ttft_pct": statistics.median(ttft_rel) * 100,
        "tpot_ms": statistics.median(tpot_abs) * 1000,
        "tpot_pct": statistics.median(tpot_rel) * 100,
        "transit_ms": statistics.median(transit) * 1000,
        "delivery_ms": statistics.median(delivery) * 1000,
        "cpu_ms_per_1000_tokens": cpu_engine / received * 1000 * 1000 if received else math.nan,
        "tokens": received,
    }


def within_target(error_ms: float, error_pct: float) -> bool:
    """Target: within 1 ms or 2 %, whichever is larger (so either bound being met is enough)."""
    return error_ms <= 1.0 or error_pct <= 2.0


def synthetic_records(requests: int) -> list[RequestRecord]:
    rng = random.Random(7)
    cases = DEFAULT_SUITE.test_cases
    records = []
    for index in range(requests):
        case = cases[index % len(cases)]
        variant = ("qwen-vllm", "qwen-sd-vllm")[(index // len(cases)) % 2]
        record = RequestRecord("bench", variant, case.name, case.prompt_class, "native", index, 1.76e9 + index)
        record.ttft_s, record.end_to_end_latency_s = rng.uniform(0.04, 0.06), rng.uniform(5, 30)
        record.inter_token_latency_s, record.time_per_output_token_s = rng.uniform(0.01, 0.05), rng.uniform(0.01, 0.05)
        record.tokens_per_chunk, record.output_throughput_tps = rng.uniform(1, 8), rng.uniform(20, 100)
        record.input_tokens, record.output_tokens = 64, rng.randint(500, 600)
        records.append(record)
    return records


def publishing(requests: int) -> dict[str, float]:
    records = synthetic_records(requests)
    started = time.perf_counter()
    datums = cloudwatch.build_datums(records)
    batches = cloudwatch.batch_datums(datums, "Qwen/LLMPerf")
    seconds = time.perf_counter() - started
    values = sum(len(d["Values"]) for d in datums)
    sizes = [cloudwatch.request_size("Qwen/LLMPerf", batch) for batch in batches]
    # The floor the API limits allow: a call carries at most 1000 datums, 1 MB, and 150 values of any
    # one metric, so a metric split into n datums needs n calls.
    per_metric: dict[tuple, int] = {}
    for datum in datums:
        identity = cloudwatch.metric_identity(datum)
        per_metric[identity] = per_metric.get(identity, 0) + 1
    minimum = max(
        math.ceil(len(datums) / cloudwatch.MAX_DATUMS_PER_REQUEST),
        math.ceil(sum(sizes) / cloudwatch.MAX_REQUEST_BYTES),
        max(per_metric.values()),
    )
    return {"requests": requests, "datums": len(datums), "values": values, "calls": len(batches), "minimum_calls": minimum,
            "largest_call_kib": max(sizes) / 1024, "seconds": seconds}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=100, help="output tokens per request")
    parser.add_argument("--repeats", type=int, default=2, help="waves of requests per endpoint")
    args = parser.parse_args()
    print(f"native engine vs emulator truth ({args.tokens} tokens per request, {args.repeats} waves)")
    header = f"{'streams':>7} {'requests':>8} {'TTFT truth':>10} {'TTFT err':>15} {'TPOT err':>15} {'target':>6} {'CPU/1000 tok':>12}"
    print(header + f" {'transit':>8} {'delivery':>8}")
    for streams in (4, 64):
        figures = accuracy(streams, args.tokens, args.repeats)
        ok = within_target(figures["ttft_ms"], figures["ttft_pct"]) and within_target(figures["tpot_ms"], figures["tpot_pct"])
        print(
            f"{streams:>7} {figures['requests']:>8} {figures['ttft_truth_ms']:>8.1f}ms "
            f"{figures['ttft_ms']:>6.2f}ms {figures['ttft_pct']:>5.2f}% {figures['tpot_ms']:>6.3f}ms {figures['tpot_pct']:>5.2f}% "
            f"{'met' if ok else 'MISSED':>6} {figures['cpu_ms_per_1000_tokens']:>9.1f} ms"
            f" {figures['transit_ms']:>6.2f}ms {figures['delivery_ms']:>6.2f}ms"
            + (f"  ({figures['errors']} errors)" if figures["errors"] else "")
        )
    print("\nCloudWatch publishing (default suite, 2 services)")
    print(f"{'requests':>8} {'datums':>7} {'values':>8} {'calls':>6} {'minimum':>7} {'largest call':>12} {'build+batch':>11}")
    for requests in (1000, 100_000):
        p = publishing(requests)
        print(
            f"{p['requests']:>8} {p['datums']:>7} {p['values']:>8} {p['calls']:>6} {p['minimum_calls']:>7} "
            f"{p['largest_call_kib']:>9.0f} KiB {p['seconds']:>10.2f}s"
        )


if __name__ == "__main__":
    main()
