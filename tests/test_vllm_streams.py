"""The native client against streams as vLLM 0.9.1 (nxd-draft stack) and 0.29.0 (vllm-neuron stack)
send them (issue 34), frames built by tests/vllm_frames.py, served over loopback: an end-of-sequence
first token is a 1-token completion, a step whose text is empty (a character split across byte-level
tokens) is a chunk of its own with its token, so a server that does not speculate streams exactly one
token a chunk and is never taken for one that coalesces, while a proxy that really merges steps is
still caught; every extra field and keep-alive comment is accepted."""

import asyncio
import dataclasses
import hashlib
import json
import statistics

import pytest

from specbench.analysis import stream_acceptance as sa
from specbench.emulator import server as em
from specbench.emulator.server import EmulatorProfile, EmulatorServer
from specbench.load.native import NativeEngine
from specbench.load.types import Endpoint, LoadSpec, PreparedCase
from specbench.prompts.suite import TestCase
from specbench.results.records import COUNT_FROM_FINAL_USAGE, COUNT_FROM_USAGE
from tests import vllm_frames as vf
from tests.faultserver import MODEL, FaultServer, Reply

pytestmark = pytest.mark.servers  # real-time loopback servers: scheduled first (tests/conftest.py)

K = 4
PROMPT_TOKENS = 23
# A translation answer: accented Latin, CJK, an emoji and a symbol, each split over two byte-level tokens.
TRANSLATED = " Ein Café für zwei: 你好, 世界 🙂 und ☕."
STREAMS = [(version, api) for version in vf.VERSIONS for api in vf.APIS]


def run(version, api, outputs, requests=2, max_tokens=64, **options):
    """``requests`` requests to a loopback server answering each with the frames ``version`` of vLLM
    sends for ``outputs`` on ``api``; the records and what the client asked for."""
    pieces = [frame.encode() for frame in vf.frames(version, api, outputs, MODEL, PROMPT_TOKENS, **options)]
    case = TestCase("translate", "translation", "Translate into German")
    load = LoadSpec(MODEL, max_tokens, 2, requests, 20.0, api=api)
    with FaultServer(lambda ordinal: Reply(pieces=pieces, gap_s=0.001)) as server:
        records = asyncio.run(NativeEngine().run(Endpoint("svc", server.url), PreparedCase(case, case.text, 5), load, "r", lambda r: None))
    asked = server.bodies[0]["stream_options"]
    assert asked == {"include_usage": True, "continuous_usage_stats": True}  # what the frames were built for
    assert len(records) == requests and all(r.ok for r in records), [r.error_msg for r in records]
    return records


def sha(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@pytest.mark.parametrize(("version", "api"), STREAMS)
def test_an_end_of_sequence_first_token_is_a_one_token_completion(version, api):
    outputs = vf.engine_outputs([[vf.EOS]], max_tokens=64)
    frames = vf.frames(version, api, outputs, MODEL, PROMPT_TOKENS)
    assert len(frames) == (4 if api == "chat" else 3)  # (role,) finish with empty text, usage-only, [DONE]
    for record in run(version, api, outputs):
        assert (record.output_tokens, record.chunks, record.chunk_tokens, record.tokens_per_chunk) == (1, 1, [1], 1.0)
        assert record.token_count_source == COUNT_FROM_USAGE and record.input_tokens == PROMPT_TOKENS
        assert 0 < record.ttft_s <= record.end_to_end_latency_s and record.time_per_output_token_s is None
        assert record.output_sha256 == sha("") and record.acceptance_length is None


@pytest.mark.parametrize(("version", "api"), STREAMS)
def test_a_character_split_over_two_tokens_is_counted_exactly_and_not_taken_for_coalescing(version, api):
    tokens = [*vf.byte_tokens(TRANSLATED), vf.EOS]
    outputs = vf.engine_outputs(vf.steps_of(tokens), max_tokens=64)
    split = sum(not char.isascii() for char in TRANSLATED)
    assert split == 8 and sum(1 for o in outputs if not o.text) == split + 1  # each first half, and the EOS step
    base = run(version, api, outputs)
    for record in base:
        assert (record.output_tokens, record.chunks) == (len(tokens), len(tokens))
        assert record.chunk_tokens == [1] * len(tokens) and record.tokens_per_chunk == 1.0
        assert record.acceptance_length == 1.0 and record.acceptance_chunks == len(tokens) - 2
        assert record.output_sha256 == sha(TRANSLATED)
    # A speculative server's steps, one of them ending inside a character (accepted + 1 tokens each).
    sizes = [1, 3, 1, 5, 2, 4, 1, 3, 2, 5]
    spec_outputs = vf.engine_outputs([[], *vf.steps_of(tokens, sizes)], max_tokens=64)  # a chunked-prefill step first: no frame
    assert any(not o.text and o.finish_reason is None and o.token_ids for o in spec_outputs)
    spec = run(version, api, spec_outputs)
    steps = [len(o.token_ids) for o in spec_outputs if o.token_ids]
    for record in spec:
        assert record.chunk_tokens == steps and record.output_tokens == len(tokens)
        assert record.acceptance_length == pytest.approx(statistics.fmean(steps[1:-1]), abs=1e-12)
        assert record.output_sha256 == sha(TRANSLATED)  # the same text as the baseline's
    assert sa.self_check(base, spec, K) == sa.Reliability(True, "")


@pytest.mark.parametrize(("version", "api"), STREAMS)
def test_max_tokens_cuts_the_last_step_and_its_tokens_are_exact(version, api):
    tokens = vf.byte_tokens(TRANSLATED)
    outputs = vf.engine_outputs(vf.steps_of(tokens, [1, 4, 4, 4]), max_tokens=12)
    assert outputs[-1].finish_reason == "length" and [len(o.token_ids) for o in outputs] == [1, 4, 4, 3]
    for record in run(version, api, outputs, max_tokens=12):
        assert (record.output_tokens, record.chunk_tokens, record.acceptance_length) == (12, [1, 4, 4, 3], 4.0)


def coalesced(frames, every=2):
    """What a buffering proxy would make of vLLM's frames: every ``every`` token frames in one, their
    texts joined under the last one's usage (the role frame and the final usage frame untouched)."""

    def text_of(choice):
        return (choice["delta"].get("content") if "delta" in choice else choice.get("text")) or ""

    events = [json.loads(f[6:]) for f in frames if f.startswith("data: {")]
    token_events = [e for e in events if e["choices"] and (e.get("usage") or {}).get("completion_tokens")]
    merged = []
    for start in range(0, len(token_events), every):
        group = token_events[start : start + every]
        last = json.loads(json.dumps(group[-1]))
        text = "".join(text_of(e["choices"][0]) for e in group)
        choice = last["choices"][0]
        if "delta" in choice:
            choice["delta"]["content"] = text
        else:
            choice["text"] = text
        merged.append(last)
    rest = [e for e in events if e not in token_events]
    role = [e for e in rest if e["choices"]]
    final = [e for e in rest if not e["choices"]]
    return [f"data: {json.dumps(e)}\n\n" for e in role + merged + final] + [vf.DONE]


@pytest.mark.parametrize(("version", "api"), STREAMS)
def test_a_proxy_that_merges_steps_is_still_flagged(version, api):
    tokens = [*vf.byte_tokens(" plain words and more plain words here"), vf.EOS]
    outputs = vf.engine_outputs(vf.steps_of(tokens), max_tokens=64)
    base_frames = coalesced(vf.frames(version, api, outputs, MODEL, PROMPT_TOKENS))
    case = TestCase("translate", "translation", "Translate")
    load = LoadSpec(MODEL, 64, 1, 1, 20.0, api=api)
    with FaultServer(lambda ordinal: Reply(pieces=[f.encode() for f in base_frames])) as server:
        base = asyncio.run(NativeEngine().run(Endpoint("base", server.url), PreparedCase(case, case.text, 5), load, "r", lambda r: None))
    assert base[0].ok and base[0].chunk_tokens[1] == 2
    spec = run(version, api, vf.engine_outputs(vf.steps_of(tokens, [1, 3, 3]), max_tokens=64))
    check = sa.self_check(base, spec, K)
    assert not check.ok and "coalesces chunks" in check.reason and "base streamed 2 tokens in one chunk" in check.reason


def speculative_metrics(steps):
    accepted = [size - 1 for size in steps[1:]]
    return vf.SpeculativeDecodingMetrics0290(
        mean_acceptance_length=1 + statistics.fmean(accepted),
        draft_acceptance_rate=sum(accepted) / (K * len(accepted)),
        acceptance_histogram=[accepted.count(j) for j in range(K + 1)],
        num_spec_steps=len(accepted),
        num_accepted_draft_tokens=sum(accepted),
        num_draft_tokens=K * len(accepted),
        num_spec_tokens=K,
        per_step_accepted=accepted,
        per_step_drafted=[K] * len(accepted),
    )


@pytest.mark.parametrize("api", vf.APIS)
def test_every_extra_field_and_keep_alive_comment_of_0_29_0_is_accepted(api):
    tokens = [*vf.byte_tokens(TRANSLATED), vf.EOS]
    sizes = [1, 2, 5, 3, 1, 4]
    outputs = vf.engine_outputs(vf.steps_of(tokens, sizes), max_tokens=64)
    extras = vf.Extras0290(return_token_ids=True, prompt_token_ids=tuple(range(PROMPT_TOKENS)), speculative=speculative_metrics(sizes))
    frames = vf.frames("0.29.0", api, outputs, MODEL, PROMPT_TOKENS, extras=extras)
    shown = "".join(frames)
    for field in ('"prompt_token_ids":[0,', '"token_ids":[', '"system_fingerprint":"vllm-0.29.0', '"speculative_decoding":{'):
        assert field in shown, field
    steps = [len(o.token_ids) for o in outputs if o.token_ids]
    pieces = [f.encode() for f in vf.with_keep_alive(frames)]
    assert pieces.count(vf.KEEP_ALIVE.encode()) == len(frames) - 1
    case = TestCase("translate", "translation", "Translate")
    with FaultServer(lambda ordinal: Reply(pieces=pieces)) as server:
        (record,) = asyncio.run(
            NativeEngine().run(
                Endpoint("sd", server.url), PreparedCase(case, case.text, 5), LoadSpec(MODEL, 64, 1, 1, 20.0, api=api), "r", lambda r: None
            )
        )
    assert record.ok, record.error_msg
    assert (record.chunk_tokens, record.output_tokens, record.output_sha256) == (steps, len(tokens), sha(TRANSLATED))


@pytest.mark.parametrize(("version", "api"), STREAMS)
def test_without_continuous_usage_the_totals_stay_exact(version, api):
    """A server that sends usage only at the end (``usage: null`` on 0.9.1's completions frames): the
    total is exact, an end-of-sequence first token still a 1-token completion, and no per-chunk figure."""
    first = run(version, api, vf.engine_outputs([[vf.EOS]], max_tokens=64), continuous=False)
    tokens = [*vf.byte_tokens(TRANSLATED), vf.EOS]
    split = run(version, api, vf.engine_outputs(vf.steps_of(tokens), max_tokens=64), continuous=False)
    for record in first:
        assert (record.output_tokens, record.chunks, record.token_count_source) == (1, 1, COUNT_FROM_FINAL_USAGE)
        assert record.chunk_tokens == [] and record.acceptance_length is None
    texts = sum(1 for o in vf.engine_outputs(vf.steps_of(tokens), max_tokens=64) if o.text)
    for record in split:
        assert (record.output_tokens, record.chunks, record.token_count_source) == (len(tokens), texts, COUNT_FROM_FINAL_USAGE)
        assert record.output_sha256 == sha(TRANSLATED)


def test_the_frames_show_the_fields_vllm_is_known_to_send():
    """REFERENCE.md section 7's list, from the builder: 0.9.1's ``tool_calls: []`` in chat deltas and
    ``usage: null`` on completions frames without continuous usage; 0.29.0's null ``prompt_token_ids``
    / ``prompt_text`` on the role frame, null ``token_ids``, null ``completion_tokens_details``."""
    outputs = vf.engine_outputs(vf.steps_of(vf.byte_tokens(" ok")), max_tokens=1)
    chat_091 = [json.loads(f[6:]) for f in vf.frames("0.9.1", "chat", outputs, MODEL, 3)[:-1]]
    assert chat_091[1]["choices"][0]["delta"] == {"content": " ok", "tool_calls": []}
    assert "tool_calls" not in chat_091[0]["choices"][0]["delta"]  # the role frame is dumped with exclude_unset
    plain = [json.loads(f[6:]) for f in vf.frames("0.9.1", "completions", outputs, MODEL, 3, continuous=False)[:-1]]
    assert plain[0]["usage"] is None and plain[1]["choices"] == [] and plain[1]["usage"]["completion_tokens"] == 1
    chat_0290 = [json.loads(f[6:]) for f in vf.frames("0.29.0", "chat", outputs, MODEL, 3)[:-1]]
    assert (chat_0290[0]["prompt_token_ids"], chat_0290[0]["prompt_text"]) == (None, None)
    assert chat_0290[1]["choices"][0]["token_ids"] is None and chat_0290[1]["usage"]["completion_tokens_details"] is None
    assert chat_0290[1]["choices"][0]["delta"] == {"content": " ok"}  # 0.29.0 drops an empty tool_calls
    assert "completion_tokens_details" not in chat_0290[2]["usage"]  # the final frame: exclude_none


# --- the emulator sends these streams too ----------------------------------------------------------

FAST = EmulatorProfile(target_step_s=0.002, prefill_base_s=0.002, prefill_s_per_token=0.0, seed=5)
SPLIT = dataclasses.replace(FAST, split_characters=("Translate the following",))


def emulated(profile, text, api="chat", requests=3, max_tokens=40):
    case = TestCase("translate", "translation", text)
    load = LoadSpec("Qwen/Qwen3-32B", max_tokens, 3, requests, 20.0, api=api)
    with EmulatorServer(profile) as server:
        records = asyncio.run(NativeEngine().run(Endpoint("svc", server.url), PreparedCase(case, text, 5), load, "r", lambda r: None))
        truth = {t.request_id: t for t in server.truth}
    assert all(r.ok for r in records), [r.error_msg for r in records]
    return records, truth


@pytest.mark.parametrize("api", vf.APIS)
def test_the_emulator_answers_a_marked_prompt_with_the_end_of_sequence_at_once(api):
    profile = dataclasses.replace(FAST, stop_at_once=("say nothing",))
    records, truth = emulated(profile, "Say nothing at all.", api)
    for record in records:
        assert (record.output_tokens, record.chunks, record.chunk_tokens, record.output_sha256) == (1, 1, [1], sha(""))
    assert all(t.chunk_tokens == [1] for t in truth.values())
    other, _ = emulated(profile, "Count to ten.", api, requests=1)
    assert other[0].output_tokens == 40  # unmarked prompts run to max_tokens as before


def test_the_emulators_split_characters_keep_the_baseline_at_one_token_a_chunk_and_coalescing_flagged():
    text = "Translate the following sentence into French: the cat sat on the mat."
    base, _ = emulated(SPLIT, text)
    spec, truth = emulated(dataclasses.replace(SPLIT, num_speculative_tokens=K, draft_cost_ratio=0.1), text)
    for record in base:
        assert record.chunk_tokens == [1] * 40 and record.acceptance_length == 1.0
    for record in spec:
        t = truth[f"r-svc-translate-{record.request_index}"]
        assert record.chunk_tokens == t.chunk_tokens and record.output_tokens == 40
    assert {r.output_sha256 for r in base + spec} == {base[0].output_sha256}  # the same text, split or not
    assert sa.self_check(base, spec, K) == sa.Reliability(True, "")
    merged, _ = emulated(dataclasses.replace(SPLIT, coalesce_chunks=2), text, requests=1)
    check = sa.self_check(merged, spec, K)
    assert not check.ok and "coalesces chunks" in check.reason


def test_the_emulators_text_re_tokenizes_to_the_tokens_that_carry_text():
    for planned in range(1, 13):
        for eos in (False, True):
            pieces = [em.token_text(position, planned, True, eos) for position in range(planned)]
            assert em.count_tokens("".join(pieces)) == planned - eos
            held = [p for p, piece in enumerate(pieces) if not piece]
            assert held == [p for p in range(planned) if p % em.SPLIT_EVERY == em.SPLIT_EVERY - 2 and p + 1 < planned - eos] + (
                [planned - 1] if eos else []
            )
    assert "".join(em.token_text(p, 6, False) for p in range(6)) == em.filler_text(0, 6)  # unchanged without splits
    assert em.default_profiles()["qwen-vllm"].marked(em.default_profiles()["qwen-vllm"].split_characters, "Translate the following")
    with pytest.raises(SystemExit) as exited:
        em.main_emulate(["--stop-at-once", " "])
    assert exited.value.code == 2
    with pytest.raises(ValueError, match="EmulatorProfile.stop_at_once must be a tuple of non-empty prompt markers"):
        EmulatorProfile(stop_at_once=("",))
