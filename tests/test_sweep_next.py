"""``specbench sweep next`` on stored points of a known truth: stage after stage it proposes what the
model cannot rule out, refuses to advance before a stage's points are stored, and stops with the
truth's optimum; ``sweep stage-job`` makes the CronJob's Job into the stage's."""

from __future__ import annotations

import io
import json
from dataclasses import replace

from specbench import cli
from specbench.analysis.sweep import CONCURRENCY, Load
from specbench.analysis.theory import expected_speedup
from specbench.outputs import sweep_next
from specbench.results.store import LocalStore
from tests.sweep_data import Truth, store_points, synthetic_points

Q17, Q06 = "Qwen/Qwen3-1.7B", "Qwen/Qwen3-0.6B"
NAMES = {Q17: "q17", Q06: "q06"}
VARIANTS = ",".join(f"q17-k{k}:{Q17}:{k}" for k in range(3, 10)) + "," + ",".join(f"q06-k{k}:{Q06}:{k}" for k in range(3, 10))
CONTEXT = [
    *("-c", "neuron_nodes.desired_size=2", "-c", "neuron_nodes.max_size=2", "-c", f"sweep.variants={VARIANTS}"),
    *("-c", "sweep.concurrencies=1", "-c", "sweep.strategy=staged"),
]
TRUTH = Truth(
    classes={"structured": 0.92, "open-ended": 0.7}, drafts={Q17: 0.08, Q06: 0.3}, ks=tuple(range(3, 10)), loads=(Load(CONCURRENCY, 1),)
)


def _named(points):
    """synthetic_points' variants renamed as the configuration names them (q17-k7, method draft)."""
    out = []
    for p in points:
        if p.variant.is_baseline:
            out.append(p)
            continue
        name = f"{NAMES[p.variant.draft_model]}-k{p.variant.k}"
        out.append(replace(p, point_id=f"{name}-{p.load.label}", variant=replace(p.variant, name=name, method="draft")))
    return out


ALL = _named(synthetic_points(TRUTH, requests=10, seed=3))


def _store(store, names):
    store_points(store, "sw", [p for p in ALL if p.variant.is_baseline or p.variant.name in names])


def _next(tmp_path, capsys):
    code = cli.main(["sweep", "next", "--sweep-id", "sw", "--results", str(tmp_path), "--node-price-per-hour", "0", *CONTEXT])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_sweep_next_walks_a_staged_sweep_to_the_truths_optimum(tmp_path, capsys):
    store = LocalStore(tmp_path)
    measured = {"q17-k7", "q06-k6"}  # stage 1 (the synth Job: config/sweep.py stage_one_variants)
    _store(store, measured)
    best_k = max(range(3, 10), key=lambda k: sum(expected_speedup(a, k, TRUTH.drafts[Q17]) for a in TRUTH.classes.values()))
    for stage in range(2, 10):
        code, out, err = _next(tmp_path, capsys)
        assert code == 0, err
        doc = json.loads((tmp_path / f"sweeps/sw/stages/after-stage-{stage - 1}.json").read_text())
        proposed = [v["name"] for v in doc["next_stage"]["variants"]]
        if not proposed:
            assert "every decision is made" in out
            break
        assert f"next: stage {stage}: " in out and "kubectl -n specdecode create job sw-s" in out
        assert not set(proposed) & measured  # never a variant again
        assert len(proposed) == 2  # one wave of the two slots
        if stage == 2:
            assert proposed[0] == f"q17-k{best_k}"  # the model's predicted optimum first
            code, _, err = _next(tmp_path, capsys)  # stage 2 not stored yet: refused, with the command
            assert code == cli.EXIT_USAGE and "stage 2 has not finished" in err and "kubectl" in err
        measured |= set(proposed)
        _store(store, measured)
    decision = doc["decisions"]["c1"]
    assert decision["made"] and (decision["best"] == f"{Q17} k={best_k}" or f"{Q17} k={best_k}" in decision["ties"])
    assert len(measured) < 14 and all(q.startswith("q17") for q in measured - {"q06-k6"})  # the 0.6B: one point
    assert any("predicted" in why for why in decision["ruled_out"].values())
    # sweep-report: which stage made the decision, and every point never run with its prediction.
    out_dir = tmp_path / "report"
    code = cli.main(
        ["sweep-report", "--results", str(tmp_path), "--sweep-id", "sw", "--out", str(out_dir), "--no-charts", "--resamples", "200"]
    )
    assert code == 0
    report = (out_dir / "sweep-report.md").read_text()
    assert "## Staged decisions" in report and f"decided after stage {doc['after_stage']}" in report
    never = [line for line in report.splitlines() if line.startswith(f"| {Q06} k=9 | c1 | predicted ")]
    assert len(never) == 1 and "below the best measured" in never[0]
    assert f"| {Q17} k={best_k} |" not in report.split("### Never run")[1]  # measured, so not in the table


def test_stage_job_maps_completion_indexes_to_the_catalogue_and_keeps_the_sweep_id(monkeypatch, tmp_path, capsys):
    doc = {
        "sweep_id": "sw",
        "catalogue": [{"name": "q17-k3"}, {"name": "q17-k4"}, {"name": "q17-k5"}],
        "next_stage": {"stage": 2, "variants": [{"name": "q17-k5"}, {"name": "q17-k3"}], "points": []},
    }
    path = tmp_path / "after-stage-1.json"
    path.write_text(json.dumps(doc))
    sweep_id = {"name": "SWEEP_ID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['batch.kubernetes.io/job-name']"}}}
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "sw-s2", "labels": {"app.kubernetes.io/name": "specbench-sweep"}},
        "spec": {
            "completionMode": "Indexed",
            "completions": 4,
            "parallelism": 2,
            "template": {"spec": {"initContainers": [{"name": "vllm", "env": []}], "containers": [{"name": "client", "env": [sweep_id]}]}},
        },
    }
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(job)))
    assert cli.main(["sweep", "stage-job", "--stage", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["spec"]["completions"] == 2 and out["spec"]["parallelism"] == 2
    client, server = out["spec"]["template"]["spec"]["containers"][0], out["spec"]["template"]["spec"]["initContainers"][0]
    assert {"name": "SWEEP_ID", "value": "sw"} in client["env"]
    assert {"name": sweep_next.STAGE_UNITS_ENV, "value": "3,1"} in client["env"] and {
        "name": "SWEEP_STAGE_UNITS",
        "value": "3,1",
    } in server["env"]
    decided = {**doc, "next_stage": {"stage": None, "variants": [], "points": []}}
    path.write_text(json.dumps(decided))
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(job)))
    assert cli.main(["sweep", "stage-job", "--stage", str(path)]) == cli.EXIT_USAGE
    assert "proposes no further stage" in capsys.readouterr().err


def test_sweep_next_without_points_is_one_line(tmp_path, capsys):
    code, _, err = _next(tmp_path, capsys)
    assert code == cli.EXIT_USAGE and err.startswith("specbench: sweep next: no sweep point stored under") and err.count("\n") == 1


def test_a_mix_of_classes_no_point_measured_is_one_line(tmp_path, capsys):
    """Synth already refuses weights outside the suite; points that measured fewer classes than the mix weighs are refused here."""
    only = Truth(classes={"structured": 0.9}, drafts={Q17: 0.08, Q06: 0.3}, ks=(6, 7), loads=(Load(CONCURRENCY, 1),))
    points = [p for p in _named(synthetic_points(only, requests=4)) if p.variant.is_baseline or p.variant.name in ("q17-k7", "q06-k6")]
    store_points(LocalStore(tmp_path), "sw", points)
    code, _, err = _next(tmp_path, capsys)
    assert code == cli.EXIT_USAGE and "weighs class(es) open-ended that no stored point measured (measured: structured)" in err
    assert err.count("\n") == 1
