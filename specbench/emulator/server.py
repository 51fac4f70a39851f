"""A local stand-in for the two vLLM servers the benchmark compares: baseline and speculative decoding.

It speaks the slice of vLLM's OpenAI-compatible API the benchmark uses (streamed chat and text
completions with usage statistics, /tokenize, /health, /v1/models, /metrics), paces its chunks with
a continuous-batching engine (``Engine``: at most ``max_num_seqs`` sequences run, the rest queue; one
engine step advances every running sequence; prefill runs in steps of its own, as vLLM V0 and the
Neuron schedulers do), with step times from the serving model (specbench/analysis/serving_model.py)
or a batch-independent legacy profile, acceptance per prompt class (Leviathan et al. 2023), injects
faults on chosen requests, and keeps the ground truth of every request and every engine step so a
client's measurements can be checked against what was really sent.

What it does not model: the chat template (prompt tokens are the tokens of the message contents),
sampling (output is filler text), chunked prefill (vLLM V1 on GPUs mixes prefill chunks into decode
steps), preemption (KV-cache memory is never short).

Clock: every timestamp in the ground truth is ``time.perf_counter()``, the clock the client measures
with, so a client's and the server's stamps of one request can be compared directly. (On Linux,
CPython's perf_counter and monotonic are the same CLOCK_MONOTONIC, see ``time.get_clock_info``; the
emulator does not rely on that: it sleeps for relative delays towards perf_counter deadlines.)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import copy
import functools
import hashlib
import itertools
import json
import math
import random
import re
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from dataclasses import replace as dataclasses_replace
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from specbench import jsonfile
from specbench.analysis import serving_model as sm
from specbench.flags import OneLineParser, ascii_float, ascii_int, listen_port, positive_float, positive_int
from specbench.results.records import time_per_output_token

CLOCK = time.perf_counter
FAULT_KINDS = ("http_500", "drop_mid_stream", "stall", "malformed_sse", "empty_completion")
DEFAULT_MAX_TOKENS = 16  # vLLM's default for /v1/completions
VOCAB_SIZE = 151_936  # Qwen3's vocabulary: token ids look plausible
FAULT_AFTER_CHUNKS = 3  # mid-stream faults strike after this many content chunks (fewer on short streams)


# ---------------------------------------------------------------------------------------------
# Pure math: Leviathan et al. 2023, section 3


def expected_tokens_per_step(a: float, k: int) -> float:
    """Expected tokens one target step yields: E = (1 - a^(k+1)) / (1 - a); k + 1 when a = 1."""
    _check_probability("a", a)
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    if a == 1.0:
        return k + 1.0
    return (1.0 - a ** (k + 1)) / (1.0 - a)


def expected_speedup(a: float, k: int, c: float) -> float:
    """Expected wall-time speedup over plain decoding: S = E / (k*c + 1)."""
    if c < 0:
        raise ValueError(f"c must be >= 0, got {c}")
    return expected_tokens_per_step(a, k) / (k * c + 1.0)


def best_speculation_length(a: float, c: float, k_max: int = 15) -> int:
    """The k in 0..k_max with the highest expected speedup (no closed form); ties go to the smaller k."""
    return max(range(k_max + 1), key=lambda k: (expected_speedup(a, k, c), -k))


def step_time_s(target_step_s: float, k: int, c: float) -> float:
    """One speculative step: k draft steps at c times the target's cost, then one target step."""
    return target_step_s * (k * c + 1.0)


def sample_accepted(rng: random.Random, p: float, k: int) -> int:
    """Draft tokens accepted in one step: leading successes of Bernoulli(p) trials, at most k."""
    accepted = 0
    while accepted < k and rng.random() < p:
        accepted += 1
    return accepted


@dataclass(frozen=True)
class PlannedChunk:
    offset_s: float  # send time after the request's arrival
    tokens: int
    accepted: int | None  # drafts accepted by the step behind this chunk; None for prefill and baseline


def plan_chunks(num_tokens: int, prefill_s: float, step_s: float, k: int, p: float, rng: random.Random) -> list[PlannedChunk]:
    """The chunks of one request: 1 token at prefill time, then one chunk per step.

    A speculative step emits accepted + 1 tokens (the +1 is the target's own token), truncated so the
    total is exactly ``num_tokens``; the step's acceptance is kept whole, as vLLM's counters count it.
    """
    if num_tokens < 1:
        return []
    chunks = [PlannedChunk(prefill_s, 1, None)]
    offset, left = prefill_s, num_tokens - 1
    while left > 0:
        offset += step_s
        accepted = sample_accepted(rng, p, k) if k else None
        tokens = min((accepted or 0) + 1, left)
        chunks.append(PlannedChunk(offset, tokens, accepted))
        left -= tokens
    return chunks


def coalesce(plan: Sequence[PlannedChunk], every: int) -> list[list[PlannedChunk]]:
    """The planned chunks grouped as they go out: one group per event, ``every`` chunks a group
    (the last group may be shorter); one chunk a group when ``every`` is 0 or 1."""
    size = max(every, 1)
    return [list(plan[start : start + size]) for start in range(0, len(plan), size)]


def request_seed(seed: int, prompt: str, ordinal: int) -> int:
    """Stable across processes (unlike hash()): same seed, prompt and ordinal, same plan."""
    digest = hashlib.sha256(f"{seed}\0{ordinal}\0{prompt}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def _check_probability(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}")


# ---------------------------------------------------------------------------------------------
# Tokenizer: deterministic, and the generated text re-tokenizes to exactly the tokens generated

_TOKEN_RE = re.compile(r"\w+|[^\w\s]")


def tokenize(text: str) -> list[int]:
    return [zlib.crc32(piece.encode()) % VOCAB_SIZE for piece in _TOKEN_RE.findall(text)]


def count_tokens(text: str) -> int:
    return len(_TOKEN_RE.findall(text))


def filler_text(start: int, tokens: int) -> str:
    """Tokens ``start`` .. ``start + tokens - 1`` of a completion: one word each, numbered by position."""
    return "".join(f" w{i}" for i in range(start, start + tokens))


SPLIT_EVERY = 5  # with split characters, tokens 3 and 4 of every 5 are one word opening with a 2-byte character


def token_text(position: int, planned: int, split: bool, eos: bool = False) -> str:
    """What the stream shows for token ``position`` of a ``planned``-token completion, as vLLM shows
    it: the end-of-sequence token (the last one, when ``eos``) shows nothing; with ``split``, a token
    that ends inside a character shows nothing and the next shows the whole word (vLLM's detokenizer
    holds back an unfinished UTF-8 character: tests/vllm_frames.py). The text still re-tokenizes to
    the tokens that carry text (``tokenize``: " ü7 w8" is two words), so /tokenize stays exact."""
    if eos and position == planned - 1:
        return ""
    held = split and position % SPLIT_EVERY == SPLIT_EVERY - 2 and position + 1 < planned - eos
    if held:
        return ""
    if split and position % SPLIT_EVERY == SPLIT_EVERY - 1 and position < planned - eos:
        return f" ü{position - 1} w{position}"
    return f" w{position}"


# ---------------------------------------------------------------------------------------------
# Settings


@dataclass(frozen=True)
class EmulatorProfile:
    served_model_name: str = "Qwen/Qwen3-32B"
    max_model_len: int = 1024
    target_step_s: float = 0.045
    prefill_base_s: float = 0.03
    prefill_s_per_token: float = 0.0002
    num_speculative_tokens: int = 0  # k; 0 is the baseline server
    draft_cost_ratio: float = 0.0  # c: draft step cost / target step cost
    acceptance: tuple[tuple[str, float], ...] = ()  # (marker, p): first marker found in the prompt wins
    default_acceptance: float = 0.7
    seed: int = 0
    legacy_gauges: bool = False  # vLLM V0's metrics instead of V1's
    # False: no spec-decode metric at all, as on Neuron's 0.9.1 image, whose V0 path speculates in
    # NeuronSpeculationCausalLM and reports no spec_decode_worker_metrics (issue 13; REFERENCE.md section 5).
    spec_metrics: bool = True
    ready_after_s: float = 0.0
    faults: Mapping[int, str] = field(default_factory=dict, hash=False)  # request ordinal -> fault kind
    stall_s: float = 30.0
    # > 1: every this many content chunks go out as one event, as a buffering server or proxy would
    # (tests the stream-acceptance self-check); 0 or 1: one event per engine step, as vLLM streams.
    coalesce_chunks: int = 0
    # Streams as vLLM sends them (tests/vllm_frames.py): a prompt containing a ``stop_at_once`` marker
    # is answered with the end-of-sequence token at once (a finish frame with empty text counting 1
    # token); one containing a ``split_characters`` marker gets a character split over two byte-level
    # tokens every SPLIT_EVERY tokens (an empty-text frame, then the character). Case-insensitive.
    stop_at_once: tuple[str, ...] = ()
    split_characters: tuple[str, ...] = ()
    # The batch limit (vLLM --max-num-seqs): at most this many sequences run, later arrivals queue.
    # 256 is vLLM's default (SchedulerConfig); default_profiles use the deployment's 4.
    max_num_seqs: int = 256
    # Requests one prefill step admits, the serving stack's (config/serving_stacks.py): None = as many as
    # there are free slots (vLLM V0, the reference stack), 1 on the vllm-neuron plugin (eagle3_profile).
    max_prefills_per_batch: int | None = None
    # With a deployment, step times come from the serving model (its k set from num_speculative_tokens),
    # times time_scale; without one, from the batch-independent fields above (target_step_s,
    # draft_cost_ratio, prefill_*), already scaled.
    deployment: sm.Deployment | None = None
    serving_profile: sm.Profile = field(default_factory=sm.writeup_profile)
    time_scale: float = 1.0

    def __post_init__(self) -> None:
        name = self.served_model_name
        _require(isinstance(name, str) and name, "served_model_name", "a non-empty string", name)
        _require(_is_int(self.max_model_len) and self.max_model_len >= 2, "max_model_len", "an integer >= 2", self.max_model_len)
        for field_name in ("target_step_s", "prefill_base_s", "prefill_s_per_token", "draft_cost_ratio", "ready_after_s", "stall_s"):
            value = getattr(self, field_name)
            _require(_is_number(value) and value >= 0, field_name, "a number >= 0", value)
        k = self.num_speculative_tokens
        _require(_is_int(k) and k >= 0, "num_speculative_tokens", "an integer >= 0 (0 = baseline)", k)
        _require(_is_int(self.seed), "seed", "an integer", self.seed)
        _require(_is_int(self.coalesce_chunks) and self.coalesce_chunks >= 0, "coalesce_chunks", "an integer >= 0", self.coalesce_chunks)
        _require(_is_int(self.max_num_seqs) and self.max_num_seqs >= 1, "max_num_seqs", "an integer >= 1", self.max_num_seqs)
        for name in ("stop_at_once", "split_characters"):
            markers = getattr(self, name)
            ok = isinstance(markers, tuple) and all(isinstance(m, str) and m.strip() for m in markers)
            _require(ok, name, "a tuple of non-empty prompt markers", markers)
        cap = self.max_prefills_per_batch
        _require(cap is None or (_is_int(cap) and cap >= 1), "max_prefills_per_batch", "None (no limit) or an integer >= 1", cap)
        _require(_is_number(self.time_scale) and self.time_scale > 0, "time_scale", "a number > 0", self.time_scale)
        _require(isinstance(self.serving_profile, sm.Profile), "serving_profile", "a serving-model Profile", self.serving_profile)
        if self.deployment is not None:
            _require(isinstance(self.deployment, sm.Deployment), "deployment", "a serving-model Deployment", self.deployment)
            ok = k == 0 or bool(self.deployment.method)
            _require(ok, "deployment", "a speculation method (draft or eagle3) when num_speculative_tokens > 0", self.deployment)
        _require(isinstance(self.legacy_gauges, bool), "legacy_gauges", "a bool", self.legacy_gauges)
        _require(isinstance(self.spec_metrics, bool), "spec_metrics", "a bool", self.spec_metrics)
        p = self.default_acceptance
        _require(_is_number(p) and 0 <= p <= 1, "default_acceptance", "a probability in [0, 1]", p)
        pairs = tuple(tuple(pair) if isinstance(pair, (tuple, list)) else (pair,) for pair in self.acceptance)
        for pair in pairs:
            ok = len(pair) == 2 and isinstance(pair[0], str) and pair[0] and _is_number(pair[1]) and 0 <= pair[1] <= 1
            _require(ok, "acceptance", "(marker, probability) pairs with a non-empty marker and a probability in [0, 1]", pair)
        object.__setattr__(self, "acceptance", pairs)
        object.__setattr__(self, "faults", validate_faults(self.faults))

    @property
    def speculative(self) -> bool:
        return self.num_speculative_tokens > 0

    @functools.cached_property
    def serving_deployment(self) -> sm.Deployment | None:
        """The deployment this profile serves (its k is the profile's), or None for the legacy model.
        Built once per profile (a frozen dataclass: nothing it derives from changes), not at every
        engine step (``with_k`` is a dataclasses.replace: 2.2 of a sweep simulation's 7.9 s)."""
        if self.deployment is None:
            return None
        return self.deployment.with_k(self.num_speculative_tokens)

    def decode_step_s(self, batch: int) -> float:
        """One engine decode step advancing ``batch`` sequences (k drafts and the verify, or one token).
        Pure in ``batch`` for a profile, so each batch size is computed once."""
        steps = self.__dict__.setdefault("_decode_step_s", {})  # a frozen dataclass's own cache, as cached_property keeps one
        if batch not in steps:
            deployment = self.serving_deployment
            if deployment is None:
                steps[batch] = step_time_s(self.target_step_s, self.num_speculative_tokens, self.draft_cost_ratio)
            else:
                steps[batch] = sm.decode_step(deployment, self.serving_profile, batch).total_s * self.time_scale
        return steps[batch]

    def prefill_step_s(self, prompt_tokens: Sequence[int]) -> float:
        """One prefill step over the prompts it admits."""
        deployment = self.serving_deployment
        if deployment is None:
            return self.prefill_base_s + self.prefill_s_per_token * sum(prompt_tokens)
        return sm.prefill_step(deployment, self.serving_profile, [max(n, 1) for n in prompt_tokens]).total_s * self.time_scale

    @property
    def step_s(self) -> float:
        """A decode step of one sequence alone."""
        return self.decode_step_s(1)

    def prefill_s(self, prompt_tokens: int) -> float:
        """A prefill step of one prompt alone."""
        return self.prefill_step_s([prompt_tokens])

    def marked(self, markers: tuple[str, ...], prompt: str) -> bool:
        """Whether ``prompt`` contains one of ``markers`` (case-insensitive, as acceptance_for)."""
        lowered = prompt.lower()
        return any(marker.lower() in lowered for marker in markers)

    def acceptance_for(self, prompt: str) -> float:
        """Case-insensitive: the first marker contained in the prompt gives p, else the default."""
        lowered = prompt.lower()
        return next((p for marker, p in self.acceptance if marker.lower() in lowered), self.default_acceptance)


def validate_faults(faults: Mapping[int, str]) -> dict[int, str]:
    checked = {}
    for ordinal, kind in dict(faults).items():
        _require(_is_int(ordinal) and ordinal >= 0, "faults", "keyed by request ordinals (integers >= 0)", ordinal)
        _require(kind in FAULT_KINDS, f"faults[{ordinal}]", f"one of {', '.join(FAULT_KINDS)}", kind)
        checked[ordinal] = kind
    return checked


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _require(ok: Any, name: str, allowed: str, value: Any) -> None:
    if not ok:
        raise ValueError(f"EmulatorProfile.{name} must be {allowed}; got {value!r}")


# Marker -> p for the prompt classes of the dataset fixtures: their own acceptance, so a per-class
# report shows classes apart (values in the range EAGLE/draft-model papers report per task).
CLASS_ACCEPTANCE = (
    ("Return only a JSON object", 0.9),  # structured output; first: its template wraps another class's prompt
    ("Following up on your answer", 0.66),  # multi-turn
    ("Translate the following", 0.58),  # translation
    ("Summarize the following", 0.7),  # summarization
    ("Answer the question", 0.62),  # question answering
    ("step by step", 0.78),  # math reasoning
    ("Use only the documents", 0.74),  # retrieval-augmented generation
    ("Complete the Python function", 0.82),  # code
)


def default_profiles(time_scale: float = 1.0) -> dict[str, EmulatorProfile]:
    """The two services of the write-up. ``time_scale`` < 1 shrinks every duration (for tests).

    Acceptance per test case (REFERENCE.md section 2): structured prompts high, open-ended low. The
    Shakespeare case has no marker: llmperf wraps every prompt in the same instruction, and sonnet
    lines share no sure word, so the default carries it. "a a a" comes last: it is the loosest marker.
    """
    if not _is_number(time_scale) or time_scale <= 0:
        raise ValueError(f"time_scale must be a number > 0, got {time_scale!r}")
    acceptance = (
        ("counting numbers from 1", 0.9),
        ("List numbers from one to twenty", 0.9),
        ("Output valid JSON with fixed keys", 0.87),
        ("hello world", 0.88),
        ("the cat sat on the mat", 0.6),
        ("Write a simple Python function skeleton", 0.55),
        # The dataset fixtures' classes (specbench/prompts/fixtures): each opens with its class's instruction.
        *CLASS_ACCEPTANCE,
        ("a a a", 0.93),
    )
    common = dict(
        target_step_s=0.045 * time_scale,
        prefill_base_s=0.03 * time_scale,
        prefill_s_per_token=0.0002 * time_scale,
        stall_s=30.0 * time_scale,
        acceptance=acceptance,
        default_acceptance=0.5,
        max_num_seqs=4,  # serving.max_num_seqs (config/model.py), the write-up's
        time_scale=time_scale,
        # The translation class's answers carry characters split over two byte-level tokens, as
        # accented and CJK text does on vLLM (empty-text frames that carry a token: issue 34).
        split_characters=("Translate the following",),
    )
    return {
        "qwen-vllm": EmulatorProfile(**common),
        "qwen-sd-vllm": EmulatorProfile(num_speculative_tokens=7, draft_cost_ratio=0.08, **common),
    }


EAGLE3_SERVICE = "qwen-eagle3-vllm"


def eagle3_profile(time_scale: float = 1.0, k: int = 5) -> EmulatorProfile:
    """An EAGLE3-head service (the vLLM-Neuron stack) beside the two of ``default_profiles``, for the
    three-way demo. Illustrative figures, not measurements: a one-layer head costs less per draft
    step than a 1.7B draft (c 0.03 against 0.08), and public Qwen3-32B heads report shorter
    acceptance than that draft (REFERENCE.md section 5), so each marker's acceptance is 0.1 lower.
    It exposes vLLM V1's counters, per position too, as that stack does (legacy_gauges off), and admits
    one prefill per step, as the plugin's NeuronScheduler does (max_prefills_per_batch = 1;
    config/serving_stacks.py cites it, tests/test_prefill_admission.py keeps the two equal)."""
    reference = default_profiles(time_scale)["qwen-sd-vllm"]
    acceptance = tuple((marker, round(max(p - 0.1, 0.0), 2)) for marker, p in reference.acceptance)
    return dataclasses_replace(
        reference,
        num_speculative_tokens=k,
        draft_cost_ratio=0.03,
        acceptance=acceptance,
        default_acceptance=round(reference.default_acceptance - 0.1, 2),
        legacy_gauges=False,
        max_prefills_per_batch=1,
    )


# ---------------------------------------------------------------------------------------------
# Ground truth


@dataclass
class TruthRecord:
    request_id: str
    ordinal: int
    endpoint: str  # "chat" or "completions"
    arrival_s: float  # time.perf_counter() when the handler started
    prompt_tokens: int
    max_tokens: int  # tokens planned: the request's max_tokens capped by the context left
    acceptance: float | None  # p used; None on the baseline server
    fault: str | None = None
    chat_template_kwargs: dict[str, Any] | None = None  # as the request sent them (Qwen3's enable_thinking)
    planned_offsets_s: list[float] = field(default_factory=list)
    chunk_offsets_s: list[float] = field(default_factory=list)  # each content chunk handed to the socket
    chunk_tokens: list[int] = field(default_factory=list)
    accepted_per_step: list[int] = field(default_factory=list)  # per speculative step sent, untruncated
    queued_s: float | None = None  # arrival -> the start of its prefill step (the wait for a slot and the step)
    steps: list[int] = field(default_factory=list)  # the engine steps (Emulator.steps) that produced its chunks
    e2e_s: float | None = None  # [DONE] handed to the socket; None if the stream never finished
    error: str = ""

    @property
    def ttft_s(self) -> float | None:
        return self.chunk_offsets_s[0] if self.chunk_offsets_s else None

    @property
    def output_tokens(self) -> int:
        return sum(self.chunk_tokens)

    @property
    def time_per_output_token_s(self) -> float | None:
        if self.ttft_s is None or self.e2e_s is None:
            return None
        return time_per_output_token(self.ttft_s, self.e2e_s, self.output_tokens)

    def to_dict(self) -> dict[str, Any]:
        derived = {"ttft_s": self.ttft_s, "output_tokens": self.output_tokens, "time_per_output_token_s": self.time_per_output_token_s}
        return {**asdict(self), **derived}


# ---------------------------------------------------------------------------------------------
# Metrics


@dataclass
class Counters:
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    emitted: int = 0  # V0: accepted + the bonus token, per step
    accepted_per_pos: list[int] = field(default_factory=list)
    prompt_tokens: int = 0
    generation_tokens: int = 0
    finished: int = 0


class _Collector(Collector):
    """Built at scrape time from plain counters, so a reset is just new zeros (and no _created series)."""

    def __init__(self, emulator: Emulator) -> None:
        self.emulator = emulator

    def collect(self) -> Iterator[Any]:
        em, profile = self.emulator, self.emulator.profile
        n, k, model = em.counters, profile.num_speculative_tokens, [profile.served_model_name]
        running = GaugeMetricFamily("vllm:num_requests_running", "Requests being generated.", labels=["model_name"])
        running.add_metric(model, em.running)
        yield running
        waiting = GaugeMetricFamily("vllm:num_requests_waiting", "Requests waiting to be processed.", labels=["model_name"])
        waiting.add_metric(model, len(em.engine.waiting))
        yield waiting
        success = CounterMetricFamily("vllm:request_success", "Finished requests.", labels=["model_name", "finish_reason"])
        success.add_metric([*model, "length"], n.finished)
        yield success
        yield _counter("vllm:prompt_tokens", "Prefill tokens processed.", model, n.prompt_tokens)
        yield _counter("vllm:generation_tokens", "Generation tokens processed.", model, n.generation_tokens)
        if not k or not profile.spec_metrics:
            return
        if profile.legacy_gauges:
            # vLLM V0 (engine/metrics.py, spec_decode/metrics.py): two gauges, absent until the first
            # report, and counters of accepted, draft and emitted tokens; no draft count, no positions.
            # efficiency = emitted / (speculated sequences * (k + 1)), the +1 being the bonus token.
            if n.draft_tokens:
                rate = n.accepted / n.draft_tokens
                yield _gauge("vllm:spec_decode_draft_acceptance_rate", "Speculative token acceptance rate.", model, rate)
                efficiency = n.emitted / (n.draft_tokens // k * (k + 1))
                yield _gauge("vllm:spec_decode_efficiency", "Speculative decoding system efficiency.", model, efficiency)
            yield _counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", model, n.accepted)
            yield _counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", model, n.draft_tokens)
            yield _counter("vllm:spec_decode_num_emitted_tokens", "Number of emitted tokens.", model, n.emitted)
            return
        yield _counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", model, n.drafts)
        yield _counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", model, n.draft_tokens)
        yield _counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", model, n.accepted)
        per_pos = CounterMetricFamily(
            "vllm:spec_decode_num_accepted_tokens_per_pos", "Accepted tokens per draft position.", labels=["model_name", "position"]
        )
        for position, value in enumerate(n.accepted_per_pos):
            per_pos.add_metric([*model, str(position)], value)
        yield per_pos


def _counter(name: str, doc: str, model: list[str], value: float) -> CounterMetricFamily:
    family = CounterMetricFamily(name, doc, labels=["model_name"])
    family.add_metric(model, value)
    return family


def _gauge(name: str, doc: str, model: list[str], value: float) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc, labels=["model_name"])
    family.add_metric(model, value)
    return family


# ---------------------------------------------------------------------------------------------
# The server


class _BadRequest(Exception):
    pass


def _error(status: int, message: str, kind: str) -> web.Response:
    """vLLM's ErrorResponse body."""
    return web.json_response({"object": "error", "message": message, "type": kind, "param": None, "code": status}, status=status)


def _prompt_text(body: dict[str, Any], chat: bool) -> str:
    if chat or "messages" in body:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise _BadRequest("'messages' must be a non-empty list of message objects")
        parts = []
        for message in messages:
            content = message.get("content") or ""
            if isinstance(content, list):  # OpenAI content parts
                content = " ".join(part.get("text", "") for part in content if isinstance(part, dict))
            parts.append(str(content))
        return "\n".join(parts)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise _BadRequest("'prompt' must be a string (batched or token-id prompts are not emulated)")
    return prompt


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens}


async def _sleep_until(deadline: float) -> None:
    """Absolute deadlines keep late wake-ups from adding up; each wake-up is 0-1 ms late (epoll's
    millisecond timeouts round up), never early."""
    delay = deadline - CLOCK()
    if delay > 0:
        await asyncio.sleep(delay)


@dataclass(frozen=True)
class StepRecord:
    """One engine step as the engine ran it: the ground truth of batching."""

    index: int
    kind: str  # "prefill" or "decode"
    start_s: float  # perf_counter at the step's start
    duration_s: float  # from the profile (decode_step_s / prefill_step_s of this step's batch)
    ordinals: tuple[int, ...]  # the requests it advanced
    tokens: tuple[int, ...]  # tokens each got (same order)
    running: int  # sequences holding a slot when it started
    waiting: int  # requests queued when it started

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s


@dataclass
class _Sequence:
    record: TruthRecord
    plan: list[PlannedChunk]  # tokens and acceptance per step, sampled at arrival (timing-independent)
    outbox: asyncio.Queue[PlannedChunk] | None  # None in a simulation (no stream)
    position: int = 0  # chunks produced
    paused_until: float = 0.0  # a stalled stream takes no part in steps until then
    aborted: bool = False

    @property
    def finished(self) -> bool:
        return self.position >= len(self.plan)


class Engine:
    """vLLM's continuous batching, on the emulator's loop.

    At most ``max_num_seqs`` sequences hold a slot; later arrivals wait in arrival order (FCFS). Each
    step either prefills waiting requests or advances every running sequence by one decode step, never
    both: vLLM V0's default scheduler "prioritizes prefills and doesn't batch prefill and decode to the
    same batch" (vLLM docs, Optimization and Tuning, Chunked Prefill; vllm/core/scheduler.py
    ``_schedule_default``), and the Neuron schedulers separate them too (NxD Inference compiles context
    encoding and token generation as separate graphs; the vllm-neuron plugin's NeuronScheduler does
    "prefill/decode separation", docs vllm-neuron/docs/design/vllm/neuron-scheduler). A prefill step
    admits as many waiting requests as there are free slots, at most the profile's
    ``max_prefills_per_batch`` (serving_model.admitted: one on the vllm-neuron plugin, so a burst of N
    takes N prefill steps). Every chunk of a step is handed to its stream at the step's end;
    back-to-back steps follow each other's deadlines, so late wake-ups do not add up.
    """

    def __init__(self, profile: EmulatorProfile) -> None:
        self.profile = profile
        self.waiting: list[_Sequence] = []
        self.running: list[_Sequence] = []
        self.steps: list[StepRecord] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def submit(self, record: TruthRecord, plan: list[PlannedChunk]) -> _Sequence:
        sequence = _Sequence(record, plan, asyncio.Queue())
        self.waiting.append(sequence)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())
        self._wake.set()
        return sequence

    def abort(self, sequence: _Sequence) -> None:
        """The stream ended early (a fault, or the client left): free its slot."""
        sequence.aborted = True
        for queue in (self.waiting, self.running):
            if sequence in queue:
                queue.remove(sequence)
        self._wake.set()

    def pause(self, sequence: _Sequence, seconds: float) -> None:
        sequence.paused_until = CLOCK() + seconds

    def _decodable(self, now: float) -> list[_Sequence]:
        return [s for s in self.running if s.paused_until <= now]

    def schedule(self, now: float) -> tuple[str, list[_Sequence], float] | None:
        """The next step's kind, batch and duration (moving the admitted requests into slots), or None
        when there is nothing to run. Prefills first: waiting requests get the free slots, as many as
        the stack admits per step (serving_model.admitted)."""
        free = max(self.profile.max_num_seqs - len(self.running), 0)
        admit = sm.admitted(len(self.waiting), free, self.profile.max_prefills_per_batch)
        if admit:
            batch, self.waiting = self.waiting[:admit], self.waiting[admit:]
            self.running += batch
            return "prefill", batch, self.profile.prefill_step_s([s.record.prompt_tokens for s in batch])
        batch = self._decodable(now)
        return ("decode", batch, self.profile.decode_step_s(len(batch))) if batch else None

    def complete(self, kind: str, batch: list[_Sequence], start: float, duration: float, waiting: int) -> list[_Sequence]:
        """The step's end: each sequence of the batch gets its next planned chunk; returns those done."""
        produced, done = [], []
        for s in batch:
            if s.aborted or s.finished:
                continue
            chunk = s.plan[s.position]
            s.position += 1
            s.record.planned_offsets_s.append(start + duration - s.record.arrival_s)
            s.record.steps.append(len(self.steps))
            if s.outbox is not None:
                s.outbox.put_nowait(chunk)
            produced.append((s.record.ordinal, chunk.tokens))
            if s.finished and s in self.running:
                self.running.remove(s)
                done.append(s)
        ordinals, tokens = tuple(o for o, _ in produced), tuple(t for _, t in produced)
        self.steps.append(StepRecord(len(self.steps), kind, start, duration, ordinals, tokens, len(self.running) + len(done), waiting))
        return done

    async def _run(self) -> None:
        previous_end: float | None = None  # the last step's deadline while the engine stays busy
        idle_since = -math.inf  # the engine starts with its first request
        while True:
            now = CLOCK()
            step = self.schedule(now)
            if step is None:
                if previous_end is not None:
                    idle_since, previous_end = previous_end, None
                await self._idle(now)
                continue
            kind, batch, duration = step
            if previous_end is not None:  # busy: this step follows the last one's deadline
                start = min(previous_end, now)
            elif kind == "prefill":  # idle: the request is scheduled as it arrives (not after the handler's parsing)
                start = min(max(idle_since, *(s.record.arrival_s for s in batch)), now)
            else:
                start = now
            if kind == "prefill":
                for s in batch:
                    s.record.queued_s = start - s.record.arrival_s
            waiting = len(self.waiting)
            await _sleep_until(start + duration)
            self.complete(kind, batch, start, duration, waiting)
            previous_end = start + duration

    async def _idle(self, now: float) -> None:
        """Nothing to run: sleep until an arrival, an abort, or a paused sequence's resumption."""
        self._wake.clear()
        resume = [s.paused_until for s in self.running if s.paused_until > now]
        timeout = min(resume) - now if resume else None
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout)


def simulate_closed_loop(
    profile: EmulatorProfile, prompts: Sequence[str], clients: int, requests: int, max_tokens: int
) -> tuple[list[TruthRecord], list[StepRecord]]:
    """The engine on a virtual clock, without sockets: ``clients`` closed-loop clients (each sends its
    next request the moment its last one ends) send ``requests`` requests in turn over ``prompts``.
    Same scheduling (``Engine.schedule``/``complete``), same plans (seeded by prompt and ordinal) as
    the server; every timestamp is exact, so what it measures is the engine's behaviour alone."""
    if clients < 1 or requests < 1 or max_tokens < 1 or not prompts:
        raise ValueError("simulate_closed_loop needs clients, requests and max_tokens >= 1 and a prompt")
    engine = Engine(profile)
    records: list[TruthRecord] = []
    now = 0.0

    def send(at: float) -> None:
        ordinal = len(records)
        text = prompts[ordinal % len(prompts)]
        tokens = count_tokens(text)
        p = profile.acceptance_for(text) if profile.speculative else None
        planned = min(max_tokens, profile.max_model_len - tokens)
        plan = plan_chunks(
            planned, 0.0, 0.0, profile.num_speculative_tokens, p or 0.0, random.Random(request_seed(profile.seed, text, ordinal))
        )
        record = TruthRecord(f"sim-{ordinal}", ordinal, "completions", at, tokens, planned, p)
        records.append(record)
        engine.waiting.append(_Sequence(record, plan, None))

    for _ in range(min(clients, requests)):
        send(now)
    while (stepped := simulate_step(engine, now)) is not None:
        now, done = stepped
        for _ in done:
            if len(records) < requests:
                send(now)
    return records, engine.steps


def simulate_step(engine: Engine, now: float) -> tuple[float, list[_Sequence]] | None:
    """One engine step on the virtual clock at ``now``: the time after it and the sequences it
    finished (their truth records completed as the server writes them), or None when nothing is
    scheduled. The closed loop above and the open loop of emulator/sweep_truth.py share it."""
    step = engine.schedule(now)
    if step is None:
        return None
    kind, batch, duration = step
    if kind == "prefill":
        for s in batch:
            s.record.queued_s = now - s.record.arrival_s
    done = engine.complete(kind, batch, now, duration, len(engine.waiting))
    now += duration
    for s in done:
        s.record.chunk_offsets_s = list(s.record.planned_offsets_s)
        s.record.chunk_tokens = [chunk.tokens for chunk in s.plan]
        s.record.accepted_per_step = [chunk.accepted for chunk in s.plan if chunk.accepted is not None]
        s.record.e2e_s = now - s.record.arrival_s
    return now, done


class Emulator:
    """One emulated vLLM server: the aiohttp application and its state. Touch state on its loop only."""

    def __init__(self, profile: EmulatorProfile) -> None:
        self.profile = profile
        self.truth: list[TruthRecord] = []
        self.faults = dict(profile.faults)
        self.counters = self._zero_counters()
        self.engine = Engine(profile)
        self.started_s = CLOCK()
        self._ordinals = itertools.count()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Collector(self))
        self.app = web.Application(middlewares=[self._readiness])
        self.app.on_startup.append(self._on_startup)
        self.app.add_routes(
            [
                web.get("/health", self._health),
                web.get("/v1/models", self._models),
                web.post("/v1/chat/completions", self._chat),
                web.post("/v1/completions", self._completions),
                web.post("/tokenize", self._tokenize),
                web.get("/metrics", self._metrics),
                web.get("/emulator/truth", self._truth),
                web.get("/emulator/steps", self._steps),
            ]
        )

    @property
    def running(self) -> int:
        """Sequences holding a slot (vllm:num_requests_running)."""
        return len(self.engine.running)

    @property
    def steps(self) -> list[StepRecord]:
        return self.engine.steps

    def reset_counters(self) -> None:
        """What a server restart does to Prometheus counters."""
        self.counters = self._zero_counters()

    def set_faults(self, faults: Mapping[int, str]) -> None:
        self.faults = validate_faults(faults)

    def start_loading(self) -> float:
        """Begin loading now, as a restarted vLLM server does: the API answers 503 for the profile's
        ``ready_after_s`` from here (/metrics at once). One attribute written, so safe from any thread.
        When it began, on CLOCK."""
        self.started_s = CLOCK()
        return self.started_s

    def _zero_counters(self) -> Counters:
        return Counters(accepted_per_pos=[0] * self.profile.num_speculative_tokens)

    async def _on_startup(self, app: web.Application) -> None:
        self.started_s = CLOCK()

    @web.middleware
    async def _readiness(self, request: web.Request, handler: Callable[[web.Request], Any]) -> web.StreamResponse:
        # /metrics and the emulator's own routes answer at once; the API waits as a loading server would.
        always = request.path == "/metrics" or request.path.startswith("/emulator/")
        if not always and CLOCK() - self.started_s < self.profile.ready_after_s:
            return _error(503, "server is starting", "ServiceUnavailableError")
        return await handler(request)

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def _models(self, request: web.Request) -> web.Response:
        name = self.profile.served_model_name
        card = {"id": name, "object": "model", "created": int(time.time()), "owned_by": "vllm", "root": name, "parent": None}
        card["max_model_len"] = self.profile.max_model_len
        return web.json_response({"object": "list", "data": [card]})

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(self.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _truth(self, request: web.Request) -> web.Response:
        return web.json_response([record.to_dict() for record in self.truth])

    async def _steps(self, request: web.Request) -> web.Response:
        return web.json_response([{**asdict(step), "end_s": step.end_s} for step in self.engine.steps])

    def _check_model(self, body: dict[str, Any]) -> web.Response | None:
        model = body.get("model")
        if model is not None and model != self.profile.served_model_name:
            return _error(404, f"The model `{model}` does not exist.", "NotFoundError")
        return None

    async def _read_body(self, request: web.Request) -> dict[str, Any]:
        try:
            body = await request.json()
        except ValueError:
            raise _BadRequest("request body is not valid JSON") from None
        if not isinstance(body, dict):
            raise _BadRequest("request body must be a JSON object")
        return body

    async def _tokenize(self, request: web.Request) -> web.Response:
        try:
            body = await self._read_body(request)
            text = _prompt_text(body, chat=False)
        except _BadRequest as exc:
            return _error(400, str(exc), "BadRequestError")
        if (missing := self._check_model(body)) is not None:
            return missing
        tokens = tokenize(text)
        return web.json_response({"count": len(tokens), "max_model_len": self.profile.max_model_len, "tokens": tokens, "token_strs": None})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=True)

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=False)

    async def _generate(self, request: web.Request, chat: bool) -> web.StreamResponse:
        arrival = CLOCK()
        try:
            body = await self._read_body(request)
            text = _prompt_text(body, chat)
            max_tokens = body.get("max_completion_tokens") if chat else None
            max_tokens = body.get("max_tokens") if max_tokens is None else max_tokens
            max_tokens = DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens
            if not _is_int(max_tokens) or max_tokens < 1:
                raise _BadRequest(f"max_tokens must be an integer >= 1, got {max_tokens!r}")
            if body.get("stream") is not True:
                raise _BadRequest('the emulator only streams: set "stream": true')
            options = body.get("stream_options") or {}
            if not isinstance(options, dict):
                raise _BadRequest("'stream_options' must be an object")
            template_kwargs = body.get("chat_template_kwargs")
            if template_kwargs is not None and not isinstance(template_kwargs, dict):
                raise _BadRequest("'chat_template_kwargs' must be an object")
        except _BadRequest as exc:
            return _error(400, str(exc), "BadRequestError")
        if (missing := self._check_model(body)) is not None:
            return missing
        profile, prompt_tokens = self.profile, count_tokens(text)
        if prompt_tokens >= profile.max_model_len:
            message = f"This model's maximum context length is {profile.max_model_len} tokens; the prompt has {prompt_tokens}."
            return _error(400, message, "BadRequestError")

        ordinal = next(self._ordinals)
        p = profile.acceptance_for(text) if profile.speculative else None
        rng = random.Random(request_seed(profile.seed, text, ordinal))
        planned = min(max_tokens, profile.max_model_len - prompt_tokens)
        eos = profile.marked(profile.stop_at_once, text)
        planned = 1 if eos else planned  # its first token is the end of sequence
        # Tokens and acceptance of every step, sampled now: the same request plays the same chunks
        # whatever the load (offsets come from the engine; the plan's own offsets are unused).
        plan = plan_chunks(planned, 0.0, 0.0, profile.num_speculative_tokens, p or 0.0, rng)
        record = TruthRecord(
            request_id=request.headers.get("X-Request-Id") or uuid.uuid4().hex,
            ordinal=ordinal,
            endpoint="chat" if chat else "completions",
            arrival_s=arrival,
            prompt_tokens=prompt_tokens,
            max_tokens=planned,
            acceptance=p,
            fault=self.faults.get(ordinal),
            chat_template_kwargs=template_kwargs,
        )
        self.truth.append(record)
        if record.fault == "http_500":
            record.error = "injected http_500"
            return _error(500, "injected fault: internal server error", "InternalServerError")
        include_usage = bool(options.get("include_usage"))
        stream = _Stream(request, record, chat, include_usage, include_usage and bool(options.get("continuous_usage_stats")))
        stream.split, stream.eos = profile.marked(profile.split_characters, text), eos
        sequence = self.engine.submit(record, plan)
        try:
            await self._play(stream, sequence)
        except ConnectionError:
            record.error = "client disconnected"
        except asyncio.CancelledError:  # aiohttp cancels the handler when the client goes away
            record.error = "client disconnected"
            raise
        finally:
            self.engine.abort(sequence)  # a no-op once it finished
        return stream.response

    async def _play(self, stream: _Stream, sequence: _Sequence) -> None:
        """Write the chunks the engine produces for this request, as they come (each at its step's end)."""
        record, profile, plan = stream.record, self.profile, sequence.plan
        await stream.open(self.profile.served_model_name)
        self.counters.prompt_tokens += record.prompt_tokens
        if record.fault == "empty_completion":  # the role chunk still comes when the first token would
            await sequence.outbox.get()
            self.engine.abort(sequence)
            await stream.role()
            await stream.done()
            self.counters.finished += 1
            return
        groups = coalesce(plan, profile.coalesce_chunks)
        fault_at = min(FAULT_AFTER_CHUNKS, max(1, len(groups) // 2))
        for index in range(len(groups) + 1):
            if index == fault_at and record.fault == "drop_mid_stream":
                self.engine.abort(sequence)
                stream.request.transport.close()  # type: ignore[union-attr]  # FIN without the chunked terminator
                record.error = "injected drop_mid_stream"
                return
            if index == fault_at and record.fault == "stall":
                self.engine.pause(sequence, profile.stall_s)  # out of the batch meanwhile: later chunks come later
                await asyncio.sleep(profile.stall_s)
            if index == fault_at and record.fault == "malformed_sse":
                await stream.response.write(b"data: {not json\n\n")
            if index == len(groups):
                break
            group = [await sequence.outbox.get() for _ in groups[index]]
            for chunk in group:
                self._count_step(record, chunk)  # before the write: a cancelled write still left the engine
            await stream.content(sum(chunk.tokens for chunk in group), finish=index == len(groups) - 1)
        await stream.done()
        self.counters.finished += 1

    def _count_step(self, record: TruthRecord, chunk: PlannedChunk) -> None:
        n = self.counters
        n.generation_tokens += chunk.tokens
        if chunk.accepted is None:
            return
        record.accepted_per_step.append(chunk.accepted)
        n.drafts += 1
        n.draft_tokens += self.profile.num_speculative_tokens
        n.accepted += chunk.accepted
        n.emitted += chunk.accepted + 1
        for position in range(chunk.accepted):
            n.accepted_per_pos[position] += 1


class _Stream:
    """Writes one server-sent-event stream in vLLM's chunk shapes and records what was sent."""

    def __init__(self, request: web.Request, record: TruthRecord, chat: bool, include_usage: bool, continuous: bool) -> None:
        self.request, self.record, self.chat = request, record, chat
        self.include_usage, self.continuous = include_usage, continuous
        self.response = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"})
        self.response.headers["X-Request-Id"] = record.request_id
        self.completion_tokens = 0
        self.role_sent = False
        self.split = False  # characters split over two tokens (token_text)
        self.eos = False  # the last token is the end of sequence: no text, finish_reason "stop"

    async def open(self, model: str) -> None:
        prefix = "chatcmpl" if self.chat else "cmpl"
        self.head = {
            "id": f"{prefix}-{self.record.request_id}",
            "object": "chat.completion.chunk" if self.chat else "text_completion",
            "created": int(time.time()),
            "model": model,
        }
        await self.response.prepare(self.request)

    def _event(self, choices: list[dict[str, Any]], usage: bool) -> bytes:
        payload = {**self.head, "choices": choices}
        if usage:
            payload["usage"] = _usage(self.record.prompt_tokens, self.completion_tokens)
        return f"data: {jsonfile.dumps(payload, separators=(',', ':'))}\n\n".encode()

    async def role(self) -> None:
        """Chat only: vLLM's first chunk carries the role and no text."""
        if self.chat and not self.role_sent:
            self.role_sent = True
            choice = {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
            await self.response.write(self._event([choice], self.continuous))

    async def content(self, tokens: int, finish: bool) -> None:
        await self.role()
        start, planned = self.completion_tokens, self.record.max_tokens
        text = "".join(token_text(position, planned, self.split, self.eos) for position in range(start, start + tokens))
        self.completion_tokens += tokens
        reason = ("stop" if self.eos else "length") if finish else None
        if self.chat:
            choice = {"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": reason}
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": reason, "stop_reason": None}
        data = self._event([choice], self.continuous)
        # Stamped as the chunk is handed to the socket (sent at once unless the socket is backed up):
        # never after the client reads it, as the end of the await can be.
        self.record.chunk_offsets_s.append(CLOCK() - self.record.arrival_s)
        self.record.chunk_tokens.append(tokens)
        await self.response.write(data)

    async def done(self) -> None:
        if self.include_usage:
            await self.response.write(self._event([], True))
        sent = CLOCK()
        await self.response.write(b"data: [DONE]\n\n")
        self.record.e2e_s = sent - self.record.arrival_s


# ---------------------------------------------------------------------------------------------
# Running it


class EmulatorServer:
    """An emulator on 127.0.0.1 in a background thread with its own event loop.

    ``port=0`` picks a free port. Methods are safe to call from any thread: they run on the loop.
    """

    def __init__(self, profile: EmulatorProfile, port: int = 0, host: str = "127.0.0.1") -> None:
        self.emulator = Emulator(profile)
        self.host, self.port = host, port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._failure: BaseException | None = None

    @property
    def profile(self) -> EmulatorProfile:
        return self.emulator.profile

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def truth(self) -> list[TruthRecord]:
        """A snapshot: copies, taken on the loop so no record is half-written."""
        return self._call(lambda: copy.deepcopy(self.emulator.truth))

    @property
    def counters(self) -> Counters:
        return self._call(lambda: copy.deepcopy(self.emulator.counters))

    def reset_counters(self) -> None:
        self._call(self.emulator.reset_counters)

    def set_faults(self, faults: Mapping[int, str]) -> None:
        self._call(lambda: self.emulator.set_faults(faults))

    def start(self) -> EmulatorServer:
        self._thread = threading.Thread(target=self._run, name=f"emulator-{self.profile.served_model_name}", daemon=True)
        self._thread.start()
        self._started.wait()
        if self._failure is not None:
            raise self._failure
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()

    def __enter__(self) -> EmulatorServer:
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    def _run(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        # Cancel handlers whose client left (a stalled stream must not outlive its client); a short
        # shutdown grace, since nothing here is worth waiting for.
        runner = web.AppRunner(self.emulator.app, handler_cancellation=True, shutdown_timeout=0.5, access_log=None)
        try:
            loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, self.host, self.port)
            loop.run_until_complete(site.start())
            self.port = runner.addresses[0][1]
        except BaseException as exc:  # reported by start()
            self._failure = exc
            self._started.set()
            loop.run_until_complete(runner.cleanup())
            loop.close()
            return
        self._started.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(runner.cleanup())
            loop.close()

    def _call(self, fn: Callable[[], Any]) -> Any:
        if self._loop is None or not self._loop.is_running():
            return fn()  # not started or stopped: nothing else touches the state
        done: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def run() -> None:
            try:
                done.set_result(fn())
            except BaseException as exc:
                done.set_exception(exc)

        self._loop.call_soon_threadsafe(run)
        return done.result(timeout=10)


@contextlib.contextmanager
def run_in_thread(profile: EmulatorProfile, port: int = 0) -> Iterator[EmulatorServer]:
    with EmulatorServer(profile, port) as server:
        yield server


def serve_forever(
    profiles: Mapping[str, EmulatorProfile],
    host: str = "127.0.0.1",
    ports: Sequence[int] = (8000, 8001),
    stop: threading.Event | None = None,
) -> None:
    """Serve each profile on its port (in order) until Ctrl-C or ``stop`` is set; prints the URLs.

    All servers share one event loop in this thread: separate threads would contend for the GIL
    (5 ms switch interval), which a client would measure as server latency.
    """
    if len(ports) != len(profiles):
        raise ValueError(f"need one port per profile: {len(profiles)} profiles, {len(ports)} ports")
    stop = stop or threading.Event()

    async def serve() -> None:
        runners = []
        try:
            for (name, profile), port in zip(profiles.items(), ports, strict=True):
                runner = web.AppRunner(Emulator(profile).app, handler_cancellation=True, shutdown_timeout=0.5, access_log=None)
                runners.append(runner)
                await runner.setup()
                await web.TCPSite(runner, host, port).start()
                print(f"{name}: http://{host}:{runner.addresses[0][1]}/v1", flush=True)
            while not stop.is_set():
                await asyncio.sleep(0.2)
        finally:
            for runner in runners:
                await runner.cleanup()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())


def with_speculation(profile: EmulatorProfile, k: int | None, draft_cost_ratio: float | None) -> EmulatorProfile:
    """A speculative profile with another k and/or draft cost (the baseline is left as it is)."""
    if not profile.speculative:
        return profile
    if k is not None and (not _is_int(k) or k < 1):
        raise ValueError(f"--speculative-k must be an integer >= 1, got {k!r}")
    changes = {"num_speculative_tokens": k, "draft_cost_ratio": draft_cost_ratio}
    return dataclasses_replace(profile, **{key: value for key, value in changes.items() if value is not None})


def serving_setup(path: str = "") -> tuple[sm.Deployment, sm.Profile]:
    """The deployment and profile the serving model runs with: a profile file's (``predict
    --calibrate``), else the write-up's calibration of the default deployment."""
    if not path:
        return sm.WRITEUP_DEPLOYMENT, sm.writeup_profile()
    with open(path, encoding="utf-8") as handle:
        try:
            data = json.load(handle)
        except json.JSONDecodeError as error:
            raise ValueError(f"not JSON ({error})") from None
    profile, deployment = sm.read_profile_document(data, sm.writeup_profile())
    return deployment or sm.WRITEUP_DEPLOYMENT, profile


def on_serving_model(profile: EmulatorProfile, deployment: sm.Deployment, serving: sm.Profile) -> EmulatorProfile:
    """The same service with step times from the serving model. A speculative profile keeps its k
    (the deployment gets a draft method if it had none); max_num_seqs stays the profile's."""
    if profile.speculative and not deployment.method:
        deployment = sm.Deployment(**{**asdict(deployment), "method": "draft", "draft": sm.QWEN3_1_7B.name, "k": 1})
    return dataclasses_replace(profile, deployment=deployment, serving_profile=serving)


def main_emulate(argv: Sequence[str] | None = None, stop: threading.Event | None = None) -> int:
    """``emulate``: the baseline and speculative emulators on two local ports, until Ctrl-C."""
    parser = OneLineParser(prog="emulate", description="Serve emulated vLLM endpoints (baseline and speculative) locally.")
    parser.add_argument("--baseline-port", type=listen_port, default=8000)
    parser.add_argument("--speculative-port", type=listen_port, default=8001)
    parser.add_argument("--time-scale", type=positive_float, default=1.0, help="multiply every duration (0.1 runs ten times faster)")
    parser.add_argument("--seed", type=ascii_int, default=0)
    parser.add_argument("--legacy-gauges", action="store_true", help="expose vLLM V0's speculative metrics")
    parser.add_argument(
        "--no-spec-metrics",
        action="store_true",
        help="expose no speculative metric, as Neuron's 0.9.1 image (acceptance then comes from the stream)",
    )
    parser.add_argument(
        "--coalesce-chunks",
        type=ascii_int,
        default=0,
        help="send every N content chunks as one event, as a buffering proxy would (0: one per step)",
    )
    parser.add_argument(
        "--stop-at-once",
        action="append",
        default=[],
        metavar="MARKER",
        help="answer a prompt containing MARKER with the end-of-sequence token at once: a 1-token completion (repeatable)",
    )
    parser.add_argument(
        "--only", choices=("baseline", "speculative"), help="serve one of the two (run two processes to measure at high load)"
    )
    # Sweeps (scripts/demo_sweep.py): one speculative server per k, each with the same draft cost.
    parser.add_argument("--speculative-k", type=ascii_int, default=None, help="the speculative server's k (default: 7)")
    parser.add_argument("--draft-cost-ratio", type=ascii_float, default=None, help="c, a draft step's cost in target steps (default: 0.08)")
    # Batching (issue 26): every emulator batches; step times come from the serving model with one of these two.
    parser.add_argument("--max-num-seqs", type=positive_int, default=None, help="the batch limit, as vLLM's --max-num-seqs (default: 4)")
    parser.add_argument(
        "--serving-model",
        action="store_true",
        help="step times from the serving model (Qwen3-32B on trn2 TP 32, the write-up's calibration) instead of fixed ones",
    )
    parser.add_argument(
        "--profile",
        default="",
        metavar="FILE",
        help="step times from the serving model with this profile (written by specbench predict --calibrate)",
    )
    args = parser.parse_args(argv)
    if args.time_scale <= 0:
        parser.error("--time-scale must be > 0")
    if args.coalesce_chunks < 0:
        parser.error("--coalesce-chunks must be >= 0")
    if args.max_num_seqs is not None and args.max_num_seqs < 1:
        parser.error(f"--max-num-seqs must be an integer >= 1, got {args.max_num_seqs}")
    if any(not marker.strip() for marker in args.stop_at_once):
        parser.error("--stop-at-once must be a non-empty prompt marker")
    serving = None
    if args.profile or args.serving_model:
        if args.draft_cost_ratio is not None:
            parser.error("--draft-cost-ratio sets the fixed-step profile; with the serving model the draft's cost is its profile's")
        try:
            serving = serving_setup(args.profile)
        except (OSError, ValueError) as error:
            parser.error(f"--profile {args.profile}: {error}")
    profiles = {
        name: dataclasses_replace(
            profile,
            seed=args.seed,
            legacy_gauges=args.legacy_gauges and profile.speculative,
            spec_metrics=not args.no_spec_metrics,
            coalesce_chunks=args.coalesce_chunks,
            stop_at_once=tuple(args.stop_at_once),
            **({} if args.max_num_seqs is None else {"max_num_seqs": args.max_num_seqs}),
        )
        for name, profile in default_profiles(args.time_scale).items()
    }
    if serving is not None:
        profiles = {name: on_serving_model(profile, *serving) for name, profile in profiles.items()}
    try:
        profiles = {name: with_speculation(profile, args.speculative_k, args.draft_cost_ratio) for name, profile in profiles.items()}
    except ValueError as error:
        parser.error(str(error))
    ports = dict(zip(profiles, (args.baseline_port, args.speculative_port), strict=True))
    if args.only:
        kept = [name for name, profile in profiles.items() if profile.speculative == (args.only == "speculative")]
        profiles, ports = {name: profiles[name] for name in kept}, {name: ports[name] for name in kept}
    serve_forever(profiles, "127.0.0.1", tuple(ports.values()), stop)
    return 0
