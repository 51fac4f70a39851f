"""The emulator's continuous batching against its own ground truth: queueing for a slot, what each
engine step holds, each step's duration under a known serving-model profile, and the client's
measurements of a batched server against the stamps the server recorded."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import statistics

import aiohttp
import pytest
from loop_probe import record_engine_passes

from specbench.analysis import serving_model as sm
from specbench.emulator import server as em
from specbench.load.native import NativeEngine
from specbench.load.types import Endpoint, LoadSpec, PreparedCase
from specbench.prompts.suite import DEFAULT_SUITE

pytestmark = pytest.mark.servers  # real-time loopback servers: scheduled first (tests/conftest.py)

# A known profile: no bandwidth term, a slow compute term, so a step's time grows with the tokens it
# processes: 2 ms + 1.2 ms per token of the 32B target (64 GFLOP / (8 x 667 TFLOPS x 1 %)).
PROFILE = sm.Profile(overhead_s=0.002, bandwidth_efficiency=None, compute_efficiency=0.01, draft_overhead_s=0.0005)
DEPLOYMENT = sm.Deployment(method="draft", draft="Qwen/Qwen3-0.6B", k=3, max_num_seqs=2)
PER_TOKEN_S = sm.QWEN3_32B.flops_per_token / (8 * 667e12 * 0.01)
BATCHED = em.EmulatorProfile(max_num_seqs=2, deployment=DEPLOYMENT, serving_profile=PROFILE, seed=5)
SPEC = dataclasses.replace(BATCHED, num_speculative_tokens=3, default_acceptance=0.7)


async def _stream(session: aiohttp.ClientSession, url: str, prompt: str, max_tokens: int, delay: float = 0.0) -> int:
    await asyncio.sleep(delay)
    body = {"model": "Qwen/Qwen3-32B", "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens, "stream": True}
    async with session.post(url + "/v1/chat/completions", json=body) as response:
        await response.read()
        return response.status


def burst(profile: em.EmulatorProfile, requests: list[tuple[str, int, float]]) -> tuple[list[em.TruthRecord], list[em.StepRecord]]:
    """The requests' truth and the engine's steps."""
    with em.run_in_thread(profile) as server:

        async def go() -> list[int]:
            async with aiohttp.ClientSession() as session:
                return await asyncio.gather(*(_stream(session, server.url, p, n, d) for p, n, d in requests))

        assert asyncio.run(go()) == [200] * len(requests)
        steps = server._call(lambda: list(server.emulator.steps))
        return server.truth, steps


def test_step_times_follow_the_serving_model():
    assert SPEC.decode_step_s(1) == pytest.approx(
        0.002 + 4 * PER_TOKEN_S + 3 * (0.0005 + sm.QWEN3_0_6B.flops_per_token / (8 * 667e12 * 0.01))
    )
    assert BATCHED.decode_step_s(2) - BATCHED.decode_step_s(1) == pytest.approx(PER_TOKEN_S)
    assert BATCHED.prefill_step_s([3, 5]) == pytest.approx(0.002 + 8 * PER_TOKEN_S)
    scaled = dataclasses.replace(BATCHED, time_scale=0.5)
    assert scaled.decode_step_s(2) == pytest.approx(BATCHED.decode_step_s(2) / 2)
    # The legacy profile stays batch-independent.
    legacy = em.EmulatorProfile(target_step_s=0.01, num_speculative_tokens=2, draft_cost_ratio=0.1)
    assert legacy.decode_step_s(1) == legacy.decode_step_s(64) == pytest.approx(0.012)
    with pytest.raises(ValueError, match="deployment must be a speculation method"):
        em.EmulatorProfile(num_speculative_tokens=2, deployment=sm.Deployment())
    with pytest.raises(ValueError, match="max_num_seqs must be an integer >= 1"):
        em.EmulatorProfile(max_num_seqs=0)


def test_the_request_beyond_max_num_seqs_waits_for_a_slot():
    # Three at once, two slots: the third is prefilled only when one of the first two has finished.
    truth, steps = burst(BATCHED, [("a b c", 6, 0.0), ("d e f", 6, 0.0), ("g h i", 6, 0.0)])
    by_ordinal = {t.ordinal: t for t in truth}
    assert all(len(step.ordinals) <= 2 for step in steps)
    prefills = [s for s in steps if s.kind == "prefill"]
    late = next(t for t in truth if t.queued_s == max(r.queued_s for r in truth))
    late_prefill = next(s for s in prefills if late.ordinal in s.ordinals)
    first_done = min(steps[r.steps[-1]].end_s for r in truth if r.ordinal != late.ordinal)
    assert late_prefill.start_s >= first_done - 1e-9
    assert late.queued_s == pytest.approx(late_prefill.start_s - late.arrival_s)
    assert any(s.waiting >= 1 for s in steps if s.kind == "decode")  # it was queued while the others decoded
    # Its TTFT holds the wait: more than a prefill step plus the others' decode.
    assert late.ttft_s > BATCHED.prefill_step_s([3]) + 5 * BATCHED.decode_step_s(2) - 0.001
    assert sorted(len(by_ordinal[o].chunk_tokens) for o in by_ordinal) == [6, 6, 6]


def test_each_step_advances_every_running_sequence_and_takes_the_profiles_time(monkeypatch):
    passes = record_engine_passes(monkeypatch)
    truth, steps = burst(SPEC, [("one", 12, 0.0), ("two", 12, 0.0), ("three", 12, 0.03)])
    running: set[int] = set()
    left = {t.ordinal: t.max_tokens for t in truth}
    for previous, step in zip([None, *steps], steps, strict=False):
        if step.kind == "prefill":
            assert not running & set(step.ordinals)  # only new arrivals
            assert step.tokens == (1,) * len(step.ordinals)
            assert step.duration_s == pytest.approx(SPEC.prefill_step_s([1] * len(step.ordinals)))
            running |= set(step.ordinals)
        else:
            assert set(step.ordinals) == running  # one decode step advances every running sequence
            assert all(1 <= t <= 4 for t in step.tokens)  # speculative: at most k + 1 a chunk
            assert step.duration_s == pytest.approx(SPEC.decode_step_s(len(step.ordinals)))
        for ordinal, tokens in zip(step.ordinals, step.tokens, strict=True):
            left[ordinal] -= tokens
            if left[ordinal] == 0:
                running.discard(ordinal)
        if previous is not None and step.start_s < previous.end_s + 0.002:
            assert step.start_s == pytest.approx(previous.end_s, abs=1e-9)  # busy: back to back, on deadlines
    assert set(left.values()) == {0}
    # Every chunk went out at its step's end, never before: stamped after the engine completed its
    # step, and before the engine completed the next step it slept for (a chunk held for the next
    # step is stamped after it). Orderings on one clock, so a busy machine cannot break them
    # (tests/loop_probe.py); only a step the engine ran late without sleeping bounds nothing.
    bounded = 0
    for record in truth:
        ends = [steps[i].end_s - record.arrival_s for i in record.steps]
        assert record.planned_offsets_s == pytest.approx(ends, abs=1e-9)
        assert all(sent >= planned - 1e-4 for sent, planned in zip(record.chunk_offsets_s, ends, strict=True))
        for stamp, completed, next_completed in passes.chunk_bounds(record):
            assert stamp >= completed - 1e-9, (record.ordinal, stamp, completed)
            if next_completed is not None:
                assert stamp < next_completed, (record.ordinal, stamp, next_completed)
                bounded += 1
        assert sum(record.chunk_tokens) == 12
    assert bounded >= 1  # some step was slept for: the check above ran


def test_baseline_streams_one_token_a_chunk_under_batching():
    truth, steps = burst(BATCHED, [("x", 8, 0.0), ("y", 8, 0.0), ("z", 8, 0.0)])
    assert all(t.chunk_tokens == [1] * 8 for t in truth)
    assert all(set(s.tokens) == {1} for s in steps)
    pairs = [s.duration_s for s in steps if s.kind == "decode" and len(s.ordinals) == 2]
    assert pairs and pairs == pytest.approx([BATCHED.decode_step_s(2)] * len(pairs))


def test_the_native_clients_measurements_of_a_batched_server_match_its_stamps():
    prepared = PreparedCase(DEFAULT_SUITE.test_cases[0], "counting numbers from 1 " * 4, 16)
    load = LoadSpec("Qwen/Qwen3-32B", 24, 3, 6, 30.0)  # 3 clients, 2 slots: queueing, prefills interleaved
    with em.run_in_thread(SPEC) as server:

        async def go():  # type: ignore[no-untyped-def]
            return await NativeEngine().run(Endpoint("sd", server.url), prepared, load, "native", lambda record: None)

        records = asyncio.run(go())
        truth = {t.request_id: t for t in server.truth}
    assert len(records) == 6 and all(r.ok for r in records)
    lead = []
    for record in records:
        t = truth[f"native-sd-{prepared.case.name}-{record.request_index}"]
        where = record.request_index
        assert record.chunk_tokens == t.chunk_tokens, where  # chunk for chunk as the engine produced them
        # One monotonic clock (the server's perf_counter, the client's stamps): the request sent
        # before the server answered it, every chunk read after the server wrote it, the stream's end
        # after [DONE] went out; TTFT and time per output token derived from those stamps. No
        # wall-clock bound: a busy machine stretches the loopback's transit but cannot turn it around.
        sent, arrival = record.sent_monotonic_s, t.arrival_s
        read = [sent + offset + 1e-6 for offset in record.chunk_times_s]  # offsets are stored to the microsecond
        written = [arrival + offset for offset in t.chunk_offsets_s]
        assert sent <= arrival + t.ttft_s, where
        lead.append(arrival - sent)
        assert all(w <= r for w, r in zip(written, read, strict=True)), (where, written, read)
        assert arrival + t.e2e_s <= sent + record.end_to_end_latency_s + 1e-6, where
        assert record.ttft_s == pytest.approx(record.chunk_times_s[0], abs=2e-6), where
        expected_tpot = (record.end_to_end_latency_s - record.ttft_s) / (record.output_tokens - 1)
        assert record.time_per_output_token_s == pytest.approx(expected_tpot, rel=1e-9), where
    # The client stamps "sent" just after its write returns, the server "arrival" once it has read
    # the request: one preempted between the two can stamp after the server, not on the median.
    assert statistics.median(lead) >= 0, lead
    assert max(t.queued_s for t in truth.values()) > SPEC.decode_step_s(2)  # someone did wait for a slot


def test_the_virtual_clock_simulation_schedules_as_the_server_does():
    truth, steps = em.simulate_closed_loop(SPEC, ["one two three"], clients=3, requests=5, max_tokens=10)
    assert len(truth) == 5 and all(t.output_tokens == 10 and t.e2e_s is not None for t in truth)
    assert all(len(s.ordinals) <= 2 for s in steps)  # max_num_seqs 2
    assert steps[0].kind == "prefill" and steps[0].ordinals == (0, 1)  # two slots for three clients
    assert truth[2].queued_s > 0 and truth[0].queued_s == 0
    for step in steps:
        expected = SPEC.prefill_step_s([3] * len(step.ordinals)) if step.kind == "prefill" else SPEC.decode_step_s(len(step.ordinals))
        assert step.duration_s == pytest.approx(expected)
    for earlier, later in zip(steps, steps[1:], strict=False):
        assert later.start_s == pytest.approx(earlier.end_s)  # a closed loop never lets the engine idle
    # Same seed, prompt and ordinal: the same chunks as the server plays.
    plan = em.plan_chunks(
        10, 0.0, 0.0, 3, SPEC.acceptance_for("one two three"), random.Random(em.request_seed(SPEC.seed, "one two three", 0))
    )
    assert truth[0].chunk_tokens == [c.tokens for c in plan]
