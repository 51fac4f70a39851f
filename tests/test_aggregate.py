"""specbench.analysis.aggregate: a stored run summarized per test case and per prompt class, on synthetic records
whose medians, speedups and pooled acceptance are computed by hand below."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from specbench.analysis import aggregate, theory
from specbench.analysis.acceptance import Acceptance
from specbench.results import runfiles
from specbench.results.records import RequestRecord
from specbench.results.store import LocalStore, RunStore

RUN_ID = "20250101T000000Z-abc123"
RESAMPLES = 200
CLASS_OF = {"qa-1": "qa", "qa-2": "qa", "code-1": "code"}
K = 4

# Per test case and variant: four requests' end-to-end latency, time per output token and TTFT.
# Medians by hand: the mean of the middle two values.
LATENCIES: dict[str, dict[str, dict[str, list[float]]]] = {
    "qa-1": {
        "base": {"e2e": [2.0, 2.2, 2.4, 2.6], "tpot": [0.050, 0.052, 0.054, 0.056], "ttft": [0.30, 0.31, 0.32, 0.33]},  # 2.3, 0.053, 0.315
        "spec": {"e2e": [1.0, 1.1, 1.2, 1.3], "tpot": [0.025, 0.026, 0.027, 0.028], "ttft": [0.30, 0.32, 0.34, 0.36]},  # 1.15, 0.0265, 0.33
    },
    "qa-2": {
        "base": {"e2e": [3.0, 3.2, 3.4, 3.6], "tpot": [0.050, 0.052, 0.054, 0.056], "ttft": [0.30, 0.31, 0.32, 0.33]},  # 3.3, 0.053
        "spec": {"e2e": [2.0, 2.1, 2.2, 2.3], "tpot": [0.030, 0.031, 0.032, 0.033], "ttft": [0.30, 0.32, 0.34, 0.36]},  # 2.15, 0.0315
    },
    "code-1": {
        "base": {"e2e": [4.0, 4.4, 4.8, 5.2], "tpot": [0.040, 0.042, 0.044, 0.046], "ttft": [0.30, 0.31, 0.32, 0.33]},  # 4.6, 0.043
        "spec": {"e2e": [2.0, 2.2, 2.4, 2.6], "tpot": [0.020, 0.021, 0.022, 0.023], "ttft": [0.30, 0.32, 0.34, 0.36]},  # 2.3, 0.0215
    },
}
TOKENS_PER_CHUNK = {"base": 1.0, "spec": 3.0}


def record(
    variant: str, case: str, index: int, *, e2e: float | None, tpot: float | None = None, ttft: float | None = None, **extra: Any
) -> RequestRecord:
    chunk = TOKENS_PER_CHUNK.get(variant, 1.0)
    fields: dict[str, Any] = {
        "ttft_s": ttft,
        "end_to_end_latency_s": e2e,
        "time_per_output_token_s": tpot,
        "inter_token_latency_s": None if tpot is None else tpot * chunk,  # one chunk per engine step
        "tokens_per_chunk": chunk if e2e is not None else None,
        "output_tokens": 128,
        "output_sha256": "same-answer",
    }
    fields.update(extra)
    return RequestRecord(run_id=RUN_ID, variant=variant, test_case=case, prompt_class=CLASS_OF.get(case, "other"), engine="native",
                         request_index=index, started_at=1.7e9 + index, **fields)  # fmt: skip


def case_records(case: str, variants: tuple[str, ...] = ("base", "spec"), count: int = 4) -> list[RequestRecord]:
    out = []
    for variant in variants:
        data = LATENCIES[case][variant]
        for i in range(count):
            out.append(record(variant, case, i, e2e=data["e2e"][i], tpot=data["tpot"][i], ttft=data["ttft"][i]))
    return out


def all_records(cases: tuple[str, ...] = ("qa-1", "qa-2", "code-1")) -> list[RequestRecord]:
    return [r for case in cases for r in case_records(case)]


DEPLOYMENT_VARIANTS = [
    # The speculative service listed first: the baseline is the one without a draft model, not the first.
    {"name": "spec", "target_model": "Qwen/Qwen3-32B", "draft_model": "Qwen/Qwen3-1.7B", "num_speculative_tokens": K},
    {"name": "base", "target_model": "Qwen/Qwen3-32B", "draft_model": "", "num_speculative_tokens": 0},
]


def run_json(*, requests: int = 4, status: str = "completed", variants: list[dict] | None = None, **extra: Any) -> dict[str, Any]:
    variants = DEPLOYMENT_VARIANTS if variants is None else variants
    return {
        "run_id": RUN_ID,
        "status": status,
        "started": "2025-01-01T00:00:00+00:00",
        "finished": "2025-01-01T00:10:00+00:00",
        "plan": {
            "endpoints": [{"name": v["name"], "url": f"http://{v['name']}:8000"} for v in variants],
            "suite": {"name": "mini", "test_cases": [{"name": n, "prompt_class": c, "text": "..."} for n, c in CLASS_OF.items()]},
            "load": {
                "model": "qwen",
                "max_tokens": 128,
                "concurrency": 2,
                "requests": requests,
                "request_timeout_s": 600.0,
                "temperature": 0.0,
                "seed": 11111,
                "api": "chat",
                "ignore_eos": False,
            },  # fmt: skip
            "input_tokens": 512,
            "engine": "native",
            "ready_timeout_s": 900.0,
            "deployment": {"variants": variants},
        },
        **extra,
    }


def counters(drafts: float, accepted_per_position: list[float], k: int = K) -> dict[str, Any]:
    """Acceptance figures as the runner stores them (Acceptance.to_dict()) for counter increases."""
    accepted = sum(accepted_per_position)
    return Acceptance(
        source="counters",
        acceptance_rate=accepted / (drafts * k),
        mean_acceptance_length=1.0 + accepted / drafts,
        per_position=tuple(n / drafts for n in accepted_per_position),
        drafts=drafts,
        draft_tokens=drafts * k,
        accepted_tokens=accepted,
    ).to_dict()


MISSING = Acceptance(source="missing", reason="no speculative-decoding counters").to_dict()
QA1_SPEC = counters(100, [90, 81, 73, 66])  # a = 0.9
QA2_SPEC = counters(300, [240, 192, 150, 120])  # a = 0.8
CODE_SPEC = Acceptance(source="gauges", acceptance_rate=0.5, efficiency=0.6).to_dict()
ACCEPTANCE = {
    "qa-1": {"base": MISSING, "spec": QA1_SPEC},
    "qa-2": {"base": MISSING, "spec": QA2_SPEC},
    "code-1": {"base": MISSING, "spec": CODE_SPEC},
}


def summarize(
    run: dict | None = None, records: list[RequestRecord] | None = None, acceptance: dict | None = None, **options: Any
) -> aggregate.RunSummary:
    return aggregate.summarize_run(
        run_json() if run is None else run,
        all_records() if records is None else records,
        ACCEPTANCE if acceptance is None else acceptance,
        resamples=RESAMPLES,
        **options,
    )


@pytest.fixture(scope="module")
def summary() -> aggregate.RunSummary:
    return summarize()


def model_speedup(a: float, k: int = K, c: float = 0.1) -> float:
    """S = E / (k c + 1), E = 1 + a + ... + a^k: written out here, independent of specbench.analysis.theory."""
    return sum(a**i for i in range(k + 1)) / (k * c + 1)


# --- baseline, groups, speedups --------------------------------------------------------------------


def test_baseline_is_the_variant_without_a_draft_model(summary: aggregate.RunSummary) -> None:
    assert summary.baseline == "base"
    assert summary.speculative == ["spec"]
    assert summary.run_id == RUN_ID and summary.status == "completed"
    assert summary.expected_test_cases == ["qa-1", "qa-2", "code-1"]
    assert [g.name for g in summary.test_cases] == ["qa-1", "qa-2", "code-1"]
    assert [(g.name, g.kind) for g in summary.prompt_classes] == [("qa", "prompt class"), ("code", "prompt class")]
    assert summary.settings == {"variants": DEPLOYMENT_VARIANTS}
    assert summary.parameters == {"input_tokens": 512, "engine": "native", "model": "qwen", "max_tokens": 128, "concurrency": 2,
                                  "requests": 4, "temperature": 0.0, "seed": 11111, "api": "chat"}  # fmt: skip
    assert (summary.started, summary.finished, summary.draft_cost_ratio) == ("2025-01-01T00:00:00+00:00", "2025-01-01T00:10:00+00:00", 0.1)


def test_baseline_can_be_overridden() -> None:
    flipped = summarize(baseline="spec")
    assert flipped.baseline == "spec" and flipped.speculative == ["base"]
    comparison = flipped.group("qa-1").comparisons[0]
    assert comparison.variant == "base" and comparison.num_speculative_tokens == 0
    assert comparison.headline.point == pytest.approx(1.15 / 2.3)
    assert comparison.expected_speedup is None and comparison.shortfall is None  # k = 0: no model figure
    assert flipped.group("qa-1").variants["spec"].acceptance is None  # the baseline's acceptance is not reported


def test_baseline_of_a_run_without_deployment_or_endpoints_must_be_named() -> None:
    # An imported run: nothing says which service is the baseline, and sorted names would guess wrong.
    with pytest.raises(ValueError, match="which service is the baseline: name it \\(one of base, spec\\)"):
        aggregate.summarize_run(None, all_records(), {}, resamples=RESAMPLES)
    imported = aggregate.summarize_run(None, all_records(), {}, baseline="base", resamples=RESAMPLES)
    assert imported.baseline == "base" and imported.speculative == ["spec"]
    assert imported.status == "unknown" and imported.run_id == RUN_ID
    assert imported.completeness == aggregate.COMPLETE  # nothing planned, nothing missing
    assert imported.expected_test_cases == [] and [g.name for g in imported.test_cases] == ["code-1", "qa-1", "qa-2"]
    assert imported.group("qa-1").comparisons[0].num_speculative_tokens is None
    assert imported.group("qa-1").comparisons[0].expected_speedup is None


@pytest.mark.parametrize(
    ("group", "metric", "expected"),
    [
        ("qa-1", "EndToEndLatency", 2.3 / 1.15),
        ("qa-1", "TimePerOutputToken", 0.053 / 0.0265),
        ("qa-1", "TTFT", 0.315 / 0.33),
        ("qa-1", "InterTokenLatency", 0.053 / (0.0265 * 3)),  # three tokens per chunk: slower per chunk
        ("qa-2", "EndToEndLatency", 3.3 / 2.15),
        ("qa-2", "TimePerOutputToken", 0.053 / 0.0315),
        ("code-1", "EndToEndLatency", 4.6 / 2.3),
        ("code-1", "TimePerOutputToken", 0.043 / 0.0215),
        # Pooled over qa-1 and qa-2: medians of the eight values, not a mean of the two ratios.
        ("qa", "EndToEndLatency", ((2.6 + 3.0) / 2) / ((1.3 + 2.0) / 2)),
        ("qa", "TimePerOutputToken", 0.053 / ((0.028 + 0.030) / 2)),
        ("code", "EndToEndLatency", 4.6 / 2.3),
    ],
)
def test_speedups_per_test_case_and_pooled_per_prompt_class(
    summary: aggregate.RunSummary, group: str, metric: str, expected: float
) -> None:
    interval = summary.group(group).comparisons[0].speedups[metric]
    assert interval.point == pytest.approx(expected, rel=1e-12)
    assert interval.known and interval.resamples == RESAMPLES
    assert interval.low <= interval.high


def test_variant_statistics(summary: aggregate.RunSummary) -> None:
    qa1 = summary.group("qa-1")
    base, spec = qa1.variants["base"], qa1.variants["spec"]
    assert (base.requests, base.errors, base.error_rate) == (4, 0, 0.0)
    e2e = base.distributions["EndToEndLatency"]
    assert (e2e.count, e2e.p50, e2e.minimum, e2e.maximum) == (4, pytest.approx(2.3), 2.0, 2.6)
    assert e2e.mean == pytest.approx(2.3) and e2e.p90 == pytest.approx(2.4 + 0.7 * 0.2)  # position 3 * 0.9 = 2.7
    assert base.medians["EndToEndLatency"].point == pytest.approx(2.3)
    assert 2.0 <= base.medians["EndToEndLatency"].low <= 2.3 <= base.medians["EndToEndLatency"].high <= 2.6
    assert spec.tokens_per_chunk.p50 == 3.0 and base.tokens_per_chunk.p50 == 1.0
    assert base.acceptance is None  # the baseline does not speculate
    assert spec.acceptance == QA1_SPEC
    assert qa1.outputs_match is True and qa1.complete
    assert summary.group("qa").outputs_match is None  # only compared per test case
    assert summary.group("qa").variants["spec"].requests == 8


def test_errors_are_counted_and_left_out_of_latencies() -> None:
    failed = record("base", "qa-1", 4, e2e=100.0, tpot=9.0, ttft=50.0, error_code=500, error_msg="boom", output_sha256="")
    timeout = record("base", "qa-1", 5, e2e=None, error_code=-1, error_msg="timeout", output_sha256="")
    result = summarize(records=all_records() + [failed, timeout])
    base = result.group("qa-1").variants["base"]
    assert (base.requests, base.errors, base.error_rate) == (6, 2, pytest.approx(1 / 3))
    assert base.distributions["EndToEndLatency"].count == 4 and base.distributions["EndToEndLatency"].maximum == 2.6
    assert base.distributions["TTFT"].maximum == 0.33
    assert result.group("qa-1").comparisons[0].headline.point == pytest.approx(2.0)
    assert result.group("qa").variants["base"].errors == 2
    assert "qa-1: failed requests (base 2/6); latencies use the successful ones" in result.notes
    assert result.completeness == aggregate.COMPLETE  # errors alone do not make a run partial


def test_outputs_that_differ_are_noted() -> None:
    records = all_records()
    records[0] = record("base", "qa-1", 0, e2e=2.0, tpot=0.05, ttft=0.3, output_sha256="another-answer")
    result = summarize(records=records)
    assert result.group("qa-1").outputs_match is False and result.group("qa-2").outputs_match is True
    assert result.notes == ["qa-1: outputs differ between requests at temperature 0"]


# --- acceptance and the model ----------------------------------------------------------------------


def test_acceptance_estimates_and_expected_speedups(summary: aggregate.RunSummary) -> None:
    qa1 = summary.group("qa-1").comparisons[0]
    assert qa1.num_speculative_tokens == K
    assert qa1.acceptance == theory.AcceptanceEstimate(0.9, "position-0")
    assert qa1.expected_speedup == pytest.approx(model_speedup(0.9))  # 4.0951 / 1.4 = 2.925
    assert qa1.expected_speedup == pytest.approx(4.0951 / 1.4)
    # c that explains the measured TPOT speedup of 2.0 with E = 4.0951: (4.0951 / 2 - 1) / 4.
    assert qa1.implied_cost_ratio == pytest.approx((4.0951 / 2.0 - 1) / 4)

    qa = summary.group("qa").comparisons[0]  # pooled counters: position 0 = (90 + 240) / 400
    assert qa.acceptance.source == "position-0" and qa.acceptance.a == pytest.approx(0.825)
    assert qa.expected_speedup == pytest.approx(model_speedup(0.825))

    code = summary.group("code-1").comparisons[0]  # gauges: rate 0.5, E = 1 + 0.5 * 4 = 3
    assert code.acceptance.source == "acceptance-rate"
    assert sum(code.acceptance.a**i for i in range(K + 1)) == pytest.approx(3.0)
    assert code.expected_speedup == pytest.approx(3.0 / 1.4)


def test_shortfall_when_the_whole_interval_is_below_the_model(summary: aggregate.RunSummary) -> None:
    for name, a in (("qa-1", 0.9), ("qa-2", 0.8)):
        comparison = summary.group(name).comparisons[0]
        measured = comparison.speedups["TimePerOutputToken"]
        # Every resampled ratio is at most max(base) / min(spec): 0.056 / 0.025 = 2.24 and 0.056 / 0.030 = 1.87.
        assert measured.high <= 0.056 / min(LATENCIES[name]["spec"]["tpot"]) < model_speedup(a)
        assert comparison.shortfall is True


def test_no_shortfall_when_the_interval_contains_the_model() -> None:
    # Choose c so that the model expects exactly the measured TPOT speedup of qa-1 (2.0): c = (E / 2 - 1) / k.
    tokens = 1 + 0.9 + 0.81 + 0.729 + 0.6561
    c = (tokens / 2.0 - 1) / K
    result = summarize(records=case_records("qa-1"), draft_cost_ratio=c)
    comparison = result.group("qa-1").comparisons[0]
    measured = comparison.speedups["TimePerOutputToken"]
    assert comparison.expected_speedup == pytest.approx(2.0)
    assert measured.low < 2.0 < measured.high
    assert comparison.shortfall is False
    assert comparison.implied_cost_ratio == pytest.approx(c)
    assert result.draft_cost_ratio == c


def test_no_shortfall_judgement_without_an_interval_or_acceptance() -> None:
    one_each = [record("base", "qa-1", 0, e2e=2.0, tpot=0.05), record("spec", "qa-1", 0, e2e=1.0, tpot=0.025)]
    comparison = summarize(records=one_each).group("qa-1").comparisons[0]
    assert comparison.speedups["TimePerOutputToken"] == aggregate.stats.Interval(2.0, None, None, 0.95, 0)
    assert comparison.expected_speedup == pytest.approx(model_speedup(0.9)) and comparison.shortfall is None
    missing = summarize(acceptance={"qa-1": {"spec": MISSING}}).group("qa-1").comparisons[0]
    assert missing.acceptance == theory.AcceptanceEstimate(None, "missing")
    assert (missing.expected_speedup, missing.implied_cost_ratio, missing.shortfall) == (None, None, None)


# --- pool_acceptance -------------------------------------------------------------------------------


def test_pool_acceptance_sums_counters_exactly() -> None:
    pooled = aggregate.pool_acceptance([QA1_SPEC, QA2_SPEC])
    assert pooled == {
        "source": "counters",
        "drafts": 400.0,
        "draft_tokens": 1600.0,
        "accepted_tokens": 1012.0,  # 310 + 702
        "acceptance_rate": 1012 / 1600,  # not the mean of 0.775 and 0.585
        "mean_acceptance_length": 1 + 1012 / 400,
        "per_position": [pytest.approx(v) for v in (330 / 400, 273 / 400, 223 / 400, 186 / 400)],  # weighted by drafts
    }


def test_pool_acceptance_per_position_needs_every_case() -> None:
    without_positions = {**QA2_SPEC, "per_position": None}
    pooled = aggregate.pool_acceptance([QA1_SPEC, without_positions])
    assert pooled["source"] == "counters" and pooled["acceptance_rate"] == 1012 / 1600 and pooled["per_position"] is None
    shorter = {**QA2_SPEC, "per_position": QA2_SPEC["per_position"][:2]}  # a case run with a smaller k
    assert aggregate.pool_acceptance([QA1_SPEC, shorter])["per_position"] == [pytest.approx(330 / 400), pytest.approx(273 / 400)]


def test_pool_acceptance_falls_back_to_means() -> None:
    pooled = aggregate.pool_acceptance([CODE_SPEC, QA1_SPEC])  # gauges have no counters
    assert pooled == {
        "source": "gauges",
        "note": "mean of 2 test cases' figures",
        "acceptance_rate": (0.5 + 0.775) / 2,
        "mean_acceptance_length": 4.1,  # only the counters case has one
    }
    gauges_only = aggregate.pool_acceptance([CODE_SPEC, {**CODE_SPEC, "acceptance_rate": 0.7}])
    assert gauges_only["acceptance_rate"] == pytest.approx(0.6) and gauges_only["mean_acceptance_length"] is None


def test_pool_acceptance_single_missing_and_empty() -> None:
    assert aggregate.pool_acceptance([]) is None
    assert aggregate.pool_acceptance([QA1_SPEC]) == QA1_SPEC
    assert aggregate.pool_acceptance([MISSING, QA1_SPEC]) == QA1_SPEC  # a missing case is left out
    other = {"source": "missing", "reason": "/metrics unreadable"}
    assert aggregate.pool_acceptance([MISSING, other, MISSING]) == {
        "source": "missing",
        "reason": "/metrics unreadable; no speculative-decoding counters",
    }


def test_pool_acceptance_counts_a_case_without_drafts_exactly() -> None:
    """A case during which the server never drafted still has its counters (all increases 0):
    Acceptance gives source "counters", drafts 0 and no rates. The pooled figure stays exact."""
    idle = Acceptance(source="counters", drafts=0.0, draft_tokens=0.0, accepted_tokens=0.0, reason="no drafts in the interval").to_dict()
    pooled = aggregate.pool_acceptance([QA1_SPEC, idle, QA2_SPEC])
    assert pooled["source"] == "counters"
    assert pooled["acceptance_rate"] == 1012 / 1600
    assert pooled["per_position"] is not None


def test_pool_acceptance_of_cases_that_never_drafted() -> None:
    idle = Acceptance(source="counters", drafts=0.0, draft_tokens=0.0, accepted_tokens=0.0, reason="no drafts in the interval").to_dict()
    pooled = aggregate.pool_acceptance([idle, idle])
    assert pooled is not None
    assert pooled.get("acceptance_rate") is None and pooled.get("mean_acceptance_length") is None  # no division by zero
    assert theory.estimate_acceptance(pooled, K) == theory.AcceptanceEstimate(None, "missing")


# --- completeness, notes and the verdict -----------------------------------------------------------

VERDICT_PART = r"(\d+\.\d\d)x \(95% CI (\d+\.\d\d)-(\d+\.\d\d), (faster|slower|no clear difference)\)"  # point, low, high, clear


def test_complete_run_and_its_verdict(summary: aggregate.RunSummary) -> None:
    assert summary.completeness == aggregate.COMPLETE
    assert summary.missing_test_cases == [] and summary.notes == []
    assert all(g.complete for g in (*summary.test_cases, *summary.prompt_classes))
    match = re.fullmatch(rf"Speculative decoding, end-to-end: qa {VERDICT_PART}; code {VERDICT_PART}\.", summary.verdict)
    assert match, summary.verdict
    qa_point, code_point = match.group(1), match.group(5)
    assert (qa_point, code_point) == ("1.70", "2.00")  # 2.8 / 1.65 and 4.6 / 2.3
    assert match.group(8) == "faster"  # code: every resampled ratio >= 4.0 / 2.6 > 1
    assert summary.verdict == aggregate.verdict(summary)


def test_missing_test_case_makes_the_run_partial() -> None:
    result = summarize(records=all_records(("qa-1", "qa-2")))
    assert result.completeness == aggregate.PARTIAL
    assert result.missing_test_cases == ["code-1"]
    assert result.notes == ["no results yet for 1 test case(s): code-1"]
    assert [g.name for g in result.prompt_classes] == ["qa"]
    assert re.fullmatch(rf"PARTIAL: Speculative decoding, end-to-end: qa {VERDICT_PART}\.", result.verdict), result.verdict


@pytest.mark.parametrize(
    ("status", "error", "note"),
    [("running", "", "run status is running"), ("failed", "RuntimeError: boom", "run status is failed: RuntimeError: boom")],
)
def test_unfinished_run_is_partial(status: str, error: str, note: str) -> None:
    result = summarize(run=run_json(status=status, error=error))
    assert result.completeness == aggregate.PARTIAL and result.status == status
    assert result.notes == [note]
    assert result.verdict.startswith("PARTIAL: Speculative decoding, end-to-end: qa ")
    assert "; code " in result.verdict


def test_fewer_requests_than_planned_is_partial() -> None:
    records = [r for r in all_records() if not (r.test_case == "qa-2" and r.variant == "spec" and r.request_index == 3)]
    result = summarize(run=run_json(requests=4), records=records)
    assert result.completeness == aggregate.PARTIAL
    assert not result.group("qa-2").complete and result.group("qa-1").complete and result.group("code-1").complete
    assert not result.group("qa").complete and result.group("code").complete  # 7 < 4 * 2 requests for spec
    assert result.notes == ["qa-2: fewer requests than planned (base 4, spec 3)"]
    assert result.verdict.startswith("PARTIAL: ")


def test_more_requests_than_planned_is_complete() -> None:
    assert summarize(run=run_json(requests=3)).completeness == aggregate.COMPLETE


def test_no_data_yet() -> None:
    result = summarize(records=[], acceptance={})
    assert result.completeness == aggregate.NO_DATA
    assert result.verdict == "No data yet: no benchmark request has been stored for this run."
    assert result.test_cases == [] and result.prompt_classes == []
    assert result.missing_test_cases == ["qa-1", "qa-2", "code-1"]
    assert result.baseline == "base" and result.run_id == RUN_ID
    json.dumps(result.to_dict(), allow_nan=False)


def test_verdict_with_only_a_baseline() -> None:
    only = [{"name": "base", "draft_model": "", "num_speculative_tokens": 0}]
    records = [r for r in all_records() if r.variant == "base"]
    result = summarize(run=run_json(variants=only), records=records, acceptance={})
    assert result.speculative == []
    assert result.verdict == "Only the baseline (base) has results: nothing to compare."


def test_verdict_names_each_variant_when_there_are_several() -> None:
    variants = [*DEPLOYMENT_VARIANTS, {"name": "spec-k2", "draft_model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 2}]
    records = all_records()
    for case in CLASS_OF:
        data = LATENCIES[case]["spec"]
        records += [record("spec-k2", case, i, e2e=data["e2e"][i] * 2, tpot=data["tpot"][i] * 2, ttft=data["ttft"][i]) for i in range(4)]
    result = summarize(run=run_json(variants=variants), records=records)
    assert result.speculative == ["spec", "spec-k2"]
    assert re.fullmatch(
        rf"Speculative decoding, end-to-end: qa \(spec\) {VERDICT_PART}; qa \(spec-k2\) {VERDICT_PART}; code \(spec\) {VERDICT_PART}; code \(spec-k2\) {VERDICT_PART}\.",
        result.verdict,
    ), result.verdict
    assert result.group("code").comparisons[1].headline.point == pytest.approx(4.6 / 4.6)
    assert "code (spec-k2) 1.00x" in result.verdict
    assert result.group("code-1").comparisons[1].acceptance.source == "missing"  # no acceptance stored for spec-k2


def test_verdict_without_measurements_or_intervals() -> None:
    failed = [record("spec", "qa-1", i, e2e=None, error_code=500) for i in range(4)]
    result = summarize(records=case_records("qa-1", ("base",)) + failed, acceptance={})
    assert "qa not measured" in result.verdict
    one_each = [record("base", "qa-1", 0, e2e=2.0), record("spec", "qa-1", 0, e2e=1.0)]
    assert "qa 2.00x (no CI: too few requests)" in summarize(records=one_each).verdict


@pytest.mark.parametrize(
    ("interval", "text"),
    [
        (aggregate.stats.Interval(1.5, 1.2, 1.8), "1.50x (95% CI 1.20-1.80, faster)"),
        (aggregate.stats.Interval(0.8, 0.7, 0.9), "0.80x (95% CI 0.70-0.90, slower)"),
        (aggregate.stats.Interval(1.05, 0.95, 1.1), "1.05x (95% CI 0.95-1.10, no clear difference)"),
        (aggregate.stats.Interval(1.05, 1.0, 1.1), "1.05x (95% CI 1.00-1.10, no clear difference)"),  # touching 1 is not clear
        (aggregate.stats.Interval(1.3, None, None), "1.30x (no CI: too few requests)"),
        (aggregate.stats.Interval(None), "not measured"),
    ],
)
def test_describe_speedup(interval: aggregate.stats.Interval, text: str) -> None:
    assert aggregate.describe_speedup(interval) == text


# --- serialization and loading ---------------------------------------------------------------------


def test_to_dict_is_plain_json(summary: aggregate.RunSummary) -> None:
    data = summary.to_dict()
    text = json.dumps(data, allow_nan=False)
    assert json.loads(text) == data
    qa1 = data["test_cases"][0]
    assert qa1["name"] == "qa-1" and qa1["comparisons"][0]["speedups"]["EndToEndLatency"]["point"] == pytest.approx(2.0)
    assert qa1["comparisons"][0]["acceptance"] == {"a": 0.9, "source": "position-0"}
    assert qa1["variants"]["base"]["distributions"]["TTFT"]["p50"] == pytest.approx(0.315)
    assert data["verdict"] == summary.verdict and data["completeness"] == "complete"


def test_to_dict_replaces_non_finite_values() -> None:
    odd = {**QA1_SPEC, "efficiency": float("nan"), "drafts": float("inf")}
    data = summarize(records=case_records("qa-1"), acceptance={"qa-1": {"spec": odd}}).to_dict()
    figures = data["test_cases"][0]["variants"]["spec"]["acceptance"]
    assert figures["efficiency"] is None and figures["drafts"] is None
    json.dumps(data, allow_nan=False)


def test_load_run_reads_a_stored_run(tmp_path) -> None:  # noqa: ANN001
    store = RunStore(LocalStore(tmp_path), RUN_ID)
    run = run_json()
    store.write("run.json", json.dumps(run, indent=2, sort_keys=True))
    for case in ("qa-1", "qa-2", "code-1"):
        store.write(f"records/{case}.jsonl", "".join(r.to_json() + "\n" for r in case_records(case)))
        store.write(f"acceptance/{case}.json", json.dumps(ACCEPTANCE[case], indent=2, sort_keys=True))
    store.write("llmperf/qa-1/spec_summary.json", "{}")  # other files of the run are not read
    (tmp_path / RUN_ID / "records" / "code-2.jsonl.partial").write_text("half a line", encoding="utf-8")

    files = runfiles.load_run(store)
    assert files.run == run
    assert sorted(files.records, key=lambda r: (r.test_case, r.variant, r.request_index)) == sorted(
        all_records(), key=lambda r: (r.test_case, r.variant, r.request_index)
    )
    assert files.acceptance == ACCEPTANCE
    stored = aggregate.summarize_run(files.run, files.records, files.acceptance, resamples=RESAMPLES)
    assert stored.to_dict() == summarize().to_dict()


def test_load_run_of_an_imported_run_without_run_json(tmp_path) -> None:  # noqa: ANN001
    store = RunStore(LocalStore(tmp_path), "imported")
    store.write("records/qa-1.jsonl", "".join(r.to_json() + "\n" for r in case_records("qa-1")) + "\n")
    files = runfiles.load_run(store)
    assert files.run == {} and files.acceptance == {} and len(files.records) == 8
    empty = runfiles.load_run(RunStore(LocalStore(tmp_path), "nothing-here"))
    assert (empty.run, empty.records, empty.acceptance) == ({}, [], {})
    assert aggregate.summarize_run(empty.run, empty.records, empty.acceptance).completeness == aggregate.NO_DATA


def test_summary_is_deterministic() -> None:
    assert summarize().to_dict() == summarize().to_dict()
