"""Draft acceptance from two reads of vLLM's /metrics: parsing real exposition text and the interval math."""

from __future__ import annotations

import json

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from specbench.analysis.acceptance import (
    ACCEPTANCE_RATE_GAUGE,
    ACCEPTED_PER_POS,
    ACCEPTED_TOKENS,
    COUNTERS,
    DRAFT_TOKENS,
    DRAFTS,
    EFFICIENCY_GAUGE,
    GAUGES,
    SpecDecodeSnapshot,
    acceptance_between,
    parse_spec_decode,
)

QWEN = "Qwen/Qwen3-32B"


def v1_text(drafts: float, draft_tokens: float, accepted: float, per_pos: list[float], model: str = QWEN) -> str:
    """A V1 server's /metrics as vLLM writes it: HELP/TYPE lines, _created samples, other metrics around."""
    positions = "\n".join(
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="{model}",position="{i}"}} {v}'
        for i, v in enumerate(per_pos)
    )
    created = "\n".join(
        f'vllm:spec_decode_num_accepted_tokens_per_pos_created{{engine="0",model_name="{model}",position="{i}"}} 1.7959470602751937e+09'
        for i in range(len(per_pos))
    )
    return f"""# HELP python_gc_objects_collected_total Objects collected during gc
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{{generation="0"}} 12345.0
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="{model}"}} 4.0
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{engine="0",model_name="{model}"}} 98765.0
# HELP vllm:generation_tokens_created Number of generation tokens processed.
# TYPE vllm:generation_tokens_created gauge
vllm:generation_tokens_created{{engine="0",model_name="{model}"}} 1.7959470602751627e+09
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{{engine="0",model_name="{model}"}} {drafts}
# HELP vllm:spec_decode_num_drafts_created Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_created gauge
vllm:spec_decode_num_drafts_created{{engine="0",model_name="{model}"}} 1.7959470602751627e+09
# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="{model}"}} {draft_tokens}
# HELP vllm:spec_decode_num_draft_tokens_created Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens_created gauge
vllm:spec_decode_num_draft_tokens_created{{engine="0",model_name="{model}"}} 1.7959470602751627e+09
# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="{model}"}} {accepted}
# HELP vllm:spec_decode_num_accepted_tokens_created Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_created gauge
vllm:spec_decode_num_accepted_tokens_created{{engine="0",model_name="{model}"}} 1.7959470602751627e+09
# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
{positions}
# HELP vllm:spec_decode_num_accepted_tokens_per_pos_created Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_created gauge
{created}
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{{engine="0",le="0.1",model_name="{model}"}} 3.0
vllm:time_to_first_token_seconds_bucket{{engine="0",le="+Inf",model_name="{model}"}} 8.0
vllm:time_to_first_token_seconds_count{{engine="0",model_name="{model}"}} 8.0
vllm:time_to_first_token_seconds_sum{{engine="0",model_name="{model}"}} 1.25
"""


V0_TEXT = """# HELP vllm:spec_decode_draft_acceptance_rate Speulative token acceptance rate.
# TYPE vllm:spec_decode_draft_acceptance_rate gauge
vllm:spec_decode_draft_acceptance_rate{model_name="Qwen/Qwen3-32B"} 0.6875
# HELP vllm:spec_decode_efficiency Speculative decoding system efficiency.
# TYPE vllm:spec_decode_efficiency gauge
vllm:spec_decode_efficiency{model_name="Qwen/Qwen3-32B"} 0.5
# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{model_name="Qwen/Qwen3-32B"} 5500.0
# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{model_name="Qwen/Qwen3-32B"} 8000.0
# HELP vllm:spec_decode_num_emitted_tokens_total Number of emitted tokens.
# TYPE vllm:spec_decode_num_emitted_tokens_total counter
vllm:spec_decode_num_emitted_tokens_total{model_name="Qwen/Qwen3-32B"} 6500.0
"""

BASELINE_TEXT = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-32B"} 0.0
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="Qwen/Qwen3-32B"} 4800.0
"""


# --- parsing ----------------------------------------------------------------------------------------


def test_parser_reads_v1_counters_from_realistic_text_and_ignores_created_and_other_metrics():
    snapshot = parse_spec_decode(v1_text(100, 700, 350, [90, 80, 60, 50, 40, 20, 10]))
    assert snapshot == SpecDecodeSnapshot(
        num_drafts=100.0,
        num_draft_tokens=700.0,
        num_accepted_tokens=350.0,
        accepted_per_pos={0: 90.0, 1: 80.0, 2: 60.0, 3: 50.0, 4: 40.0, 5: 20.0, 6: 10.0},
    )


def test_parser_reads_what_prometheus_client_itself_exposes():
    """vLLM defines its counters without _total and prometheus_client adds it: read a registry built the same way."""
    registry = CollectorRegistry()
    labels = ["model_name", "engine"]
    drafts = Counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", labels, registry=registry)
    tokens = Counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", labels, registry=registry)
    accepted = Counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", labels, registry=registry)
    per_pos = Counter(
        "vllm:spec_decode_num_accepted_tokens_per_pos", "Accepted tokens per draft position.", [*labels, "position"], registry=registry
    )
    rate = Gauge("vllm:spec_decode_draft_acceptance_rate", "Speculative token acceptance rate.", ["model_name"], registry=registry)
    for engine, n in (("0", 10), ("1", 30)):  # two engines of one model: counters add up
        drafts.labels(QWEN, engine).inc(n)
        tokens.labels(QWEN, engine).inc(4 * n)
        accepted.labels(QWEN, engine).inc(2 * n)
        for position in range(4):
            per_pos.labels(QWEN, engine, str(position)).inc(n // (position + 1))
    rate.labels(QWEN).set(0.5)

    snapshot = parse_spec_decode(generate_latest(registry).decode())

    assert (snapshot.num_drafts, snapshot.num_draft_tokens, snapshot.num_accepted_tokens) == (40.0, 160.0, 80.0)
    assert snapshot.accepted_per_pos == {0: 40.0, 1: 20.0, 2: 13.0, 3: 9.0}
    assert snapshot.draft_acceptance_rate == 0.5


TWO_MODELS = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="Qwen/Qwen3-32B"} 100.0
vllm:spec_decode_num_drafts_total{engine="0",model_name="other/model"} 10.0
# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="Qwen/Qwen3-32B"} 200.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="other/model"} 4.0
# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="Qwen/Qwen3-32B",position="0"} 60.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="other/model",position="0"} 3.0
# HELP vllm:spec_decode_draft_acceptance_rate Speculative token acceptance rate.
# TYPE vllm:spec_decode_draft_acceptance_rate gauge
vllm:spec_decode_draft_acceptance_rate{model_name="Qwen/Qwen3-32B"} 0.8
vllm:spec_decode_draft_acceptance_rate{model_name="other/model"} 0.4
"""


def test_parser_filters_by_model_name_and_sums_counters_otherwise():
    qwen = parse_spec_decode(TWO_MODELS, model_name=QWEN)
    other = parse_spec_decode(TWO_MODELS, model_name="other/model")
    both = parse_spec_decode(TWO_MODELS)
    assert qwen == SpecDecodeSnapshot(
        num_drafts=100.0, num_accepted_tokens=200.0, accepted_per_pos={0: 60.0}, draft_acceptance_rate=0.8, other_models=("other/model",)
    )
    assert other == SpecDecodeSnapshot(
        num_drafts=10.0, num_accepted_tokens=4.0, accepted_per_pos={0: 3.0}, draft_acceptance_rate=0.4, other_models=(QWEN,)
    )
    assert both == SpecDecodeSnapshot(
        num_drafts=110.0, num_accepted_tokens=204.0, accepted_per_pos={0: 63.0}, draft_acceptance_rate=pytest.approx(0.6)
    )
    assert parse_spec_decode(TWO_MODELS, model_name="not/served") == SpecDecodeSnapshot(other_models=(QWEN, "other/model"))


def test_counters_for_another_model_name_are_reported_as_such_not_as_no_speculation():
    before = parse_spec_decode(v1_text(100, 700, 350, [90, 80]), model_name="qwen")
    after = parse_spec_decode(v1_text(200, 1400, 700, [180, 160]), model_name="qwen")
    acceptance = acceptance_between(before, after, "qwen")
    assert (acceptance.source, acceptance.acceptance_rate) == ("missing", None)
    assert acceptance.reason == (
        "speculative-decoding metrics exist only for model_name 'Qwen/Qwen3-32B', not for the served model 'qwen': "
        "the benchmark's --model differs from the server's --served-model-name"
    )
    baseline = parse_spec_decode(BASELINE_TEXT, model_name="qwen")
    assert "a server without speculation" in acceptance_between(baseline, baseline, "qwen").reason


def test_parser_reads_v0_gauges_and_keeps_absent_metrics_none():
    snapshot = parse_spec_decode(V0_TEXT)
    assert snapshot.draft_acceptance_rate == 0.6875
    assert snapshot.efficiency == 0.5
    assert (snapshot.num_drafts, snapshot.accepted_per_pos) == (None, None)  # absent, not 0
    assert snapshot.num_accepted_tokens == 5500.0


def test_a_nan_gauge_counts_as_absent():
    """V0 sets the acceptance gauge to NaN before its first draft."""
    snapshot = parse_spec_decode(V0_TEXT.replace("} 0.6875", "} NaN"))
    assert snapshot.draft_acceptance_rate is None
    assert snapshot.efficiency == 0.5


def test_baseline_and_empty_text_give_an_empty_snapshot():
    assert parse_spec_decode(BASELINE_TEXT) == SpecDecodeSnapshot()
    assert parse_spec_decode("") == SpecDecodeSnapshot()


@pytest.mark.parametrize(
    "text",
    [
        "<html><body>502 Bad Gateway</body></html>",
        '{"detail": "Not Found"}',
        "vllm:spec_decode_num_drafts_total{model_name=Qwen} 3",
        'vllm:spec_decode_num_drafts_total{model_name="Qwen"} three',
    ],
)
def test_malformed_text_raises_a_clear_value_error(text):
    with pytest.raises(ValueError, match="not Prometheus text exposition"):
        parse_spec_decode(text)


def test_a_per_position_sample_without_a_position_is_an_error():
    with pytest.raises(ValueError, match="position"):
        parse_spec_decode('vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name="m"} 3')


# --- interval math ----------------------------------------------------------------------------------


def test_counter_math_on_known_numbers():
    before = parse_spec_decode(v1_text(1000, 7000, 3000, [900, 700, 500, 400, 300, 150, 50]))
    # 200 drafts of 7 tokens, 800 accepted; position i was accepted in Δper_pos[i] of the drafts.
    after = parse_spec_decode(v1_text(1200, 8400, 3800, [1090, 880, 660, 530, 390, 190, 60]))

    acceptance = acceptance_between(before, after)

    assert acceptance.source == "counters"
    assert (acceptance.drafts, acceptance.draft_tokens, acceptance.accepted_tokens) == (200.0, 1400.0, 800.0)
    assert acceptance.acceptance_rate == pytest.approx(800 / 1400)
    assert acceptance.mean_acceptance_length == pytest.approx(5.0)  # 1 + 800/200 tokens per target step
    assert acceptance.per_position == pytest.approx((0.95, 0.9, 0.8, 0.65, 0.45, 0.2, 0.05))
    assert sum(acceptance.per_position) == pytest.approx(800 / 200)  # per-position shares add up to accepted/drafts
    assert (acceptance.counter_reset, acceptance.missing, acceptance.reason, acceptance.note) == (False, (), "", "")


def test_counter_reset_takes_the_after_value_as_the_increase():
    before = parse_spec_decode(v1_text(5000, 35000, 20000, [4000, 3000]))
    after = parse_spec_decode(v1_text(100, 700, 350, [80, 60]))  # the server restarted in between

    acceptance = acceptance_between(before, after)

    assert acceptance.counter_reset is True
    assert (acceptance.drafts, acceptance.draft_tokens, acceptance.accepted_tokens) == (100.0, 700.0, 350.0)
    assert acceptance.acceptance_rate == pytest.approx(0.5)
    assert acceptance.mean_acceptance_length == pytest.approx(4.5)
    assert acceptance.per_position == pytest.approx((0.8, 0.6))
    assert "restart" in acceptance.note


def test_a_reset_of_one_position_is_flagged_too():
    before = SpecDecodeSnapshot(10, 40, 20, {0: 9, 1: 6})
    after = SpecDecodeSnapshot(20, 80, 40, {0: 18, 1: 4})
    acceptance = acceptance_between(before, after)
    assert acceptance.counter_reset is True
    assert acceptance.per_position == pytest.approx((0.9, 0.4))


def test_baseline_server_has_everything_missing():
    empty = parse_spec_decode(BASELINE_TEXT)
    acceptance = acceptance_between(empty, empty)
    assert acceptance.source == "missing"
    assert acceptance.missing == (*COUNTERS, *GAUGES)
    assert (acceptance.acceptance_rate, acceptance.mean_acceptance_length, acceptance.per_position) == (None, None, None)
    assert "no speculative-decoding counters" in acceptance.reason


def test_missing_only_per_position():
    before = SpecDecodeSnapshot(num_drafts=10, num_draft_tokens=70, num_accepted_tokens=20)
    after = SpecDecodeSnapshot(num_drafts=30, num_draft_tokens=210, num_accepted_tokens=90)
    acceptance = acceptance_between(before, after)
    assert acceptance.source == "counters"
    assert acceptance.missing == (ACCEPTED_PER_POS,)
    assert acceptance.per_position is None
    assert acceptance.acceptance_rate == pytest.approx(0.5)
    assert acceptance.mean_acceptance_length == pytest.approx(4.5)


def test_a_counter_absent_from_one_read_is_not_differenced():
    before = SpecDecodeSnapshot()  # e.g. the before-read came from a server still starting
    after = parse_spec_decode(v1_text(100, 700, 350, [90]))
    acceptance = acceptance_between(before, after)
    assert acceptance.source == "missing"
    assert acceptance.missing == (DRAFTS, DRAFT_TOKENS, ACCEPTED_TOKENS, ACCEPTED_PER_POS, ACCEPTANCE_RATE_GAUGE, EFFICIENCY_GAUGE)
    assert acceptance.acceptance_rate is None


def test_gauges_only_reports_the_after_values_with_a_note():
    before = parse_spec_decode(V0_TEXT.replace("0.6875", "0.9"))
    after = parse_spec_decode(V0_TEXT)

    acceptance = acceptance_between(before, after)

    assert acceptance.source == "gauges"
    assert (acceptance.acceptance_rate, acceptance.efficiency) == (0.6875, 0.5)
    assert acceptance.mean_acceptance_length is None
    assert acceptance.missing == ()
    # V0's token counters are there but are not differenced: V0 increments them by cumulative totals.
    assert acceptance.accepted_tokens is None
    assert "cannot be differenced" in acceptance.note


def test_gauges_only_lists_a_missing_gauge():
    after = SpecDecodeSnapshot(efficiency=0.4)
    acceptance = acceptance_between(SpecDecodeSnapshot(), after)
    assert (acceptance.source, acceptance.acceptance_rate, acceptance.efficiency) == ("gauges", None, 0.4)
    assert acceptance.missing == (ACCEPTANCE_RATE_GAUGE,)


def test_zero_draft_interval_gives_none_with_a_reason():
    text = v1_text(100, 700, 350, [90, 80])
    acceptance = acceptance_between(parse_spec_decode(text), parse_spec_decode(text))
    assert acceptance.source == "counters"
    assert acceptance.drafts == 0.0
    assert (acceptance.acceptance_rate, acceptance.mean_acceptance_length, acceptance.per_position) == (None, None, None)
    assert "no drafts" in acceptance.reason


def test_to_dict_is_json_ready():
    acceptance = acceptance_between(SpecDecodeSnapshot(0, 0, 0, {0: 0, 1: 0}), SpecDecodeSnapshot(4, 8, 6, {0: 4, 1: 2}))
    data = json.loads(json.dumps(acceptance.to_dict()))
    assert data == {
        "source": "counters",
        "acceptance_rate": 0.75,
        "mean_acceptance_length": 2.5,
        "per_position": [1.0, 0.5],
        "efficiency": None,
        "drafts": 4,
        "draft_tokens": 8,
        "accepted_tokens": 6,
        "counter_reset": False,
        "missing": [],
        "reason": "",
        "note": "",
    }
