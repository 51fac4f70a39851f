"""``specbench sweep next`` checks every stored point before it decides (issue 33): a point of
another sweep, still running or locked, interrupted, truncated or misfiled is listed with why and
left out; points the settings contradict (a variant dropped or changed, a load not configured) are
one line; a measurement an earlier stage decided with that is gone stops the sweep."""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import shutil

import pytest

from specbench import cli
from specbench.analysis.sweep import CONCURRENCY, Load
from specbench.outputs.sweep_next import staged_section
from specbench.results.store import LocalStore
from tests.sweep_data import Truth, store_points, synthetic_points
from tests.test_sweep_next import ALL, CONTEXT, Q17, TRUTH, VARIANTS, _named

STAGE_ONE = {"q17-k7", "q06-k6"}


def _store(store, names, sweep_id="sw"):  # type: ignore[no-untyped-def]
    store_points(store, sweep_id, [p for p in ALL if p.variant.is_baseline or p.variant.name in names])


def _next(tmp_path, capsys, *extra):  # type: ignore[no-untyped-def]
    code = cli.main(["sweep", "next", "--sweep-id", "sw", "--results", str(tmp_path), "--node-price-per-hour", "0", *CONTEXT, *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _edit_run(tmp_path, point, **changes):  # type: ignore[no-untyped-def]
    path = tmp_path / f"sweeps/sw/{point}/run.json"
    run = json.loads(path.read_text())
    for key, value in changes.items():
        if key.startswith("sweep_"):
            run["sweep"][key[len("sweep_") :]] = value
        else:
            run[key] = value
    path.write_text(json.dumps(run))


def _doc(tmp_path, stage=1):  # type: ignore[no-untyped-def]
    return json.loads((tmp_path / f"sweeps/sw/stages/after-stage-{stage}.json").read_text())


def _measured(doc):  # type: ignore[no-untyped-def]
    return {e["config"] for e in doc["decisions"]["c1"]["estimates"] if e["measured"]}


def _truncate(tmp_path, point):  # type: ignore[no-untyped-def]
    folder = tmp_path / f"sweeps/sw/{point}/records"
    path = next(folder.iterdir())
    text = path.read_text()
    path.write_text(text[: len(text) - 40])  # the last line cut mid-record


BAD = {
    "another sweep": (lambda tmp: _edit_run(tmp, "q17-k5-c1", sweep_sweep_id="other"), "belongs to sweep 'other'"),
    "running": (lambda tmp: _edit_run(tmp, "q17-k5-c1", status="running"), "still running"),
    "interrupted": (lambda tmp: _edit_run(tmp, "q17-k5-c1", status="interrupted"), "not complete: status 'interrupted'"),
    "misfiled": (lambda tmp: _edit_run(tmp, "q17-k5-c1", sweep_point_id="q17-k4-c1"), "names point 'q17-k4-c1'"),
    "truncated": (lambda tmp: _truncate(tmp, "q17-k5-c1"), "damaged or truncated"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_point_that_fails_a_check_is_listed_and_changes_nothing(tmp_path, capsys, case):
    store = LocalStore(tmp_path)
    _store(store, STAGE_ONE)
    code, _, err = _next(tmp_path, capsys)
    assert code == 0, err
    clean = _doc(tmp_path)
    shutil.rmtree(tmp_path / "sweeps/sw/stages")
    _store(store, {"q17-k5"})  # an extra point, then broken
    damage, why = BAD[case]
    damage(tmp_path)
    code, out, err = _next(tmp_path, capsys)
    assert code == 0, err
    doc = _doc(tmp_path)
    assert f"{Q17} k=5" not in _measured(doc) and _measured(doc) == _measured(clean)
    assert doc["decisions"] == clean["decisions"] and doc["next_stage"]["variants"] == clean["next_stage"]["variants"]
    assert any(item.startswith("q17-k5-c1: ") and why in item for item in doc["left_out"]), doc["left_out"]
    assert "left out: q17-k5-c1: " in out and why in out


def test_a_point_whose_writer_holds_the_lock_is_left_out(tmp_path, capsys):
    store = LocalStore(tmp_path)
    _store(store, {*STAGE_ONE, "q17-k5"})
    fd = os.open(tmp_path / "sweeps/sw/q17-k5-c1/.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # a live writer (specbench/results/store.py's run lock)
        code, out, err = _next(tmp_path, capsys)
    finally:
        os.close(fd)
    assert code == 0, err
    assert "left out: q17-k5-c1: still running (its writer holds the lock)" in out
    assert f"{Q17} k=5" not in _measured(_doc(tmp_path))


def _one_line(code, err, *expected):  # type: ignore[no-untyped-def]
    assert code == cli.EXIT_USAGE and err.count("\n") == 1 and err.startswith("specbench: sweep next: "), err
    for text in expected:
        assert text in err, err


def test_a_variant_dropped_from_the_settings_is_one_line(tmp_path, capsys):
    _store(LocalStore(tmp_path), STAGE_ONE)
    only_q17 = ",".join(v for v in VARIANTS.split(",") if v.startswith("q17"))
    code, _, err = _next(tmp_path, capsys, "-c", f"sweep.variants={only_q17}")
    _one_line(code, err, "the settings contradict", "variant q06-k6 is not configured (dropped or renamed")
    assert not (tmp_path / "sweeps/sw/stages").exists()


def test_a_variant_whose_k_changed_is_one_line(tmp_path, capsys):
    _store(LocalStore(tmp_path), STAGE_ONE)
    changed = VARIANTS.replace(f"q17-k7:{Q17}:7", f"q17-k7:{Q17}:8").replace(f"q17-k8:{Q17}:8", f"q17-k8:{Q17}:7")
    code, _, err = _next(tmp_path, capsys, "-c", f"sweep.variants={changed}")
    _one_line(code, err, f"variant q17-k7 measured draft {Q17} k=7; sweep.variants has it as draft {Q17} k=8")


def test_a_load_no_longer_configured_is_one_line(tmp_path, capsys):
    _store(LocalStore(tmp_path), STAGE_ONE)
    code, _, err = _next(tmp_path, capsys, "-c", "sweep.concurrencies=4")
    _one_line(code, err, "load c1 is not configured")


def test_a_measurement_an_earlier_stage_used_that_vanished_stops_the_sweep(tmp_path, capsys):
    store = LocalStore(tmp_path)
    _store(store, STAGE_ONE)
    code, _, err = _next(tmp_path, capsys)
    assert code == 0, err
    proposed = {v["name"] for v in _doc(tmp_path)["next_stage"]["variants"]}
    _store(store, STAGE_ONE | proposed)
    shutil.rmtree(tmp_path / "sweeps/sw/q06-k6-c1")  # stage 1's only point of the 0.6B draft
    code, _, err = _next(tmp_path, capsys)
    _one_line(code, err, "no longer usable points", "Qwen/Qwen3-0.6B k=6 at c1 (used after stage 1)")
    assert not (tmp_path / "sweeps/sw/stages/after-stage-2.json").exists()


@pytest.mark.parametrize("sweep_id", ["../escaped", "a/b", ".", "sw\n", "-sw"])
def test_sweep_next_refuses_an_unsafe_sweep_id(tmp_path, capsys, sweep_id):
    with pytest.raises(SystemExit) as exit_:  # argparse: bad arguments exit 2
        cli.main(["sweep", "next", f"--sweep-id={sweep_id}", "--results", str(tmp_path / "results"), *CONTEXT])
    err = capsys.readouterr().err
    assert exit_.value.code == cli.EXIT_USAGE and "--sweep-id" in err and "allowed: ASCII letters" in err
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "results").exists()


def test_a_stage_one_point_that_never_arrived_stops_the_first_step(tmp_path, capsys):
    _store(LocalStore(tmp_path), {"q17-k7"})  # q06-k6's pod failed: stage 1 (config/sweep.py stage_one_variants) is short
    code, _, err = _next(tmp_path, capsys)
    _one_line(code, err, "stage 1 has not finished: 1 of its points are not usable (q06-k6-c1)")
    assert not (tmp_path / "sweeps/sw/stages").exists()


def test_a_stage_one_point_left_out_is_named_with_why(tmp_path, capsys):
    _store(LocalStore(tmp_path), STAGE_ONE)
    _edit_run(tmp_path, "q06-k6-c1", status="running")
    code, _, err = _next(tmp_path, capsys)
    _one_line(code, err, "(q06-k6-c1)", "left out: q06-k6-c1: still running")


def test_a_configured_load_without_a_baseline_is_one_line(tmp_path, capsys):
    two = Truth(classes=TRUTH.classes, drafts=TRUTH.drafts, ks=(6, 7), loads=(Load(CONCURRENCY, 1), Load(CONCURRENCY, 4)))
    points = [p for p in _named(synthetic_points(two, requests=6, seed=3)) if p.variant.name in STAGE_ONE or p.load.value == 1]
    store_points(LocalStore(tmp_path), "sw", points)
    code, _, err = _next(tmp_path, capsys, "-c", "sweep.concurrencies=1,4")
    _one_line(code, err, "no usable baseline point at configured load(s) c4")


def test_the_next_stages_command_quotes_a_results_folder_with_a_space(tmp_path, capsys):
    root = tmp_path / "my results"
    _store(LocalStore(root), STAGE_ONE)
    code = cli.main(["sweep", "next", "--sweep-id", "sw", "--results", str(root), "--node-price-per-hour", "0", *CONTEXT])
    assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    doc = json.loads((root / "sweeps/sw/stages/after-stage-1.json").read_text())
    filter_ = doc["next_stage"]["command"].split(" | ")[1]
    assert shlex.split(filter_)[-2:] == ["--stage", f"{root}/sweeps/sw/stages/after-stage-1.json"]


def test_the_reports_staged_section_lists_what_was_left_out(tmp_path, capsys):
    _store(LocalStore(tmp_path), {*STAGE_ONE, "q17-k5"})
    _edit_run(tmp_path, "q17-k5-c1", status="interrupted")
    code, _, err = _next(tmp_path, capsys)
    assert code == 0, err
    section = "\n".join(staged_section([_doc(tmp_path)]))
    assert "- left out of the decisions after stage 1: q17-k5-c1: not complete: status 'interrupted'" in section
