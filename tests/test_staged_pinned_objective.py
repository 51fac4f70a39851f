"""A staged sweep is pinned to what it started with (issue 33): other settings at a later
``sweep next`` are refused with the difference and no stage document is rewritten; dollar figures
use the runs' servers per node; intervals print low to high; a decision is attributed to the stage
that measured it; each proposed stage prints its node-hours and the running total."""

from __future__ import annotations

import json
import re

from specbench import cli
from specbench.outputs.sweep_next import staged_section
from specbench.results.store import LocalStore
from specbench.sweep import evidence
from tests.test_sweep_points_checked import STAGE_ONE, _doc, _next, _store


def _started(tmp_path, capsys):  # type: ignore[no-untyped-def]
    """Stage 1 decided (with a proposal) and stage 2's points stored."""
    store = LocalStore(tmp_path)
    _store(store, STAGE_ONE)
    code, out, err = _next(tmp_path, capsys)
    assert code == 0, err
    proposed = {v["name"] for v in _doc(tmp_path)["next_stage"]["variants"]}
    _store(store, STAGE_ONE | proposed)
    return out


def _refused(tmp_path, code, err, *expected):  # type: ignore[no-untyped-def]
    assert code == cli.EXIT_USAGE and err.count("\n") == 1 and "was started with other settings" in err, err
    for text in expected:
        assert text in err, err
    assert not (tmp_path / "sweeps/sw/stages/after-stage-2.json").exists()


def test_a_later_step_with_another_margin_is_refused_with_the_difference(tmp_path, capsys):
    _started(tmp_path, capsys)
    code, _, err = _next(tmp_path, capsys, "-c", "sweep.decision_margin=0.05")
    _refused(tmp_path, code, err, "sweep.decision_margin: 0.02 -> 0.05")


def test_a_later_step_with_a_price_is_refused(tmp_path, capsys):
    _started(tmp_path, capsys)
    code = cli.main(["sweep", "next", "--sweep-id", "sw", "--results", str(tmp_path), "--node-price-per-hour", "3", *_context()])
    _refused(tmp_path, code, capsys.readouterr().err, "node price (--node-price-per-hour, results.node_price_per_hour): None -> 3.0")


def test_a_later_step_with_other_class_weights_or_slos_is_refused(tmp_path, capsys):
    _started(tmp_path, capsys)
    code, _, err = _next(tmp_path, capsys, "-c", "sweep.class_weights=structured:3,open-ended:1")
    _refused(
        tmp_path, code, err, "sweep.class_weights (weights): {open-ended: 0.5, structured: 0.5} -> {open-ended: 0.25, structured: 0.75}"
    )
    code, _, err = _next(tmp_path, capsys, "-c", "sweep.slo_tpot_ms=50")
    _refused(tmp_path, code, err, "sweep.slo_tpot_ms (in s): 0.1 -> 0.05")


def test_a_stage_document_from_before_pinning_pins_its_objective_and_catalogue(tmp_path, capsys):
    _started(tmp_path, capsys)
    path = tmp_path / "sweeps/sw/stages/after-stage-1.json"
    doc = json.loads(path.read_text())
    del doc["pinned"]
    path.write_text(json.dumps(doc))
    code = cli.main(["sweep", "next", "--sweep-id", "sw", "--results", str(tmp_path), "--node-price-per-hour", "3", *_context()])
    _refused(tmp_path, code, capsys.readouterr().err, "node price (--node-price-per-hour, results.node_price_per_hour): None -> 3.0")


def test_the_same_settings_advance(tmp_path, capsys):
    _started(tmp_path, capsys)
    code, _, err = _next(tmp_path, capsys)
    assert code == 0, err
    assert _doc(tmp_path, 2)["pinned"] == _doc(tmp_path, 1)["pinned"]


def _context():  # type: ignore[no-untyped-def]
    from tests.test_sweep_next import CONTEXT

    return CONTEXT


def test_a_decided_stage_is_not_rewritten_by_a_re_decision(tmp_path, capsys):
    store = LocalStore(tmp_path)
    _store(store, STAGE_ONE)
    price = ["sweep", "next", "--sweep-id", "sw", "--results", str(tmp_path), "--node-price-per-hour", "2", *_context()]
    assert cli.main(price) == 0
    capsys.readouterr()
    path = tmp_path / "sweeps/sw/stages/after-stage-1.json"
    assert json.loads(path.read_text())["next_stage"]["stage"] is None  # decided after stage 1
    before = path.read_text()
    assert cli.main(price) == 0  # the same points and settings: the same document
    capsys.readouterr()
    assert path.read_text() == before
    _store(store, {"q17-k5"})  # a point stored since: the decision would be made again from other evidence
    code = cli.main(price)
    err = capsys.readouterr().err
    assert code == cli.EXIT_USAGE and "already holds a different decision after stage 1" in err and err.count("\n") == 1
    assert path.read_text() == before


def _with_servers(tmp_path, servers):  # type: ignore[no-untyped-def]
    for run_json in (tmp_path / "sweeps/sw").glob("*/run.json"):
        run = json.loads(run_json.read_text())
        run["plan"]["deployment"] = {"cost": {"servers_per_node": servers}}
        run_json.write_text(json.dumps(run))


def test_dollar_figures_use_the_runs_servers_per_node(tmp_path, capsys):
    figures = {}
    for servers in (1, 2):
        root = tmp_path / str(servers)
        _store(LocalStore(root), STAGE_ONE)
        _with_servers(root, servers)
        price = ["sweep", "next", "--sweep-id", "sw", "--results", str(root), "--node-price-per-hour", "2", *_context()]
        assert cli.main(price) == 0, capsys.readouterr().err
        capsys.readouterr()
        doc = _doc(root)
        assert doc["pinned"]["servers_per_node"] == servers and doc["objective"]["servers_per_node"] == servers
        figures[servers] = -doc["decisions"]["c1"]["best_value"]
    assert abs(figures[1] / figures[2] - 2.0) < 1e-6  # two servers a node: half the cost of a token


def test_intervals_print_low_to_high(tmp_path, capsys):
    _store(LocalStore(tmp_path), STAGE_ONE)
    price = ["sweep", "next", "--sweep-id", "sw", "--results", str(tmp_path), "--node-price-per-hour", "2", *_context()]
    assert cli.main(price) == 0
    capsys.readouterr()
    reasons = list(_doc(tmp_path)["decisions"]["c1"]["ruled_out"].values())
    bounds = [re.search(r"\[\$([\d.]+)/M tokens - \$([\d.]+)/M tokens\]", why) for why in reasons]
    assert bounds and all(b is not None for b in bounds), reasons
    assert all(float(b.group(1)) <= float(b.group(2)) for b in bounds), reasons


def test_each_proposed_stage_prints_its_node_hours_and_the_running_total(tmp_path, capsys):
    out = _started(tmp_path, capsys)
    first = _doc(tmp_path)["node_hours"]
    assert first["next_stage"] > 0 and abs(first["so_far"] - first["stage_one"] - first["next_stage"]) < 1e-9
    line = next(line for line in out.splitlines() if line.startswith("next: stage 2: "))
    assert f"{first['next_stage']:.1f} node-hours; {first['so_far']:.1f} node-hours so far" in line
    assert f"expected {first['expected']:.1f}, worst case {first['worst']:.1f}, budget {first['budget']:.1f}" in line
    code, out, err = _next(tmp_path, capsys)
    assert code == 0, err
    second = _doc(tmp_path, 2)["node_hours"]
    if second["next_stage"]:
        assert abs(second["so_far"] - (first["so_far"] + second["next_stage"])) < 1e-9
        assert f"{second['so_far']:.1f} node-hours so far" in out


def _estimate(config, measured=True):  # type: ignore[no-untyped-def]
    return {"config": config, "measured": measured, "point": 1.0, "low": None, "high": None, "feasible": True}


def _decision(best, measured):  # type: ignore[no-untyped-def]
    return {
        "made": True,
        "best": best,
        "best_display": "1.500x",
        "ties": [],
        "undecided": [],
        "ruled_out": {},
        "estimates": [_estimate(c) for c in measured],
    }


DOCS = [
    {
        "after_stage": 1,
        "objective": {"kind": "speedup", "weights": {"qa": 1.0}},
        "decisions": {"c1": _decision("D k=5", ["baseline", "D k=5"])},
        "next_stage": {"stage": 2, "variants": [{"name": "d-k6", "draft_model": "D", "k": 6, "method": ""}]},
    },
    {
        "after_stage": 2,
        "objective": {"kind": "speedup", "weights": {"qa": 1.0}},
        "decisions": {"c1": _decision("D k=6", ["baseline", "D k=5", "D k=6"])},
        "next_stage": {"stage": 3, "variants": [{"name": "d-k7", "draft_model": "D", "k": 7, "method": ""}]},
    },
    {
        "after_stage": 3,
        "objective": {"kind": "speedup", "weights": {"qa": 1.0}},
        "decisions": {"c1": _decision("D k=6", ["baseline", "D k=5", "D k=6", "D k=7"])},
        "next_stage": {"stage": None, "variants": []},
    },
]


def test_a_decision_is_attributed_to_the_stage_that_measured_its_best():
    assert evidence.decided_in(DOCS) == {"c1": 2}  # made after stage 1 with k=5; the decision standing is k=6's, since stage 2
    section = "\n".join(staged_section(DOCS))
    assert "- c1: D k=6, 1.500x; decided after stage 2 (measured in stage 2)" in section
    assert "- stage 1 (the synth Job): baseline, D k=5, baseline again" in section
    assert "- stage 2: d-k6 (D k=6)" in section and "- stage 3: d-k7 (D k=7)" in section
