"""Stored runs damaged on disk (tests/damage.py) through the real readers: specbench.results.runfiles,
``specbench report``, the aggregation Lambda (moto in-process for S3 and CloudWatch) and
``specbench sweep-report``. Every damaged part is skipped with its ``file:line`` and reason, the rest
is used, the figures equal those of the run without the damaged part, and nothing impossible is
published; a property test damages the files at random and checks that nothing raises and the
counts add up."""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lambdas.aggregate import handler
from specbench import cli
from specbench.analysis import aggregate
from specbench.analysis.sweep import CONCURRENCY, Load
from specbench.aws_retry import Retrier
from specbench.outputs import dashboard, deployment_state, publish, report, sweep_report
from specbench.results import runfiles, validity
from specbench.results.records import RequestRecord
from specbench.results.store import LocalStore, RunStore, S3Store
from tests import damage, moto_aws, runs
from tests.sweep_data import Truth, store_points, synthetic_points

REGION = "us-east-2"
BUCKET = "specdecode-damage"
SETTINGS = handler.Settings.from_env(runs.handler_environment(BUCKET, REGION, resamples=100))
# The readers' checks compare a damaged run's figures with its truth's, both bootstrapped alike: the
# number of resamples does not matter to them, only to the cost (the Lambda's own floor is 100).
RESAMPLES = 20


def summarize(files: runfiles.RunFiles) -> aggregate.RunSummary:
    return aggregate.summarize_run(
        files.run, files.records, files.acceptance, baseline=runs.BASELINE, resamples=RESAMPLES, data_quality=files.quality()
    )


def figures(summary: aggregate.RunSummary) -> dict:
    """Everything a summary says but what the readers left out (data quality and its note)."""
    data = summary.to_dict()
    data.pop("data_quality")
    data["notes"] = [note for note in data["notes"] if not note.startswith("data quality:")]
    return data


def damaged_run(tmp_path: Path, which: damage.Damage) -> tuple[RunStore, Path]:
    store = damage.write_small_run(tmp_path / "results")
    run_dir = tmp_path / "results" / damage.RUN_ID
    damage.apply(which, run_dir)
    return store, run_dir


def check_counts(files: runfiles.RunFiles, run_dir: Path) -> None:
    """used + skipped records = the records files' lines, and every record used is possible."""
    skipped_records = [s for s in files.skipped if s.file.startswith("records/")]
    assert files.record_lines == damage.stored_lines(run_dir)
    assert len(files.records) + len(skipped_records) == files.record_lines
    assert validity.screen(files.records, runfiles.max_tokens_of(files.run))[1] == []


def finite_figures(summary: aggregate.RunSummary) -> None:
    """No figure of the summary is negative or not finite (speedups, medians, percentiles)."""
    for group in (*summary.test_cases, *summary.prompt_classes):
        for variant in group.variants.values():
            for d in variant.distributions.values():
                assert all(v is None or (math.isfinite(v) and v >= 0) for v in (d.p50, d.p90, d.p99))
        for comparison in group.comparisons:
            for interval in comparison.speedups.values():
                assert all(v is None or (math.isfinite(v) and v > 0) for v in (interval.point, interval.low, interval.high))


# --- each kind of damage -------------------------------------------------------------------------


@pytest.mark.parametrize("which", damage.DAMAGES, ids=[d.name for d in damage.DAMAGES])
def test_each_damage_is_skipped_with_file_line_and_reason_and_the_rest_gives_the_truth(tmp_path, which):
    store, run_dir = damaged_run(tmp_path, which)
    files = runfiles.load_run(store)
    assert [(s.file, s.line, s.kind) for s in files.skipped] == [(which.file, which.line, which.kind)], [str(s) for s in files.skipped]
    assert files.skipped[0].reason and str(files.skipped[0]).startswith(files.skipped[0].where + ": ")
    check_counts(files, run_dir)
    summary = summarize(files)
    finite_figures(summary)
    assert summary.data_quality["skipped"] == 1 and summary.data_quality["skips"] == [str(files.skipped[0])]
    if which.file == "run.json":
        # Without its plan the run cannot be called complete, whatever the records say.
        assert summary.completeness == aggregate.PARTIAL
        return
    assert damage.ground_truth(which, run_dir, tmp_path / "truth" / damage.RUN_ID)
    truth = runfiles.load_run(RunStore(LocalStore(tmp_path / "truth"), damage.RUN_ID))
    assert truth.skipped == []
    assert figures(summary) == figures(summarize(truth))


@pytest.mark.parametrize(("name", "completeness"), [("last line truncated", "partial"), ("the same line twice", "complete")])
def test_a_lost_record_makes_the_run_partial_even_when_the_plan_gives_no_count(tmp_path, name, completeness):
    """Without plan.load.requests nothing else tells that a request is missing; a duplicate loses nothing."""
    store, run_dir = damaged_run(tmp_path, next(d for d in damage.DAMAGES if d.name == name))
    run = json.loads((run_dir / "run.json").read_text())
    del run["plan"]["load"]["requests"]
    (run_dir / "run.json").write_text(json.dumps(run))
    summary = summarize(runfiles.load_run(store))
    assert summary.completeness == completeness
    assert ("left out, listed under Data quality" in report.banner(summary)) == (completeness == "partial")


def test_a_skipped_line_names_its_file_and_line_not_just_a_column(tmp_path):
    """Today's failure: "Expecting value: line 1 column 1251" and no file name, the report stops."""
    store, _ = damaged_run(tmp_path, damage.DAMAGES[0])
    (skipped,) = runfiles.load_run(store).skipped
    assert skipped.where == "records/counting.jsonl:8"
    assert str(skipped).startswith("records/counting.jsonl:8: not valid JSON (truncated or damaged): ")


REPORTED = ("last line truncated", "negative latency", "run.json truncated")
CHARTED = "negative latency"  # one damaged run's report draws its charts too; the others are about the reader


@pytest.mark.parametrize("name", REPORTED)
def test_report_command_uses_the_rest_and_lists_what_it_skipped(tmp_path, capsys, name):
    which = next(d for d in damage.DAMAGES if d.name == name)
    store, _ = damaged_run(tmp_path, which)
    out = tmp_path / "report"
    args = ["report", str(tmp_path / "results" / damage.RUN_ID), "--baseline", runs.BASELINE, "--out", str(out)]
    code = cli.main([*args, "--resamples", str(RESAMPLES), *([] if name == CHARTED else ["--no-charts"])])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    where = f"{which.file}:{which.line}" if which.line else which.file
    assert f"specbench: skipped {where}: " in captured.err
    markdown = (out / "report.md").read_text(encoding="utf-8")
    assert "## Data quality" in markdown and where in markdown
    if which.file != "run.json":
        assert "| records used | 15 of 16 stored lines |" in markdown or "16 of 17 stored lines" in markdown
    assert (out / "speedup.png").is_file() == (name == CHARTED)


def test_impossible_values_never_reach_a_speedup_or_cloudwatch(tmp_path):
    """Today a negative latency is published as a -0.06x speedup: 3 of 4 speculative records negative."""
    store = damage.write_small_run(tmp_path / "results")
    path = tmp_path / "results" / damage.RUN_ID / damage.RECORDS
    for line in (6, 7, 8):
        path.write_bytes(damage.edit_line(line, lambda r: {**r, "end_to_end_latency_s": -r["end_to_end_latency_s"]})(path.read_bytes()))
    files = runfiles.load_run(store)
    assert [s.kind for s in files.skipped] == ["impossible"] * 3
    summary = summarize(files)
    finite_figures(summary)
    assert summary.group("counting").comparisons[0].speedups["EndToEndLatency"].point > 1
    datums = publish.run_datums(files.records, files.acceptance, files.run)
    assert all(v >= 0 for d in datums for v in d.get("Values", [d.get("Value", 0)]))
    # The publisher applies the same rule to records it is handed directly.
    bad = RequestRecord("r", runs.SPECULATIVE, "counting", "structured", "native", 0, 1.0, ttft_s=0.1, end_to_end_latency_s=-1.0)
    assert publish.run_datums([bad], {}) == []


def test_import_llmperf_refuses_to_rewrite_a_damaged_records_file(tmp_path, capsys):
    """import-llmperf rewrites records/<case>.jsonl with the other services' records: a line it cannot
    read would be lost, so it stops and names it."""
    store, run_dir = damaged_run(tmp_path, damage.DAMAGES[0])
    before = (run_dir / damage.RECORDS).read_bytes()
    folder = tmp_path / "llmperf"
    folder.mkdir()
    (folder / "m_64_600_individual_responses.json").write_text("[]")
    args = ["import-llmperf", str(folder), "--variant", "other", "--test-case", "counting", "--results", str(tmp_path / "results")]
    assert cli.main([*args, "--run-id", damage.RUN_ID]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert f"{damage.RUN_ID}/records/counting.jsonl:8: not valid JSON" in err and "repair or move it first" in err
    assert (run_dir / damage.RECORDS).read_bytes() == before


# --- every truncation of a small run -------------------------------------------------------------


def test_truncation_at_every_byte_offset_is_read_without_raising_and_counted(tmp_path):
    store = RunStore(LocalStore(tmp_path), "tiny")
    runs.write_run(store, cases=runs.CASES[:1], requests=1)
    keys = store.keys()
    run_dir = tmp_path / "tiny"
    checked, summarized = 0, set()
    for name in ("records/counting.jsonl", "run.json", "acceptance/counting.json"):
        path = run_dir / name
        whole = path.read_bytes()
        lines = whole.count(b"\n")
        for offset in reversed(range(len(whole))):
            os.truncate(path, offset)  # in place, as a crash or a full disk leaves it
            files = runfiles.load_run(store, keys)
            check_counts(files, run_dir)
            if name.startswith("records/"):
                complete_lines = whole[:offset].count(b"\n")
                tail = whole[:offset].rsplit(b"\n", 1)[-1]
                whole_line = tail == whole.split(b"\n")[complete_lines]  # only its newline cut: the record is whole
                cut = 1 if tail.strip() and not whole_line else 0
                assert len(files.records) == complete_lines + whole_line and files.record_lines == complete_lines + cut + whole_line
                assert [s.where for s in files.skipped] == ([f"{name}:{complete_lines + 1}"] if cut else [])
            elif offset:
                assert [s.where for s in files.skipped] == [f"{name}:1"], offset
            outcome = (name, len(files.records), tuple(s.kind for s in files.skipped))
            if outcome not in summarized:  # the summary and the report's text of each distinct outcome
                summarized.add(outcome)
                summary = summarize(files)
                finite_figures(summary)
                report.render_markdown(summary, {})
            checked += 1
        path.write_bytes(whole)
        assert lines == (2 if name.startswith("records/") else 0)
    assert checked > 2500 and len(summarized) >= 6


# --- the aggregation Lambda ----------------------------------------------------------------------


class Recording:
    """CloudWatch through moto, keeping every PutMetricData datum."""

    def __init__(self, client) -> None:
        self.client, self.datums = client, []

    def put_metric_data(self, **kwargs):
        self.datums += kwargs["MetricData"]
        return self.client.put_metric_data(**kwargs)

    def __getattr__(self, name):
        return getattr(self.client, name)


@contextlib.contextmanager
def fresh_aws() -> Iterator[tuple[Any, Recording]]:
    """A fresh moto state (about 4 ms): the bucket, and CloudWatch recording its datums."""
    with moto_aws.mocked():
        s3 = moto_aws.bucket(BUCKET, REGION)
        yield s3, Recording(moto_aws.client("cloudwatch", REGION))


@pytest.fixture
def aws(monkeypatch):
    moto_aws.offline_environment(monkeypatch)
    with fresh_aws() as clients:
        yield clients


def upload(s3, run_dir: Path, run_id: str) -> None:
    for path in sorted(p for p in run_dir.rglob("*") if p.is_file()):
        s3.put_object(Bucket=BUCKET, Key=f"results/{run_id}/{path.relative_to(run_dir)}", Body=path.read_bytes())


def refresh(s3, cloudwatch, run_id: str) -> dict:
    from datetime import datetime, timezone

    now = datetime(2026, 11, 29, 11, 0, tzinfo=timezone.utc)
    return handler.refresh({"run_id": run_id}, SETTINGS, s3, cloudwatch, retrier=Retrier(sleep=lambda s: None), now=now)


ROW = len(deployment_state.row(None, handler.dashboard_settings(SETTINGS, [])))  # the widgets above the run's header


def put_body(cloudwatch) -> dict:
    return json.loads(cloudwatch.get_dashboard(DashboardName=SETTINGS.dashboard_name)["DashboardBody"])


def check_refresh(result: dict, cloudwatch) -> dict:
    """The refresh put a valid body from a summarized run, and published only possible speedups."""
    body = put_body(cloudwatch)
    assert result["summary_error"] == "" and result["body_problems"] == []
    assert dashboard.problems(SETTINGS.dashboard_name, body) == []
    assert all(
        math.isfinite(d["Value"]) and d["Value"] > 0 for d in cloudwatch.datums if d["MetricName"].startswith(("Speedup", "Expected"))
    )
    return body


LAMBDA_DAMAGES = [
    d
    for d in damage.DAMAGES
    if d.name
    in {
        *REPORTED,
        "number stored as text",
        "the same line twice",
        "bytes that are not UTF-8",
        "carriage return inside a record",
        "acceptance rate above 1",
        "run.json a list",
    }
]


@pytest.mark.parametrize("which", LAMBDA_DAMAGES, ids=[d.name for d in LAMBDA_DAMAGES])
def test_the_lambda_refreshes_a_damaged_run_and_counts_what_it_skipped(tmp_path, aws, which):
    s3, cloudwatch = aws
    _, run_dir = damaged_run(tmp_path, which)
    upload(s3, run_dir, damage.RUN_ID)
    result = refresh(s3, cloudwatch, damage.RUN_ID)
    body = check_refresh(result, cloudwatch)
    assert result["data_quality"]["skipped"] == 1
    assert result["data_quality"]["records_used"] + result["data_quality"]["records_skipped"] == damage.stored_lines(run_dir)
    header = body["widgets"][ROW]["properties"]["markdown"]  # the run's header, under the Deployment state row
    assert "data quality" in header and (which.file in header or which.file.replace("_", "\\_") in header)


def test_negative_latencies_are_not_published_as_a_negative_speedup(tmp_path, aws):
    s3, cloudwatch = aws
    damage.write_small_run(tmp_path / "results")
    path = tmp_path / "results" / damage.RUN_ID / damage.RECORDS
    for line in (5, 6, 7):
        path.write_bytes(damage.edit_line(line, lambda r: {**r, "end_to_end_latency_s": -r["end_to_end_latency_s"]})(path.read_bytes()))
    upload(s3, tmp_path / "results" / damage.RUN_ID, damage.RUN_ID)
    result = refresh(s3, cloudwatch, damage.RUN_ID)
    check_refresh(result, cloudwatch)
    speedups = [d["Value"] for d in cloudwatch.datums if d["MetricName"] == "Speedup"]
    assert speedups and min(speedups) > 0 and result["data_quality"]["by_kind"] == {"impossible": 3}


def test_the_lambda_safety_nets_put_a_dashboard_that_names_what_failed(tmp_path, aws, monkeypatch):
    """Should a summary still fail on some content, or a body still break PutDashboard's rules, the
    refresh puts a text dashboard that says so instead of raising (the dashboard keeps updating)."""
    s3, cloudwatch = aws
    damage.write_small_run(tmp_path / "results")
    upload(s3, tmp_path / "results" / damage.RUN_ID, damage.RUN_ID)

    def broken(files, settings):
        raise ArithmeticError("injected")

    with monkeypatch.context() as patched:
        patched.setattr(handler, "summarize", broken)
        result = refresh(s3, cloudwatch, damage.RUN_ID)
    assert result["summary_error"] == "ArithmeticError: injected" and result["completeness"] == "no data"
    assert f"run {damage.RUN_ID} not summarized: ArithmeticError: injected" in json.dumps(put_body(cloudwatch))
    with monkeypatch.context() as patched:
        patched.setattr(
            dashboard, "body", lambda *args: {"widgets": [{"type": "metric", "x": 0, "y": 0, "width": 6, "height": 6, "properties": {}}]}
        )
        result = refresh(s3, cloudwatch, damage.RUN_ID)
    assert result["body_problems"] == ["widget 0: metric widget without region", "widget 0: metric widget without metrics"]
    body = put_body(cloudwatch)
    assert dashboard.problems(SETTINGS.dashboard_name, body) == [] and "metric widget without metrics" in json.dumps(body)


# --- shapes of a run the dashboard must still show -----------------------------------------------


def only_baseline(store: RunStore) -> None:
    runs.write_run(store, cases=damage.CASES, requests=2)
    for case in damage.CASES:
        key = f"records/{case.name}.jsonl"
        store.write(key, "".join(line + "\n" for line in store.read(key).splitlines() if runs.SPECULATIVE not in line))
        store.write(f"acceptance/{case.name}.json", json.dumps({runs.BASELINE: {"source": "missing"}}))
    run = json.loads(store.read("run.json"))
    run["plan"]["endpoints"] = run["plan"]["endpoints"][:1]
    run["plan"]["deployment"]["variants"] = run["plan"]["deployment"]["variants"][:1]
    store.write("run.json", json.dumps(run))


def every_request_failed(store: RunStore) -> None:
    runs.write_run(store, cases=damage.CASES, requests=2, errors=2)


def speculative_failed(store: RunStore) -> None:
    runs.write_run(store, cases=damage.CASES, requests=2)
    for case in damage.CASES:
        key = f"records/{case.name}.jsonl"
        records = runfiles.load_records(store, [key])
        for record in records:
            if record.variant == runs.SPECULATIVE:
                record.error_code, record.error_msg, record.ttft_s = 503, "Service Unavailable", None
        store.write(key, "".join(r.to_json() + "\n" for r in records))


def empty_run(store: RunStore) -> None:
    runs.write_run(store, cases=(), planned=damage.CASES)


def records_only(store: RunStore) -> None:
    runs.write_run(store, cases=damage.CASES, requests=2)
    store.store.write_text(f"{store.run_id}/run.json", "")  # an empty run.json


SHAPES = {
    "only the baseline": (only_baseline, "only the baseline"),
    "every request failed": (every_request_failed, "all 4 requests failed: 4x error 500 (injected)"),
    "the speculative service failed": (speculative_failed, f"No usable result from {runs.SPECULATIVE}"),
    "an empty run": (empty_run, "No data yet"),
    "an empty run.json": (records_only, "run.json:1"),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_every_shape_of_run_gets_a_valid_dashboard_that_says_what_is_missing(aws, shape):
    s3, cloudwatch = aws
    make, says = SHAPES[shape]
    make(RunStore(S3Store(BUCKET, "results/", s3), "20261129T100000Z-shape"))
    result = refresh(s3, cloudwatch, "20261129T100000Z-shape")
    body = check_refresh(result, cloudwatch)
    text = "\n".join(w["properties"].get("markdown", "") for w in body["widgets"] if w["type"] == "text")
    assert says.replace("_", "\\_") in text.replace("\\-", "-"), text[:2000]
    assert all(w["properties"]["metrics"] for w in body["widgets"] if w["type"] == "metric")


def test_a_run_whose_every_record_was_damaged_says_so_on_the_dashboard(aws):
    s3, cloudwatch = aws
    store = RunStore(S3Store(BUCKET, "results/", s3), "20261129T100000Z-lost")
    runs.write_run(store, cases=damage.CASES, requests=1)
    for case in damage.CASES:
        store.write(f"records/{case.name}.jsonl", store.read(f"records/{case.name}.jsonl").replace('"ttft_s":', '"ttft_s":"'))
    result = refresh(s3, cloudwatch, store.run_id)
    header = check_refresh(result, cloudwatch)["widgets"][ROW]["properties"]["markdown"]
    assert result["completeness"] == "no data" and result["data_quality"]["records_skipped"] == 4
    assert "data quality: 4 of 4 stored records" in header and "records/counting.jsonl:1: not valid JSON" in header


def test_only_the_baseline_gets_a_text_widget_in_place_of_the_speedups_graph(tmp_path):
    """Today: "widget 7: metric widget without metrics" and the Lambda raises."""
    store = RunStore(LocalStore(tmp_path), "r")
    only_baseline(store)
    summary = summarize(runfiles.load_run(store))
    body = dashboard.body(summary, handler.dashboard_settings(SETTINGS, []), {})
    assert dashboard.problems(SETTINGS.dashboard_name, body) == []
    notes = [w["properties"]["markdown"] for w in body["widgets"] if w["type"] == "text"]
    assert any(n.startswith("**Speedup per run") and "nothing to show: only the baseline" in n for n in notes)


def test_a_run_where_every_request_failed_is_partial_and_the_banner_names_the_services(tmp_path):
    store = RunStore(LocalStore(tmp_path), "r")
    every_request_failed(store)
    summary = summarize(runfiles.load_run(store))
    assert summary.completeness == aggregate.PARTIAL
    assert set(summary.missing_services) == {runs.BASELINE, runs.SPECULATIVE}
    banner = report.banner(summary)
    for service in (runs.BASELINE, runs.SPECULATIVE):
        assert f"no usable result from {service}: all 4 requests failed: 4x error 500 (injected)" in banner
    assert summary.verdict.startswith("PARTIAL: no usable result from any service")


def test_a_service_that_failed_every_request_makes_the_run_partial(tmp_path):
    store = RunStore(LocalStore(tmp_path), "r")
    speculative_failed(store)
    summary = summarize(runfiles.load_run(store))
    assert summary.completeness == aggregate.PARTIAL and list(summary.missing_services) == [runs.SPECULATIVE]
    assert "503 (Service Unavailable)" in report.banner(summary)
    header = dashboard.header_markdown(summary, handler.dashboard_settings(SETTINGS, []))
    assert "**PARTIAL DATA**" in header and "No usable result from qwen\\-sd\\-vllm" in header.replace("qwen-sd-vllm", "qwen\\-sd\\-vllm")


# --- sweep-report --------------------------------------------------------------------------------


SWEEP_TRUTH = Truth(classes={"structured": 0.9}, drafts={"Qwen3-1.7B": 0.15}, ks=(2, 4), loads=(Load(CONCURRENCY, 1),))


def stored_sweep(root: Path) -> LocalStore:
    store = LocalStore(root)
    store_points(store, "s1", synthetic_points(SWEEP_TRUTH, requests=2))
    return store


def test_sweep_report_skips_damaged_lines_and_points_it_cannot_place(tmp_path, capsys):
    store = stored_sweep(tmp_path / "results")
    base = tmp_path / "results" / "sweeps" / "s1"
    points = sorted(p.name for p in base.iterdir())
    first, second = base / points[0], base / points[1]
    records = sorted((first / "records").glob("*.jsonl"))[0]
    records.write_bytes(records.read_bytes()[:-40])  # the last line cut
    (second / "run.json").write_bytes((second / "run.json").read_bytes()[:30])  # the point cannot be placed
    read: list[runfiles.RunFiles] = []
    loaded = sweep_report.load_sweep_points(store, "s1", None, read)
    assert {p.point_id for p in loaded} == set(points) - {points[1]}
    assert sum(len(f.records) + sum(1 for s in f.skipped if s.file.startswith("records/")) for f in read) == sum(
        damage.stored_lines(base / p) for p in points
    )
    out = tmp_path / "sweep-report"
    code = cli.main(
        ["sweep-report", "--results", str(tmp_path / "results"), "--sweep-id", "s1", "--out", str(out), "--resamples", "50", "--no-charts"]
    )
    err = capsys.readouterr().err
    assert code == 0, err
    assert f"specbench: skipped {points[0]}/records/{records.name}:" in err and f"{points[1]}/run.json:1" in err


# --- any damage: nothing raises, the counts add up -----------------------------------------------

FILES = ("records/counting.jsonl", "records/json.jsonl", "run.json", "acceptance/counting.json", "acceptance/json.json")
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**6), st.floats(allow_nan=True), st.text(max_size=5))
JSON_VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=4), st.dictionaries(st.text(max_size=3), SCALARS, max_size=2))


@st.composite
def damages(draw):
    """1-3 of: truncate at an offset, flip a byte, drop or repeat a line, swap two lines, set a field
    of a record (or of the run.json's plan) to a value of any JSON type."""
    steps = []
    for _ in range(draw(st.integers(1, 3))):
        name = draw(st.sampled_from(FILES))
        kind = draw(st.sampled_from(("truncate", "flip", "drop", "repeat", "swap", "set")))
        steps.append((name, kind, draw(st.integers(0, 10**6)), draw(st.integers(0, 255)), draw(JSON_VALUES)))
    return steps


def damage_files(run_dir: Path, steps) -> None:
    fields = sorted(RequestRecord.__dataclass_fields__)
    for name, kind, position, byte, value in steps:
        path = run_dir / name
        data = bytearray(path.read_bytes())
        lines = bytes(data).split(b"\n")
        if kind == "truncate":
            data = data[: position % (len(data) + 1)]
        elif kind == "flip" and data:
            data[position % len(data)] = byte
        elif kind in ("drop", "repeat", "swap"):
            i, j = position % len(lines), (position // 7) % len(lines)
            if kind == "drop":
                del lines[i]
            elif kind == "repeat":
                lines.insert(j, lines[i])
            else:
                lines[i], lines[j] = lines[j], lines[i]
            data = bytearray(b"\n".join(lines))
        elif kind == "set":
            try:
                parsed = json.loads(lines[position % len(lines)])
            except (ValueError, UnicodeDecodeError):
                continue
            if name == "run.json" and isinstance(parsed, dict):
                target = parsed.get("plan") if isinstance(parsed.get("plan"), dict) else parsed
                section = sorted(target)[position % len(target)] if target else "x"
                if isinstance(target.get(section), dict) and target[section]:
                    target = target[section]
                    section = sorted(target)[byte % len(target)]
                target[section] = value
            elif isinstance(parsed, dict):
                key = fields[byte % len(fields)] if name.startswith("records/") else (sorted(parsed) or ["x"])[byte % max(len(parsed), 1)]
                if name.startswith("acceptance/") and isinstance(parsed.get(key), dict):
                    parsed[key] = {**parsed[key], "acceptance_rate": value}
                else:
                    parsed[key] = value
            lines[position % len(lines)] = json.dumps(parsed).encode()
            data = bytearray(b"\n".join(lines))
        path.write_bytes(bytes(data))


PROPERTY = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@PROPERTY
@given(steps=damages())
def test_any_damage_the_readers_report_and_summary_never_raise_and_counts_add_up(tmp_path_factory, steps):
    root = tmp_path_factory.mktemp("property")
    store = damage.write_small_run(root)
    run_dir = root / damage.RUN_ID
    damage_files(run_dir, steps)
    files = runfiles.load_run(store)
    check_counts(files, run_dir)
    summary = summarize(files)
    finite_figures(summary)
    report.render_markdown(summary, {})
    report.render_html(summary, {})
    body = dashboard.body(summary, handler.dashboard_settings(SETTINGS, []), {})
    assert dashboard.problems(SETTINGS.dashboard_name, body) == []
    datums = publish.run_datums(files.records, files.acceptance, files.run)
    assert all(v >= 0 for d in datums for v in d.get("Values", [d.get("Value", 0)]))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(steps=damages())
def test_any_damage_the_lambda_refresh_never_raises_and_publishes_only_possible_speedups(tmp_path_factory, monkeypatch, steps):
    moto_aws.offline_environment(monkeypatch)
    root = tmp_path_factory.mktemp("lambda")
    damage.write_small_run(root)
    damage_files(root / damage.RUN_ID, steps)
    run_id = f"20261129T100000Z-{abs(hash(repr(steps))) % 10**8:08d}"
    shutil.move(root / damage.RUN_ID, root / run_id)
    # A fresh moto state per example, not the fixture's one for all: an example is then replayed
    # alone as it ran (shrinking), and moto's GetMetricData, which scans every datum in the window
    # for each of the state row's 12 queries x 1441 periods, does not scan the earlier examples' too.
    with fresh_aws() as (s3, cloudwatch):
        upload(s3, root / run_id, run_id)
        result = refresh(s3, cloudwatch, run_id)
        check_refresh(result, cloudwatch)
    quality = result["data_quality"]
    assert quality["records_used"] + quality["records_skipped"] == damage.stored_lines(root / run_id)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(steps=damages())
def test_any_damage_sweep_report_never_raises(tmp_path_factory, steps):
    root = tmp_path_factory.mktemp("sweep")
    store = damage.write_small_run(root / "sweeps" / "s1")
    # The small run as a sweep point of the baseline at concurrency 1.
    run = json.loads(store.read("run.json"))
    run["sweep"] = {
        "sweep_id": "s1",
        "point_id": damage.RUN_ID,
        "wave": 0,
        "variant": {"name": "baseline"},
        "load": {"kind": "concurrency", "value": 1},
    }
    store.write("run.json", json.dumps(run))
    damage_files(root / "sweeps" / "s1" / damage.RUN_ID, steps)
    read: list[runfiles.RunFiles] = []
    sweep_report.load_sweep_points(LocalStore(root), "s1", None, read)
    assert len(read) == 1
    used_and_skipped = len(read[0].records) + sum(1 for s in read[0].skipped if s.file.startswith("records/"))
    assert used_and_skipped == damage.stored_lines(root / "sweeps" / "s1" / damage.RUN_ID)
    code = cli.main(
        ["sweep-report", "--results", str(root), "--sweep-id", "s1", "--out", str(root / "out"), "--resamples", "50", "--no-charts"]
    )
    assert code in (0, cli.EXIT_USAGE)
