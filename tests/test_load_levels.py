"""Load levels: open-loop Poisson arrivals in the native engine, several levels in one run (each
test case at each), records and files carrying their level, the single-level run unchanged."""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from pathlib import Path

import pytest

from specbench import cli
from specbench.emulator.server import EmulatorServer, default_profiles
from specbench.load.native import NativeEngine, arrival_offsets
from specbench.load.types import Endpoint, LoadSpec, PreparedCase
from specbench.prompts.suite import DEFAULT_SUITE
from specbench.results.records import RequestRecord, read_jsonl
from specbench.results.store import LocalStore, RunStore

# Real-time loopback servers: scheduled first (tests/conftest.py); one worker for the file: its module
# fixtures (the emulator servers and the shared three-level run) are set up once, not in every worker (tests/conftest.py XdistGroups).
pytestmark = [pytest.mark.servers, pytest.mark.xdist_group("load-levels")]

SCALE = 0.1


def run_args(baseline, speculative, results, *extra):
    endpoints = ["--endpoint", f"qwen-vllm={baseline.url}", "--endpoint", f"qwen-sd-vllm={speculative.url}"]
    return ["run", *endpoints, "--results", str(results), "--output-tokens", "40", "--no-progress", "--ready-timeout", "5", *extra]


def stored(results, run_id):
    store = RunStore(LocalStore(results), run_id)
    return store, [r for key in store.keys("records/") for r in read_jsonl(store.read(key).splitlines())]


@pytest.fixture(scope="module")
def servers():
    profiles = default_profiles(time_scale=SCALE)
    with EmulatorServer(profiles["qwen-vllm"]) as baseline, EmulatorServer(profiles["qwen-sd-vllm"]) as speculative:
        yield baseline, speculative


def test_arrivals_are_a_seeded_poisson_process() -> None:
    offsets = arrival_offsets(4.0, 4000, seed=3)
    assert offsets == arrival_offsets(4.0, 4000, seed=3) and offsets != arrival_offsets(4.0, 4000, seed=4)
    gaps = [b - a for a, b in zip(offsets, offsets[1:], strict=False)]
    assert offsets[0] == 0.0 and all(g >= 0 for g in gaps)
    # Exponential gaps: mean 1/rate and a standard deviation equal to the mean (coefficient of variation 1).
    assert statistics.fmean(gaps) == pytest.approx(0.25, rel=0.05)
    assert statistics.stdev(gaps) / statistics.fmean(gaps) == pytest.approx(1.0, rel=0.08)
    with pytest.raises(ValueError, match="request_rate must be > 0 requests/s, got 0"):
        arrival_offsets(0, 3, seed=1)


def test_load_labels_and_the_closed_loop_snapshot_is_unchanged() -> None:
    closed = LoadSpec("m", 10, 4, 8, 60.0)
    assert closed.level == "c4" and "request_rate" not in closed.to_dict()
    opened = LoadSpec("m", 10, 4, 8, 60.0, request_rate=2.5)
    assert opened.level == "r2p5" and opened.to_dict()["request_rate"] == 2.5


async def _loop_lateness(step_s: float, stop: asyncio.Event, lateness: list[float]) -> None:
    """How late this event loop wakes for absolute deadlines, measured while the engine runs on it:
    the reference for the engine's own sends, taken at the same moment on the same loop."""
    deadline = time.perf_counter()
    while not stop.is_set():
        deadline += step_s
        await asyncio.sleep(max(0.0, deadline - time.perf_counter()))
        lateness.append(time.perf_counter() - deadline)


def test_open_loop_sends_on_schedule_whatever_is_in_flight(servers, monkeypatch) -> None:
    """At 40 requests/s with a concurrency of 1, requests overlap: the schedule, not the gate, sends
    them. Checked against the server's record of what it received and the loop's own wake-ups
    measured beside the engine, so a busy machine delays both alike (issue 24)."""
    _, speculative = servers
    asked: dict[int, float] = {}  # when each request, its scheduled sleep and the gate behind it, asked to be sent
    collect = NativeEngine.collect

    async def collecting(self, session, url, payload, headers, timeout, raw, *args):  # type: ignore[no-untyped-def]
        asked[raw.record.request_index] = time.perf_counter()
        await collect(self, session, url, payload, headers, timeout, raw, *args)

    monkeypatch.setattr(NativeEngine, "collect", collecting)
    load = LoadSpec("Qwen/Qwen3-32B", 60, 1, 12, 30.0, request_rate=40.0, seed=5)
    case = DEFAULT_SUITE.test_cases[0]
    records: list[RequestRecord] = []
    probe: list[float] = []

    async def go() -> tuple[float, list[RequestRecord]]:
        stop = asyncio.Event()
        watcher = asyncio.ensure_future(_loop_lateness(0.005, stop, probe))
        called = time.perf_counter()
        try:
            return called, await NativeEngine().run(
                Endpoint("sd", speculative.url), PreparedCase(case, case.text, 8), load, "open", records.append
            )
        finally:
            stop.set()
            await watcher

    called, done = asyncio.run(go())
    assert len(done) == 12 and all(r.ok for r in done)
    by_index = {r.request_index: r.sent_monotonic_s for r in done}
    planned = arrival_offsets(40.0, 12, seed=5)
    # Never early: the schedule starts after the engine was called, and each request waits for its offset.
    assert all(by_index[i] >= called + offset for i, offset in enumerate(planned)), (called, by_index)
    # Not late beyond the loop's own wake-ups: each request asked to be sent (its sleep to its offset
    # over, the concurrency gate passed) as late as the probe's sleeps to theirs, measured from
    # request 0 (offset 0). The same operation on the same loop at the same time; the send itself
    # then waits its launch turn (one launch at a time), which a starved machine stretches (medians
    # of 190 ms against the probe's 58 ms at a load average of 10), so it is only ordered here.
    late = [asked[i] - asked[0] - offset for i, offset in enumerate(planned)]
    assert statistics.median(late) <= statistics.median(probe) + 0.005, (late, statistics.median(probe))
    assert all(asked[i] <= by_index[i] for i in by_index)
    # The server's own record: requests arrived while earlier ones were still streaming, so a
    # concurrency of 1 did not gate them (the closed loop's gate would keep them apart).
    truth = sorted((t for t in speculative.truth if t.request_id.startswith("open-sd-")), key=lambda t: t.arrival_s)
    assert len(truth) == 12 and all(t.e2e_s is not None for t in truth)
    overlapping = sum(1 for a, b in zip(truth, truth[1:], strict=False) if b.arrival_s < a.arrival_s + a.e2e_s)
    assert overlapping >= 1, [(t.arrival_s, t.e2e_s) for t in truth]
    sent = sorted(by_index.values())
    ends = sorted(r.sent_monotonic_s + r.end_to_end_latency_s for r in done)  # type: ignore[operator]
    assert sum(1 for s in sent[1:] if s < ends[0]) >= 1  # some were sent while the first was in flight
    print(
        f"open loop: median lateness {statistics.median(late) * 1e3:.1f} ms, loop's own {statistics.median(probe) * 1e3:.1f} ms, overlapping {overlapping}"
    )


@pytest.fixture(scope="module")
def multi_level_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """One run at three levels (1 and 2 in flight, 20 requests/s) that both tests below read (neither
    writes into it): the run once, not twice. Its own servers: their request ordinals start at 0, so
    the acceptance they draw (seeded by prompt and ordinal) does not depend on which tests ran before.
    Returns the results directory and each server's record of what it served."""
    results = tmp_path_factory.mktemp("multi-level")
    settings = tmp_path_factory.mktemp("multi-level-settings") / "settings.json"
    variants = [{"name": "qwen-vllm"}, {"name": "qwen-sd-vllm", "draft_model": "Qwen/Qwen3-1.7B", "num_speculative_tokens": 7}]
    settings.write_text(json.dumps({"variants": variants}))
    profiles = default_profiles(time_scale=SCALE)
    with EmulatorServer(profiles["qwen-vllm"]) as baseline, EmulatorServer(profiles["qwen-sd-vllm"]) as speculative:
        args = run_args(baseline, speculative, results, "--test-case", "counting", "--run-id", "ml", "--no-publish", "--requests", "4")
        assert cli.main([*args, "--settings", str(settings), "--concurrency", "1", "--concurrency", "2", "--request-rate", "20"]) == 0
        served = {"qwen-vllm": baseline.truth, "qwen-sd-vllm": speculative.truth}
    return results, served


def test_a_run_at_several_levels_stores_each_case_at_each_level(multi_level_run) -> None:
    results, _ = multi_level_run
    store, records = stored(results, "ml")
    assert sorted(k for k in store.keys() if k.startswith(("records/", "acceptance/"))) == [
        f"{kind}/counting@{level}.{ext}" for kind, ext in (("acceptance", "json"), ("records", "jsonl")) for level in ("c1", "c2", "r20")
    ]
    assert {(r.variant, r.load_level) for r in records} == {(v, lv) for v in ("qwen-vllm", "qwen-sd-vllm") for lv in ("c1", "c2", "r20")}
    assert len(records) == 2 * 3 * 4
    run = json.loads(store.read("run.json"))
    assert sorted(run["cases"]) == ["counting@c1", "counting@c2", "counting@r20"]
    levels = [(level["concurrency"], level.get("request_rate")) for level in run["plan"]["load_levels"]]
    assert levels == [(1, None), (2, None), (1, 20.0)]
    assert store.keys("llmperf/qwen-vllm/counting@r20/")


def test_sweep_report_of_a_multi_level_run_separates_the_levels(multi_level_run, tmp_path, capsys) -> None:
    results, served = multi_level_run
    capsys.readouterr()
    out = tmp_path / "report"
    assert cli.main(["sweep-report", "--run", str(results / "ml"), "--out", str(out), "--resamples", "50", "--no-charts"]) == 0
    summary = capsys.readouterr().out.splitlines()[:2]
    assert [line.split(": Qwen/Qwen3-1.7B, k = 7, ")[0] for line in summary] == [
        "structured prompts up to 2 in flight",
        "structured prompts at 20 requests/s (Poisson)",
    ]
    assert summary[0].endswith("(at 2 in flight)")
    analysis = json.loads((out / "sweep-analysis.json").read_text())
    assert [line.split(": Qwen/Qwen3-1.7B, k = 7, ")[0] for line in analysis["table"]] == [
        "structured prompts at 1 in flight",
        "structured prompts at 2 in flight",
        "structured prompts at 20 requests/s (Poisson)",
    ]
    (curve,) = analysis["classes"][0]["curves"]["c1"]
    # The emulator's counting prompt: a = 0.9, k = 7, c = 0.08 -> the model expects 3.65x per token.
    # The acceptance is drawn per request (seeded), so it is the same on any machine.
    assert curve["a"] == pytest.approx(0.9, abs=0.08)
    # The measured speedup is the ratio of the median TPOTs the client stored at 1 in flight; what the
    # servers' plans give (exact, whatever the machine's load) is the model's.
    _, records = stored(results, "ml")
    tpot = {v: statistics.median(r.time_per_output_token_s for r in records if r.variant == v and r.load_level == "c1") for v in served}
    assert curve["points"][0]["tpot"]["point"] == pytest.approx(tpot["qwen-vllm"] / tpot["qwen-sd-vllm"], rel=1e-6)
    planned = {
        v: statistics.median((t.planned_offsets_s[-1] - t.planned_offsets_s[0]) / (t.output_tokens - 1) for t in truth[:4])
        for v, truth in served.items()
    }
    assert planned["qwen-vllm"] / planned["qwen-sd-vllm"] == pytest.approx(3.65, rel=0.15), planned


def test_a_single_level_run_stores_what_it_always_did(servers, tmp_path) -> None:
    args = run_args(*servers, tmp_path, "--test-case", "counting", "--run-id", "sl", "--no-publish", "--requests", "2")
    assert cli.main([*args, "--concurrency", "2"]) == 0
    store, records = stored(tmp_path, "sl")
    assert store.keys("records/") == ["records/counting.jsonl"]
    assert all("load_level" not in json.loads(line) for line in store.read("records/counting.jsonl").splitlines())
    run = json.loads(store.read("run.json"))
    assert "load_levels" not in run["plan"] and "request_rate" not in run["plan"]["load"]
    assert run["plan"]["load"]["concurrency"] == 2 and list(run["cases"]) == ["counting"]
    assert read_jsonl(store.read("records/counting.jsonl").splitlines())[0].load_level == ""


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--engine", "llmperf", "--request-rate", "2"],
            "specbench: --request-rate: the llmperf engine is closed-loop only (--concurrency); use --engine native\n",
        ),
        (["--request-rate", "0"], "error: argument --request-rate: '0': must be a number > 0\n"),
    ],
)
def test_bad_load_flags_are_one_line(extra, message, capsys) -> None:
    try:
        code = cli.main(["run", "--no-publish", *extra])
    except SystemExit as exit_:  # argparse's own usage error
        code = exit_.code
    assert code == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_stored_record_reads_back_its_level(tmp_path) -> None:
    record = RequestRecord("r", "v", "t", "c", "native", 0, 0.0, load_level="r2p5")
    assert json.loads(record.to_json())["load_level"] == "r2p5"
    assert read_jsonl([record.to_json()])[0].load_level == "r2p5"
    store = RunStore(LocalStore(tmp_path), "x")
    store.write("records/t@r2p5.jsonl", record.to_json() + "\n")
    assert store.keys("records/") == ["records/t@r2p5.jsonl"]
