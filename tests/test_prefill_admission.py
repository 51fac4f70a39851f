"""How many waiting requests one prefill step admits, per serving stack: every one that fits a free
slot on vLLM 0.9.1 V0 (the reference stack), one per step on the vllm-neuron plugin
(``max_prefills_per_batch = 1``). The stack's value (config/serving_stacks.py) drives the serving
model's admission and the emulator's scheduler, and the two agree on a burst of arrivals."""

from __future__ import annotations

import asyncio
import dataclasses

import aiohttp
import pytest

from config.serving_stacks import REFERENCE_STACK, STACKS, VLLM_NEURON_STACK
from specbench.analysis import serving_model as sm
from specbench.emulator import server as em

# Step times from the serving model, compute-bound so that a step's time depends on its prompts.
PROFILE = sm.Profile(overhead_s=0.002, bandwidth_efficiency=None, compute_efficiency=0.01, draft_overhead_s=0.0005)
DEPLOYMENT = sm.Deployment(method="eagle3", k=3, max_num_seqs=8)
PROMPTS = ["a b c", "d e f g h", "i", "j k l m n o p q", "r s", "t u v w", "x y z", "one two three four five six"]


def emulator(stack: str, max_num_seqs: int = 8) -> em.EmulatorProfile:
    return em.EmulatorProfile(
        max_num_seqs=max_num_seqs,
        deployment=DEPLOYMENT,
        serving_profile=PROFILE,
        num_speculative_tokens=3,
        max_prefills_per_batch=STACKS[stack].max_prefills_per_batch,
    )


def test_each_stack_states_its_admission():
    assert STACKS[REFERENCE_STACK].max_prefills_per_batch is None  # vLLM V0: every waiting request that fits
    assert STACKS[VLLM_NEURON_STACK].max_prefills_per_batch == 1  # NeuronScheduler: one prefill per step


def test_the_emulators_stack_profiles_carry_their_stacks_value():
    for profile in em.default_profiles(0.1).values():  # the reference stack's two services
        assert profile.max_prefills_per_batch == STACKS[REFERENCE_STACK].max_prefills_per_batch
    assert em.eagle3_profile(0.1).max_prefills_per_batch == STACKS[VLLM_NEURON_STACK].max_prefills_per_batch


@pytest.mark.parametrize(
    "waiting, free, cap, sizes",
    [
        (5, 8, None, [5]),
        (5, 8, 1, [1, 1, 1, 1, 1]),
        (10, 8, None, [8]),  # two wait for a slot
        (10, 8, 3, [3, 3, 2]),
        (2, 8, 3, [2]),
        (4, 0, None, []),
        (0, 4, 1, []),
    ],
)
def test_the_models_admission(waiting, free, cap, sizes):
    assert sm.prefill_batches(waiting, free, cap) == sizes
    assert sm.admitted(waiting, free, cap) == (sizes[0] if sizes else 0)


@pytest.mark.parametrize(
    "args, message",
    [
        ((-1, 4, None), "waiting must be an integer >= 0; got -1"),
        ((1, -2, None), "free_slots must be an integer >= 0; got -2"),
        ((1, 4, 0), "max_prefills_per_batch must be None (no limit) or an integer >= 1; got 0"),
        ((1, 4, True), "max_prefills_per_batch must be None (no limit) or an integer >= 1; got True"),
    ],
)
def test_bad_admission_arguments_are_named(args, message):
    with pytest.raises(ValueError, match=f"^serving model: {message.replace('(', '[(]').replace(')', '[)]')}$"):
        sm.admitted(*args)


def test_the_emulator_refuses_a_bad_limit():
    with pytest.raises(ValueError, match="max_prefills_per_batch must be None"):
        em.EmulatorProfile(max_prefills_per_batch=0)


def _burst(profile: em.EmulatorProfile, n: int) -> tuple[list[em.TruthRecord], list[em.StepRecord]]:
    """``n`` requests at once (a closed loop of n clients, one request each), on the virtual clock."""
    return em.simulate_closed_loop(profile, PROMPTS, clients=n, requests=n, max_tokens=4)


@pytest.mark.parametrize("n", [1, 3, 8])
def test_a_burst_at_the_vllm_neuron_stack_takes_one_prefill_step_per_request_in_model_and_emulator(n):
    profile = emulator(VLLM_NEURON_STACK)
    records, steps = _burst(profile, n)
    cap = STACKS[VLLM_NEURON_STACK].max_prefills_per_batch
    assert sm.prefill_batches(n, DEPLOYMENT.max_num_seqs, cap) == [1] * n
    # The emulator: n prefill steps of one request each, in arrival order, before any decode step.
    assert [s.kind for s in steps[:n]] == ["prefill"] * n
    assert [s.ordinals for s in steps[:n]] == [(i,) for i in range(n)]
    assert all(s.kind == "decode" for s in steps[n:])
    # Model and emulator agree on every request's time to first token.
    tokens = [em.count_tokens(PROMPTS[i]) for i in range(n)]
    model = sm.burst_ttft_s(DEPLOYMENT.with_k(3), PROFILE, tokens, DEPLOYMENT.max_num_seqs, cap)
    assert [r.ttft_s for r in records] == pytest.approx(model, rel=1e-12)
    assert model == pytest.approx([sum(profile.prefill_s(t) for t in tokens[: i + 1]) for i in range(n)], rel=1e-12)


@pytest.mark.parametrize("n", [1, 3, 8])
def test_the_reference_stack_admits_the_whole_burst_in_one_step(n):
    profile = emulator(REFERENCE_STACK)
    records, steps = _burst(profile, n)
    cap = STACKS[REFERENCE_STACK].max_prefills_per_batch
    assert sm.prefill_batches(n, DEPLOYMENT.max_num_seqs, cap) == [n]
    assert steps[0].kind == "prefill" and steps[0].ordinals == tuple(range(n))
    assert all(s.kind == "decode" for s in steps[1:])
    tokens = [em.count_tokens(PROMPTS[i]) for i in range(n)]
    model = sm.burst_ttft_s(DEPLOYMENT.with_k(3), PROFILE, tokens, DEPLOYMENT.max_num_seqs, cap)
    assert [r.ttft_s for r in records] == pytest.approx(model, rel=1e-12)
    assert model == pytest.approx([profile.prefill_step_s(tokens)] * n, rel=1e-12)


@pytest.mark.parametrize("stack", [REFERENCE_STACK, VLLM_NEURON_STACK])
def test_a_burst_beyond_the_free_slots_admits_what_fits_and_the_rest_waits(stack):
    profile = emulator(stack, max_num_seqs=3)
    records, steps = _burst(profile, 5)
    cap = STACKS[stack].max_prefills_per_batch
    first = sm.prefill_batches(5, 3, cap)
    assert [len(s.ordinals) for s in steps[: len(first)]] == first
    assert all(s.kind == "prefill" for s in steps[: len(first)]) and steps[len(first)].kind == "decode"
    tokens = [em.count_tokens(p) for p in PROMPTS[:5]]
    model = sm.burst_ttft_s(DEPLOYMENT.with_k(3), PROFILE, tokens, 3, cap)
    assert len(model) == 3
    assert [r.ttft_s for r in records[:3]] == pytest.approx(model, rel=1e-12)
    assert min(r.ttft_s for r in records[3:]) > max(model)  # the other two waited for a slot


@pytest.mark.servers
def test_the_served_vllm_neuron_emulator_prefills_one_request_per_step():
    """The real server (its asyncio engine loop): three requests at once, three prefill steps."""
    profile = dataclasses.replace(em.eagle3_profile(0.2), seed=3)

    async def go(url: str) -> list[int]:
        async with aiohttp.ClientSession() as session:

            async def one(prompt: str) -> int:
                body = {"model": profile.served_model_name, "prompt": prompt, "max_tokens": 3, "stream": True}
                async with session.post(url + "/v1/completions", json=body) as response:
                    await response.read()
                    return response.status

            return await asyncio.gather(*(one(p) for p in ("a b", "c d e", "f")))

    with em.run_in_thread(profile) as server:
        assert asyncio.run(go(server.url)) == [200, 200, 200]
        steps = server._call(lambda: list(server.emulator.steps))
    prefills = [s for s in steps if s.kind == "prefill"]
    assert len(prefills) == 3 and all(len(s.ordinals) == 1 for s in prefills)
