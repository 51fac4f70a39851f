"""Acceptance from the stream (issue 13): exact per request against an emulator with known per-step
acceptance, flagged unreliable against one that coalesces chunks, pooled with bootstrap CIs."""

import asyncio
import dataclasses

import pytest

from specbench.analysis import stream_acceptance as sa
from specbench.emulator.server import EmulatorProfile, EmulatorServer
from specbench.load.native import NativeEngine
from specbench.load.types import Endpoint, LoadSpec, PreparedCase
from specbench.prompts.suite import TestCase
from specbench.results.records import COUNT_FROM_TOKENIZER, COUNT_FROM_USAGE, RequestRecord, stream_metrics

K = 4


def record(chunk_tokens, variant="sd", prompt_class="math", index=0, source=COUNT_FROM_USAGE, **changes):
    r = RequestRecord("r", variant, "case", prompt_class, "native", index, 0.0, token_count_source=source, **changes)
    times = [0.1 * (i + 1) for i in range(len(chunk_tokens))]
    for key, value in stream_metrics(times, chunk_tokens, times[-1], 10).items():
        setattr(r, key, value)
    r.chunk_tokens = list(chunk_tokens)
    return r


def test_per_request_averages_the_decode_chunks_only():
    # Prefill chunk (1) and the last (cut by max_tokens: 2) left out: (3 + 5 + 1 + 4) / 4.
    figures = sa.per_request(record([1, 3, 5, 1, 4, 2]), K)
    assert figures == sa.StreamAcceptance(length=3.25, rate=0.5625, chunks=4, max_chunk_tokens=5)
    assert record([1, 3, 5, 1, 4, 2]).acceptance_length == 3.25
    assert record([1, 3, 5, 1, 4, 2]).acceptance_chunks == 4
    assert sa.per_request(record([1, 3, 5, 1, 4, 2]), None).rate is None


def test_per_request_is_none_when_the_stream_cannot_tell():
    assert sa.per_request(record([1, 5]), K) is None  # no decode chunk between prefill and last
    assert sa.per_request(record([1, 3, 3, 1], source=COUNT_FROM_TOKENIZER), K) is None  # re-tokenized text
    assert sa.per_request(record([1, 3, 3, 1], error_code=500), K) is None


def test_self_check_passes_a_one_token_baseline_and_a_bounded_speculative_stream():
    base = [record([1, 1, 1, 2], variant="base")]  # the last chunk may carry the stop token
    assert sa.self_check(base, [record([1, 5, 1, 3])], K) == sa.Reliability(True, "")


def test_self_check_names_the_request_that_breaks_it():
    coalesced_base = [record([1, 1, 1, 1], variant="base"), record([1, 2, 1, 1], variant="base", index=3)]
    check = sa.self_check(coalesced_base, [record([1, 5, 1, 3])], K)
    assert check == sa.Reliability(
        False, "the baseline base streamed 2 tokens in one chunk (case #3; 1 expected): a server or proxy coalesces chunks"
    )
    check = sa.self_check([record([1, 1, 1, 1], variant="base")], [record([1, 6, 1, 3], index=2)], K)
    assert check == sa.Reliability(
        False, "sd streamed 6 tokens in one chunk (case #2; at most k + 1 = 5): a server or proxy coalesces chunks"
    )
    assert not sa.self_check([record([1, 1, 1, 1], variant="base")], [record([1, 2, 1, 3])], None).ok
    assert not sa.self_check([], [record([1, 2, 1, 3])], K).ok


def test_pooled_weighs_every_request_the_same_and_maps_the_ci_to_the_rate():
    records = [record([1, 3, 3, 1]), record([1, 1, 1, 1, 1, 1, 1, 1, 1, 1])]  # lengths 3.0 and 1.0
    length, rate = sa.pooled(records, K, seed=1, resamples=200)
    assert length.point == 2.0  # not (6 + 8) / 10 tokens per chunk: long completions do not dominate
    assert (length.low, length.high) == (1.0, 3.0)
    assert (rate.point, rate.low, rate.high) == (0.25, 0.0, 0.5)
    none, none_rate = sa.pooled([record([1, 2])], K)
    assert none.point is None and none_rate.point is None


def test_by_class_and_histogram():
    records = [
        record([1, 3, 3, 1], prompt_class="code"),
        record([1, 1, 2, 1], prompt_class="qa"),
        record([1, 5, 5, 1], prompt_class="code"),
    ]
    classes = sa.by_class(records, K, resamples=100)
    assert list(classes) == ["code", "qa"]
    assert classes["code"].requests == 2 and classes["code"].mean_acceptance_length.point == 4.0
    assert classes["code"].histogram == {"3": 1, "5": 1}
    assert classes["qa"].histogram == {"1.5": 1}
    assert classes["qa"].acceptance_rate.point == 0.125


def test_cross_check_shows_both_and_their_difference():
    stream = {"source": "stream", "mean_acceptance_length": 3.5, "acceptance_rate": 0.625}
    metrics = {"source": "counters", "mean_acceptance_length": 3.0, "acceptance_rate": 0.5}
    result = sa.cross_check(stream, metrics)
    assert (result["mean_acceptance_length_difference"], result["acceptance_rate_difference"]) == (0.5, 0.125)
    missing = sa.cross_check(stream, {"source": "missing", "reason": "V0"})
    assert missing["mean_acceptance_length_difference"] is None and missing["metrics"] == {"source": "missing", "reason": "V0"}


# --- against the emulator ------------------------------------------------------------------------

BASE = EmulatorProfile(target_step_s=0.002, prefill_base_s=0.002, prefill_s_per_token=0.0, seed=3)
SPEC = dataclasses.replace(BASE, num_speculative_tokens=K, draft_cost_ratio=0.1, default_acceptance=0.7)


def drive(profile, requests=6, max_tokens=60):
    case = TestCase("case", "math", "Solve this step by step")
    load = LoadSpec("Qwen/Qwen3-32B", max_tokens, 3, requests, 20.0)
    with EmulatorServer(profile) as server:
        records = asyncio.run(NativeEngine().run(Endpoint("svc", server.url), PreparedCase(case, case.text, 5), load, "r", lambda r: None))
        truth = {t.request_id: t for t in server.truth}
    return records, truth


def test_stream_figures_are_exact_against_known_per_step_acceptance():
    records, truth = drive(SPEC)
    assert len(records) == 6 and all(r.ok for r in records)
    for r in records:
        t = truth[f"r-svc-case-{r.request_index}"]
        # Every decode step but the last (which max_tokens may cut) sent accepted + 1 tokens.
        known = [a + 1 for a in t.accepted_per_step[:-1]]
        assert r.acceptance_length == pytest.approx(sum(known) / len(known), abs=1e-12)
        assert sa.per_request(r, K).rate == pytest.approx((sum(known) / len(known) - 1) / K, abs=1e-12)
    base, _ = drive(BASE, requests=2)
    assert sa.self_check(base, records, K) == sa.Reliability(True, "")


def test_a_coalescing_server_is_flagged_unreliable():
    base, _ = drive(dataclasses.replace(BASE, coalesce_chunks=3), requests=2)
    spec, _ = drive(dataclasses.replace(SPEC, coalesce_chunks=3), requests=2)
    check = sa.self_check(base, spec, K)
    assert not check.ok
    assert check.reason == "the baseline svc streamed 3 tokens in one chunk (case #0; 1 expected): a server or proxy coalesces chunks"
    figure = sa.figure(base, spec, K, resamples=50)
    assert figure["source"] == "stream" and figure["reliable"] is False and not sa.usable(figure)


# --- publishing ----------------------------------------------------------------------------------


def run_json(k=K):
    deployment = {"variants": [{"name": "base", "num_speculative_tokens": 0}, {"name": "sd", "num_speculative_tokens": k}]}
    return {"plan": {"endpoints": [{"name": "base", "url": "u"}, {"name": "sd", "url": "u"}], "deployment": deployment}}


def test_stream_acceptance_is_published_only_where_the_stream_passed_its_self_check():
    from specbench.outputs.publish import reliable_stream_records, run_datums

    good = [record([1, 1, 1, 1], variant="base"), record([1, 3, 5, 2], variant="sd")]
    coalesced = [record([1, 2, 1, 1], variant="base"), record([1, 3, 5, 2], variant="sd")]
    for r in coalesced:
        r.test_case = "coalesced"
    assert reliable_stream_records(good + coalesced, run_json()) == [good[1]]
    assert reliable_stream_records(good, None) == []  # no run.json: no baseline, no k, nothing published
    assert reliable_stream_records(good, run_json(k=2)) == []  # 5 tokens in a chunk > k + 1
    datums = [d for d in run_datums(good + coalesced, {}, run_json()) if d["MetricName"] == "StreamAcceptanceLength"]
    assert [(d["Dimensions"], d["Values"], d["Counts"], d["Unit"]) for d in datums] == [
        (
            [{"Name": "Variant", "Value": "sd"}, {"Name": "PromptClass", "Value": "math"}, {"Name": "TestCase", "Value": "case"}],
            [4.0],
            [1],
            "Count",
        ),
        ([{"Name": "Variant", "Value": "sd"}, {"Name": "PromptClass", "Value": "math"}], [4.0], [1], "Count"),
    ]


# --- the report ----------------------------------------------------------------------------------


def class_run():
    """Two prompt classes, a baseline and a k=4 service streaming known chunk sizes."""
    records = []
    for prompt_class, decode in (("code", [4, 5, 3]), ("qa", [2, 1, 2])):
        for index in range(4):
            base = record([1, 1, 1, 1, 1], variant="base", prompt_class=prompt_class, index=index)
            spec = record([1, *decode, 1], variant="sd", prompt_class=prompt_class, index=index)
            for r in (base, spec):
                r.test_case = prompt_class
                r.output_sha256 = "same"
            records += [base, spec]
    return run_json(), records


def test_the_report_shows_the_acceptance_matrix_and_histogram_per_class(tmp_path):
    pytest.importorskip("matplotlib")
    from specbench.analysis.aggregate import summarize_run
    from specbench.outputs.report import acceptance_matrix, write_report

    run, records = class_run()
    summary = summarize_run(run, records, {}, baseline="base", resamples=100)
    table = acceptance_matrix(summary)
    assert [row[:6] for row in table.rows] == [
        ("code", "sd", "4", "4.00 (4.00-4.00)", "75.0% (75.0-75.0)", "ok"),  # every request the same: no spread
        ("qa", "sd", "4", "1.67 (1.67-1.67)", "16.7% (16.7-16.7)", "ok"),
    ]
    assert [row[6:] for row in table.rows] == [("4:4", "n/a (missing)", "n/a"), ("1.5:4", "n/a (missing)", "n/a")]
    comparison = summary.group("code").comparisons[0]
    assert comparison.acceptance_source == "stream"  # /metrics had nothing: the self-checked stream stands in
    assert comparison.acceptance.source == "mean-acceptance-length" and comparison.expected_speedup is not None
    written = write_report(summary, tmp_path)
    assert written["stream-acceptance-histogram"].read_bytes()[:4] == b"\x89PNG"
    assert "Acceptance per prompt class" in written["markdown"].read_text()


def test_the_dashboard_names_the_stream_when_it_stands_in_for_metrics():
    from specbench.outputs.dashboard import _acceptance_cell

    assert _acceptance_cell(0.5, "metrics", {"reliable": True, "acceptance_rate": 0.4}) == "50.0%"
    assert _acceptance_cell(None, "stream", {"reliable": True, "acceptance_rate": 0.4}) == "40.0% (stream)"
    assert _acceptance_cell(None, "missing", {"reliable": False, "acceptance_rate": 1.8}) == "- (stream unreliable)"
    assert _acceptance_cell(None, "missing", {}) == "-"


def test_a_server_without_spec_metrics_gets_its_acceptance_and_expected_speedup_from_the_stream(tmp_path):
    """Neuron's 0.9.1 image reports no spec-decode metric (issue 13): the whole path, from a run of
    the command line to the summary, takes the acceptance from the stream instead, and says so."""
    import json

    from specbench import cli
    from specbench.analysis.aggregate import summarize_run
    from specbench.results.runfiles import load_run
    from specbench.results.store import LocalStore, RunStore

    settings = tmp_path / "settings.json"
    deployment = {"variants": [{"name": "base", "num_speculative_tokens": 0}, {"name": "sd", "num_speculative_tokens": K}]}
    settings.write_text(json.dumps(deployment))
    silent = dataclasses.replace(SPEC, spec_metrics=False)
    with EmulatorServer(BASE) as base, EmulatorServer(silent) as spec:
        code = cli.main(
            ["run", "--endpoint", f"base={base.url}", "--endpoint", f"sd={spec.url}", "--results", str(tmp_path / "results")]
            + ["--run-id", "nometrics", "--settings", str(settings), "--test-case", "counting", "--requests", "4"]
            + ["--output-tokens", "40", "--no-publish", "--no-progress", "--ready-timeout", "5"]
        )
    assert code == 0
    files = load_run(RunStore(LocalStore(tmp_path / "results"), "nometrics"))
    assert files.acceptance["counting"]["sd"]["source"] == "missing"  # /metrics had nothing to read
    summary = summarize_run(files.run, files.records, files.acceptance, baseline="base", resamples=100)
    (comparison,) = summary.test_cases[0].comparisons
    assert comparison.acceptance_source == "stream"
    assert comparison.acceptance.a is not None and comparison.expected_speedup is not None
    lengths = [r.acceptance_length for r in files.records if r.variant == "sd" and r.acceptance_length is not None]
    assert len(lengths) == 4 and comparison.cross_check["stream"]["mean_acceptance_length"] == pytest.approx(sum(lengths) / len(lengths))
    assert comparison.cross_check["mean_acceptance_length_difference"] is None  # nothing on /metrics to compare with


def test_the_emulator_can_leave_every_spec_metric_out():
    from specbench.emulator.server import main_emulate

    with pytest.raises(SystemExit):
        main_emulate(["--no-spec-metrics", "--time-scale", "0"])  # parsed, then refused for the time scale
    with EmulatorServer(dataclasses.replace(SPEC, spec_metrics=False)) as server:
        import urllib.request

        with urllib.request.urlopen(server.url + "/metrics", timeout=5) as response:  # noqa: S310 - loopback
            text = response.read().decode()
    assert "vllm:generation_tokens" in text and "spec_decode" not in text
