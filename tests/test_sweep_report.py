"""specbench sweep-report: a stored sweep read back, the table first, charts named, dashboard widgets valid."""

from __future__ import annotations

import json

import pytest

from specbench import cli
from specbench.analysis.sweep import CONCURRENCY, RATE, Load, analyze_sweep
from specbench.outputs import dashboard, sweep_report
from specbench.results.store import LocalStore
from tests.sweep_data import Truth, store_points, synthetic_points

TRUTH = Truth(
    classes={"structured": 0.9, "open-ended": 0.6},
    drafts={"Qwen3-1.7B": 0.15, "Qwen3-0.6B": 0.08},
    ks=(2, 8),
    loads=(Load(CONCURRENCY, 1), Load(RATE, 2)),
    speculative_slowdown=0.1,
)


def test_a_stored_sweep_reads_back_as_its_points(tmp_path) -> None:
    points = synthetic_points(TRUTH, requests=4)
    store = LocalStore(tmp_path)
    store_points(store, "s1", points)
    read = sweep_report.load_sweep_points(store, "s1")
    assert sorted(p.point_id for p in read) == sorted(p.point_id for p in points)
    original = {p.point_id: p for p in points}
    for p in read:
        assert (p.variant, p.load, p.wave) == (original[p.point_id].variant, original[p.point_id].load, original[p.point_id].wave)
        assert [r.to_json() for r in p.records] == [r.to_json() for r in sorted(original[p.point_id].records, key=lambda r: r.test_case)]
        assert dict(p.acceptance) == dict(original[p.point_id].acceptance)
        assert p.source == f"{tmp_path}/sweeps/s1/{p.point_id}"


@pytest.mark.long  # seconds of CPU: scheduled early (tests/conftest.py)
def test_sweep_report_command_writes_the_table_first_and_named_charts(tmp_path, capsys) -> None:
    store_points(LocalStore(tmp_path / "results"), "s1", synthetic_points(TRUTH, requests=6))
    out = tmp_path / "report"
    code = cli.main(["sweep-report", "--results", str(tmp_path / "results"), "--sweep-id", "s1", "--out", str(out), "--resamples", "100"])
    assert code == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("open-ended prompts at 1 in flight: Qwen3-")
    text = (out / "sweep-report.md").read_text()
    assert text.startswith("# Sweep s1\n\n## Recommendations\n")
    assert text.index(printed[0]) < text.index("## open-ended prompts")
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert pngs == sorted(f"{c}-{kind}.png" for c in ("structured", "open-ended") for kind in ("speedup-c1", "speedup-r2", "load"))
    assert "![structured-speedup-c1](structured-speedup-c1.png)" in text
    analysis = json.loads((out / "sweep-analysis.json").read_text())
    assert analysis["sweep_id"] == "s1" and len(analysis["table"]) == 4


def test_sweep_report_without_points_is_one_line(tmp_path, capsys) -> None:
    assert cli.main(["sweep-report", "--results", str(tmp_path), "--sweep-id", "nope"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err == f"specbench: no sweep point stored under {tmp_path}/sweeps/nope/ (--results, --sweep-id)\n"


def test_dashboard_widgets_pass_put_dashboard_rules() -> None:
    analysis = analyze_sweep(synthetic_points(TRUTH, requests=4), sweep_id="s1", resamples=50)
    widgets = sweep_report.dashboard_widgets(analysis)
    assert dashboard.problems("SpecDecode-Sweep", {"widgets": widgets}) == []
    assert [w["width"] for w in widgets] == [24, 12, 12]
    mix = [f"- cheapest within the SLOs {ranking.text}" for ranking in analysis.mix]  # the traffic mix's cheapest, per load
    assert widgets[0]["properties"]["markdown"].splitlines()[1:] == [f"- {line}" for line in analysis.summary] + mix
    bars = widgets[1]["properties"]["markdown"].splitlines()
    assert bars[0] == "### open-ended: speedup per point" and len(bars) == 3 + 2 * 2 * 2
    # The biggest speedup draws the longest bar.
    best = max(analysis.classes[0].curves["c1"][0].points + analysis.classes[0].curves["c1"][1].points, key=lambda cp: cp.e2e.point)
    assert any(line.startswith(f"    c1 {best.variant}") and "#" * sweep_report.MAX_BAR in line for line in bars)


def test_reading_a_sweep_from_s3_lists_once_and_gets_each_file_once() -> None:
    import collections

    from specbench.results.store import S3Store
    from tests import moto_aws

    with moto_aws.mocked():
        s3 = moto_aws.session().client("s3", region_name="us-east-2")  # its own: the test registers on its events
        s3.create_bucket(Bucket="sweep-bucket", CreateBucketConfiguration={"LocationConstraint": "us-east-2"})
        store = S3Store("sweep-bucket", "results/", s3)
        store_points(store, "s1", synthetic_points(TRUTH, requests=2))
        files = len(store.keys("sweeps/s1/"))
        calls: collections.Counter[str] = collections.Counter()
        s3.meta.events.register("before-call.s3.*", lambda model, **_: calls.update([model.name]))
        points = sweep_report.load_sweep_points(store, "s1")
    assert len(points) == 2 * 2 + 2 * 2 * 2  # baseline at 2 loads x 2 waves, 2 drafts x 2 k x 2 loads
    assert dict(calls) == {"ListObjectsV2": 1, "GetObject": files}


def test_sweep_report_of_a_run_without_records_and_without_a_source_are_one_line(tmp_path, capsys) -> None:
    assert cli.main(["sweep-report", "--run", str(tmp_path / "nothing")]) == cli.EXIT_USAGE
    assert capsys.readouterr().err == f"specbench: no sweep point stored under {tmp_path}/nothing (--run)\n"
    try:
        code = cli.main(["sweep-report"])
    except SystemExit as exit_:
        code = exit_.code
    assert code == cli.EXIT_USAGE
    assert capsys.readouterr().err.endswith("error: one of the arguments --sweep-id --run is required\n")


def test_sweep_report_puts_its_own_dashboard(tmp_path, monkeypatch, capsys) -> None:
    from tests import moto_aws

    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-2"}.items():
        monkeypatch.setenv(key, value)
    store_points(LocalStore(tmp_path / "results"), "s1", synthetic_points(TRUTH, requests=3))
    base = ["sweep-report", "--results", str(tmp_path / "results"), "--sweep-id", "s1", "--out", str(tmp_path / "r"), "--no-charts"]
    with moto_aws.mocked():
        assert cli.main([*base, "--resamples", "20", "--dashboard", "SpecDecode-Sweep-s1", "--region", "us-east-2"]) == 0
        put = moto_aws.client("cloudwatch", "us-east-2").get_dashboard(DashboardName="SpecDecode-Sweep-s1")
    assert json.loads(put["DashboardBody"]) == json.loads((tmp_path / "r" / "sweep-widgets.json").read_text())
    assert capsys.readouterr().out.endswith("dashboard SpecDecode-Sweep-s1: 3 widgets\n")
    assert cli.main([*base, "--resamples", "20", "--dashboard", "bad name!"]) == cli.EXIT_USAGE
    assert capsys.readouterr().err == "specbench: --dashboard bad name!: dashboard name 'bad name!': 1-255 of A-Z a-z 0-9 - _\n"
