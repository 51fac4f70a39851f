"""The sweep's plan (specbench/sweep/plan.py), its point ids and run metadata (points.py), and the
sweep section of the configuration (config/sweep.py): pure functions, no synth."""

from __future__ import annotations

import json

import pytest

from config import ConfigError, load_config
from config.loader import coerce
from config.sweep import slots_per_node, sweep_plan
from specbench.sweep.plan import Estimates, Unit, make_plan, point_ids, render, units, waves
from specbench.sweep.points import Load, SweepVariant, loads, parse_sweep_point, point_id, sweep_metadata

Q17 = "Qwen/Qwen3-1.7B"
EST = Estimates(compile_minutes=120, start_minutes=15, measure_minutes=10)


def variant(k: int, draft: str = Q17) -> SweepVariant:
    return SweepVariant(f"v{k}", draft, k, "draft")


# --- points ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("load", "label"),
    [(Load("concurrency", 4), "c4"), (Load("rate", 0.5), "r0p5"), (Load("rate", 2.0), "r2"), (Load("rate", 1e-05), "r1e-05")],
)
def test_point_ids_follow_the_contract(load, label):
    assert load.label == label
    assert point_id("q17-k5", load) == f"q17-k5-{label}"
    assert point_id("baseline", load, repeat=True) == f"baseline-last-{label}"


def test_loads_list_concurrencies_then_rates():
    assert loads((1, 4), (0.5,)) == (Load("concurrency", 1), Load("concurrency", 4), Load("rate", 0.5))


def test_sweep_point_round_trips_into_the_run_metadata():
    meta = sweep_metadata("sweep-1", "v5-c4", 2, variant(5), Load("concurrency", 4))
    text = json.dumps({k: meta[k] for k in ("point_id", "wave", "variant", "load")})
    assert (
        parse_sweep_point("sweep-1", text)
        == meta
        == {
            "sweep_id": "sweep-1",
            "point_id": "v5-c4",
            "wave": 2,
            "variant": {"name": "v5", "draft_model": Q17, "k": 5, "method": "draft"},
            "load": {"kind": "concurrency", "value": 4},
        }
    )


@pytest.mark.parametrize(
    ("sweep_id", "text", "message"),
    [
        ("Sweep_1", "{}", "--sweep-id 'Sweep_1': expected a DNS label"),
        ("s", "not json", "--sweep-point: not JSON"),
        ("s", "[1]", "--sweep-point: expected a JSON object"),
        ("s", '{"point_id": "p"}', "--sweep-point: missing wave, variant, load"),
        ("s", '{"point_id": "P!", "wave": 0, "variant": {"name": "b"}, "load": {"kind": "rate", "value": 1}}', "point_id 'P!'"),
        ("s", '{"point_id": "p", "wave": -1, "variant": {"name": "b"}, "load": {"kind": "rate", "value": 1}}', "wave -1"),
        ("s", '{"point_id": "p", "wave": 0, "variant": "b", "load": {"kind": "rate", "value": 1}}', "variant must be"),
        ("s", '{"point_id": "p", "wave": 0, "variant": {"name": "b"}, "load": {"kind": "burst", "value": 1}}', "load.kind must be"),
        ("s", '{"point_id": "p", "wave": 0, "variant": {"name": "b"}, "load": {"kind": "rate", "value": 0}}', "load.value 0"),
        ("s", '{"point_id": "p", "wave": 0, "variant": {"name": "b"}, "load": {"kind": "rate", "value": true}}', "load.value True"),
    ],
)
def test_bad_sweep_points_are_one_line_naming_the_flag(sweep_id, text, message):
    with pytest.raises(ValueError) as error:
        parse_sweep_point(sweep_id, text)
    assert message in str(error.value) and "\n" not in str(error.value)


# --- plan ------------------------------------------------------------------------------------------


def test_units_put_the_baseline_first_and_last_and_know_what_is_compiled():
    found = units([variant(5), variant(7)], precompiled=[("", 0, ""), (Q17, 7, "draft")])
    assert [(u.index, u.variant.name, u.repeat, u.compiled) for u in found] == [
        (0, "baseline", False, True),
        (1, "v5", False, False),
        (2, "v7", False, True),
        (3, "baseline", True, True),
    ]
    # Without the services' graphs, the baseline compiles once: its repeat loads them.
    assert [u.compiled for u in units([variant(5)], precompiled=[])] == [False, False, True]


def test_waves_follow_the_index_order_and_last_as_long_as_their_longest_unit():
    found = units([variant(3), variant(4), variant(5)], precompiled=[("", 0, "")])
    planned = waves(found, slots=2, points_per_unit=3, estimates=EST)
    assert [[u.index for u in w.units] for w in planned] == [[0, 1], [2, 3], [4]]
    # Compiling unit 1: 120 + 3 x 10; the repeat of the baseline only starts: 15 + 3 x 10.
    assert [w.minutes for w in planned] == [150, 150, 45]
    with pytest.raises(ValueError):
        waves(found, slots=0, points_per_unit=1, estimates=EST)


def test_node_hours_and_dollars():
    plan = make_plan(
        [variant(3), variant(4), variant(5)],
        (Load("concurrency", 1), Load("concurrency", 4), Load("rate", 0.5)),
        slots_per_node=(0, 2),
        devices_per_unit=8,
        devices_per_node=16,
        estimates=EST,
        precompiled=[("", 0, "")],
        price_per_node_hour=35.76,
    )
    assert (plan.slots, plan.nodes, plan.points, len(plan.waves)) == (2, 1, 15, 3)
    assert plan.wall_hours == pytest.approx(345 / 60) and plan.node_hours == pytest.approx(345 / 60)
    assert plan.dollars == pytest.approx(345 / 60 * 35.76)
    assert [plan.wave_of(i) for i in range(5)] == [0, 0, 1, 1, 2]
    assert point_ids(plan)[:3] == ["baseline-c1", "baseline-c4", "baseline-r0p5"] and point_ids(plan)[-1] == "baseline-last-r0p5"
    text = render(plan, "sweep-x")
    assert text.splitlines()[0] == (
        "sweep sweep-x: 3 variant(s) + baseline (first and last wave) x 3 load level(s) [c1, c4, r0p5] = 15 points in 5 pods"
    )
    assert "| 4 | baseline (again) | - | - | - | in the bucket | 2 |" in text
    assert text.splitlines()[-1] == "estimate: 3 wave(s), 5.8 h wall clock, 5.8 Neuron node-hours, $206 at $35.76/node-hour"


def test_a_unit_label_says_which_baseline_run_it_is():
    assert Unit(3, SweepVariant("baseline"), True, True).label == "baseline (again)"


# --- configuration ---------------------------------------------------------------------------------

VARIANTS = ",".join(f"q17-k{k}:{Q17}:{k}" for k in range(3, 10)) + "," + ",".join(f"q06-k{k}:Qwen/Qwen3-0.6B:{k}" for k in range(3, 10))
TWO_NODES = {"neuron_nodes.desired_size": 2, "neuron_nodes.max_size": 2}


def problems(context: dict) -> list[str]:
    with pytest.raises(ConfigError) as error:
        load_config(context, {})
    return [str(p) for p in error.value.problems]


def test_the_sweep_is_off_by_default():
    config = load_config({}, {})
    assert config.sweep.variants == () and config.sweep.start_on_deploy is False


def test_numeric_lists_are_coerced_from_text_and_json():
    assert coerce("1, 4,16", tuple[int, ...]) == (1, 4, 16)
    assert coerce([0.5, 2], tuple[float, ...]) == (0.5, 2.0)
    with pytest.raises(ValueError, match="expected a whole number in every item of the list"):
        coerce("1,x", tuple[int, ...])


@pytest.mark.parametrize(
    ("context", "expected"),
    [
        ({"sweep.variants": "q17"}, "sweep.variants='q17': is not NAME:DRAFT_MODEL:K[:METHOD]; allowed: NAME:DRAFT_MODEL:K or "),
        ({"sweep.variants": f"q17:{Q17}:x"}, "sweep.variants='q17:Qwen/Qwen3-1.7B:x': has K='x', not a whole number"),
        ({"sweep.variants": f"q17:{Q17}:16"}, "sweep.variants=16: is out of range; allowed: 1 to 15"),
        (
            {"sweep.variants": f"q17:{Q17}:5:medusa"},
            "sweep.variants='medusa': is not a speculation method of serving stack nxdi-draft (variant q17); allowed: draft",
        ),
        ({"sweep.variants": f"Q17:{Q17}:5"}, "sweep.variants='Q17': is not a variant name"),
        ({"sweep.variants": f"baseline2:{Q17}:5"}, "sweep.variants='baseline2': starts with 'baseline'"),
        ({"sweep.variants": f"a:{Q17}:5,a:{Q17}:6"}, "sweep.variants='a': names two variants"),
        ({"sweep.variants": f"a:{Q17}:5,b:{Q17}:5"}, "sweep.variants='b:Qwen/Qwen3-1.7B:5': measures the same draft, k and method as a"),
        ({"sweep.variants": "a:meta-llama/Llama-3.2-1B:5"}, "sweep.variants='meta-llama/Llama-3.2-1B': is from family 'Llama-3'"),
        ({"sweep.concurrencies": "0"}, "sweep.concurrencies=0: is out of range; allowed: 1 to 1024"),
        ({"sweep.concurrencies": "4,4"}, "sweep.concurrencies='4,4': lists a level twice"),
        ({"sweep.concurrencies": "x"}, "sweep.concurrencies='x': expected a whole number in every item of the list"),
        ({"sweep.request_rates": "0"}, "sweep.request_rates=0.0: is out of range; allowed: greater than 0, up to 1000 requests/s"),
        ({"sweep.request_rates": "nan"}, "sweep.request_rates='nan': expected a finite number"),
        ({"sweep.request_rates": "1,1.0000001"}, "sweep.request_rates='1.0,1.0000001': has rates equal to 6 significant digits"),
        (
            {"sweep.request_rates": "0.5", "benchmark.engine": "llmperf"},
            "sweep.request_rates='0.5': needs open-loop load, which the llmperf engine (benchmark.engine=llmperf) does not drive",
        ),
        ({"sweep.slo_ttft_ms": "0"}, "sweep.slo_ttft_ms=0.0: must be a number greater than 0; allowed: > 0"),
        ({"sweep.slo_tpot_ms": "-1"}, "sweep.slo_tpot_ms=-1.0: must be a number greater than 0"),
        ({"sweep.budget_node_hours": "inf"}, "sweep.budget_node_hours='inf': expected a finite number"),
        ({"sweep.measure_minutes_per_point": "0"}, "sweep.measure_minutes_per_point=0.0: must be a number greater than 0"),
        ({"sweep.start_minutes_per_variant": "-5"}, "sweep.start_minutes_per_variant=-5.0: must be a number of minutes; allowed: >= 0"),
        ({"sweep.suite": "/no/such/suite.json"}, "sweep.suite='/no/such/suite.json': "),
        (
            {"sweep.variants": f"q17:{Q17}:5", "sweep.concurrencies": "[]"},
            "sweep.concurrencies='': is empty and so is sweep.request_rates: the sweep has no load level",
        ),
    ],
)
def test_each_bad_sweep_setting_is_one_line_naming_it(context, expected):
    found = problems({**TWO_NODES, **context})
    assert len(found) == 1 and found[0].startswith(expected), found


@pytest.mark.parametrize(
    ("context", "expected"),
    [
        (
            {},
            "neuron_nodes.desired_size=1: leaves no room for a sweep pod beside the 2 long-running services (trn2.48xlarge); "
            "allowed: >= 2 (and neuron_nodes.max_size with it)",
        ),
        ({"neuron_nodes.desired_size": 0, "neuron_nodes.min_size": 0}, "neuron_nodes.desired_size=0: leaves no room for a sweep pod"),
        # TP 16 (4 devices per service): both services and two sweep pods share the first node.
        ({"serving.tensor_parallel_size": 16, "serving.cpu_per_service": 40, "serving.memory_gib_per_service": 400}, None),
    ],
)
def test_a_sweep_needs_a_free_neuron_slot_beside_the_services(context, expected):
    context = {"sweep.variants": f"q17:{Q17}:5", **context}
    if expected is None:
        assert slots_per_node(load_config(context, {})) == (2,)
        return
    (found,) = problems(context)
    assert found.startswith(expected) and found.endswith("allowed: >= 2 (and neuron_nodes.max_size with it)")


def test_sidecars_need_kubernetes_1_29():
    from types import SimpleNamespace

    from config.sweep import sidecar_problems

    def config(version, layout="sidecar"):
        return SimpleNamespace(cluster=SimpleNamespace(kubernetes_version=version), sweep=SimpleNamespace(pod_layout=layout))

    assert [str(p) for p in sidecar_problems(config("1.28"))] == [
        "cluster.kubernetes_version='1.28': has no native sidecar containers, which the sweep pods use with "
        "sweep.pod_layout=sidecar; allowed: 1.29 or later, or sweep.pod_layout=server-container"
    ]
    assert list(sidecar_problems(config("1.29"))) == []
    assert list(sidecar_problems(config("1.28", "server-container"))) == []  # no sidecar in that layout


def test_the_pod_layout_is_one_of_two():
    (found,) = problems({"sweep.variants": f"q17:{Q17}:5", **TWO_NODES, "sweep.pod_layout": "init"})
    assert found == "sweep.pod_layout='init': is not a sweep pod layout; allowed: server-container, sidecar"
    assert load_config({"sweep.pod_layout": "sidecar"}, {}).sweep.pod_layout == "sidecar"


def test_slots_count_what_fits_each_node_after_the_services():
    config = load_config({**TWO_NODES, "sweep.variants": f"q17:{Q17}:5"}, {})
    assert slots_per_node(config) == (0, 2)
    three = load_config({"neuron_nodes.desired_size": 3, "neuron_nodes.max_size": 3, "serving.tensor_parallel_size": 64}, {})
    # TP 64 at LNC 2 = 16 devices: one service per node, the third node is free for one sweep pod.
    assert slots_per_node(three) == (0, 0, 1)


def test_synth_refuses_a_sweep_above_its_budget_naming_the_numbers():
    context = {**TWO_NODES, "sweep.variants": VARIANTS, "sweep.request_rates": "0.5", "sweep.budget_node_hours": "10"}
    assert problems(context) == [
        "sweep.budget_node_hours=10.0: is below the plan's 22.0 node-hours (8 waves of up to 2 pods on 1 node(s), 22.0 h; "
        "`specbench plan` shows them); allowed: >= 22, or fewer variants or load levels, or more nodes"
    ]
    plan = sweep_plan(load_config({**context, "sweep.budget_node_hours": "22"}, {}))
    assert (plan.points, len(plan.units), len(plan.waves), plan.node_hours) == (48, 16, 8, pytest.approx(22.0))
    # The default services' graphs (baseline and k = 7 with the 1.7B draft) are in the bucket already.
    assert [u.variant.name for u in plan.units if u.compiled] == ["baseline", "q17-k7", "baseline"]
