"""A sweep over tensor parallelism and k (issue 37): TP variants are units of their own, their points
feed the analysis and the staged strategy, and sweep-report recommends the cheapest configuration
within the SLOs for the traffic mix.

The truth (specbench/emulator/tp_truth.py): the batching emulator's engine serves each unit at its
TP (its weights over that TP's devices, the draft's steps on them) with a per-step overhead that
depends on TP as overhead(TP) = a + b log2(TP); this test knows a and b, so it knows each
configuration's cost per million output tokens (the serving model's steady state, x servers per
node). Every point is measured on a virtual clock (no wall-clock figure is asserted)."""

from __future__ import annotations

import math

import pytest

from config import ConfigError, load_config
from config import sweep as sweep_config
from specbench.analysis import cost, sweep_mix
from specbench.analysis.sweep import analyze_sweep
from specbench.emulator import sweep_truth
from specbench.emulator import tp_truth as tt
from specbench.sweep import staged
from specbench.sweep.plan import Packing, Room
from specbench.sweep.points import SweepVariant
from tests.session_cache import once_per_session

Q17 = tt.DRAFT
KS = (1, 3, 8)
TPS = (4, 16)  # besides the services' TP 32
CONTEXT = {
    "neuron_nodes.desired_size": 2,
    "neuron_nodes.max_size": 2,
    "sweep.variants": ",".join(f"q17b-k{k}:{Q17}:{k}" for k in KS),
    "sweep.tensor_parallel_sizes": "32,4,16",
    "sweep.concurrencies": "1,4",
}
# overhead(TP) = 19.7 ms + 4.2 ms x log2(TP): 40.7 ms at TP 32 (the write-up's fitted overhead), 32.1 ms at TP 4.
TRUTH = tt.TpTruth("overhead a + b log2(TP)", {Q17: {"code": 0.85, "qa": 0.6}}, {Q17: 0.005}, 0.0197, 0.0042)
WEIGHTS = {"code": 1.0, "qa": 1.0}
SHAPE = tt.TpShape(ks=KS, tps=TPS, loads=("c1", "c4"))
DENSE = tt.TpShape(ks=tuple(range(1, 9)), tps=TPS, loads=("c1", "c4"))
# Two SLOs the test knows the answer for: TPOT 55 ms rules out TP 4 without speculation (60 ms a
# token: its step reads the 32B weights from one chip); TTFT 65 ms also rules out TP 4 with it (72 ms).
LOOSE = (0.055, 2.0)
TIGHT_TTFT = (0.055, 0.065)


@pytest.fixture(scope="module")
def config():
    return load_config(CONTEXT, {})


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """The configurations of k = 1, 3, 8 measured once."""
    # Once per session, not per xdist worker (tests/session_cache.py): 12 configurations, 0.6 s of CPU.
    return once_per_session(
        tmp_path_factory, "sweep-tp-measured", lambda _: {c: tt.simulate(TRUTH, c, DENSE) for c in [staged.BASELINE, *SHAPE.candidates()]}
    )


@pytest.fixture(scope="module")
def dense_measured(tmp_path_factory, measured):
    """Every configuration of k = 1..8 measured once (each point is seeded by its configuration and
    load, so a sweep of fewer k measures the same points: the grid and the staged sweep share them).
    Built on ``measured``, not the other way round: a process that runs only tests of k = 1, 3, 8
    simulates their 12 configurations, not all 27 (about 50 ms of CPU each)."""
    return once_per_session(
        tmp_path_factory,
        "sweep-tp-dense-measured",
        lambda _: {c: measured[c] if c in measured else tt.simulate(TRUTH, c, DENSE) for c in [staged.BASELINE, *DENSE.candidates()]},
    )


def _points(measured):
    return [p for c, m in measured.items() for p in tt.points(TRUTH, c, SHAPE, m)]


def _name(c: staged.Config) -> str:
    return staged.variant_of(c).name


# --- configuration: the catalogue, its units and their capacity --------------------------------------


def test_tp_variants_are_units_of_their_own(config):
    names = [v.name for v in sweep_config.sweep_variants(config)]
    assert names == [
        "q17b-k1", "q17b-k3", "q17b-k8",
        "baseline-tp4", "q17b-k1-tp4", "q17b-k3-tp4", "q17b-k8-tp4",
        "baseline-tp16", "q17b-k1-tp16", "q17b-k3-tp16", "q17b-k8-tp16",
    ]  # fmt: skip
    # The shape's catalogue is the configuration's (the staged truth below decides over the same candidates).
    assert sweep_config.candidates(config) == SHAPE.candidates()
    tp4 = SweepVariant("q17b-k3-tp4", Q17, 3, "draft", 4)
    assert tp4.compile_key == (Q17, 3, "draft", 4) != SweepVariant("q17b-k3", Q17, 3, "draft").compile_key
    assert tp4.to_dict()["tp"] == 4 and "tp" not in SweepVariant("q17b-k3", Q17, 3, "draft").to_dict()
    plan = sweep_config.grid_plan(config)
    # Only the services' graphs are in the bucket: every TP variant compiles (its compile key has its TP).
    assert [u.variant.name for u in plan.units if u.compiled] == ["baseline", "baseline"]


def test_each_unit_asks_for_the_devices_of_its_tp_and_packs_by_them(config):
    request = {tp: sweep_config.unit_request(config, tp) for tp in (0, 4, 16)}
    # devices = TP x LNC / 8 physical cores per device; CPU and memory are the service's scaled by devices.
    assert {tp: r.neuron_devices for tp, r in request.items()} == {0: 8, 4: 1, 16: 4}
    assert sweep_config.scaled_service(config, 16) == (45, 450)
    assert sweep_config.scaled_service(config, 4) == (12, 144)  # 900 GiB / 8 = 113 is below /dev/shm 128 + 16
    pack = sweep_config.packing(config)
    assert pack.free[0].devices == 0 and pack.free[1].devices == 16  # the services hold node 1
    assert (pack.slots(0), pack.slots(16), pack.nodes) == (2, 3, 1)  # TP 16: CPU, not devices, stops the fourth
    assert pack.fits([0, 4, 4, 4, 16]) and not pack.fits([0, 0, 4])
    plan = sweep_config.grid_plan(config)
    charged = {u.variant.name: plan.unit_node_hours(u) for u in plan.units if not u.repeat}
    # A unit is charged its minutes x its share of the node's 16 devices: 150 min compiling and measuring 2 loads.
    assert charged["q17b-k3"] == pytest.approx(150 / 60 * 8 / 16)
    assert charged["q17b-k3-tp4"] == pytest.approx(150 / 60 * 1 / 16)
    assert charged["q17b-k3-tp16"] == pytest.approx(150 / 60 * 4 / 16)
    assert math.fsum(charged.values()) < plan.node_hours  # the node is held whole: the rest is idle capacity
    text = sweep_config.plan_text(config)
    assert "units packed by devices, CPU and memory" in text and "charged to units by device share" in text


@pytest.mark.parametrize(
    ("sizes", "message"),
    [
        ("12", "sweep.tensor_parallel_sizes=12: needs 3 devices, a count the Neuron scheduler extension cannot place on connected "
         "devices; allowed: 4, 16, 32, 64 (or addons.neuron_scheduler=false)"),
        ("6", "sweep.tensor_parallel_sizes=6: is not a whole number of Neuron devices; allowed: a multiple of 4 up to 64 on "
         "trn2.48xlarge at LNC=2"),
        ("128", "sweep.tensor_parallel_sizes=128: exceeds the 64 logical NeuronCores of one trn2.48xlarge"),
        ("4,4", "sweep.tensor_parallel_sizes='4,4': lists a TP twice; allowed: distinct sizes"),
    ],
)  # fmt: skip
def test_a_tp_that_cannot_be_allocated_is_refused_naming_the_field_and_allowed_values(sizes, message):
    with pytest.raises(ConfigError) as error:
        load_config({**CONTEXT, "sweep.tensor_parallel_sizes": sizes}, {})
    assert any(str(p).startswith(message) for p in error.value.problems), [str(p) for p in error.value.problems]


def test_a_tp_whose_pod_fits_no_node_or_sizes_without_a_sweep_are_refused():
    # The services at TP 16 fill node 1 to 8 of its 16 devices: a TP 64 pod (16 devices) fits nowhere.
    small = {"serving.tensor_parallel_size": 16, "serving.cpu_per_service": 40, "serving.memory_gib_per_service": 400}
    with pytest.raises(ConfigError) as error:
        load_config({**small, "sweep.variants": f"q17b-k3:{Q17}:3", "sweep.tensor_parallel_sizes": "64"}, {})
    assert [str(p) for p in error.value.problems] == [
        "sweep.tensor_parallel_sizes=64: makes a sweep pod (16 devices, 161 vCPU, 1604 GiB with its client; CPU and memory are "
        "the service's scaled by devices) that fits no running Neuron node's free room; allowed: a TP whose pod fits a node, "
        "more nodes, or a smaller serving.cpu_per_service / serving.memory_gib_per_service"
    ]
    with pytest.raises(ConfigError) as error:
        load_config({"sweep.tensor_parallel_sizes": "4"}, {})
    assert [str(p) for p in error.value.problems] == [
        "sweep.tensor_parallel_sizes='4': is set without sweep.variants: there is no sweep; allowed: empty, or set sweep.variants"
    ]


def test_a_tp_whose_ranks_cannot_hold_the_model_is_refused():
    """TP 4 at LNC 2: 4 ranks of 24 GiB hold Qwen3-32B's weights (about 16 GiB each) but not a KV cache of
    4 x 32768 tokens (2 KV heads per rank, 64 KiB a token: 8 GiB) with the draft's."""
    context = {**CONTEXT, "serving.max_model_len": 32768, "sweep.tensor_parallel_sizes": "4"}
    with pytest.raises(ConfigError) as error:
        load_config(context, {})
    (found,) = [str(p) for p in error.value.problems if "HBM" in str(p)]
    assert found.startswith("sweep.tensor_parallel_sizes=4: does not fit Qwen/Qwen3-32B")
    assert "GiB HBM per logical core" in found and "allowed: a TP whose ranks hold it (16, 32, 64)" in found


# --- the analysis: the ranking from measured points ---------------------------------------------------

# The rankings order configurations by their point estimates and test the SLOs on medians; no check
# here reads an interval, whose width is all the count changes (200 -> 50: 0.17 -> 0.06 s an analysis;
# rank_configurations' default 2000 cost 0.25 s).
RESAMPLES = 50


def _truth_order(slo: tuple[float, float], load: str) -> tuple[list[str], set[str]]:
    costs = tt.truth_costs(TRUTH, SHAPE, load, WEIGHTS, *slo)
    return [_name(c.config) for c in costs if c.within_slo], {_name(c.config) for c in costs if not c.within_slo}


@pytest.mark.parametrize("slo", [LOOSE, TIGHT_TTFT], ids=["tpot-slo", "tpot-and-ttft-slo"])
def test_the_ranking_from_measured_points_equals_the_truths(measured, slo):
    points = _points(measured)
    servers = {tp: tt.servers_per_node(tp) for tp in TPS}
    analysis = analyze_sweep(
        points,
        resamples=RESAMPLES,
        slo=_slo(slo),
        servers_per_node=tt.servers_per_node(tt.REFERENCE_TP),
        price=cost.NodePrice(35.76, "test"),
        weights=WEIGHTS,
        servers_by_tp=servers,
        reference_tp=tt.REFERENCE_TP,
    )
    assert [r.load for r in analysis.mix] == ["c1", "c4"]
    for ranking in analysis.mix:
        within, outside = _truth_order(slo, ranking.load)
        assert [c.variant for c in ranking.ranked if c.within_slo] == within
        assert {c.variant for c in ranking.ranked if not c.within_slo} == outside
        assert ranking.best == within[0] and not ranking.unranked
        best = ranking.ranked[0]
        # The truth's cost lies in the measured CI's neighbourhood (the emulator samples acceptance; 5 %).
        true = next(c for c in tt.truth_costs(TRUTH, SHAPE, ranking.load, WEIGHTS, *slo) if _name(c.config) == best.variant)
        assert best.node_hours_per_million.point == pytest.approx(true.node_hours_per_million, rel=0.05)
        assert best.dollars_per_million.point == pytest.approx(best.node_hours_per_million.point * 35.76)
        assert ranking.text.startswith(f"at {ranking.load_text}, for the mix (code 0.50, qa 0.50): TP ")
    # Per-TP points feed the per-class analysis too: each TP's group against its own baseline.
    assert {cls.title for cls in analysis.classes} == {"code", "qa", "code (TP 4)", "qa (TP 4)", "code (TP 16)", "qa (TP 16)"}
    # Several deployments measured: the sweep report opens with their ranking, before the per-class recommendations.
    from specbench.outputs.sweep_report import markdown

    report = markdown(analysis)
    assert report.index("## Cheapest configuration for the traffic mix") < report.index("## Recommendations")
    assert f"| {analysis.mix[0].best} (cheapest) |" in report


def _slo(slo: tuple[float, float]):
    from specbench.analysis.sweep import Slo

    return Slo(ttft_ms=slo[1] * 1000, tpot_ms=slo[0] * 1000)


def test_the_ranking_changes_with_the_slo_as_the_truth_does(measured):
    """Not a ranking that holds whatever the inputs: with the TTFT limit, TP 4's configurations drop out
    and the cheapest is at TP 16, in the truth and in the measured ranking alike."""
    loose, tight = (_truth_order(slo, "c1")[0][0] for slo in (LOOSE, TIGHT_TTFT))
    assert (loose, tight) == ("q17b-k3-tp4", "q17b-k3-tp16")
    ranked = sweep_mix.rank_configurations(
        _points(measured), WEIGHTS, 65.0, 55.0, cost.NodePrice(None), {0: 2, 4: 16, 16: 4}, resamples=RESAMPLES
    )
    assert ranked[0].best == "q17b-k3-tp16" and "node-hours per M output tokens" in ranked[0].text


# --- the staged strategy over TP and k ------------------------------------------------------------------


@pytest.mark.parametrize("slo", [LOOSE, TIGHT_TTFT], ids=["tpot-slo", "tpot-and-ttft-slo"])
def test_a_staged_sweep_over_tp_and_k_finds_the_truths_cheapest_for_fewer_node_hours(config, measured, slo, capsys):
    pack = sweep_config.packing(config)
    base = measured[staged.BASELINE]

    def measure(c: staged.Config):
        return sweep_truth.class_measures(measured[c.__class__(tp=c.tp)] if c.tp else base, measured[c])

    def measure_baseline(tp: int):
        return tt.baseline_figures(measured[staged.Config(tp=tp)], tp)

    objective = staged.Objective(WEIGHTS, price_per_node_hour=35.76, slo_tpot_s=slo[0], slo_ttft_s=slo[1])
    result = staged.run_staged(
        SHAPE.candidates(),
        measure,
        tt.baseline_figures(base, tt.REFERENCE_TP),
        objective,
        SHAPE.loads,
        slots=pack,
        precompiled=sweep_config.stage_costing(config)[2],
        estimates=SHAPE.estimates,
        margin=0.02,
        measure_baseline=measure_baseline,
    )
    grid = staged.grid_node_hours(SHAPE.candidates(), len(SHAPE.loads), pack, sweep_config.stage_costing(config)[2], SHAPE.estimates)
    assert grid == pytest.approx(sweep_config.grid_plan(config).node_hours)  # the plan synth prints
    for load in SHAPE.loads:
        decision = result.decisions[load]
        assert decision.made and _name(decision.best) == _truth_order(slo, load)[0][0]
    assert result.node_hours < grid
    # Stage 1: the services' baseline, one k of the draft at the services' TP, the baseline at every other TP.
    assert result.stages[0] == [staged.Config(Q17, 3, "draft"), staged.Config(tp=4), staged.Config(tp=16)]
    unmeasured = set(SHAPE.candidates()) - result.measured
    assert unmeasured  # TP values and k ruled out without a point of their own
    with capsys.disabled():
        print(
            f"\n[{'+'.join(f'{v:g}' for v in slo)} s SLO] staged over TP x k: {result.node_hours:.2f} node-hours in "
            f"{len(result.stages)} stages against the grid's {grid:.2f}; never run: {', '.join(sorted(_name(c) for c in unmeasured))}"
        )


MARGIN = 0.02  # sweep.decision_margin's default


@pytest.mark.parametrize("slo", [LOOSE, TIGHT_TTFT], ids=["tpot-slo", "tpot-and-ttft-slo"])
def test_with_every_k_the_staged_sweep_prunes_whole_tps_and_lands_within_the_margin(slo, dense_measured, capsys):
    """k = 1..8 at three TPs (26 candidates): near the optimum neighbouring k cost within 2 % of each
    other, which the decision margin does not tell apart; the decision is at the truth's TP and within
    the margin of its cheapest, and whole TPs are ruled out from their baselines and the model."""
    dense = load_config({**CONTEXT, "sweep.variants": ",".join(f"q17b-k{k}:{Q17}:{k}" for k in DENSE.ks)}, {})
    assert sweep_config.candidates(dense) == DENSE.candidates()
    measured = dense_measured
    pack, precompiled = sweep_config.packing(dense), sweep_config.stage_costing(dense)[2]
    objective = staged.Objective(WEIGHTS, price_per_node_hour=35.76, slo_tpot_s=slo[0], slo_ttft_s=slo[1])
    result = staged.run_staged(
        DENSE.candidates(),
        lambda c: sweep_truth.class_measures(measured[staged.Config(tp=c.tp)] if c.tp else measured[staged.BASELINE], measured[c]),
        tt.baseline_figures(measured[staged.BASELINE], tt.REFERENCE_TP),
        objective,
        DENSE.loads,
        slots=pack,
        precompiled=precompiled,
        estimates=DENSE.estimates,
        margin=MARGIN,
        measure_baseline=lambda tp: tt.baseline_figures(measured[staged.Config(tp=tp)], tp),
    )
    grid = staged.grid_node_hours(DENSE.candidates(), len(DENSE.loads), pack, precompiled, DENSE.estimates)
    for load in DENSE.loads:
        truth = {c.config: c for c in tt.truth_costs(TRUTH, DENSE, load, WEIGHTS, *slo)}
        cheapest = min((c for c in truth.values() if c.within_slo), key=lambda c: c.node_hours_per_million)
        decided = truth[result.decisions[load].best]
        assert result.decisions[load].made and decided.within_slo and decided.config.tp == cheapest.config.tp
        assert decided.node_hours_per_million <= cheapest.node_hours_per_million * (1 + MARGIN)
    never = set(DENSE.candidates()) - result.measured
    pruned = [tp for tp in (0, *TPS) if sum(1 for c in never if c.tp == tp and not c.is_baseline) >= len(DENSE.ks) - 1]
    assert pruned, "no TP was pruned: every TP had most of its k measured"
    assert result.node_hours <= grid / 2
    with capsys.disabled():
        print(
            f"\n[{'+'.join(f'{v:g}' for v in slo)} s SLO, k = 1..8] staged over TP x k: {result.node_hours:.2f} node-hours "
            f"({len(result.measured) - 1} of {len(DENSE.candidates())} candidates measured) against the grid's {grid:.2f}; "
            f"TP(s) pruned to at most one k: {', '.join(str(tp or tt.REFERENCE_TP) for tp in pruned)}"
        )


def test_a_tp_without_a_speculative_point_is_predicted_over_the_range_its_draft_cost_may_take():
    """c at TP 4 from TP 32's fit: between c (the draft's step a fixed share of the target's) and c x the
    baselines' step ratio (the draft's step a fixed time), the truth's c (its draft and target steps at
    TP 4 in the serving model) inside it."""
    from dataclasses import replace

    from specbench.analysis import serving_model as sm

    def c_at(tp: int) -> float:
        dep = tt.deployment(SHAPE, staged.Config(Q17, 3, "draft", tp))
        profile = TRUTH.serving(tp, Q17)
        return sm.draft_step_s(dep, profile, 1) / sm.decode_step(replace(dep, method="", draft="", k=0), profile, 1).total_s

    base = {
        cls: staged.BaseClass(None, sm.decode_step(tt.deployment(SHAPE, staged.BASELINE), TRUTH.serving(32), 1).total_s) for cls in WEIGHTS
    }
    tp4 = {
        cls: staged.BaseClass(None, sm.decode_step(tt.deployment(SHAPE, staged.Config(tp=4)), TRUTH.serving(4), 1).total_s)
        for cls in WEIGHTS
    }
    obs = staged.Observations({"c1": base}, {}, {"c1": {4: tp4}})
    fit = staged.DraftFit(Q17, "c1", {cls: (0.8, 0.01) for cls in WEIGHTS}, c_at(32), 0.0)
    (transfer,) = staged.transfers(obs, "c1", [(Q17, 4)], {(Q17, 0): fit, (Q17, 4): None}, WEIGHTS).values()
    assert transfer.source_tp == 0 and transfer.low < 1.0 == transfer.high
    assert c_at(32) * transfer.low <= c_at(4) <= c_at(32) * transfer.high


def test_packing_refuses_a_unit_no_node_can_hold():
    pack = Packing((Room(16, 100_000, 1_000_000),), ((0, Room(8, 60_000, 100)), (4, Room(1, 5_000, 100))), 16)
    assert pack.fits([0, 4, 4]) and not pack.fits([0, 0])  # CPU: two 60-vCPU pods do not fit 100
    assert pack.slots(4) == 16 and pack.slots(0) == 1
    with pytest.raises(ValueError, match="no pod size for a unit at TP 16"):
        pack.fits([16])


# --- the chart: each TP group a Job of its own, its server built by the services' code ------------------


def test_each_tp_group_is_a_job_whose_server_has_its_tp_and_devices():
    from charts import benchmark_spec, serving_plan
    from charts.sweep import NAME, TP_LABEL, sweep_objects, sweep_spec
    from conftest import BUCKET

    context = {**CONTEXT, "sweep.variants": f"q17b-k3:{Q17}:3", "sweep.start_on_deploy": "true"}
    config = load_config(context, {})
    plan = serving_plan(config, BUCKET)
    spec = sweep_spec(config, plan, benchmark_spec(config, plan))
    objects = sweep_objects(spec)
    cronjobs = {o["metadata"]["name"]: o for o in objects if o["kind"] == "CronJob" and o["metadata"]["name"].startswith(NAME)}
    assert set(cronjobs) == {NAME, f"{NAME}-tp4", f"{NAME}-tp16"}
    units = {u.index: u for u in spec.units}
    for name, tp, devices, cores in ((NAME, 0, 8, 32), (f"{NAME}-tp4", 4, 1, 4), (f"{NAME}-tp16", 4 * 4, 4, 16)):
        job = cronjobs[name]["spec"]["jobTemplate"]["spec"]
        pod = job["template"]["spec"]
        server = next(c for c in [*pod.get("initContainers", []), *pod["containers"]] if c["name"] == "vllm")
        assert server["resources"]["limits"]["aws.amazon.com/neuron"] == str(devices)
        env = {e["name"]: e.get("value") for c in pod["containers"] for e in c.get("env", [])}
        indexes = [int(i) for i in env["SWEEP_STAGE_UNITS"].split(",")]
        assert job["completions"] == len(indexes) and all(int(units[i].variant.get("tp") or 0) == tp for i in indexes)
        for i in indexes:  # the units' servers as the services' code builds them, at the group's TP
            assert units[i].service.serving.tensor_parallel_size == cores
        assert (env.get("SWEEP_ID_SUFFIX"), job["template"]["metadata"]["labels"].get(TP_LABEL)) == (
            (f"-tp{tp}", str(tp)) if tp else (None, None)
        )
    import json

    (config_map,) = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith(NAME)]
    for entry, unit in zip(json.loads(config_map["data"]["units.json"]), spec.units, strict=True):  # what each pod's launcher runs
        args = entry["args"]
        assert args[args.index("--tensor-parallel-size") + 1] == str(unit.service.serving.tensor_parallel_size)
    # A TP variant compiles into a folder of its own: its compile settings carry its TP.
    k3 = {int(u.variant.get("tp") or 0): u.service for u in spec.units if u.variant.get("k") == 3}
    assert len({s.artifacts_dir() for s in k3.values()}) == 3
    assert {s.compile_settings()["tensor_parallel_size"] for s in k3.values()} == {4, 16, 32}
    jobs = [o["metadata"]["name"] for o in objects if o["kind"] == "Job" and o["metadata"]["name"].startswith(NAME)]
    assert len(jobs) == 3 and all(j.startswith(jobs[0]) for j in jobs)  # start_on_deploy: <id>, <id>-tp4, <id>-tp16


# --- sweep next on stored TP points: one decision, one Job per TP group ------------------------------


def _store_points(store, sweep_id: str, points, deployment: dict) -> None:
    """Each point as ``specbench run --sweep-point`` stores it (tests/sweep_data.py), its variant's TP and
    the deployment's settings snapshot (logical cores per node: each TP's servers per node) recorded."""
    import json

    for point in points:
        base = f"sweeps/{sweep_id}/{point.point_id}/"
        v = point.variant
        variant = {"name": v.name, "draft_model": v.draft_model or "", "k": v.k or 0, "method": v.method or "", "tp": v.tp or 0}
        load = {"kind": point.load.kind, "value": int(point.load.value)}
        sweep = {"sweep_id": sweep_id, "point_id": point.point_id, "wave": 0, "variant": variant, "load": load}
        cases = sorted({(r.test_case, r.prompt_class) for r in point.records})
        suite = {"test_cases": [{"name": c, "prompt_class": k} for c, k in cases]}
        store.write_text(
            base + "run.json", json.dumps({"status": "completed", "sweep": sweep, "plan": {"suite": suite, "deployment": deployment}})
        )
        for case, cls in cases:
            store.write_text(f"{base}records/{case}.jsonl", "".join(r.to_json() + "\n" for r in point.records if r.test_case == case))
            if cls in point.acceptance:
                figures = {v.name: {"source": "counters", "per_position": [point.acceptance[cls]]}}
                store.write_text(f"{base}acceptance/{case}.json", json.dumps(figures))


def test_sweep_next_on_stored_tp_points_proposes_a_job_per_tp_group(config, measured, tmp_path):
    from charts import benchmark_spec, serving_plan
    from charts.sweep import NAME, sweep_objects, sweep_spec
    from config.sweep_decision import decision_settings
    from conftest import BUCKET
    from specbench.outputs import sweep_controller, sweep_next
    from specbench.outputs.sweep_report import load_sweep_folders
    from specbench.results.store import LocalStore

    store = LocalStore(tmp_path)
    deployment = {"cost": {"logical_cores_per_node": 64, "servers_per_node": 2}, "serving": {"tensor_parallel_size": 32}}
    first = [staged.BASELINE, *staged.stage_one(SHAPE.candidates(), sweep_config.stage_costing(config)[2])]
    _store_points(store, "sw", [p for c in first for p in tt.points(TRUTH, c, SHAPE, measured[c])], deployment)
    from dataclasses import replace

    inputs = sweep_controller.inputs_from_settings(decision_settings(config, 35.76))
    inputs = replace(inputs, objective=replace(inputs.objective, weights=WEIGHTS))  # the truth's classes, not the default suite's
    assert inputs.packing == sweep_config.packing(config) and [v.name for v in inputs.stage_one] == [
        "q17b-k3",
        "baseline-tp4",
        "baseline-tp16",
    ]
    step, doc, _ = sweep_next.advance(store, load_sweep_folders(store, "sw"), "sw", inputs, resamples=100)
    groups = sorted({v.tp for v in step.proposal})
    # The same stage as run_staged's on these points: TP 4's configurations (predicted cheapest), TP 16's filling the wave.
    assert groups == [4, 16] and doc["next_stage"]["stage"] == 2
    command = doc["next_stage"]["command"]
    for tp in groups:  # one Job per TP group the stage has units in, each from its group's CronJob
        suffix = f"-tp{tp}" if tp else ""
        assert f"create job sw-s2{suffix} --from=cronjob/{NAME}{suffix} " in command
    # The group's CronJob Job, filtered into the stage's: only the stage's units at TP 4, the sweep id set.
    plan = serving_plan(config, BUCKET)
    objects = sweep_objects(sweep_spec(config, plan, benchmark_spec(config, plan)))
    (cronjob,) = [o for o in objects if o["kind"] == "CronJob" and o["metadata"]["name"] == f"{NAME}-tp4"]
    template = cronjob["spec"]["jobTemplate"]
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "sw-s2-tp4", "labels": template["metadata"]["labels"]}}
    made = sweep_next.stage_job({**job, "spec": template["spec"]}, doc)
    env = {e["name"]: e.get("value") for e in made["spec"]["template"]["spec"]["containers"][-1]["env"]}
    catalogue = [v.name for v in inputs.variants]
    ran = [catalogue[int(i) - 1] for i in env["SWEEP_STAGE_UNITS"].split(",")]
    assert ran == [v.name for v in step.proposal if v.tp == 4] and env["SWEEP_ID"] == "sw" and "SWEEP_ID_SUFFIX" not in env
    # sweep control makes the same Jobs: one per TP group, each from that group's first Job (kept in the store).
    import json

    class Api:
        namespace, created = "specdecode", []

        def get(self, name):
            return None

        def create(self, job):
            self.created.append(job)
            return True

    for tp in groups:
        suffix = f"-tp{tp}" if tp else ""
        (group,) = [o for o in objects if o["kind"] == "CronJob" and o["metadata"]["name"] == NAME + suffix]
        first = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": f"sw{suffix}", "labels": group["spec"]["jobTemplate"]["metadata"]["labels"]},
        }
        store.write_text(sweep_controller.template_key("sw", tp), json.dumps({**first, "spec": group["spec"]["jobTemplate"]["spec"]}))
    api = Api()
    did, outcome = sweep_controller.step(api, store, "sw", inputs, "sw", 100)
    assert outcome is None and [j["metadata"]["name"] for j in api.created] == [f"sw-s2{f'-tp{tp}' if tp else ''}" for tp in groups]
    assert did.startswith("created job sw-s2")
