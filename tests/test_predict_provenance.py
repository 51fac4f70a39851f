"""Issue 33: settings a run or a profile recorded win over the local ones; a run without a settings
snapshot is not two baselines; a named source that is not there is an error; every prediction says
which parameters were fitted and which assumed, and which loads lie outside the measured ones."""

from __future__ import annotations

import json

import pytest

from specbench import cli
from specbench.analysis import provenance
from specbench.analysis import serving_model as sm
from specbench.analysis.sweep import points_from_run
from specbench.results import roles
from specbench.results.records import RequestRecord

TRUTH = sm.Profile(overhead_s=0.02, bandwidth_efficiency=0.7, compute_efficiency=0.3, draft_overhead_s=0.002)
RECORDED = sm.Deployment(method="draft", draft="Qwen/Qwen3-1.7B", k=7, max_num_seqs=64)  # the local cdk.json says 4
A = 0.8
WORKLOAD = sm.Workload(64, 600)
BASE, SPEC = "qwen-vllm", "qwen-sd-vllm"


def snapshot(dep: sm.Deployment = RECORDED) -> dict:
    """A settings snapshot as charts/spec.py writes it (the fields the readers use)."""
    serving = {"target_model": dep.target, "tensor_parallel_size": dep.tensor_parallel_size, "max_num_seqs": dep.max_num_seqs}
    serving |= {"logical_nc_config": dep.lnc, "instance_type": dep.node_type}
    variants = [
        {"name": BASE, "draft_model": None, "num_speculative_tokens": None},
        {"name": SPEC, "draft_model": dep.draft, "num_speculative_tokens": dep.k, "method": "draft"},
    ]
    return {"serving": serving, "variants": variants}


def store_run(root, run_id, loads=(1, 8, 32), settings=None, plan_roles=None, metrics=True, dep=RECORDED, profile=TRUTH):
    """A multi-level run of the two services whose every request's TPOT is the model's under ``profile``
    on ``dep``; /metrics acceptance figures for the speculative one (k positions) when ``metrics``."""
    folder = root / run_id
    (folder / "records").mkdir(parents=True)
    (folder / "acceptance").mkdir()
    plan = {
        "endpoints": [{"name": BASE, "url": "http://127.0.0.1:8000"}, {"name": SPEC, "url": "http://127.0.0.1:8001"}],
        "suite": {"name": "t", "test_cases": [{"name": "counting", "prompt_class": "structured"}]},
        "load": {"concurrency": loads[0]},
        "deployment": settings or {},
    }
    if plan_roles:
        plan["roles"] = plan_roles
    (folder / "run.json").write_text(json.dumps({"run_id": run_id, "status": "completed", "plan": plan}))
    for c in loads:
        lines = []
        for name, d, a in ((BASE, dep.with_k(0), 0.0), (SPEC, dep, A)):
            tpot = sm.predict(d, profile, a, c, WORKLOAD).tpot_s
            for i in range(3):
                r = RequestRecord(run_id, name, "counting", "structured", "native", i, 1000.0 + i, load_level=f"c{c}")
                r.ttft_s, r.time_per_output_token_s, r.end_to_end_latency_s = 0.05, tpot, 0.05 + 599 * tpot
                r.input_tokens, r.output_tokens = 64, 600
                lines.append(r.to_json())
        (folder / "records" / f"counting@c{c}.jsonl").write_text("\n".join(lines) + "\n")
        figures = {BASE: {"source": "missing", "reason": "no spec-decode metrics"}}
        if metrics:
            figures[SPEC] = {"source": "counters", "per_position": [A ** (i + 1) for i in range(dep.k)]}
        else:
            figures[SPEC] = {"source": "missing", "reason": "no spec-decode metrics"}
        (folder / "acceptance" / f"counting@c{c}.json").write_text(json.dumps(figures))
    return str(folder)


def predict_json(tmp_path, capsys, *args: str) -> tuple[int, dict, str, str]:
    written = tmp_path / "prediction.json"
    code = cli.main(["predict", "--save-profile", str(tmp_path / "profile.json"), "--json", str(written), *args])
    out, err = capsys.readouterr()
    return code, (json.loads(written.read_text()) if code == 0 else {}), out, err


def rows(doc: dict) -> dict[int, dict]:
    (cls,) = doc["classes"]
    return {row["concurrency"]: row for row in cls["rows"]}


# --- a calibration point's deployment comes from its run ------------------------------------------


def test_calibrate_takes_max_num_seqs_from_the_runs_not_the_local_settings(tmp_path, capsys):
    run = store_run(tmp_path, "r64", settings=snapshot())
    code, doc, out, err = predict_json(tmp_path, capsys, "--calibrate", run, "--loads", "1,32,64")
    assert code == 0, err
    # The fit on the recorded max_num_seqs 64 reproduces the measured TPOTs at high load (the local 4 did not).
    assert doc["deployment"]["max_num_seqs"] == 64
    truth = sm.predict(RECORDED, TRUTH, A, 32, WORKLOAD).tpot_s
    assert rows(doc)[32]["speculative"]["tpot_s"] == pytest.approx(truth, rel=1e-6)
    assert "rms relative residual 0.00%" in out
    saved, deployment = sm.read_profile_document(json.loads((tmp_path / "profile.json").read_text()))
    assert deployment == RECORDED and saved.compute_efficiency == pytest.approx(0.3, rel=1e-6)
    # Per parameter, fitted or assumed, in the fit table and in the prediction.
    assert "bandwidth_efficiency" in out and "assumed: the starting value, not fitted" in out
    status = {p["name"]: p["status"] for p in doc["parameters"]}
    assert status == {
        "overhead_s": "fitted",
        "bandwidth_efficiency": "assumed",
        "compute_efficiency": "fitted",
        "draft_overhead_s": "fitted",
    }
    assert dict(doc["deployment_sources"])["max_num_seqs"] == "the calibration runs"
    # 64 clients lies outside the measured 1-32: marked.
    assert [rows(doc)[c]["extrapolated"] for c in (1, 32, 64)] == [False, False, True]
    assert "extrapolated" in out.splitlines()[-8] or any(line.rstrip().endswith("extrapolated") for line in out.splitlines())


def test_a_run_that_records_no_deployment_says_what_it_assumed(tmp_path, capsys):
    run = store_run(tmp_path, "bare", dep=RECORDED)  # no snapshot: roles from the first --endpoint and /metrics
    code, _, out, err = predict_json(tmp_path, capsys, "-c", "serving.max_num_seqs=64", "--calibrate", run, "--loads", "8")
    assert code == 0, err
    assert f"{run}: records no target, tensor_parallel_size, lnc, max_num_seqs, node_type; the local settings'" in out
    assert "the run records no draft; the settings' Qwen/Qwen3-1.7B assumed" in out
    assert f"{run}: {BASE} baseline (the first --endpoint); {SPEC} speculative (draft unknown) k=7 (/metrics" in out


# --- a profile's deployment wins over the configured one -----------------------------------------


def write_profile(path, dep: sm.Deployment, concurrencies=(1, 8, 32)) -> str:
    fit = sm.Fit(TRUTH, ("overhead_s", "inverse_compute_efficiency", "draft_overhead_s"))
    doc = sm.profile_document(TRUTH, dep, fit)
    doc["measured"] = {"deployments": [json.loads(json.dumps(d.__dict__)) for d in (dep.with_k(0), dep)]}
    doc["measured"] |= {"concurrencies": list(concurrencies), "batches": sorted({min(c, dep.max_num_seqs) for c in concurrencies})}
    path.write_text(json.dumps(doc))
    return str(path)


def test_predict_profile_uses_the_profiles_deployment_and_says_what_carries_over(tmp_path, capsys):
    fitted_on = sm.Deployment(method="draft", draft="Qwen/Qwen3-1.7B", k=5, max_num_seqs=64)
    profile = write_profile(tmp_path / "p.json", fitted_on)
    code, doc, out, err = predict_json(tmp_path, capsys, "--profile", profile, "--acceptance", f"structured={A}", "--loads", "16")
    assert code == 0, err
    assert (doc["deployment"]["k"], doc["deployment"]["max_num_seqs"]) == (5, 64)  # not the configured 7 and 4
    assert rows(doc)[16]["speculative"]["tpot_s"] == pytest.approx(sm.predict(fitted_on, TRUTH, A, 16, WORKLOAD).tpot_s, rel=1e-9)
    assert f"deployment from: the profile {profile}: target, method, draft, k" in out
    assert {p["name"]: p["note"] for p in doc["parameters"]}["overhead_s"] == "carries over"
    # Another deployment from the same profile: -c wins, and what does not carry over is said.
    code, doc, out, err = predict_json(
        tmp_path, capsys, "--profile", profile, "-c", "serving.tensor_parallel_size=16", "--acceptance", "structured=0.8", "--loads", "16"
    )
    assert code == 0, err
    assert doc["deployment"]["tensor_parallel_size"] == 16 and doc["deployment"]["max_num_seqs"] == 64
    notes = {p["name"]: p["note"] for p in doc["parameters"]}
    assert notes["overhead_s"] == "an assumption here: fitted at tensor_parallel_size 32, predicted at tensor_parallel_size 16"
    assert notes["bandwidth_efficiency"].startswith("the starting value, not fitted")
    assert "-c serving.tensor_parallel_size: tensor_parallel_size" in out


def test_a_profile_without_a_fit_is_all_assumption(tmp_path, capsys):
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps({"overhead_s": 0.03}))
    code, doc, out, err = predict_json(tmp_path, capsys, "--profile", str(bare), "--acceptance", "structured=0.8", "--loads", "1")
    assert code == 0, err
    assert {p["status"] for p in doc["parameters"]} == {"assumed"} and rows(doc)[1]["extrapolated"] is True
    assert "no fit recorded: every parameter as given" in out and "no measured load recorded" in out


# --- one load is not a calibration of the load term ----------------------------------------------


def test_a_fit_at_one_load_says_the_load_term_is_assumed_and_marks_other_loads(tmp_path, capsys):
    run = store_run(tmp_path, "one", loads=(1,), settings=snapshot())
    code, doc, out, err = predict_json(tmp_path, capsys, "--calibrate", run, "--loads", "1,16")
    assert code == 0, err
    assert "rms relative residual 0.00% (2 parameter(s) fitted to as many distinct points or fewer" in out
    status = {p["name"]: p["status"] for p in doc["parameters"]}
    assert status["compute_efficiency"] == "assumed" and status["overhead_s"] == "fitted"
    assert rows(doc)[1]["extrapolated"] is False and rows(doc)[16]["extrapolated"] is True
    assert "measured at 1 clients in flight (batch 1)" in out
    sixteen = next(line for line in out.splitlines() if line.split()[:1] == ["16"])
    assert sixteen.rstrip().endswith("extrapolated")
    # predict --profile of that profile says the same.
    code, again, out, err = predict_json(
        tmp_path, capsys, "--profile", str(tmp_path / "profile.json"), "--acceptance", "structured=0.8", "--loads", "16"
    )
    assert code == 0, err
    assert rows(again)[16]["extrapolated"] is True and "compute_efficiency" in out
    assert {p["name"]: p["status"] for p in again["parameters"]}["compute_efficiency"] == "assumed"


def test_extrapolation_is_the_load_or_the_batch_outside_the_measured_range():
    cal = provenance.Calibration("t", ("overhead_s",), (RECORDED,), (2, 8), (2, 8))
    assert [provenance.extrapolated(cal, RECORDED, c) for c in (1, 2, 8, 9)] == [True, False, False, True]
    small = sm.Deployment(method="draft", draft="Qwen/Qwen3-1.7B", k=7, max_num_seqs=1)
    assert provenance.extrapolated(cal, small, 4) is True  # 4 clients in range, but a batch of 1 never measured
    assert provenance.extrapolated(provenance.Calibration("t"), RECORDED, 4) is True


# --- a named source that does not exist is an error --------------------------------------------


@pytest.mark.parametrize(
    ("flag", "name", "message"),
    [
        ("--from-run", "/nonexistent/run-1", "--from-run /nonexistent/run-1: no run at /nonexistent/run-1"),
        ("--from-sweep", "nosuch", "--from-sweep nosuch: no sweep point stored under "),
        ("--calibrate", "/nonexistent/run-2", "--calibrate /nonexistent/run-2: no run at /nonexistent/run-2"),
    ],
)
def test_a_named_source_that_is_not_there_is_an_error(tmp_path, capsys, flag, name, message):
    results = ["--results", str(tmp_path)] if flag == "--from-sweep" else []
    assert cli.main(["predict", *results, flag, name, "--save-profile", str(tmp_path / "p.json")]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and message in err and "(assumed)" not in out


def test_from_run_without_acceptance_is_an_error_not_the_default(tmp_path, capsys):
    run = store_run(tmp_path, "noacc", settings=snapshot(), metrics=False)
    assert cli.main(["predict", "--from-run", run]) == 2
    assert "--from-run " + run + ": no acceptance figure for any prompt class" in capsys.readouterr().err


# --- a run without a settings snapshot is not two baselines -------------------------------------


def load(run: str):  # type: ignore[no-untyped-def]
    from pathlib import Path

    from specbench.results.runfiles import load_run
    from specbench.results.store import LocalStore, RunStore

    store = RunStore(LocalStore(Path(run).parent), Path(run).name)
    return load_run(store)


def test_a_run_without_a_snapshot_reads_the_speculative_endpoint_from_its_metrics(tmp_path):
    files = load(store_run(tmp_path, "laptop"))
    points = points_from_run(files.run, files.records, files.acceptance)
    kinds = {(p.variant.name, p.variant.k) for p in points}
    assert kinds == {("baseline", None), (SPEC, 7)}


def test_a_run_whose_endpoints_say_nothing_is_refused_with_what_to_pass(tmp_path, capsys):
    run = store_run(tmp_path, "neuron", metrics=False)  # as Neuron's 0.9.1 image: no spec-decode metrics
    assert cli.main(["sweep-report", "--run", run, "--out", str(tmp_path / "rep"), "--no-charts", "--resamples", "20"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"endpoint {SPEC}: what it serves is not recorded" in err and f"--role {SPEC}=" in err
    assert cli.main(["predict", "--calibrate", run, "--save-profile", str(tmp_path / "p.json")]) == 2
    assert f"pass --role {SPEC}=baseline or --role {SPEC}=draft:MODEL:K" in capsys.readouterr().err
    # Said on the command line, the same run is read.
    role = ["--role", f"{SPEC}=draft:Qwen/Qwen3-1.7B:7"]
    code = cli.main(["sweep-report", "--run", run, *role, "--out", str(tmp_path / "rep"), "--no-charts", "--resamples", "20"])
    assert code == 0
    assert "Qwen/Qwen3-1.7B, k = 7" in capsys.readouterr().out
    assert cli.main(["sweep-report", "--sweep-id", "s", *role]) == 2
    assert "--role applies with --run only" in capsys.readouterr().err
    assert cli.main(["predict", "--calibrate", run, "--role", f"{SPEC}=draft:X", "--save-profile", str(tmp_path / "p.json")]) == 2
    assert "--role 'qwen-sd-vllm=draft:X': expected NAME=baseline, or NAME=METHOD:MODEL:K" in capsys.readouterr().err


def test_roles_the_run_recorded_and_a_contradiction_refused(tmp_path):
    plan_roles = {SPEC: roles.Role(True, "draft", "Qwen/Qwen3-0.6B", 3, "--role").to_dict()}
    files = load(store_run(tmp_path, "flagged", metrics=False, plan_roles=plan_roles))
    found = roles.run_roles(files.run, files.acceptance)
    assert found[SPEC].k == 3 and found[SPEC].draft_model == "Qwen/Qwen3-0.6B" and not found[BASE].speculative
    snap = load(store_run(tmp_path, "snap", settings=snapshot()))
    with pytest.raises(roles.RolesUnknown, match=f"endpoint {SPEC}: the settings snapshot says draft Qwen/Qwen3-1.7B k=7 but --role"):
        roles.run_roles(snap.run, snap.acceptance, given={SPEC: roles.parse_role(f"{SPEC}=draft:Qwen/Qwen3-1.7B:5")[1]})
    # A first endpoint whose /metrics say it speculates is not taken as the baseline.
    swapped = {"plan": {"endpoints": [{"name": SPEC}, {"name": BASE}]}}
    with pytest.raises(roles.RolesUnknown, match=f"endpoint {BASE}: what it serves is not recorded"):
        roles.run_roles(swapped, files_acceptance(k=7))


def files_acceptance(k: int) -> dict:
    return {"counting@c1": {SPEC: {"per_position": [0.5] * k}, BASE: {"source": "missing"}}}


@pytest.mark.parametrize(
    ("text", "ok"),
    [("a=baseline", True), ("a=draft:Qwen/Qwen3-1.7B:7", True), ("a=eagle3::3", True), ("a=draft:X:0", False), ("a=medusa:X:3", False)],
)
def test_the_role_flag(text, ok):
    if ok:
        assert roles.parse_role(text)[0] == "a"
    else:
        with pytest.raises(ValueError, match="expected NAME=baseline, or NAME=METHOD:MODEL:K"):
            roles.parse_role(text)


def test_run_records_its_roles_and_refuses_a_role_the_settings_contradict(tmp_path, capsys):
    endpoints = ["--endpoint", f"{BASE}=http://127.0.0.1:9", "--endpoint", f"{SPEC}=http://127.0.0.1:9"]
    common = ["run", *endpoints, "--results", str(tmp_path), "--no-publish", "--no-progress", "--ready-timeout", "0.05"]
    assert cli.main([*common, "--run-id", "r1", "--role", f"{SPEC}=draft:Qwen/Qwen3-1.7B:7"]) == 4  # never ready
    plan = json.loads((tmp_path / "r1" / "run.json").read_text())["plan"]
    assert plan["roles"][SPEC] == {"role": "speculative", "method": "draft", "draft_model": "Qwen/Qwen3-1.7B", "k": 7, "source": "--role"}
    assert plan["roles"][BASE] == {"role": "baseline", "source": roles.FIRST_ENDPOINT}
    capsys.readouterr()
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps(snapshot()))
    code = cli.main([*common, "--run-id", "r2", "--settings", str(settings), "--role", f"{SPEC}=draft:Qwen/Qwen3-1.7B:5"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--role {SPEC}: says draft Qwen/Qwen3-1.7B k=5 but --settings says" in err
    assert cli.main([*common, "--run-id", "r3", "--role", "other=baseline"]) == 2
    assert "--role other: no such --endpoint" in capsys.readouterr().err
