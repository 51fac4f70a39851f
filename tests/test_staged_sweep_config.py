"""sweep.strategy, sweep.class_weights and sweep.decision_margin: validated at synth, the Job of a
staged sweep is its first stage, the plan prints both strategies, the budget uses the worst case."""

from __future__ import annotations

import json

import pytest

from config import ConfigError, load_config
from config.sweep import mix_weights, plan_text, staged_cost, sweep_plan
from specbench.prompts.suite import SuiteError, parse_suite

Q17, Q06 = "Qwen/Qwen3-1.7B", "Qwen/Qwen3-0.6B"
VARIANTS = ",".join(f"q17-k{k}:{Q17}:{k}" for k in range(3, 10)) + "," + ",".join(f"q06-k{k}:{Q06}:{k}" for k in range(3, 10))
DOCS_SWEEP = {
    "neuron_nodes.desired_size": 2,
    "neuron_nodes.max_size": 2,
    "sweep.variants": VARIANTS,
    "sweep.request_rates": "0.5",
    "sweep.suite": "specbench/prompts/suites/classes.json",
}


def problems(context: dict) -> list[str]:
    with pytest.raises(ConfigError) as error:
        load_config(context, {})
    return [str(p) for p in error.value.problems]


@pytest.mark.parametrize(
    ("context", "expected"),
    [
        ({"sweep.strategy": "bayes"}, "sweep.strategy='bayes': is not a sweep strategy; allowed: grid, staged"),
        ({"sweep.decision_margin": "0.5"}, "sweep.decision_margin=0.5: is out of range; allowed: 0 to 0.2"),
        ({"sweep.class_weights": "code"}, "sweep.class_weights='code': 'code' is not CLASS:WEIGHT with a number"),
        ({"sweep.class_weights": "code:-2"}, "sweep.class_weights='code:-2': 'code:-2': expected CLASS:WEIGHT with a weight >= 0"),
        ({"sweep.class_weights": "poetry:1"}, "sweep.class_weights='poetry': is not a prompt class of the sweep's suite; allowed: "),
    ],
)
def test_each_bad_staged_setting_is_one_line_naming_it(context, expected):
    found = problems({**DOCS_SWEEP, **context})
    assert len(found) == 1 and found[0].startswith(expected), found


def test_the_mix_is_the_setting_else_the_suites_else_equal(tmp_path):
    config = load_config({**DOCS_SWEEP, "sweep.class_weights": "code:3,qa:1"}, {})
    assert mix_weights(config) == {"code": 3.0, "qa": 1.0}
    equal = mix_weights(load_config(DOCS_SWEEP, {}))
    assert len(equal) == 8 and set(equal.values()) == {1.0}
    suite = {
        "name": "mix",
        "class_weights": {"structured": 4, "open-ended": 1},
        "test_cases": [
            {"name": "a", "prompt_class": "structured", "text": "1 2 3"},
            {"name": "b", "prompt_class": "open-ended", "text": "once"},
        ],
    }
    path = tmp_path / "mix.json"
    path.write_text(json.dumps(suite))
    assert mix_weights(load_config({**DOCS_SWEEP, "sweep.suite": str(path)}, {})) == {"structured": 4.0, "open-ended": 1.0}
    assert parse_suite(suite).to_dict()["class_weights"] == {"structured": 4.0, "open-ended": 1.0}


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ({"poetry": 1}, "'poetry' is not a prompt class of the suite"),
        ({"structured": -1}, "must be a number >= 0"),
        ({"structured": 0}, "every weight is 0"),
    ],
)
def test_a_suites_bad_weights_name_the_field(weights, message):
    suite = {"name": "mix", "class_weights": weights, "test_cases": [{"name": "a", "prompt_class": "structured", "text": "1 2 3"}]}
    with pytest.raises(SuiteError, match=message):
        parse_suite(suite)


def test_a_staged_job_is_its_first_stage_and_the_plan_prints_both_strategies():
    grid = load_config(DOCS_SWEEP, {})
    config = load_config({**DOCS_SWEEP, "sweep.strategy": "staged"}, {})
    plan = sweep_plan(config)
    assert [u.label for u in plan.units] == ["baseline", "q17-k7", "q06-k6", "baseline (again)"]
    assert plan.node_hours == pytest.approx(3.75) and sweep_plan(grid).node_hours == pytest.approx(22.0)
    cost = staged_cost(config)
    assert (cost.grid, cost.stage_one, cost.expected, cost.worst) == pytest.approx((22.0, 3.75, 6.5, 20.25))
    text = plan_text(config, 35.76)
    assert "strategy staged (this Job is stage 1)" in text
    assert "grid:   22.0 node-hours ($787)" in text
    assert "expected 6.5 ($232)" in text and "worst case 20.2 ($724)" in text


def test_the_budget_of_a_staged_sweep_is_its_worst_case():
    context = {**DOCS_SWEEP, "sweep.strategy": "staged", "sweep.budget_node_hours": "10"}
    (found,) = problems(context)
    assert found.startswith("sweep.budget_node_hours=10.0: is below the staged plan's worst case of 20.2 node-hours")
    assert found.endswith("allowed: >= 21, or fewer variants or load levels, or more nodes")
    load_config({**context, "sweep.budget_node_hours": "21"}, {})


def test_a_staged_sweep_chart_runs_stage_one_of_the_whole_catalogue():
    """charts/sweep.py: the ConfigMap holds every unit (the catalogue later stages pick from), the
    Job runs stage 1's indexes, and both launchers map a completion index through SWEEP_STAGE_UNITS."""
    import inspect

    from charts import benchmark_spec, serving_plan
    from charts.sweep import LAUNCHER, RUNNER, job_spec, sweep_spec
    from conftest import BUCKET

    config = load_config({**DOCS_SWEEP, "sweep.strategy": "staged", "sweep.suite": ""}, {})
    plan = serving_plan(config, BUCKET)
    spec = sweep_spec(config, plan, benchmark_spec(config, plan))
    assert len(spec.units) == 16
    assert [spec.units[i].variant["name"] for i in spec.stage_units] == ["baseline", "q17-k7", "q06-k6", "baseline"]
    job = job_spec(spec, "cm")
    assert job["completions"] == 4
    pod = job["template"]["spec"]
    everyone = [*pod["containers"], *pod.get("initContainers", [])]
    [client] = [c for c in everyone if c["name"] == "measure"]
    [server] = [c for c in everyone if LAUNCHER in c.get("command", [])]  # either pod layout
    stage_env = {"name": "SWEEP_STAGE_UNITS", "value": ",".join(map(str, spec.stage_units))}
    assert stage_env in client["env"] and stage_env in server["env"]
    from specbench.sweep import point_runner
    from specbench.sweep import vllm_supervisor as launcher

    assert (LAUNCHER, RUNNER) == (launcher.__name__, point_runner.__name__)
    assert "SWEEP_STAGE_UNITS" in inspect.getsource(point_runner.main)  # the client's runner maps the index the same way
    assert launcher.unit_index({"JOB_COMPLETION_INDEX": "2", "SWEEP_STAGE_UNITS": "0,7,14,15"}) == 14
    assert launcher.unit_index({"JOB_COMPLETION_INDEX": "2"}) == 2
