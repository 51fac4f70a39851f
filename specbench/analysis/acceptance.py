"""Draft acceptance of a speculative vLLM server over one test case, from two reads of ``/metrics``.

Pure functions: the caller fetches the Prometheus text before and after a test case;
``parse_spec_decode`` reads each, ``acceptance_between`` differences them.

Where the figures come from (checked against vLLM's source):
- V1 engines expose counters ``vllm:spec_decode_num_drafts``, ``..._num_draft_tokens``,
  ``..._num_accepted_tokens`` and ``..._num_accepted_tokens_per_pos{position="i"}`` (exposed with
  ``_total``; labels ``model_name`` and ``engine``). Differencing them gives this test case's figures.
- V0 engines (Neuron's 0.9.1 image is a V0 fork) expose gauges ``vllm:spec_decode_draft_acceptance_rate``
  and ``vllm:spec_decode_efficiency``. They also expose accepted/draft-token counters, but V0's
  Prometheus logger increments those by the collector's *cumulative* totals on every logging interval
  (vllm/engine/metrics.py with vllm/spec_decode/metrics.py), so their differences mean nothing: without
  the V1 ``num_drafts`` counter we difference no counter and fall back to the gauges. Whether Neuron's
  fused speculation fills any of these is unverified; absence is reported, never read as 0.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

# Sample names as exposed: prometheus_client strips ``_total`` from a counter's *family* name, so
# match samples, never families (that also leaves out the ``_created`` samples).
DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED_TOKENS = "vllm:spec_decode_num_accepted_tokens_total"
ACCEPTED_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
ACCEPTANCE_RATE_GAUGE = "vllm:spec_decode_draft_acceptance_rate"
EFFICIENCY_GAUGE = "vllm:spec_decode_efficiency"

COUNTERS = (DRAFTS, DRAFT_TOKENS, ACCEPTED_TOKENS, ACCEPTED_PER_POS)
GAUGES = (ACCEPTANCE_RATE_GAUGE, EFFICIENCY_GAUGE)

SOURCE_COUNTERS = "counters"
SOURCE_GAUGES = "gauges"
SOURCE_MISSING = "missing"

_SCALARS = {DRAFTS: "num_drafts", DRAFT_TOKENS: "num_draft_tokens", ACCEPTED_TOKENS: "num_accepted_tokens"}
_GAUGE_FIELDS = {ACCEPTANCE_RATE_GAUGE: "draft_acceptance_rate", EFFICIENCY_GAUGE: "efficiency"}
_FIELD_OF = {**_SCALARS, ACCEPTED_PER_POS: "accepted_per_pos", **_GAUGE_FIELDS}


@dataclass(frozen=True)
class SpecDecodeSnapshot:
    """One read of the speculative-decoding metrics. None = the metric was absent (absent is not 0)."""

    num_drafts: float | None = None
    num_draft_tokens: float | None = None
    num_accepted_tokens: float | None = None
    accepted_per_pos: dict[int, float] | None = None  # position -> accepted tokens
    draft_acceptance_rate: float | None = None  # V0 gauge
    efficiency: float | None = None  # V0 gauge
    # model_name labels of speculative-decoding series left out because they name another model:
    # present but not ours is a different finding from absent (a --model that differs from the
    # server's --served-model-name).
    other_models: tuple[str, ...] = ()

    def has(self, metric: str) -> bool:
        return getattr(self, _FIELD_OF[metric]) is not None


@dataclass(frozen=True)
class Acceptance:
    """Draft acceptance over one interval. Values are None when they cannot be known, never 0."""

    source: str  # "counters" | "gauges" | "missing"
    acceptance_rate: float | None = None  # accepted / drafted tokens, 0..1
    mean_acceptance_length: float | None = None  # tokens per target step, bonus token included
    per_position: tuple[float, ...] | None = None  # [i] = share of drafts whose position i was accepted
    efficiency: float | None = None  # V0 gauge only
    drafts: float | None = None  # interval increases of the counters
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    counter_reset: bool = False  # a counter went down: the server restarted between the reads
    missing: tuple[str, ...] = ()  # metrics the chosen source needed but at least one read lacked
    reason: str = ""  # why the values are None
    note: str = ""  # caveats on values that are present

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["per_position"] = None if self.per_position is None else list(self.per_position)
        data["missing"] = list(self.missing)
        return data


def parse_spec_decode(text: str, model_name: str | None = None) -> SpecDecodeSnapshot:
    """Read the speculative-decoding metrics from Prometheus text exposition.

    Series are kept only for ``model_name`` when given; counters are summed over the remaining
    series (one per engine), gauges averaged. A NaN sample counts as absent: V0 sets its acceptance
    gauge to NaN before its first draft. Raises ValueError if the text is not Prometheus text.
    """
    sums: dict[str, float] = {}
    gauges: dict[str, list[float]] = {}
    per_pos: dict[int, float] = {}
    others: set[str] = set()
    for name, labels, value in _samples(text):
        if name not in _FIELD_OF:
            continue
        if model_name is not None and labels.get("model_name") != model_name:
            others.add(labels.get("model_name", "(no model_name label)"))
            continue
        if math.isnan(value):
            continue
        if name in _GAUGE_FIELDS:
            gauges.setdefault(name, []).append(value)
        elif name == ACCEPTED_PER_POS:
            position = _position(labels)
            per_pos[position] = per_pos.get(position, 0.0) + value
        else:
            sums[name] = sums.get(name, 0.0) + value
    fields: dict[str, Any] = {_SCALARS[name]: total for name, total in sums.items()}
    fields.update({_GAUGE_FIELDS[name]: sum(values) / len(values) for name, values in gauges.items()})
    if per_pos:
        fields["accepted_per_pos"] = dict(sorted(per_pos.items()))
    return SpecDecodeSnapshot(**fields, other_models=tuple(sorted(others)))


def _samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    # The parser is lazy and raises whatever it trips on; turn all of it into one clear error.
    try:
        return [(s.name, s.labels, s.value) for family in text_string_to_metric_families(text) for s in family.samples]
    except (ValueError, TypeError, IndexError, KeyError) as error:
        raise ValueError(f"not Prometheus text exposition (a /metrics body was expected): {error}") from error


def _position(labels: dict[str, str]) -> int:
    try:
        return int(labels["position"])
    except (KeyError, ValueError) as error:
        raise ValueError(f"{ACCEPTED_PER_POS} sample without an integer position label: {labels}") from error


def acceptance_between(before: SpecDecodeSnapshot, after: SpecDecodeSnapshot, model_name: str | None = None) -> Acceptance:
    """Acceptance over the interval between two reads: from counters if the server has the V1 set,
    else from the V0 gauges at the ``after`` read, else nothing (source "missing"). ``model_name`` is
    the served model the reads were filtered by; it only words the reason when nothing matched."""
    if all(before.has(m) and after.has(m) for m in (DRAFTS, DRAFT_TOKENS, ACCEPTED_TOKENS)):
        return _from_counters(before, after)
    if after.draft_acceptance_rate is not None or after.efficiency is not None:
        return Acceptance(
            source=SOURCE_GAUGES,
            acceptance_rate=after.draft_acceptance_rate,
            efficiency=after.efficiency,
            missing=tuple(m for m in GAUGES if not after.has(m)),
            note="V0 gauges read after the test case: the server's own running figure, which covers more than this "
            "test case and cannot be differenced; V0 gives no mean acceptance length",
        )
    missing = tuple(m for m in (*COUNTERS, *GAUGES) if not (before.has(m) and after.has(m)))
    others = sorted(set(before.other_models) | set(after.other_models))
    if others:
        return Acceptance(
            source=SOURCE_MISSING,
            missing=missing,
            reason=f"speculative-decoding metrics exist only for model_name {', '.join(repr(o) for o in others)}, not for the "
            f"served model {model_name!r}: the benchmark's --model differs from the server's --served-model-name",
        )
    return Acceptance(
        source=SOURCE_MISSING,
        missing=missing,
        reason="no speculative-decoding counters in both reads and no acceptance gauges: "
        "a server without speculation, or one whose metrics are off",
    )


def _increase(before: float, after: float) -> tuple[float, bool]:
    """Prometheus ``increase()`` over two samples: a drop means the counter restarted from 0."""
    return (after, True) if after < before else (after - before, False)


def _from_counters(before: SpecDecodeSnapshot, after: SpecDecodeSnapshot) -> Acceptance:
    assert before.num_drafts is not None and after.num_drafts is not None
    assert before.num_draft_tokens is not None and after.num_draft_tokens is not None
    assert before.num_accepted_tokens is not None and after.num_accepted_tokens is not None
    drafts, reset_drafts = _increase(before.num_drafts, after.num_drafts)
    draft_tokens, reset_tokens = _increase(before.num_draft_tokens, after.num_draft_tokens)
    accepted, reset_accepted = _increase(before.num_accepted_tokens, after.num_accepted_tokens)
    resets = [reset_drafts, reset_tokens, reset_accepted]

    per_pos: dict[int, float] | None = None
    if before.accepted_per_pos is not None and after.accepted_per_pos is not None:
        per_pos = {}
        # A position only one read has counts from 0 (a restart with another k also shows as a reset).
        for position in sorted(set(before.accepted_per_pos) | set(after.accepted_per_pos)):
            per_pos[position], reset = _increase(before.accepted_per_pos.get(position, 0.0), after.accepted_per_pos.get(position, 0.0))
            resets.append(reset)

    counter_reset = any(resets)
    counted = Acceptance(
        source=SOURCE_COUNTERS,
        drafts=drafts,
        draft_tokens=draft_tokens,
        accepted_tokens=accepted,
        counter_reset=counter_reset,
        missing=() if per_pos is not None else (ACCEPTED_PER_POS,),
        note="a counter went down between the reads (server restart): increases count from the restart, work before it is lost"
        if counter_reset
        else "",
    )
    if drafts <= 0:
        return replace(counted, reason="no drafts in the interval: the server did not speculate during this test case")
    return replace(
        counted,
        acceptance_rate=accepted / draft_tokens if draft_tokens > 0 else None,
        mean_acceptance_length=1.0 + accepted / drafts,
        per_position=None if per_pos is None else tuple(per_pos[p] / drafts for p in sorted(per_pos)),
        reason="" if draft_tokens > 0 else "drafts but no draft tokens counted: acceptance rate undefined",
    )
