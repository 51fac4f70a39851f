"""Issue 33: inputs a figure is computed from are checked first (sweep points, --loads, --from-sweep, --sweep-point)."""

from __future__ import annotations

import argparse

import pytest

from specbench.analysis.sweep import Point, Variant
from specbench.cli import main
from specbench.flags import load_list
from specbench.sweep import checked
from specbench.sweep.points import Load, parse_sweep_point

C1 = Load("concurrency", 1)


def _folder(
    name: str,
    variant: Variant,
    sweep_id: str = "sw",
    status: str = "completed",
    lost: tuple[str, ...] = (),
    point_id: str = "",
    locked=None,
):  # type: ignore[no-untyped-def]
    run = {"status": status, "sweep": {"sweep_id": sweep_id, "point_id": point_id or name}}
    return checked.Folder(name, run, locked, lost, (Point(point_id or name, variant, C1, 0, ()),))


def _grid() -> list[checked.Folder]:
    folders = [_folder("baseline-c1", Variant("baseline"))]
    folders += [_folder(f"q17-k{k}-c1", Variant(f"q17-k{k}", "Qwen/Qwen3-1.7B", k, "draft")) for k in (3, 4, 5, 6)]
    return folders


def _left_out(folders: list[checked.Folder]) -> dict[str, str]:
    return dict(checked.check_grid(folders, "sw").left_out)


def test_a_clean_grid_is_used_whole() -> None:
    verdict = checked.check_grid(_grid(), "sw")
    assert not verdict.left_out and len(verdict.used) == 5


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        (_folder("q17-k7-c1", Variant("q17-k7", "Qwen/Qwen3-1.7B", 7), sweep_id="other-sweep"), "other-sweep"),
        (_folder("q17-k7-c1", Variant("q17-k7", "Qwen/Qwen3-1.7B", 3)), "mismatch"),
        (_folder("q17-k7-c1", Variant("q17-k7", "Qwen/Qwen3-8B", 7)), "Qwen/Qwen3-8B"),
        (_folder("q17-k7-c1", Variant("q17-k7", "Qwen/Qwen3-1.7B", 7), status="failed"), "failed"),
        (_folder("q17-k7-c1", Variant("q17-k7", "Qwen/Qwen3-1.7B", 7), status="running", locked=True), "running"),
        (_folder("q17-k7-c1-again", Variant("q17-k7", "Qwen/Qwen3-1.7B", 7), point_id="q17-k7-c1"), "q17-k7-c1"),
        (_folder("q17-k7-c1", Variant("../q17", "Qwen/Qwen3-1.7B", 7), point_id="../../x"), "../../x"),
        (_folder("q17-k7-c1", Variant("../q17", "Qwen/Qwen3-1.7B", 7)), "not a DNS label"),
    ],
)
def test_a_point_its_own_record_contradicts_is_left_out_with_why(extra: checked.Folder, why: str) -> None:
    verdict = checked.check_grid([*_grid(), extra], "sw")
    assert dict(verdict.left_out).keys() == {extra.name} and why in dict(verdict.left_out)[extra.name]
    assert len(verdict.used) == 5


def test_damaged_records_within_a_point_do_not_leave_it_out() -> None:
    # tests/test_damaged_runs.py: the reader skips and counts damaged records; the rest of the point is used.
    verdict = checked.check_grid(
        [*_grid(), _folder("q17-k7-c1", Variant("q17-k7", "Qwen/Qwen3-1.7B", 7), lost=("records/a.jsonl:3",))], "sw"
    )
    assert not verdict.left_out and len(verdict.used) == 6


@pytest.mark.parametrize("text", ["abc", "1e9", "1,,nan", "2.5", "0", "-1", "20000", ""])
def test_loads_outside_the_allowed_form_are_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="whole numbers 1-"):
        load_list(text)


def test_loads_in_the_allowed_form() -> None:
    assert load_list("1,2, 4") == [1, 2, 4]


def test_predict_loads_refusal_names_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["predict", "--loads", "abc"])
    assert exited.value.code == 2 and "--loads" in capsys.readouterr().err


def test_an_empty_from_sweep_is_refused_not_ignored(capsys: pytest.CaptureFixture[str], tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert main(["predict", "--from-sweep", "", "--results", str(tmp_path)]) == 2
    assert "--from-sweep" in capsys.readouterr().err


def test_an_unsafe_from_sweep_refusal_names_from_sweep(capsys: pytest.CaptureFixture[str], tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert main(["predict", "--from-sweep", "../x", "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--from-sweep" in err and "--sweep-id" not in err


def test_a_negative_k_in_a_sweep_point_is_refused() -> None:
    point = '{"point_id": "q17-k5-c1", "wave": 0, "variant": {"name": "q17-k5", "draft_model": "Qwen/Qwen3-1.7B", "k": -1}, "load": {"kind": "concurrency", "value": 1}}'
    with pytest.raises(ValueError, match="variant.k"):
        parse_sweep_point("sw", point)


@pytest.mark.parametrize("sweep_id", ["SW_1", "Sw", "sw_1", "1sw", "sw-"])
def test_a_sweep_id_is_a_dns_label_where_points_are_read(sweep_id: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # charts/sweep.py names Jobs "<sweep_id>-s<stage>": "SW_1-s2" is no Kubernetes name, so it is refused, not mapped.
    from specbench.outputs.sweep_report import load_sweep_folders
    from specbench.results.store import open_store

    with pytest.raises(ValueError, match="--sweep-id .*DNS label"):
        load_sweep_folders(open_store(str(tmp_path), None), sweep_id)


@pytest.mark.parametrize("field", ["compute_efficiency", "bandwidth_efficiency"])
def test_a_stored_profile_efficiency_above_one_is_refused(field: str) -> None:
    from specbench.analysis.serving_model import read_profile_document

    with pytest.raises(ValueError, match=f"{field} must be a share of the peak in \\(0, 1\\]"):
        read_profile_document({"profile": {field: 1e6}})
    with pytest.raises(ValueError, match=field):
        read_profile_document({field: 1.5})
    assert getattr(read_profile_document({"profile": {field: 1.0}})[0], field) == 1.0


def test_predict_json_to_a_folder_is_one_line_naming_json(capsys: pytest.CaptureFixture[str], tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert main(["predict", "--json", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"--json {tmp_path}" in err and "unexpected" not in err and len(err.strip().splitlines()) == 1


def test_roles_without_a_settings_snapshot_say_so() -> None:
    from specbench.results.roles import Role, describe_roles

    from_metrics = describe_roles({"a": Role(False, source="the first --endpoint"), "b": Role(True, "", "", 7, "/metrics")})
    assert "b speculative (draft unknown) k=7 (/metrics)" in from_metrics and "no settings snapshot" in from_metrics
    recorded = describe_roles({"a": Role(False, source="the settings snapshot")})
    assert "no settings snapshot" not in recorded


@pytest.mark.parametrize("flag", ["--from-run", "--calibrate"])
def test_a_garbled_run_json_is_named_with_the_flag(flag: str, capsys: pytest.CaptureFixture[str], tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "records").mkdir()
    (tmp_path / "records" / "a.jsonl").write_text("", encoding="utf-8")
    (tmp_path / "run.json").write_text('{"run_id": "x", "status": ', encoding="utf-8")
    extra = ["--save-profile", str(tmp_path / "p.json")] if flag == "--calibrate" else []
    assert main(["predict", flag, str(tmp_path), *extra]) == 2
    err = capsys.readouterr().err
    assert f"{flag} {tmp_path}: run.json" in err and "what it serves" not in err


@pytest.mark.parametrize(("text", "why"), [("{not json", "not valid JSON"), ("[1, 2]", "a JSON list, expected an object")])
def test_publish_refuses_a_damaged_run_json_before_sending_anything(tmp_path, monkeypatch, capsys, text, why):
    """A run.json that is not a run's: its records' services and settings are unknown, so nothing goes to
    CloudWatch (before: "not published: run.json..." and then the records were sent anyway, exit 3)."""
    from specbench import cli
    from specbench.outputs import publish

    run = tmp_path / "r1"
    (run / "records").mkdir(parents=True)
    (run / "run.json").write_text(text)
    (run / "records" / "counting.jsonl").write_text("{}\n")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    sent = []
    monkeypatch.setattr(publish, "publish_run", lambda *a, **k: sent.append(a))
    assert cli.main(["publish", str(run), "--region", "us-east-2"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "run.json" in err and why in err and "nothing was sent" in err
    assert sent == []


def test_from_run_on_another_deployment_says_what_carries_over_and_refuses_another_target():
    """--from-run of a run measured at TP 16, predicting TP 32: the difference is named and only the
    acceptance is said to carry over; a run of another target is refused (its acceptance is not this one's)."""
    from specbench.analysis import serving_model as sm
    from specbench.outputs import prediction as out

    predicted = sm.Deployment()
    assert out.from_run_carry_over(sm.Deployment(), predicted, "r") == []
    (line,) = out.from_run_carry_over(sm.Deployment(tensor_parallel_size=16), predicted, "r")
    assert "--from-run r" in line and "tensor_parallel_size 16 (predicted at 32)" in line and "acceptance" in line
    with pytest.raises(ValueError, match=r"--from-run r: it measured target Qwen/Qwen3-1.7B"):
        out.from_run_carry_over(sm.Deployment(target="Qwen/Qwen3-1.7B"), predicted, "r")
