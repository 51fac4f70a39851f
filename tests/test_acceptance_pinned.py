"""Draft acceptance pinned to whole results (issue 17: the mutants test_acceptance leaves alive):
every field of every result kind, per-position counters only one read has, zero draft tokens.
Exact binary fractions, so equality is exact."""

import dataclasses

import pytest

from specbench.analysis import acceptance as acc
from specbench.analysis.acceptance import Acceptance, SpecDecodeSnapshot, acceptance_between, parse_spec_decode

RESET_NOTE = "a counter went down between the reads (server restart): increases count from the restart, work before it is lost"
GAUGE_NOTE = (
    "V0 gauges read after the test case: the server's own running figure, which covers more than this "
    "test case and cannot be differenced; V0 gives no mean acceptance length"
)
NO_SPECULATION = (
    "no speculative-decoding counters in both reads and no acceptance gauges: a server without speculation, or one whose metrics are off"
)


def test_metric_names_are_vllms():
    # vllm/v1/spec_decode/metrics.py and vllm/engine/metrics.py name them so (module docstring).
    assert acc.COUNTERS == (
        "vllm:spec_decode_num_drafts_total",
        "vllm:spec_decode_num_draft_tokens_total",
        "vllm:spec_decode_num_accepted_tokens_total",
        "vllm:spec_decode_num_accepted_tokens_per_pos_total",
    )
    assert acc.GAUGES == ("vllm:spec_decode_draft_acceptance_rate", "vllm:spec_decode_efficiency")
    assert (acc.SOURCE_COUNTERS, acc.SOURCE_GAUGES, acc.SOURCE_MISSING) == ("counters", "gauges", "missing")


def test_counters_whole_result():
    before = SpecDecodeSnapshot(10, 30, 15, {0: 8, 1: 5, 2: 2})
    after = SpecDecodeSnapshot(18, 54, 27, {0: 14, 1: 9, 2: 4})
    assert acceptance_between(before, after) == Acceptance(
        source="counters",
        acceptance_rate=0.5,
        mean_acceptance_length=2.5,
        per_position=(0.75, 0.5, 0.25),
        drafts=8,
        draft_tokens=24,
        accepted_tokens=12,
    )


def test_one_draft_is_enough_to_compute():
    result = acceptance_between(SpecDecodeSnapshot(0, 0, 0, {0: 0}), SpecDecodeSnapshot(1, 2, 1, {0: 1}))
    assert result == Acceptance(
        source="counters", acceptance_rate=0.5, mean_acceptance_length=2.0, per_position=(1.0,), drafts=1, draft_tokens=2, accepted_tokens=1
    )


def test_an_unchanged_counter_is_no_reset():
    before = SpecDecodeSnapshot(10, 20, 8, {0: 5, 1: 3})
    after = SpecDecodeSnapshot(14, 28, 12, {0: 8, 1: 3})
    assert acceptance_between(before, after) == Acceptance(
        source="counters",
        acceptance_rate=0.5,
        mean_acceptance_length=2.0,
        per_position=(0.75, 0.0),
        drafts=4,
        draft_tokens=8,
        accepted_tokens=4,
    )


def test_a_position_only_the_after_read_has_counts_from_zero():
    # A server restarted with a longer speculation between the reads (and counters that kept rising).
    before = SpecDecodeSnapshot(10, 20, 8, {0: 8})
    after = SpecDecodeSnapshot(14, 32, 14, {0: 11, 1: 3})
    assert acceptance_between(before, after) == Acceptance(
        source="counters",
        acceptance_rate=0.5,
        mean_acceptance_length=2.5,
        per_position=(0.75, 0.75),
        drafts=4,
        draft_tokens=12,
        accepted_tokens=6,
    )


def test_a_position_only_the_before_read_has_is_a_reset():
    before = SpecDecodeSnapshot(10, 20, 8, {0: 5, 1: 3})
    after = SpecDecodeSnapshot(14, 28, 12, {0: 9})
    assert acceptance_between(before, after) == Acceptance(
        source="counters",
        acceptance_rate=0.5,
        mean_acceptance_length=2.0,
        per_position=(1.0, 0.0),
        drafts=4,
        draft_tokens=8,
        accepted_tokens=4,
        counter_reset=True,
        note=RESET_NOTE,
    )


@pytest.mark.parametrize("reset", ["drafts", "draft_tokens", "accepted"])
def test_each_scalar_counter_alone_flags_a_reset(reset):
    before = {"drafts": 10.0, "draft_tokens": 20.0, "accepted": 8.0}
    after = {"drafts": 14.0, "draft_tokens": 28.0, "accepted": 12.0}
    before[reset] = 100.0
    result = acceptance_between(
        SpecDecodeSnapshot(before["drafts"], before["draft_tokens"], before["accepted"]),
        SpecDecodeSnapshot(after["drafts"], after["draft_tokens"], after["accepted"]),
    )
    increases = {"drafts": 4.0, "draft_tokens": 8.0, "accepted": 4.0, reset: after[reset]}
    assert result == Acceptance(
        source="counters",
        acceptance_rate=increases["accepted"] / increases["draft_tokens"],
        mean_acceptance_length=1.0 + increases["accepted"] / increases["drafts"],
        drafts=increases["drafts"],
        draft_tokens=increases["draft_tokens"],
        accepted_tokens=increases["accepted"],
        counter_reset=True,
        missing=(acc.ACCEPTED_PER_POS,),
        note=RESET_NOTE,
    )


def test_drafts_without_draft_tokens_leave_the_rate_unknown():
    result = acceptance_between(SpecDecodeSnapshot(10, 20, 8, {0: 4}), SpecDecodeSnapshot(14, 20, 10, {0: 6}))
    assert result == Acceptance(
        source="counters",
        acceptance_rate=None,
        mean_acceptance_length=1.5,
        per_position=(0.5,),
        drafts=4,
        draft_tokens=0,
        accepted_tokens=2,
        reason="drafts but no draft tokens counted: acceptance rate undefined",
    )


def test_no_drafts_whole_result_with_per_position_in_one_read_only():
    result = acceptance_between(SpecDecodeSnapshot(10, 20, 8, {0: 4}), SpecDecodeSnapshot(10, 20, 8))
    assert result == Acceptance(
        source="counters",
        drafts=0,
        draft_tokens=0,
        accepted_tokens=0,
        missing=(acc.ACCEPTED_PER_POS,),
        reason="no drafts in the interval: the server did not speculate during this test case",
    )


def test_no_drafts_after_a_reset_keeps_the_flag_and_the_note():
    result = acceptance_between(SpecDecodeSnapshot(10, 20, 8, {0: 4}), SpecDecodeSnapshot(0, 0, 0, {0: 0}))
    assert result == Acceptance(
        source="counters",
        drafts=0,
        draft_tokens=0,
        accepted_tokens=0,
        counter_reset=True,
        reason="no drafts in the interval: the server did not speculate during this test case",
        note=RESET_NOTE,
    )


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        (SpecDecodeSnapshot(draft_acceptance_rate=0.75, efficiency=0.5), {"acceptance_rate": 0.75, "efficiency": 0.5, "missing": ()}),
        (SpecDecodeSnapshot(draft_acceptance_rate=0.75), {"acceptance_rate": 0.75, "missing": (acc.EFFICIENCY_GAUGE,)}),
        (SpecDecodeSnapshot(efficiency=0.5), {"efficiency": 0.5, "missing": (acc.ACCEPTANCE_RATE_GAUGE,)}),
    ],
)
def test_gauges_whole_result(after, expected):
    # V0 counters in both reads but no num_drafts: the gauges, and no counter is differenced or reset.
    before = SpecDecodeSnapshot(num_draft_tokens=900, num_accepted_tokens=800, draft_acceptance_rate=0.25, efficiency=0.25)
    after = SpecDecodeSnapshot(**{**after.__dict__, "num_draft_tokens": 100, "num_accepted_tokens": 50})
    assert acceptance_between(before, after) == Acceptance(source="gauges", note=GAUGE_NOTE, **expected)


def test_missing_whole_result():
    assert acceptance_between(SpecDecodeSnapshot(), SpecDecodeSnapshot(), "qwen") == Acceptance(
        source="missing", missing=(*acc.COUNTERS, *acc.GAUGES), reason=NO_SPECULATION
    )


def test_missing_lists_only_what_a_read_lacks():
    before = SpecDecodeSnapshot(num_drafts=3, num_draft_tokens=6, accepted_per_pos={0: 1})
    after = SpecDecodeSnapshot(num_drafts=5, num_accepted_tokens=6, accepted_per_pos={0: 2})
    assert acceptance_between(before, after) == Acceptance(
        source="missing",
        missing=(acc.DRAFT_TOKENS, acc.ACCEPTED_TOKENS, *acc.GAUGES),
        reason=NO_SPECULATION,
    )


def test_missing_for_other_models_names_them_all():
    before = SpecDecodeSnapshot(other_models=("b/model",))
    after = SpecDecodeSnapshot(other_models=("a/model", "b/model"))
    assert acceptance_between(before, after, "qwen") == Acceptance(
        source="missing",
        missing=(*acc.COUNTERS, *acc.GAUGES),
        reason="speculative-decoding metrics exist only for model_name 'a/model', 'b/model', not for the served model 'qwen': "
        "the benchmark's --model differs from the server's --served-model-name",
    )
    only_before = acceptance_between(before, SpecDecodeSnapshot(), "qwen")
    assert only_before.reason.startswith("speculative-decoding metrics exist only for model_name 'b/model', not for")


def test_parser_averages_gauges_and_sums_counters_over_engines_and_names_unlabelled_series():
    text = """# TYPE vllm:spec_decode_draft_acceptance_rate gauge
vllm:spec_decode_draft_acceptance_rate{engine="0",model_name="m"} 0.5
vllm:spec_decode_draft_acceptance_rate{engine="1",model_name="m"} 0.75
vllm:spec_decode_draft_acceptance_rate{engine="2",model_name="m"} 1.0
vllm:spec_decode_draft_acceptance_rate{engine="3"} 0.0
# TYPE vllm:spec_decode_efficiency gauge
vllm:spec_decode_efficiency{engine="0",model_name="m"} 0.25
# TYPE vllm:spec_decode_num_drafts counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 3
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 4
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 2
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 3
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="1"} 5
"""
    snapshot = parse_spec_decode(text, model_name="m")
    assert snapshot == SpecDecodeSnapshot(
        num_drafts=7.0,
        accepted_per_pos={0: 3.0, 1: 7.0},
        draft_acceptance_rate=0.75,
        efficiency=0.25,
        other_models=("(no model_name label)",),
    )
    assert list(snapshot.accepted_per_pos) == [0, 1]
    assert parse_spec_decode(text).draft_acceptance_rate == 0.5625  # (0.5 + 0.75 + 1.0 + 0.0) / 4


def test_parse_errors_are_one_line_each():
    with pytest.raises(ValueError) as raised:
        parse_spec_decode('vllm:spec_decode_num_accepted_tokens_per_pos_total{position="first"} 3')
    assert str(raised.value) == (
        "vllm:spec_decode_num_accepted_tokens_per_pos_total sample without an integer position label: {'position': 'first'}"
    )
    with pytest.raises(ValueError) as raised:
        parse_spec_decode("<html>")
    assert str(raised.value).startswith("not Prometheus text exposition (a /metrics body was expected): ")


def test_to_dict_of_a_gauge_result():
    result = Acceptance(source="gauges", acceptance_rate=0.75, missing=(acc.EFFICIENCY_GAUGE,), note="n")
    assert result.to_dict() == {
        "source": "gauges",
        "acceptance_rate": 0.75,
        "mean_acceptance_length": None,
        "per_position": None,
        "efficiency": None,
        "drafts": None,
        "draft_tokens": None,
        "accepted_tokens": None,
        "counter_reset": False,
        "missing": ["vllm:spec_decode_efficiency"],
        "reason": "",
        "note": "n",
    }


def test_a_single_draft_token_gives_a_rate():
    result = acceptance_between(SpecDecodeSnapshot(4, 8, 2), SpecDecodeSnapshot(5, 9, 3))
    assert result == Acceptance(
        source="counters",
        acceptance_rate=1.0,
        mean_acceptance_length=2.0,
        drafts=1,
        draft_tokens=1,
        accepted_tokens=1,
        missing=(acc.ACCEPTED_PER_POS,),
    )


def test_reads_and_results_are_frozen():
    # One read serves two intervals (the after-read of one test case is the before-read of the next).
    with pytest.raises(dataclasses.FrozenInstanceError):
        SpecDecodeSnapshot().num_drafts = 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        Acceptance(source="missing").reason = "changed"
