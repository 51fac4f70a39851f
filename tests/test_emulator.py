"""The vLLM emulator: its math against the closed forms, and its HTTP behaviour over real loopback sockets.

Durations are a few milliseconds (scaled profiles), so the whole file runs in seconds.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from loop_probe import record_engine_passes
from prometheus_client.parser import text_string_to_metric_families

from specbench.emulator import server as em

pytestmark = pytest.mark.servers  # real-time loopback servers: scheduled first (tests/conftest.py)

MODEL = "Qwen/Qwen3-32B"
FAST = dict(target_step_s=0.004, prefill_base_s=0.008, prefill_s_per_token=0.0001)
SPEC = em.EmulatorProfile(num_speculative_tokens=3, draft_cost_ratio=0.25, acceptance=(("json", 0.9), ("poem", 0.3)), **FAST)
BASE = em.EmulatorProfile(**FAST)
CHAT_USAGE = {"include_usage": True, "continuous_usage_stats": True}
SEED_0_HI_3 = 14348836074120014125


# ---------------------------------------------------------------------------------------------
# Client side helpers


@dataclass
class Streamed:
    status: int
    sent_at: float
    lines: list[str] = field(default_factory=list)  # SSE payloads after "data: "
    arrivals: list[float] = field(default_factory=list)
    body: Any = None  # JSON body of a non-stream answer
    error: BaseException | None = None

    @property
    def done(self) -> bool:
        return bool(self.lines) and self.lines[-1] == "[DONE]"

    @property
    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.lines if line != "[DONE]" and _is_json(line)]

    @property
    def content_events(self) -> list[dict[str, Any]]:
        return [e for e in self.events if e["choices"] and _text(e["choices"][0])]


def _is_json(line: str) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def _text(choice: dict[str, Any]) -> str:
    return choice["delta"].get("content") or "" if "delta" in choice else choice.get("text") or ""


async def _post(
    url: str, body: dict[str, Any], path: str = "/v1/chat/completions", headers: dict[str, str] | None = None, read_timeout: float = 5.0
):
    timeout = aiohttp.ClientTimeout(total=10, sock_read=read_timeout)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        result = Streamed(status=0, sent_at=time.perf_counter())
        try:
            async with session.post(url + path, json=body, headers=headers or {}) as resp:
                result.status = resp.status
                if resp.content_type != "text/event-stream":
                    result.body = await resp.json()
                    return result
                async for raw in resp.content:
                    line = raw.decode().strip()
                    if line:
                        assert line.startswith("data: "), line
                        result.lines.append(line[len("data: ") :])
                        result.arrivals.append(time.perf_counter())
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:  # noqa: UP041 (distinct from TimeoutError on Python 3.10)
            result.error = exc
        return result


def post(url: str, body: dict[str, Any], **kwargs: Any) -> Streamed:
    return asyncio.run(_post(url, body, **kwargs))


def chat(prompt: str = "emit json please", **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": prompt}], "stream": True, **extra}


async def _get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        return resp.status, await resp.text()


def get(url: str) -> tuple[int, str]:
    return asyncio.run(_get(url))


def scrape(url: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Sample name -> {sorted label pairs without model_name: value}."""
    status, text = get(url + "/metrics")
    assert status == 200
    samples: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = tuple(sorted((k, v) for k, v in sample.labels.items() if k != "model_name"))
            assert sample.labels.get("model_name") == MODEL
            samples.setdefault(sample.name, {})[labels] = sample.value
    return samples


# ---------------------------------------------------------------------------------------------
# Pure math


@pytest.mark.parametrize("a", [0.0, 0.3, 0.5, 0.8, 0.95, 1.0])
@pytest.mark.parametrize("k", [0, 1, 3, 7, 15])
def test_expected_tokens_per_step_is_the_geometric_sum(a, k):
    assert em.expected_tokens_per_step(a, k) == pytest.approx(sum(a**i for i in range(k + 1)))


def test_expected_tokens_and_speedup_closed_forms():
    assert em.expected_tokens_per_step(0.5, 1) == pytest.approx(1.5)
    assert em.expected_tokens_per_step(0.8, 7) == pytest.approx((1 - 0.8**8) / 0.2)
    assert em.expected_speedup(0.8, 7, 0.08) == pytest.approx((1 - 0.8**8) / 0.2 / 1.56)
    assert em.expected_speedup(0.9, 0, 0.5) == 1.0
    # With one draft token, speculation pays exactly when a > c.
    for a, c in [(0.3, 0.2), (0.2, 0.3), (0.6, 0.59), (0.59, 0.6)]:
        assert (em.expected_speedup(a, 1, c) > 1) == (a > c)
    assert em.step_time_s(0.045, 7, 0.08) == pytest.approx(0.045 * 1.56)


def test_best_speculation_length_searches_integers():
    for a, c in [(0.9, 0.08), (0.6, 0.08), (0.5, 0.3), (0.95, 0.01)]:
        best = em.best_speculation_length(a, c, k_max=15)
        assert all(em.expected_speedup(a, best, c) >= em.expected_speedup(a, k, c) for k in range(16))
    assert em.best_speculation_length(0.05, 0.1) == 0  # a < c: never speculate
    assert em.best_speculation_length(0.95, 0.01, k_max=15) > em.best_speculation_length(0.6, 0.08)


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan"), True])
def test_probability_is_checked(bad):
    with pytest.raises(ValueError, match="a must be a probability"):
        em.expected_tokens_per_step(bad, 3)


def test_sampled_steps_match_the_expectation():
    rng, p, k, n = random.Random(1), 0.8, 7, 40_000
    accepted = [em.sample_accepted(rng, p, k) for _ in range(n)]
    assert statistics.fmean(a + 1 for a in accepted) == pytest.approx(em.expected_tokens_per_step(p, k), abs=0.05)
    # Position i is accepted when the first i+1 trials succeed: frequency p^(i+1), non-increasing.
    for i in range(k):
        assert sum(a > i for a in accepted) / n == pytest.approx(p ** (i + 1), abs=0.015)
    assert max(accepted) == k and min(accepted) == 0


def test_plan_emits_exactly_the_tokens_asked_on_a_fixed_grid():
    for seed in range(50):
        plan = em.plan_chunks(37, 0.05, 0.01, 5, 0.7, random.Random(seed))
        assert sum(c.tokens for c in plan) == 37
        assert plan[0] == em.PlannedChunk(0.05, 1, None)
        assert all(c.accepted is not None and 1 <= c.tokens <= c.accepted + 1 <= 6 for c in plan[1:])
        assert all(c.tokens == c.accepted + 1 for c in plan[1:-1])  # only the last step is truncated
        assert [round(c.offset_s, 9) for c in plan] == [round(0.05 + 0.01 * i, 9) for i in range(len(plan))]
    baseline = em.plan_chunks(5, 0.1, 0.02, 0, 0.9, random.Random(0))
    assert [(c.tokens, c.accepted) for c in baseline] == [(1, None)] * 5
    assert em.plan_chunks(0, 0.1, 0.02, 3, 0.9, random.Random(0)) == []
    perfect = em.plan_chunks(9, 0.0, 1.0, 3, 1.0, random.Random(0))
    assert [c.tokens for c in perfect] == [1, 4, 4]


def test_request_seed_is_stable_and_distinguishes_requests():
    assert em.request_seed(0, "hi", 3) == SEED_0_HI_3  # sha256-based: the same in every process, unlike hash()
    seeds = {em.request_seed(s, p, o) for s in (0, 1) for p in ("hi", "ho") for o in (0, 1)}
    assert len(seeds) == 8


def test_tokenizer_counts_generated_text_exactly():
    assert em.count_tokens("Hello, world! 12 x") == 6
    assert em.tokenize("a b a") == em.tokenize("a b a") and len(set(em.tokenize("a b a"))) == 2
    for start, n in [(0, 1), (5, 7), (990, 30)]:
        assert em.count_tokens(em.filler_text(start, n)) == n
    assert em.count_tokens(em.filler_text(0, 3) + em.filler_text(3, 4)) == 7


# ---------------------------------------------------------------------------------------------
# Settings


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"num_speculative_tokens": -1}, "num_speculative_tokens must be an integer >= 0"),
        ({"num_speculative_tokens": 2.5}, "num_speculative_tokens must be an integer >= 0"),
        ({"target_step_s": -0.1}, "target_step_s must be a number >= 0"),
        ({"draft_cost_ratio": "x"}, "draft_cost_ratio must be a number >= 0"),
        ({"default_acceptance": 1.2}, "default_acceptance must be a probability"),
        ({"acceptance": (("json", 2.0),)}, "acceptance must be \\(marker, probability\\) pairs"),
        ({"acceptance": (("", 0.5),)}, "acceptance must be"),
        ({"max_model_len": 1}, "max_model_len must be an integer >= 2"),
        ({"served_model_name": ""}, "served_model_name must be a non-empty string"),
        ({"legacy_gauges": 1}, "legacy_gauges must be a bool"),
        (
            {"faults": {0: "boom"}},
            "faults\\[0\\] must be one of http_500, drop_mid_stream, stall, malformed_sse, empty_completion; got 'boom'",
        ),
        ({"faults": {-1: "stall"}}, "faults must be keyed by request ordinals"),
    ],
)
def test_profile_validation_names_the_field(overrides, message):
    with pytest.raises(ValueError, match="EmulatorProfile." + message):
        em.EmulatorProfile(**overrides)


def test_acceptance_markers_first_match_wins_case_insensitively():
    profile = em.EmulatorProfile(acceptance=(("json", 0.9), ("js", 0.1)), default_acceptance=0.4)
    assert profile.acceptance_for("Give me JSON") == 0.9
    assert profile.acceptance_for("some js code") == 0.1
    assert profile.acceptance_for("nothing") == 0.4
    assert em.EmulatorProfile(acceptance=[["x", 0.5]]).acceptance == (("x", 0.5),)


# llmperf wraps each line of its prompt file in the same instruction; the test cases fill that file.
LLMPERF = "Randomly stream lines from the following text with 600 output tokens. Don't generate eos tokens:\n\n"
STRUCTURED = [
    "counting numbers from 1 " * 8,
    "a " * 40,
    "hello world " * 10,
    "Output valid JSON with fixed keys " * 4,
    "List numbers from one to twenty " * 4,
]
OPEN_ENDED = [
    "Shall I compare thee to a summer's day?\nThou art more lovely and more temperate:",
    "the cat sat on the mat. " * 8,
    "Write a simple Python function skeleton " * 4,
]


def test_default_profiles_model_the_write_up():
    profiles = em.default_profiles()
    base, spec = profiles["qwen-vllm"], profiles["qwen-sd-vllm"]
    assert (base.num_speculative_tokens, spec.num_speculative_tokens, spec.draft_cost_ratio) == (0, 7, 0.08)
    assert base.target_step_s == spec.target_step_s == 0.045
    for text in STRUCTURED:
        p = spec.acceptance_for(LLMPERF + text)
        assert 0.85 <= p <= 0.95, text
        assert 2.5 < em.expected_speedup(p, 7, 0.08) < 4.5  # "up to 3x"
    for text in OPEN_ENDED:
        p = spec.acceptance_for(LLMPERF + text)
        assert 0.5 <= p <= 0.6, text
        assert em.expected_speedup(p, 7, 0.08) < 1.7
    fast = em.default_profiles(0.1)["qwen-sd-vllm"]
    assert fast.target_step_s == pytest.approx(0.0045) and fast.stall_s == pytest.approx(3.0)
    assert fast.prefill_s(64) == pytest.approx(spec.prefill_s(64) / 10)
    with pytest.raises(ValueError, match="time_scale"):
        em.default_profiles(0)


# ---------------------------------------------------------------------------------------------
# Streaming over loopback


def test_chat_stream_has_role_chunk_cumulative_usage_and_done():
    with em.run_in_thread(SPEC) as server:
        result = post(server.url, chat(max_tokens=24, stream_options=CHAT_USAGE), headers={"X-Request-Id": "req-1"})
        (truth,) = server.truth
    assert result.status == 200 and result.error is None and result.done
    events = result.events
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert events[0]["usage"]["completion_tokens"] == 0
    assert all(e["object"] == "chat.completion.chunk" and e["model"] == MODEL and e["id"] == "chatcmpl-req-1" for e in events)
    # Every chunk's cumulative usage grows by exactly the tokens of its text.
    previous = 0
    for event in result.content_events:
        usage = event["usage"]
        assert usage["completion_tokens"] - previous == em.count_tokens(_text(event["choices"][0]))
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] and usage["prompt_tokens"] == 3
        previous = usage["completion_tokens"]
    assert previous == 24
    assert result.content_events[-1]["choices"][0]["finish_reason"] == "length"
    assert all(e["choices"][0]["finish_reason"] is None for e in result.content_events[:-1])
    assert events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] == 24
    # The ground truth agrees with what the client saw.
    assert truth.request_id == "req-1" and truth.acceptance == 0.9 and truth.prompt_tokens == 3
    assert truth.chunk_tokens == [em.count_tokens(_text(e["choices"][0])) for e in result.content_events]
    assert max(truth.chunk_tokens) > 1  # speculative steps carry several tokens
    assert truth.output_tokens == 24 and truth.e2e_s >= truth.chunk_offsets_s[-1]
    assert truth.time_per_output_token_s == pytest.approx((truth.e2e_s - truth.ttft_s) / 23)


def test_completions_stream_uses_text_and_usage_only_when_asked():
    with em.run_in_thread(BASE) as server:
        plain = post(server.url, {"model": MODEL, "prompt": "one two three", "stream": True, "max_tokens": 5}, path="/v1/completions")
        final_only = post(
            server.url, {"prompt": ["one two"], "stream": True, "stream_options": {"include_usage": True}}, path="/v1/completions"
        )
        truth = server.truth
    assert plain.done and [e["object"] for e in plain.events] == ["text_completion"] * 5
    assert [_text(e["choices"][0]) for e in plain.events] == [" w0", " w1", " w2", " w3", " w4"]
    assert all("usage" not in e for e in plain.events)
    assert truth[0].chunk_tokens == [1] * 5 and truth[0].acceptance is None and truth[0].accepted_per_step == []
    # No max_tokens: vLLM's default of 16; include_usage alone: only the final chunk carries usage.
    assert len(final_only.content_events) == 16 and all("usage" not in e for e in final_only.content_events)
    assert final_only.events[-1] == {
        **final_only.events[-1],
        "choices": [],
        "usage": {"prompt_tokens": 2, "completion_tokens": 16, "total_tokens": 18},
    }


def test_max_tokens_is_capped_by_the_context_and_bad_requests_are_refused():
    profile = dataclasses.replace(BASE, max_model_len=12)
    with em.run_in_thread(profile) as server:
        capped = post(server.url, chat("w " * 8, max_tokens=100))
        too_long = post(server.url, chat("w " * 12))
        unknown = post(server.url, {**chat(), "model": "gpt-4"})
        not_streamed = post(server.url, {**chat(), "stream": False})
        zero = post(server.url, chat(max_tokens=0))
        no_messages = post(server.url, {"model": MODEL, "stream": True})
        bad_options = post(server.url, chat(stream_options=True))
        newer_name = post(server.url, chat(max_completion_tokens=2, max_tokens=5))
        ordinals = [record.ordinal for record in server.truth]
    assert sum(em.count_tokens(_text(e["choices"][0])) for e in capped.content_events) == 4
    assert len(newer_name.content_events) == 2  # OpenAI's newer name wins, as in vLLM
    assert too_long.status == 400 and "maximum context length is 12 tokens" in too_long.body["message"]
    assert unknown.status == 404 and unknown.body == {
        "object": "error",
        "message": "The model `gpt-4` does not exist.",
        "type": "NotFoundError",
        "param": None,
        "code": 404,
    }
    assert not_streamed.status == 400 and "only streams" in not_streamed.body["message"]
    assert zero.status == 400 and "max_tokens must be an integer >= 1" in zero.body["message"]
    assert no_messages.status == 400 and "'messages'" in no_messages.body["message"]
    assert bad_options.status == 400 and "'stream_options' must be an object" in bad_options.body["message"]
    assert ordinals == [0, 1]  # refused requests never reach the engine


def test_tokenize_health_models_and_readiness():
    profile = dataclasses.replace(BASE, ready_after_s=0.3, max_model_len=64)
    with em.run_in_thread(profile) as server:
        early = [get(server.url + path)[0] for path in ("/health", "/v1/models")]
        early_chat = post(server.url, chat())
        metrics_early = get(server.url + "/metrics")[0]
        time.sleep(0.35)
        health = get(server.url + "/health")
        models = json.loads(get(server.url + "/v1/models")[1])
        tokenized = post(server.url, {"model": MODEL, "prompt": "Hello, world"}, path="/tokenize")
        from_messages = post(server.url, {"messages": [{"role": "user", "content": [{"type": "text", "text": "a b c"}]}]}, path="/tokenize")
        unknown = post(server.url, {"model": "nope", "prompt": "x"}, path="/tokenize")
    assert early == [503, 503] and early_chat.status == 503 and metrics_early == 200
    assert health == (200, "")
    assert models["object"] == "list" and [(m["id"], m["max_model_len"]) for m in models["data"]] == [(MODEL, 64)]
    assert tokenized.body == {"count": 3, "max_model_len": 64, "tokens": em.tokenize("Hello, world"), "token_strs": None}
    assert from_messages.body["count"] == 3
    assert unknown.status == 404


def test_truth_timing_follows_the_plan_and_the_client_clock(monkeypatch):
    """Exact where the schedule is the emulator's logic (absolute deadlines: a late wake-up never
    moves a later chunk), causal against the client's clock for every chunk, and written in the
    loop pass its step completed in (ordered against the engine's own steps, tests/loop_probe.py):
    on a busy machine every figure here stays true."""
    passes = record_engine_passes(monkeypatch)
    with em.run_in_thread(SPEC) as server:
        results = [post(server.url, chat(f"json {i}", max_tokens=20, stream_options=CHAT_USAGE)) for i in range(6)]
        truth = server.truth
        over_http = json.loads(get(server.url + "/emulator/truth")[1])
    bounded = 0
    for result, record in zip(results, truth, strict=True):
        # The plan: prefill, then one step per chunk, each deadline from the last deadline (not from
        # the last wake-up), so however late the loop woke the planned offsets are exact.
        planned = record.planned_offsets_s
        assert planned[0] == pytest.approx(SPEC.prefill_s(record.prompt_tokens), abs=1e-9)
        assert [b - a for a, b in zip(planned, planned[1:], strict=False)] == pytest.approx([SPEC.step_s] * (len(planned) - 1), abs=1e-9)
        # Never early (deadlines are absolute); written after its step completed and before the
        # engine completed the next step it slept for (a chunk held for the next step comes after).
        for planned_s, sent in zip(planned, record.chunk_offsets_s, strict=True):
            assert sent >= planned_s - 0.0005
        for stamp, completed, next_completed in passes.chunk_bounds(record):
            assert stamp >= completed - 1e-9, (record.ordinal, stamp, completed)
            if next_completed is not None:
                assert stamp < next_completed, (record.ordinal, stamp, next_completed)
                bounded += 1
        # Same clock as the client's perf_counter: every chunk is stamped as it goes to the socket,
        # after the request arrived and before the client read it.
        content = [json.dumps(e, separators=(",", ":")) for e in result.content_events]
        arrivals = [result.arrivals[result.lines.index(line)] for line in content]
        handed = [record.arrival_s + offset for offset in record.chunk_offsets_s]
        assert len(arrivals) == len(handed) == len(record.chunk_tokens)
        assert result.sent_at <= record.arrival_s <= handed[0]
        assert all(h <= a for h, a in zip(handed, arrivals, strict=True)), (handed, arrivals)
        assert handed == sorted(handed) and arrivals == sorted(arrivals)
    assert bounded >= 1  # some step was slept for: the ordering above was checked
    assert [r["chunk_tokens"] for r in over_http] == [r.chunk_tokens for r in truth]
    assert over_http[0]["ttft_s"] == truth[0].ttft_s and over_http[0]["time_per_output_token_s"] == truth[0].time_per_output_token_s


def test_same_seed_same_plan_and_concurrent_requests():
    async def burst(url: str) -> list[Streamed]:
        return await asyncio.gather(*(_post(url, chat("json", max_tokens=30)) for _ in range(4)))

    runs = []
    for _ in range(2):
        with em.run_in_thread(SPEC) as server:
            results = asyncio.run(burst(server.url))
            runs.append(sorted((r.ordinal, r.chunk_tokens) for r in server.truth))
        assert all(r.done and sum(em.count_tokens(_text(e["choices"][0])) for e in r.content_events) == 30 for r in results)
    assert runs[0] == runs[1]
    assert len({tuple(tokens) for _, tokens in runs[0]}) > 1  # the ordinal feeds the seed


# ---------------------------------------------------------------------------------------------
# Metrics


def test_spec_counters_match_the_truth_and_reset():
    with em.run_in_thread(SPEC) as server:
        assert scrape(server.url)["vllm:spec_decode_num_drafts_total"] == {(): 0.0}
        for prompt in ("json", "poem", "json again"):
            post(server.url, chat(prompt, max_tokens=40))
        samples, truth = scrape(server.url), server.truth
        server.reset_counters()
        after_reset = scrape(server.url)
    steps = [a for record in truth for a in record.accepted_per_step]
    assert samples["vllm:spec_decode_num_drafts_total"][()] == len(steps) == sum(len(r.chunk_tokens) - 1 for r in truth)
    assert samples["vllm:spec_decode_num_draft_tokens_total"][()] == 3 * len(steps)
    assert samples["vllm:spec_decode_num_accepted_tokens_total"][()] == sum(steps)
    per_pos = [samples["vllm:spec_decode_num_accepted_tokens_per_pos_total"][(("position", str(i)),)] for i in range(3)]
    assert per_pos == sorted(per_pos, reverse=True) and sum(per_pos) == sum(steps) and per_pos[0] < len(steps)
    assert samples["vllm:generation_tokens_total"][()] == 120
    assert samples["vllm:request_success_total"][(("finish_reason", "length"),)] == 3
    assert samples["vllm:num_requests_running"][()] == 0
    assert "vllm:spec_decode_draft_acceptance_rate" not in samples
    assert not any(name.endswith("_created") for name in samples)
    assert after_reset["vllm:spec_decode_num_accepted_tokens_total"][()] == 0
    assert set(after_reset["vllm:spec_decode_num_accepted_tokens_per_pos_total"].values()) == {0.0}


def test_baseline_has_no_spec_metrics_and_running_gauge_counts_streams():
    with em.run_in_thread(BASE) as server:

        async def during() -> tuple[float, Streamed]:
            task = asyncio.ensure_future(_post(server.url, chat(max_tokens=40)))
            await asyncio.sleep(0.05)
            async with aiohttp.ClientSession() as session, session.get(server.url + "/metrics") as resp:
                text = await resp.text()
            running = next(
                s.value for f in text_string_to_metric_families(text) for s in f.samples if s.name == "vllm:num_requests_running"
            )
            return running, await task

        running, result = asyncio.run(during())
        samples = scrape(server.url)
    assert running == 1 and result.done
    assert not any("spec_decode" in name for name in samples)
    assert samples["vllm:prompt_tokens_total"][()] == 3


def test_legacy_gauges_follow_vllm_v0():
    profile = dataclasses.replace(SPEC, legacy_gauges=True)
    with em.run_in_thread(profile) as server:
        before = scrape(server.url)
        post(server.url, chat("json", max_tokens=30))
        post(server.url, chat("poem", max_tokens=30))
        samples, truth = scrape(server.url), server.truth
    assert "vllm:spec_decode_draft_acceptance_rate" not in before and before["vllm:spec_decode_num_draft_tokens_total"][()] == 0
    steps = [a for record in truth for a in record.accepted_per_step]
    assert samples["vllm:spec_decode_draft_acceptance_rate"][()] == pytest.approx(sum(steps) / (3 * len(steps)))
    assert samples["vllm:spec_decode_efficiency"][()] == pytest.approx(sum(a + 1 for a in steps) / (4 * len(steps)))
    assert samples["vllm:spec_decode_num_emitted_tokens_total"][()] == sum(steps) + len(steps)
    assert "vllm:spec_decode_num_drafts_total" not in samples and "vllm:spec_decode_num_accepted_tokens_per_pos_total" not in samples


# ---------------------------------------------------------------------------------------------
# Faults


def test_each_fault_kind_on_its_ordinal():
    faults = {1: "http_500", 2: "drop_mid_stream", 3: "malformed_sse", 4: "empty_completion"}
    with em.run_in_thread(dataclasses.replace(SPEC, faults=faults)) as server:
        results = [post(server.url, chat(max_tokens=20, stream_options=CHAT_USAGE)) for _ in range(6)]
        get(server.url + "/health")  # other routes do not count as requests
        post(server.url, {"prompt": "x"}, path="/tokenize")
        server.set_faults({6: "empty_completion"})
        late = post(server.url, chat())
        truth = server.truth
    ok, error_500, dropped, malformed, empty, ok_again = results
    assert (
        ok.done
        and ok_again.done
        and [r.fault for r in truth] == [None, "http_500", "drop_mid_stream", "malformed_sse", "empty_completion", None, "empty_completion"]
    )
    assert error_500.status == 500 and error_500.body["type"] == "InternalServerError" and error_500.body["code"] == 500
    assert isinstance(dropped.error, aiohttp.ClientPayloadError) and not dropped.done
    assert 1 <= len(dropped.content_events) < len(ok.content_events)
    assert truth[2].e2e_s is None and truth[2].error == "injected drop_mid_stream"
    assert malformed.done and "{not json" in malformed.lines and not _is_json("{not json")
    assert sum(em.count_tokens(_text(e["choices"][0])) for e in malformed.content_events) == 20
    assert empty.done and empty.content_events == [] and empty.events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert empty.events[-1]["usage"]["completion_tokens"] == 0 and truth[4].ttft_s is None
    assert late.done and late.content_events == []


def test_stall_outlasts_the_client_timeout():
    profile = dataclasses.replace(SPEC, faults={0: "stall"}, stall_s=5.0)
    with em.run_in_thread(profile) as server:
        started = time.perf_counter()
        stalled = post(server.url, chat(max_tokens=20), read_timeout=0.2)
        waited = time.perf_counter() - started
        deadline = time.perf_counter() + 2
        while server.truth[0].error == "" and time.perf_counter() < deadline:
            time.sleep(0.01)
        (record,) = server.truth
    assert isinstance(stalled.error, asyncio.TimeoutError) and not stalled.done
    assert 1 <= len(stalled.content_events) and 0.2 <= waited < 4.5  # the client gave up before the 5 s stall ended
    assert record.error == "client disconnected" and record.e2e_s is None  # the handler ended with its client


# ---------------------------------------------------------------------------------------------
# Command line


def test_main_emulate_serves_both_profiles_until_stopped(capsys):
    stop = threading.Event()
    argv = ["--baseline-port", "0", "--speculative-port", "0", "--time-scale", "0.01"]
    thread = threading.Thread(target=em.main_emulate, args=(argv, stop))
    thread.start()
    output = ""
    try:
        deadline = time.perf_counter() + 5
        while output.count("\n") < 2 and time.perf_counter() < deadline:
            time.sleep(0.02)
            output += capsys.readouterr().out
        urls = dict(line.split(": ", 1) for line in output.splitlines())
        assert set(urls) == {"qwen-vllm", "qwen-sd-vllm"} and all(u.startswith("http://127.0.0.1:") for u in urls.values())
        served = {name: json.loads(get(url + "/models")[1])["data"][0]["id"] for name, url in urls.items()}
        spec_metrics = get(urls["qwen-sd-vllm"].removesuffix("/v1") + "/metrics")[1]
    finally:
        stop.set()
        thread.join(5)
    assert not thread.is_alive()
    assert served == {"qwen-vllm": MODEL, "qwen-sd-vllm": MODEL}
    assert "vllm:spec_decode_num_drafts_total" in spec_metrics
