"""The ``report`` command: a stored run's summary as self-contained HTML, Markdown and PNG charts."""

from __future__ import annotations

import base64
import json
import random
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from specbench import cli
from specbench.analysis.aggregate import COMPLETE, NO_DATA, PARTIAL, summarize_run
from specbench.analysis.stats import Interval
from specbench.commands import common
from specbench.outputs.report import chart_titles, format_interval, latency_table, speedup_table, write_report
from specbench.results.records import RequestRecord
from specbench.results.store import LocalStore, RunStore, open_store
from tests import moto_aws
from tests.session_cache import once_per_session

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
RESAMPLES = 200
CASES = {"json": "structured", "poem": "open-ended"}
# Per test case: (baseline TPOT s, speculative TPOT s, position-0 acceptance). json measures 2.5x
# against an expected 3.35x (flagged); poem measures 1.67x against an expected 1.17x (not flagged).
PROFILE = {"json": (0.020, 0.008, 0.9), "poem": (0.020, 0.012, 0.5)}


def make_records(case: str, variant: str, tpot_s: float, requests: int = 8, errors: int = 0, run_id: str = "run-1") -> list[RequestRecord]:
    rng = random.Random(f"{case}/{variant}")
    records = []
    for index in range(requests):
        if index < errors:
            records.append(RequestRecord(run_id, variant, case, CASES.get(case, "structured"), "native", index, 1.7e9, 500, "boom"))
            continue
        tpot = tpot_s * (1 + 0.05 * rng.random())
        ttft = 0.05 * (1 + 0.1 * rng.random())
        e2e = ttft + 99 * tpot
        timings = {"ttft_s": ttft, "end_to_end_latency_s": e2e, "inter_token_latency_s": e2e / 40, "time_per_output_token_s": tpot}
        stream = {"tokens_per_chunk": 2.5, "output_tokens": 100, "chunks": 40, "output_sha256": "same"}
        records.append(RequestRecord(run_id, variant, case, CASES.get(case, "structured"), "native", index, 1.7e9, **timings, **stream))
    return records


def make_acceptance(a: float, k: int = 7) -> dict:
    per_position = [a**i for i in range(1, k + 1)]
    accepted = 100 * sum(per_position)
    return {
        "source": "counters",
        "drafts": 100.0,
        "draft_tokens": 100.0 * k,
        "accepted_tokens": accepted,
        "acceptance_rate": accepted / (100.0 * k),
        "mean_acceptance_length": 1 + accepted / 100,
        "per_position": per_position,
    }


def make_run(cases: dict[str, str] = CASES, status: str = "completed", **extra) -> dict:
    return {
        "run_id": "run-1",
        "status": status,
        "started": "2026-11-29T10:00:00+00:00",
        "finished": "2026-11-29T10:20:00+00:00",
        "plan": {
            "engine": "native",
            "input_tokens": 64,
            "load": {"model": "Qwen/Qwen3-32B", "max_tokens": 100, "concurrency": 4, "requests": 8},
            "suite": {"name": "reference", "test_cases": [{"name": n, "prompt_class": c} for n, c in cases.items()]},
            "deployment": {
                "serving": {"target_model": "Qwen/Qwen3-32B", "instance_type": "trn2.48xlarge"},
                "variants": [
                    {"name": "qwen-vllm", "draft_model": "", "num_speculative_tokens": 0},
                    {"name": "qwen-sd-vllm", "draft_model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 7},
                ],
            },
        },
        **extra,
    }


def complete_inputs() -> tuple[dict, list[RequestRecord], dict]:
    records, acceptance = [], {}
    for case, (base, spec, a) in PROFILE.items():
        records += make_records(case, "qwen-vllm", base) + make_records(case, "qwen-sd-vllm", spec)
        acceptance[case] = {
            "qwen-vllm": {"source": "missing", "reason": "no speculative decoding metrics"},
            "qwen-sd-vllm": make_acceptance(a),
        }
    return make_run(), records, acceptance


def _complete_report(out: Path) -> tuple:
    summary = summarize_run(*complete_inputs(), resamples=RESAMPLES)
    return summary, write_report(summary, out), out


@pytest.fixture(scope="module")
def complete(tmp_path_factory):
    """Read only. Drawn once per session, not per xdist worker (tests/session_cache.py): its six
    charts cost 0.6 s of CPU, and the tests that read them run on both workers."""
    return once_per_session(tmp_path_factory, "report-complete", _complete_report)


@pytest.fixture(scope="module")
def partial(tmp_path_factory):
    """Crashed after the first of three test cases; two of its baseline requests failed."""
    base, spec, a = PROFILE["json"]
    records = make_records("json", "qwen-vllm", base, errors=2) + make_records("json", "qwen-sd-vllm", spec)
    run = make_run({**CASES, "code": "structured"}, status="failed", error="RuntimeError: endpoint went away")
    summary = summarize_run(run, records, {"json": {"qwen-sd-vllm": make_acceptance(a)}}, resamples=RESAMPLES)
    out = tmp_path_factory.mktemp("partial")
    return summary, write_report(summary, out), out


class Resources(HTMLParser):
    """Every tag and every attribute that could load something."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.references: list[str] = []

    def handle_starttag(self, tag, attrs):  # noqa: ANN001
        self.tags.append(tag)
        self.references += [value or "" for name, value in attrs if name in ("src", "href", "srcset", "data", "action", "poster")]


def resources(text: str) -> Resources:
    parser = Resources()
    parser.feed(text)
    return parser


def chart_files(written: dict[str, Path]) -> dict[str, Path]:
    return {name: path for name, path in written.items() if name not in ("html", "markdown")}


# --- complete run --------------------------------------------------------------------------------


def test_complete_report_writes_every_chart_as_a_real_png(complete):
    from matplotlib import image  # here: at the module's top, every pytest-xdist worker would import matplotlib at collection

    summary, written, out = complete
    assert summary.completeness == COMPLETE
    # These stored records carry no per-chunk tokens, so no stream histogram (test_stream_acceptance draws one).
    assert set(written) == {"html", "markdown", *chart_titles()} - {"stream-acceptance-histogram"}
    for name, path in chart_files(written).items():
        assert path == out / f"{name}.png"
        assert path.read_bytes()[:8] == PNG_SIGNATURE
        pixels = image.imread(path)
        height, width = pixels.shape[:2]
        assert (width, height) == (1100, 500), name
        assert pixels.std() > 0.05, f"{name} is blank"


def test_html_is_self_contained_and_embeds_every_chart(complete):
    summary, written, _ = complete
    text = written["html"].read_text(encoding="utf-8")
    found = resources(text)
    assert found.references and all(ref.startswith("data:image/png;base64,") for ref in found.references)
    assert not {"script", "link", "iframe", "object", "embed"} & set(found.tags)
    assert "url(" not in text and "@import" not in text
    embedded = {base64.b64decode(ref.split(",", 1)[1]) for ref in found.references}
    assert embedded == {path.read_bytes() for path in chart_files(written).values()}
    assert summary.verdict in text and "run-1" in text
    for heading in ("Decision per prompt class", "Decision per test case", "What was deployed", "Load", "How to read this"):
        assert f"<h2>{heading}</h2>" in text
    for heading in ("Latency per service", "Speedups in detail", "Throughput and cost per load level"):
        assert f"<h3>{heading}</h3>" in text
    assert "Qwen/Qwen3-0.6B, k=7" in text and "trn2.48xlarge" in text
    assert "E/(k·c+1)" in text and "percentile bootstrap" in text and "per streamed chunk" in text
    assert "PARTIAL" not in text and "NO DATA" not in text


def test_markdown_references_the_chart_files_next_to_it(complete):
    _, written, out = complete
    text = written["markdown"].read_text(encoding="utf-8")
    referenced = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert sorted(referenced) == sorted(path.name for path in chart_files(written).values())
    assert all((out / name).is_file() for name in referenced)
    assert "### Speedups in detail" in text and "## How to read this" in text


def test_speedup_short_of_the_model_is_flagged_in_both_tables(complete):
    summary, written, _ = complete
    table = speedup_table(summary)
    rows = {(row[0], row[1]): (index, row) for index, row in enumerate(table.rows)}
    flag = table.headers.index("Short of model")
    json_index, json_row = rows["json", "test case"]
    poem_index, poem_row = rows["poem", "test case"]
    assert json_row[flag] == "yes" and json_index in table.flagged
    assert poem_row[flag] == "no" and poem_index not in table.flagged
    assert summary.group("json").comparisons[0].shortfall is True and summary.group("poem").comparisons[0].shortfall is False
    assert re.fullmatch(r"\d+\.\d\dx \(\d+\.\d\d-\d+\.\d\d\)", json_row[table.headers.index("TPOT speedup")])
    assert json_row[table.headers.index("a (source)")] == "0.900 (position-0)"
    assert json_row[table.headers.index("Expected speedup")] == "3.35x"

    html = written["html"].read_text(encoding="utf-8")
    assert re.search(r'<tr class="short"><td>json</td><td>test case</td>.*<td>yes</td></tr>', html)
    assert re.search(r"<tr><td>poem</td><td>test case</td>.*<td>no</td></tr>", html)
    markdown = written["markdown"].read_text(encoding="utf-8")
    assert re.search(r"^\| json \| test case \|.*\| \*\*yes\*\* \|$", markdown, re.M)
    assert re.search(r"^\| poem \| test case \|.*\| no \|$", markdown, re.M)


def test_latency_table_in_milliseconds_and_seconds(complete):
    summary, _, _ = complete
    table = latency_table(summary)
    assert table.headers[:3] == ("Group", "Service", "Errors / requests")
    assert "End-to-end p50 / p90 / p99 (s)" in table.headers and "TPOT p50 / p90 / p99 (ms)" in table.headers
    row = next(r for r in table.rows if r[:2] == ("json", "qwen-vllm"))
    assert row[2] == "0/8"
    tpot_p50 = float(row[table.headers.index("TPOT p50 / p90 / p99 (ms)")].split(" / ")[0])
    assert 20.0 <= tpot_p50 <= 21.0
    e2e_p50 = float(row[table.headers.index("End-to-end p50 / p90 / p99 (s)")].split(" / ")[0])
    assert 2.0 <= e2e_p50 <= 2.2


def test_intervals_are_formatted_with_their_ci():
    assert format_interval(Interval(2.4137, 2.2011, 2.6349, resamples=200)) == "2.41x (2.20-2.63)"
    assert format_interval(Interval(1.5)) == "1.50x (no CI)"
    assert format_interval(Interval(None)) == "n/a"
    assert format_interval(Interval(0.0123, 0.0120, 0.0130), unit=" ms", scale=1000, digits=1) == "12.3 ms (12.0-13.0)"


# --- partial and empty runs ----------------------------------------------------------------------


def test_partial_report_says_so_and_renders_what_exists(partial):
    summary, written, out = partial
    assert summary.completeness == PARTIAL
    html = written["html"].read_text(encoding="utf-8")
    assert '<div class="banner partial">PARTIAL: ' in html and "poem, code" in html
    assert "RuntimeError: endpoint went away" in html  # the run's notes
    assert "failed requests (qwen-vllm 2/8)" in html
    assert "<td>json</td><td>qwen-vllm</td><td>2/8</td>" in html
    assert summary.verdict.startswith("PARTIAL: ")
    assert set(chart_files(written)) == set(chart_titles()) - {"stream-acceptance-histogram"}  # no per-chunk tokens stored
    assert all(path.read_bytes()[:8] == PNG_SIGNATURE for path in chart_files(written).values())
    markdown = written["markdown"].read_text(encoding="utf-8")
    assert "> **PARTIAL: " in markdown
    assert all((out / name).is_file() for name in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", markdown))


def test_no_data_report_is_short_and_has_no_charts(tmp_path):
    summary = summarize_run(make_run(status="running"), [], {}, resamples=RESAMPLES)
    assert summary.completeness == NO_DATA
    written = write_report(summary, tmp_path / "out")
    assert set(written) == {"html", "markdown"}
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["report.html", "report.md"]
    html = written["html"].read_text(encoding="utf-8")
    assert '<div class="banner nodata">NO DATA: ' in html and "<img" not in html
    assert "No data yet" in html and "Speedups in detail" not in html and "<h2>Decision" not in html
    assert "Qwen/Qwen3-0.6B" in html  # what was deployed is still told
    assert "> **NO DATA: " in written["markdown"].read_text(encoding="utf-8")


def test_strings_from_the_data_are_escaped(tmp_path):
    hostile = "<script>alert('x')</script>"
    mathtext = r"$\frac{"  # would break matplotlib's mathtext parser if it were parsed
    case = f"{hostile}{mathtext}|x"
    records = make_records(case, "qwen-vllm", 0.02, requests=3) + make_records(case, "qwen-sd-vllm", 0.01, requests=3)
    run = make_run({case: "structured"}, status="failed", error=hostile)
    run["plan"]["deployment"]["serving"]["image"] = hostile
    summary = summarize_run(run, records, {case: {"qwen-sd-vllm": make_acceptance(0.8)}}, resamples=RESAMPLES)
    written = write_report(summary, tmp_path)
    html = written["html"].read_text(encoding="utf-8")
    markdown = written["markdown"].read_text(encoding="utf-8")
    for text in (html, markdown):
        assert "<script" not in text
        assert "&lt;script&gt;alert(" in text
    assert "script" not in resources(html).tags
    assert "&lt;script&gt;alert('x')&lt;/script&gt;$\\frac{\\|x" in markdown  # no table cell broken by the |
    assert all(path.read_bytes()[:8] == PNG_SIGNATURE for path in chart_files(written).values())


# --- the command ---------------------------------------------------------------------------------


def store_run(results: Path, run_id: str, run: dict, records: list[RequestRecord], acceptance: dict) -> RunStore:
    """A run folder as specbench.runner writes it."""
    store = RunStore(LocalStore(results), run_id)
    store.write("run.json", json.dumps({**run, "run_id": run_id}, indent=2, sort_keys=True))
    for case in {r.test_case for r in records}:
        store.write(f"records/{case}.jsonl", "".join(r.to_json() + "\n" for r in records if r.test_case == case))
    for case, figures in acceptance.items():
        store.write(f"acceptance/{case}.json", json.dumps(figures, indent=2, sort_keys=True))
    return store


def test_cli_report_of_a_stored_run(tmp_path, monkeypatch, capsys, complete):
    summary, written, _ = complete
    store_run(tmp_path / "results", "run-1", *complete_inputs())
    monkeypatch.chdir(tmp_path)
    assert cli.main(["report", "run-1", "--resamples", str(RESAMPLES)]) == 0
    out = capsys.readouterr().out
    assert summary.verdict in out and "report-run-1/report.html" in out and "report-run-1/speedup.png" in out
    # Same records, same summary: byte-for-byte the same charts (they are reproducible).
    for name, path in chart_files(written).items():
        assert (tmp_path / "report-run-1" / path.name).read_bytes() == path.read_bytes(), name
    html = (tmp_path / "report-run-1" / "report.html").read_text(encoding="utf-8")
    assert '<tr class="short"><td>json</td>' in html and "<tr><td>poem</td>" in html


def test_run_argument_is_a_location_or_an_id_inside_results(tmp_path):
    assert common.report_store("run-1", None, None).location == "results/run-1"
    assert common.report_store("run-1", str(tmp_path), None).location == f"{tmp_path}/run-1"
    assert common.report_store(f"{tmp_path}/run-1/", None, None).location == f"{tmp_path}/run-1"
    assert common.report_store("s3://bucket/results/run-1", None, "us-east-2").location == "s3://bucket/results/run-1"
    with pytest.raises(ValueError, match="--results applies only to a bare run id"):
        common.report_store(f"{tmp_path}/run-1", str(tmp_path), None)
    with pytest.raises(ValueError, match="expected s3://BUCKET/PREFIX/RUN_ID"):
        common.report_store("s3://bucket", None, "us-east-2")


def test_cli_report_of_a_run_in_s3_before_any_record(tmp_path, monkeypatch, capsys):
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-2"}.items():
        monkeypatch.setenv(key, value)
    with moto_aws.mocked():
        moto_aws.bucket("bench", "us-east-2")
        RunStore(open_store("s3://bench/results/", "us-east-2"), "run-9").write(
            "run.json", json.dumps(make_run(status="running", run_id="run-9"))
        )
        args = ["report", "s3://bench/results/run-9", "--region", "us-east-2", "--out", str(tmp_path / "out")]
        assert cli.main(args) == 0
        assert cli.main(["report", "run-0", "--results", "s3://bench/results/", "--region", "us-east-2"]) == cli.EXIT_USAGE
    captured = capsys.readouterr()
    assert "report of run run-9 (no data) from s3://bench/results/run-9:" in captured.out and "No data yet" in captured.out
    assert "NO DATA" in (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert captured.err == "specbench: no run at s3://bench/results/run-0 (neither run.json nor records/)\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["report", "missing-run"], "no run at {tmp}/missing-run (neither run.json nor records/)"),
        (["report", "ftp://host/results/run-1"], "allowed are a directory path or s3://BUCKET/PREFIX/"),
        (["report", "run-1", "--draft-cost-ratio", "1.5"], "--draft-cost-ratio must lie between 0 and 1 (exclusive), got 1.5"),
        (["report", "run-1", "--draft-cost-ratio", "0"], "--draft-cost-ratio must lie between 0 and 1"),
        (["report", "run-1", "--baseline", "nope"], "--baseline nope: no such service in this run (qwen-sd-vllm, qwen-vllm)"),
    ],
)
def test_cli_errors_are_one_line_with_exit_code_2(tmp_path, capsys, args, message):
    base, spec, a = PROFILE["json"]
    records = make_records("json", "qwen-vllm", base, requests=3) + make_records("json", "qwen-sd-vllm", spec, requests=3)
    store_run(tmp_path, "run-1", make_run({"json": "structured"}), records, {})
    assert cli.main([*args, "--resamples", "20"] + (["--results", str(tmp_path)] if "/" not in args[1] else [])) == cli.EXIT_USAGE
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
    assert message.format(tmp=tmp_path) in captured.err
    assert not captured.out


def test_cli_without_matplotlib_says_how_to_install_it(tmp_path, monkeypatch, capsys):
    base, spec, _ = PROFILE["json"]
    store_run(tmp_path, "run-1", make_run({"json": "structured"}), make_records("json", "qwen-vllm", base, requests=3), {})
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    monkeypatch.setitem(sys.modules, "specbench.outputs.report_charts", None)
    assert cli.main(["report", "run-1", "--results", str(tmp_path), "--out", str(tmp_path / "out"), "--resamples", "20"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install -r specbench/requirements-report.txt" in err


def test_cli_report_without_charts_needs_no_matplotlib(tmp_path, monkeypatch, capsys):
    store_run(tmp_path, "run-1", *complete_inputs())
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    monkeypatch.setitem(sys.modules, "specbench.outputs.report_charts", None)
    args = ["report", "run-1", "--results", str(tmp_path), "--out", str(tmp_path / "out"), "--resamples", "20", "--no-charts"]
    assert cli.main(args) == 0, capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["report.html", "report.md"]
    html = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "<img" not in html and "<h2>Decision per prompt class</h2>" in html and "PARTIAL" not in html
    markdown = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert ".png" not in markdown and "### Speedups in detail" in markdown


# --- the page opens with the answer --------------------------------------------------------------


class Outline(HTMLParser):
    """Section ids in page order, and every image's source and alt text."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: list[str] = []
        self.images: list[tuple[str, str]] = []
        self.first_image_section = ""

    def handle_starttag(self, tag, attrs):  # noqa: ANN001
        found = dict(attrs)
        if tag == "section":
            self.sections.append(found.get("id", ""))
        if tag == "img":
            self.images.append((found.get("src", ""), found.get("alt", "")))
            self.first_image_section = self.first_image_section or self.sections[-1]


def test_report_opens_with_the_decision_in_this_order_and_every_image_exists(complete):
    from specbench.outputs.report import SECTION_ORDER

    summary, written, out = complete
    outline = Outline()
    outline.feed(written["html"].read_text(encoding="utf-8"))
    # headline, speedup chart, decision per class and per test case, then the evidence, then settings and load.
    assert outline.sections == [
        "headline",
        "speedup-chart",
        "decision",
        "decision-test-cases",
        "latency",
        "deployment",
        "load",
        "how-to-read",
    ]
    known = [s for s in outline.sections if s in SECTION_ORDER]
    assert known == sorted(known, key=SECTION_ORDER.index)
    assert outline.first_image_section == "speedup-chart"
    titles = chart_titles()
    assert outline.images[0][1] == titles["speedup"]
    for source, alt in outline.images:
        name = next(n for n, t in titles.items() if t == alt)
        assert base64.b64decode(source.split(",", 1)[1]) == (out / f"{name}.png").read_bytes()
    markdown = written["markdown"].read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", markdown, re.M)
    assert headings == [
        "Decision per prompt class",
        "Decision per test case",
        "Latency, throughput and acceptance",
        "What was deployed",
        "Load",
        "How to read this",
    ]
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", markdown)
    assert images[0] == "speedup.png" and all((out / name).is_file() for name in images)
    assert markdown.index("speedup.png") < markdown.index("## Decision per prompt class") < markdown.index("latency-end-to-end.png")


def test_decision_table_per_class_and_per_test_case_share_their_columns(complete):
    from specbench.outputs.report import DECISION_HEADERS, SAVING_HEADER, decision_table

    summary, _, _ = complete
    by_class, by_case = decision_table(summary, "prompt class"), decision_table(summary, "test case")
    assert by_class.headers[1:] == by_case.headers[1:] == DECISION_HEADERS[1:]
    assert (by_class.headers[0], by_case.headers[0]) == ("Prompt class", "Test case")
    assert [row[0] for row in by_class.rows] == ["structured", "open-ended"] and [row[0] for row in by_case.rows] == ["json", "poem"]
    assert not any("Inter-token" in header for header in DECISION_HEADERS)  # per chunk: not a decision figure
    row = dict(zip(DECISION_HEADERS[1:], by_case.rows[0][1:], strict=True))
    assert row["Faster?"] == "yes" and row["Acceptance length (source)"].endswith("(/metrics)")
    assert row["Requests (baseline / speculative)"] == "8 / 8"
    # This run records no price: cost is not computed, never 0.
    assert row["Cost per M output tokens: baseline"] == "not computed (no price)" and "$0" not in row[SAVING_HEADER]


def test_the_per_chunk_speedup_is_labelled_so_with_tokens_per_chunk_beside_it(complete):
    summary, _, _ = complete
    table = speedup_table(summary)
    column = table.headers.index("Inter-token (per chunk) speedup")
    assert table.headers[column + 1] == "Tokens per chunk (baseline / speculative)"
    assert table.rows[0][column + 1] == "2.50 / 2.50"


def test_cost_per_million_tokens_with_a_price():
    run, records, acceptance = complete_inputs()
    for record in records:  # test cases run one after the other
        record.started_at += 1000.0 if record.test_case == "poem" else 0.0
    run["plan"]["deployment"]["cost"] = {"node_price_per_hour": 36.0, "price_source": "test", "servers_per_node": 2}
    summary = summarize_run(run, records, acceptance, resamples=RESAMPLES)
    from specbench.outputs.report import decision_table, render_html, throughput_table

    row = decision_table(summary).rows[0]
    assert re.fullmatch(r"\$\d+\.\d\d \(\d+\.\d\d-\d+\.\d\d\)", row[5]) and row[7].startswith("+$")  # cheaper: a positive saving
    rows = throughput_table(summary).rows
    base = next(r for r in rows if r[0] == "json" and r[2] == "qwen-vllm")
    # Each request: 100 tokens in 0.05 + 99 x ~20 ms; 8 requests back to back from the same start (all
    # in flight at once): tokens/s per server = 800 / the longest request, per node x 2.
    longest = max(r.end_to_end_latency_s for r in records if r.test_case == "json" and r.variant == "qwen-vllm")
    assert float(base[3].split(" ")[0]) == pytest.approx(800 / longest, abs=0.05)
    assert float(base[5].split(" ")[0]) == pytest.approx(2 * 800 / longest, abs=0.1)
    html = render_html(summary, {})  # the page's text; a price changes no chart (the complete run draws them)
    assert "$36.00 per node-hour (test)" in html and "Cost per million output tokens at $36.00 per node-hour" in html
