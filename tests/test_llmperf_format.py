"""llmperf's result files: written from our records the way llmperf writes them, and read back from
realistically shaped files (numbers as strings, error rows, empty files)."""

import json

import pytest

from specbench.results import llmperf_format as fmt
from specbench.results.records import RequestRecord


def record(index, ttft=0.05, e2e=3.0, itl=0.04, tokens=100, error=None):
    r = RequestRecord("run", "qwen-vllm", "counting", "structured", "native", index, 1.7e9, input_tokens=64)
    if error:
        r.error_code, r.error_msg = error
    else:
        r.ttft_s, r.end_to_end_latency_s, r.inter_token_latency_s, r.output_tokens = ttft, e2e, itl, tokens
        r.output_throughput_tps = tokens / e2e
    return r


def test_file_names_follow_llmperf():
    assert fmt.file_stem("Qwen/Qwen3-32B", 64, 600) == "Qwen-Qwen3-32B_64_600"


def test_quantiles_match_pandas_linear_interpolation():
    values = [1.0, 2.0, 3.0, 4.0, 10.0]
    # pandas.Series(values).quantile([.25, .5, .9, .99]) -> 2.0, 3.0, 7.6, 9.76
    assert [round(fmt.quantile(values, q), 6) for q in (0.25, 0.5, 0.9, 0.99)] == [2.0, 3.0, 7.6, 9.76]


def test_written_files_have_llmperf_keys_and_exclude_errors_from_latency():
    records = [record(0, ttft=0.1), record(1, ttft=0.3), record(2, error=(500, "boom"))]
    run = fmt.LlmperfRun("Qwen/Qwen3-32B", 64, 600, 4, {"temperature": 0.0}, elapsed_s=10.0, timestamp=1700000000)
    files = fmt.result_files(records, run)
    summary = json.loads(files["Qwen-Qwen3-32B_64_600_summary.json"])
    rows = json.loads(files["Qwen-Qwen3-32B_64_600_individual_responses.json"])
    assert [row["error_code"] for row in rows] == [None, None, 500]
    assert rows[2]["ttft_s"] == 0 and rows[2]["error_msg"] == "boom"
    assert summary["results_ttft_s_quantiles_p50"] == pytest.approx(0.2)
    assert summary["results_ttft_s_max"] == pytest.approx(0.3)
    assert summary["results_number_errors"] == 1
    assert summary["results_error_rate"] == pytest.approx(1 / 3)
    assert summary["results_num_completed_requests"] == 2
    assert summary["results_mean_output_throughput_token_per_s"] == pytest.approx(20.0)
    assert summary["mean_input_tokens"] == 64 and summary["version"] == fmt.RESULTS_VERSION
    # Round trip through our reader.
    parsed = fmt.parse_individual_responses(files["Qwen-Qwen3-32B_64_600_individual_responses.json"])
    assert parsed[0]["ttft_s"] == pytest.approx(0.1) and parsed[2]["error_code"] == 500


REALISTIC_ROWS = """[
  {"error_code": null, "error_msg": "", "inter_token_latency_s": 0.0451, "ttft_s": 0.212,
   "end_to_end_latency_s": 27.3, "request_output_throughput_token_per_s": 21.9,
   "number_total_tokens": "664", "number_output_tokens": "600", "number_input_tokens": "64"},
  {"error_code": -1, "error_msg": "", "inter_token_latency_s": 0, "ttft_s": 0, "end_to_end_latency_s": 0,
   "request_output_throughput_token_per_s": 0, "number_total_tokens": 64, "number_output_tokens": 0,
   "number_input_tokens": 64},
  {"error_code": "503", "error_msg": "Service Unavailable", "inter_token_latency_s": "0", "ttft_s": 0,
   "end_to_end_latency_s": 0, "request_output_throughput_token_per_s": 0, "number_total_tokens": "64",
   "number_output_tokens": "0", "number_input_tokens": "64"},
  {"error_code": NaN, "error_msg": null, "inter_token_latency_s": 0.05, "ttft_s": "0.25",
   "end_to_end_latency_s": "30.1", "request_output_throughput_token_per_s": 19.9,
   "number_total_tokens": 663.0, "number_output_tokens": 599.0, "number_input_tokens": 64}
]"""


def test_reader_coerces_strings_and_keeps_error_rows():
    rows = fmt.parse_individual_responses(REALISTIC_ROWS)
    assert [row["error_code"] for row in rows] == [None, -1, 503, None]  # NaN (pandas' missing) is a success
    assert rows[0]["number_output_tokens"] == 600 and isinstance(rows[0]["number_output_tokens"], int)
    assert rows[3]["ttft_s"] == pytest.approx(0.25) and rows[3]["number_output_tokens"] == 599
    assert rows[2]["error_msg"] == "Service Unavailable" and rows[3]["error_msg"] == ""
    records = fmt.records_from_rows(
        rows, run_id="ref", variant="qwen-vllm", test_case="counting", prompt_class="structured", started_at=0.0
    )
    assert [r.ok for r in records] == [True, False, False, True]
    # llmperf's count includes a BOS: content tokens are one fewer, and per-token time uses those.
    assert (records[0].output_tokens, records[0].llmperf_output_tokens, records[0].llmperf_inter_token_latency_s) == (599, 600, 0.0451)
    assert records[0].time_per_output_token_s == pytest.approx((27.3 - 0.212) / 598)
    assert records[1].ttft_s is None  # llmperf's zeros on error rows are not latencies


@pytest.mark.parametrize("text", ["", "  \n", "[]"])
def test_empty_files_are_no_rows(text):
    assert fmt.parse_individual_responses(text) == []


def test_summary_reader_turns_numeric_strings_into_numbers():
    summary = fmt.parse_summary(
        '{"results_number_errors": "2", "results_ttft_s_mean": "0.2134", "results_error_code_frequency": "{-1: 2}", "model": "Qwen/Qwen3-32B"}'
    )
    assert summary["results_number_errors"] == 2 and summary["results_ttft_s_mean"] == pytest.approx(0.2134)
    assert summary["results_error_code_frequency"] == "{-1: 2}" and summary["model"] == "Qwen/Qwen3-32B"
    assert fmt.parse_summary("") == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not JSON"),
        ('{"a": 1}', "expected a list"),
        ('[{"ttft_s": "fast"}]', r"\[0\].ttft_s: expected a number"),
        ("[1]", r"\[0\]: expected an object"),
    ],
)
def test_reader_rejects_non_llmperf_files_naming_the_place(text, message):
    with pytest.raises(fmt.LlmperfFormatError, match=message):
        fmt.parse_individual_responses(text, "x.json")


def test_llmperf_engine_records_write_llmperfs_own_figures_to_its_files():
    """Rows of llmperf's files keep llmperf's figures (Llama-2 tokens with BOS, summed gaps over data
    lines); the record itself carries content figures."""
    r = record(0, ttft=0.2, e2e=1.0, itl=0.1, tokens=8)
    r.engine, r.llmperf_chunks, r.llmperf_output_tokens = "llmperf", 10, 9
    r.llmperf_inter_token_latency_s, r.llmperf_output_throughput_tps = 0.08, 9.0
    row = fmt.individual_response(r)
    assert (row["number_output_tokens"], row["number_total_tokens"], row["inter_token_latency_s"]) == (9, 73, 0.08)
    assert row["request_output_throughput_token_per_s"] == 9.0
    native = fmt.individual_response(record(0, itl=0.1, tokens=8, e2e=1.0))
    assert (native["number_output_tokens"], native["inter_token_latency_s"], native["request_output_throughput_token_per_s"]) == (
        8,
        0.1,
        8.0,
    )


def test_import_brings_llmperf_directories_into_one_run_and_publish_reads_them(tmp_path, capsys):
    from specbench import cli
    from specbench.outputs.publish import load_records, run_datums
    from specbench.results.records import read_jsonl
    from specbench.results.store import LocalStore, RunStore

    for variant in ("qwen-vllm", "qwen-sd-vllm"):
        folder = tmp_path / "llmperf" / variant
        folder.mkdir(parents=True)
        (folder / "Qwen-Qwen3-32B_64_600_individual_responses.json").write_text(REALISTIC_ROWS)
        (folder / "Qwen-Qwen3-32B_64_600_summary.json").write_text(
            '{"model": "Qwen/Qwen3-32B", "mean_input_tokens": 64, "timestamp": "1764400000"}'
        )
        code = cli.main(
            [
                "import-llmperf",
                str(folder),
                "--variant",
                variant,
                "--test-case",
                "json",
                "--results",
                str(tmp_path / "results"),
                "--run-id",
                "ref",
            ]
        )
        assert code == 0
    store = RunStore(LocalStore(tmp_path / "results"), "ref")
    records = read_jsonl(store.read("records/json.jsonl").splitlines())
    assert len(records) == 8 and {r.variant for r in records} == {"qwen-vllm", "qwen-sd-vllm"}
    assert all(r.prompt_class == "structured" and r.started_at == 1764400000 and r.engine == "llmperf" for r in records)
    run = json.loads(store.read("run.json"))
    assert [(i["variant"], i["requests"], i["errors"]) for i in run["imports"]] == [("qwen-vllm", 4, 2), ("qwen-sd-vllm", 4, 2)]
    # Importing a variant again replaces it, it does not add to it.
    assert cli.main(["import-llmperf", str(tmp_path / "llmperf" / "qwen-vllm"), "--variant", "qwen-vllm", "--test-case", "json",
                     "--results", str(tmp_path / "results"), "--run-id", "ref"]) == 0  # fmt: skip
    assert len(load_records(store)) == 8 and len(json.loads(store.read("run.json"))["imports"]) == 2
    errors = [d for d in run_datums(load_records(store), {}) if d["MetricName"] == "Errors" and len(d["Dimensions"]) == 3]
    assert sorted(sum(v * c for v, c in zip(d["Values"], d["Counts"], strict=True)) for d in errors) == [2, 2]
    # A test case outside the reference suite needs its class; an empty directory is an error, not an empty import.
    assert (
        cli.main(["import-llmperf", str(tmp_path), "--variant", "v", "--test-case", "mine", "--run-id", "x", "--results", str(tmp_path)])
        == cli.EXIT_USAGE
    )
    assert "--prompt-class is needed" in capsys.readouterr().err
    assert (
        cli.main(["import-llmperf", str(tmp_path), "--variant", "v", "--test-case", "json", "--run-id", "x", "--results", str(tmp_path)])
        == cli.EXIT_USAGE
    )
    assert "expected one *_individual_responses.json" in capsys.readouterr().err
