"""specbench predict and --calibrate: stored runs whose TPOTs a known profile produced, fitted back;
the prediction table and JSON; the write-up's anchor; bad input as one line."""

from __future__ import annotations

import json

import pytest
from sweep_data import store_points

from specbench import cli
from specbench.analysis import prediction
from specbench.analysis import serving_model as sm
from specbench.analysis.sweep import CONCURRENCY, Load, Point, Variant
from specbench.outputs import prediction as out
from specbench.results.records import RequestRecord
from specbench.results.store import LocalStore

TRUTH = sm.Profile(overhead_s=0.02, bandwidth_efficiency=0.7, compute_efficiency=0.3, draft_overhead_s=0.002)
DEPLOYMENT = sm.Deployment(method="draft", draft="Qwen/Qwen3-1.7B", k=7, max_num_seqs=64)
A = 0.8
WORKLOAD = sm.Workload(64, 600)
CONTEXT = ["-c", "serving.max_num_seqs=64"]


def model_points(profile: sm.Profile = TRUTH, ks=(0, 3, 7), loads=(1, 8, 32), requests: int = 3) -> list[Point]:
    """Points whose every request's TPOT is the model's under ``profile`` (a sweep with a known truth)."""
    points = []
    for k in ks:
        variant = Variant("baseline") if not k else Variant(f"q17-k{k}", "Qwen/Qwen3-1.7B", k, "draft_model")
        for c in loads:
            dep = DEPLOYMENT.with_k(k)
            tpot = sm.predict(dep, profile, A if k else 0.0, c, WORKLOAD).tpot_s
            records = []
            for i in range(requests):
                r = RequestRecord("r", variant.name, "counting", "structured", "native", i, 1000.0 + i)
                r.ttft_s, r.time_per_output_token_s = 0.05, tpot
                r.end_to_end_latency_s = 0.05 + 599 * tpot
                r.input_tokens, r.output_tokens = 64, 600
                records.append(r)
            acceptance = {"structured": A} if k else {}
            points.append(Point(f"{variant.name}-c{c}", variant, Load(CONCURRENCY, c), 0, tuple(records), acceptance))
    return points


def test_measured_points_from_runs_recover_the_profile():
    notes: list[str] = []
    measured = out.measured_points(model_points(), DEPLOYMENT, notes)
    assert len(measured) == 9 and not notes
    assert {(p.deployment.k, p.concurrency) for p in measured} == {(k, c) for k in (0, 3, 7) for c in (1, 8, 32)}
    assert all(p.a == pytest.approx(A if p.deployment.k else 0.0) and p.workload == WORKLOAD for p in measured)
    fit = sm.fit_profile(measured, sm.Profile(bandwidth_efficiency=0.7))
    assert fit.fitted == ("overhead_s", "inverse_compute_efficiency", "draft_overhead_s")
    assert fit.profile.overhead_s == pytest.approx(TRUTH.overhead_s, rel=1e-6)
    assert fit.profile.compute_efficiency == pytest.approx(TRUTH.compute_efficiency, rel=1e-6)
    assert fit.profile.draft_overhead_s == pytest.approx(TRUTH.draft_overhead_s, rel=1e-6)
    assert max(abs(r.relative) for r in fit.residuals) < 1e-9


def test_calibrate_from_stored_runs_saves_a_profile_the_next_predict_uses(tmp_path, capsys):
    results = tmp_path / "results"
    points = model_points()
    store_points(LocalStore(results), "cal", points)
    runs = [str(results / "sweeps" / "cal" / p.point_id) for p in points]
    saved, written = tmp_path / "profile.json", tmp_path / "prediction.json"
    args = ["predict", *CONTEXT, "--calibrate", *runs, "--save-profile", str(saved), "--json", str(written), "--loads", "1,8,64"]
    assert cli.main(args) == 0
    text = capsys.readouterr().out
    assert "fitted overhead_s, inverse_compute_efficiency, draft_overhead_s on 9 point(s)" in text
    assert "rms relative residual 0.00%" in text
    profile, deployment = sm.read_profile_document(json.loads(saved.read_text()))
    assert profile.overhead_s == pytest.approx(0.02, rel=1e-6) and profile.draft_overhead_s == pytest.approx(0.002, rel=1e-6)
    assert deployment == DEPLOYMENT
    # The acceptance comes from the calibration runs; the prediction reproduces the measured TPOTs.
    doc = json.loads(written.read_text())
    (cls,) = doc["classes"]
    assert cls["prompt_class"] == "structured" and cls["a"] == pytest.approx(A) and cls["source"] == "the calibration runs"
    by_load = {row["concurrency"]: row for row in cls["rows"]}
    spec_tpot = sm.predict(DEPLOYMENT, TRUTH, A, 8, WORKLOAD).tpot_s
    assert by_load[8]["speculative"]["tpot_s"] == pytest.approx(spec_tpot, rel=1e-6)
    assert doc["calibration"]["fitted"] == ["overhead_s", "inverse_compute_efficiency", "draft_overhead_s"]
    assert doc["assumptions"] and doc["weight_bound_s"] == pytest.approx(sm.weight_bound_s(DEPLOYMENT))
    # predict --profile: the same numbers without refitting.
    again = tmp_path / "again.json"
    assert (
        cli.main(
            ["predict", *CONTEXT, "--profile", str(saved), "--acceptance", f"structured={A}", "--loads", "1,8,64", "--json", str(again)]
        )
        == 0
    )
    rows = json.loads(again.read_text())["classes"][0]["rows"]
    assert [r["speculative"]["tpot_s"] for r in rows] == pytest.approx([r["speculative"]["tpot_s"] for r in cls["rows"]])


def test_predict_reproduces_the_writeup_and_prints_the_bandwidth_headroom(tmp_path, capsys):
    saved = tmp_path / "writeup.json"
    assert (
        cli.main(["predict", "--calibrate", "writeup", "--save-profile", str(saved), "--acceptance", "structured=0.9", "--loads", "4"]) == 0
    )
    text = capsys.readouterr().out
    assert "write-up baseline, 45 ms per token                        45.0      45.0" in text
    assert "16.3x" in text  # 45 ms against the 2.76 ms bound
    row = next(line for line in text.splitlines() if line.strip().startswith("4 "))
    assert row.split()[1:3] == ["45.0", "15.0"]  # TPOT base and speculative at 4 clients, as measured
    assert "weight-bandwidth bound of a plain step: 2.8 ms" in text
    assert "Assumptions:" in text and "$14.56/node-hour" in text  # the price catalog's us-east-2 on-demand entry


def test_prediction_table_costs_and_best_k():
    profile = sm.writeup_profile()
    report = prediction.predict_deployment(sm.WRITEUP_DEPLOYMENT, profile, {"structured": (0.9, "assumed")}, [1, 4, 8], price_per_hour=36.0)
    (cls,) = report.classes
    four = next(r for r in cls.rows if r.concurrency == 4)
    assert four.speculative_cost == pytest.approx(36.0 / (four.speculative.tokens_per_s_per_node * 3600) * 1e6)
    assert four.best_k_speedup >= four.speedup and 1 <= four.best_k <= 15
    assert cls.crossover is None and cls.first_level_not_paying is None  # max_num_seqs 4: the batch stays small
    assert prediction.cost_per_million_tokens(None, 100.0) is None
    assert prediction.default_loads(4) == [1, 2, 4, 8]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--acceptance", "structured=1.5"], "specbench: --acceptance 'structured=1.5': expected CLASS=A with A a probability in [0, 1]\n"),
        (["--profile", "/nonexistent.json"], "specbench: --profile /nonexistent.json: does not exist\n"),
        (["-c", "serving.num_speculative_tokens=abc"], None),
        (["--calibrate", "no-such-run"], None),
    ],
)
def test_bad_input_is_one_line(tmp_path, capsys, args, message):
    assert cli.main(["predict", "--results", str(tmp_path), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    if message is not None:
        assert err == message


def test_emulate_reads_the_saved_profile(tmp_path, capsys):
    from specbench.emulator.server import default_profiles, main_emulate, on_serving_model, serving_setup

    saved = tmp_path / "p.json"
    saved.write_text(json.dumps(sm.profile_document(TRUTH, DEPLOYMENT)))
    deployment, profile = serving_setup(str(saved))
    assert (deployment, profile) == (DEPLOYMENT, TRUTH)
    assert serving_setup("") == (sm.WRITEUP_DEPLOYMENT, sm.writeup_profile())
    base, spec = (on_serving_model(p, deployment, profile) for p in default_profiles(0.1).values())
    assert base.decode_step_s(4) == pytest.approx(sm.decode_step(DEPLOYMENT.with_k(0), TRUTH, 4).total_s * 0.1)
    assert spec.decode_step_s(4) == pytest.approx(sm.decode_step(DEPLOYMENT, TRUTH, 4).total_s * 0.1)  # k 7: the profile's
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"profile": {"overhead": 1}}))
    with pytest.raises(SystemExit):
        main_emulate(["--profile", str(bad)])
    assert "unknown field(s) overhead; allowed" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main_emulate(["--serving-model", "--draft-cost-ratio", "0.1"])
    assert "--draft-cost-ratio sets the fixed-step profile" in capsys.readouterr().err


def test_acceptance_from_a_stored_sweep(tmp_path, capsys):
    store_points(LocalStore(tmp_path), "s1", model_points(ks=(0, 3), loads=(1,)))
    written = tmp_path / "p.json"
    assert cli.main(["predict", "--results", str(tmp_path), "--from-sweep", "s1", "--loads", "1", "--json", str(written)]) == 0
    (cls,) = json.loads(written.read_text())["classes"]
    assert (cls["prompt_class"], cls["source"]) == ("structured", "sweep s1") and cls["a"] == pytest.approx(A)
    assert "structured: a = 0.800 (sweep s1)" in capsys.readouterr().out
