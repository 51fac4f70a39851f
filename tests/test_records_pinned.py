"""The record and its math pinned to whole values (issue 17: the mutants test_native_stream and
test_llmperf_format leave alive). Exact binary fractions, so equality is exact."""

import json
import re
from pathlib import Path

import pytest

from specbench.results import records
from specbench.results.records import RequestRecord, read_jsonl, stream_metrics, time_per_output_token

IDENTITY = {
    "run_id": "r1",
    "variant": "qwen-sd-vllm",
    "test_case": "short",
    "prompt_class": "structured",
    "engine": "native",
    "request_index": 3,
    "started_at": 1764400000.5,
}


def test_persisted_labels_and_codes_are_pinned():
    # Stored in every record and read back by other runs and dashboards: a change breaks old results.
    assert (records.COUNT_FROM_USAGE, records.COUNT_FROM_TOKENIZER, records.COUNT_FROM_LLAMA2) == ("usage", "tokenizer", "llama2-tokenizer")
    assert records.COUNT_FROM_FINAL_USAGE == "final-usage"  # docs/benchmark.md: `token_count_source: final-usage`
    assert (records.CLIENT_ERROR, records.INTERRUPTED, records.NOT_SENT) == (-1, -2, -3)  # docs/benchmark.md#error-kinds


def test_error_kinds_are_the_documented_ones():
    """The stored ``error_kind`` names are the ones docs/benchmark.md's table explains, no more, no fewer."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "benchmark.md").read_text(encoding="utf-8")
    table = text[text.index("### Error kinds") :].split("\n\n| kind |", 1)[1].split("\n\n", 1)[0]
    documented = [name for row in table.splitlines()[2:] for name in re.findall(r"`([a-z_]+)`", row.split(" | ")[0])]
    assert len(records.ERROR_KINDS) == len(set(records.ERROR_KINDS)) == 19
    assert sorted(documented) == sorted(records.ERROR_KINDS)


def failed(code, kind=""):  # type: ignore[no-untyped-def]
    return RequestRecord(**IDENTITY, error_code=code, error_msg="x", error_kind=kind)


def test_failure_kind_of_each_kind_of_record():
    assert records.failure_kind(RequestRecord(**IDENTITY)) == ""
    assert RequestRecord(**IDENTITY).error_kind == ""  # a string on every record, as read back from storage
    assert records.failure_kind(failed(503, "model_mismatch")) == "model_mismatch"  # the stored kind wins
    assert records.failure_kind(failed(records.INTERRUPTED)) == "interrupted"
    assert records.failure_kind(failed(records.NOT_SENT)) == "not_sent"
    assert records.failure_kind(failed(503)) == "http_status"
    assert records.failure_kind(failed(1)) == "http_status"
    assert records.failure_kind(failed(0)) == "client_error"
    assert records.failure_kind(failed(records.CLIENT_ERROR)) == "client_error"
    assert records.failure_kind(failed(-4)) == "client_error"


def test_error_kinds_counts_failures_only_sorted_by_kind():
    batch = [RequestRecord(**IDENTITY), failed(503), failed(records.NOT_SENT), failed(500), failed(-1, "timeout"), failed(-1)]
    counted = records.error_kinds(batch)
    assert counted == {"client_error": 1, "http_status": 2, "not_sent": 1, "timeout": 1}
    assert list(counted) == ["client_error", "http_status", "not_sent", "timeout"]
    assert records.error_kinds([]) == {} and records.error_kinds([RequestRecord(**IDENTITY)]) == {}


def test_figure_definitions_name_every_figure_of_the_record():
    figures = {f for f in IDENTITY} | {"error_code", "error_msg", "input_tokens", "token_count_source", "output_sha256"}
    figures |= {"sent_monotonic_s", "chunk_tokens", "prompt_id"}
    record_fields = set(json.loads(RequestRecord(**IDENTITY).to_json()))
    assert set(records.FIGURE_DEFINITIONS) == record_fields - figures


def test_a_failed_requests_whole_record():
    failed = RequestRecord(**IDENTITY, error_code=500, error_msg="boom")
    assert not failed.ok
    assert json.loads(failed.to_json()) == {
        **IDENTITY,
        "error_code": 500,
        "error_msg": "boom",
        "ttft_s": None,
        "end_to_end_latency_s": None,
        "inter_token_latency_s": None,
        "time_per_output_token_s": None,
        "tokens_per_chunk": None,
        "output_throughput_tps": None,
        "input_tokens": None,
        "output_tokens": None,
        "chunks": 0,
        "token_count_source": "",
        "output_sha256": "",
        "sent_monotonic_s": None,
        "chunk_times_s": [],
        "chunk_tokens": [],
        "prompt_id": "",
        "acceptance_length": None,
        "acceptance_chunks": 0,
        "llmperf_ttft_s": None,
        "llmperf_end_to_end_latency_s": None,
        "llmperf_chunks": None,
        "llmperf_output_tokens": None,
        "llmperf_inter_token_latency_s": None,
        "llmperf_output_throughput_tps": None,
    }


def test_a_fresh_records_whole_value():
    assert json.loads(RequestRecord(**IDENTITY).to_json()) == {
        **json.loads(RequestRecord(**IDENTITY, error_code=500, error_msg="boom").to_json()),
        "error_code": None,
        "error_msg": "",
    }
    assert RequestRecord(**IDENTITY).error_msg == ""


def test_ok_is_no_error_code_at_all():
    assert RequestRecord(**IDENTITY).ok
    assert not RequestRecord(**IDENTITY, error_code=0).ok
    assert not RequestRecord(**IDENTITY, error_code=records.CLIENT_ERROR).ok


def test_to_json_is_compact_and_round_trips_the_whole_record():
    record = RequestRecord(**IDENTITY, ttft_s=0.25, chunk_times_s=[0.25, 0.5], chunk_tokens=[1, 2], output_tokens=3)
    text = record.to_json()
    assert text.startswith('{"run_id":"r1","variant":"qwen-sd-vllm",') and ", " not in text and '": ' not in text
    assert RequestRecord.from_dict(json.loads(text)) == record


def test_to_json_is_what_asdict_gives_with_every_field_set_and_the_record_unchanged():
    """to_json reads the fields directly (asdict deep-copies each float of the chunk lists): same text,
    in field order, the empty optional fields left out, and the record's own lists not shared with it."""
    import dataclasses

    values = {"error_code": 500, "error_msg": "boom", "error_kind": "http_status", "load_level": "c4", "chunks": 3}
    values |= {f.name: 0.5 for f in dataclasses.fields(RequestRecord) if f.type in ("float | None", "float")}
    values |= {f.name: 7 for f in dataclasses.fields(RequestRecord) if f.type == "int | None" and f.name != "error_code"}
    values |= {"chunk_times_s": [0.25, 0.5, 0.75], "chunk_tokens": [1, 2, 3], "token_count_source": "usage", "output_sha256": "ab"}
    full = RequestRecord(**{**IDENTITY, **values})
    assert json.dumps(dataclasses.asdict(full), separators=(",", ":"), allow_nan=False) == full.to_json()
    assert list(json.loads(full.to_json())) == [f.name for f in dataclasses.fields(RequestRecord)]
    bare = RequestRecord(**IDENTITY)
    expected = {k: v for k, v in dataclasses.asdict(bare).items() if k not in ("error_kind", "load_level")}
    assert bare.to_json() == json.dumps(expected, separators=(",", ":"))
    before = dataclasses.replace(full, chunk_times_s=list(full.chunk_times_s))
    full.to_json()
    assert full == before and "error_kind" in dataclasses.asdict(full)


def test_from_dict_drops_unknown_keys_and_keeps_the_known():
    data = {**IDENTITY, "ttft_s": 0.5, "added_later": 1}
    assert RequestRecord.from_dict(data) == RequestRecord(**IDENTITY, ttft_s=0.5)


def test_read_jsonl_skips_blank_lines_and_reads_the_rest_whole():
    first = RequestRecord(**IDENTITY, ttft_s=0.25)
    second = RequestRecord(**{**IDENTITY, "request_index": 4}, error_code=records.INTERRUPTED, error_msg="stopped")
    assert read_jsonl(["", first.to_json(), "  \n", second.to_json() + "\n"]) == [first, second]
    assert read_jsonl([]) == [] and read_jsonl(["\n"]) == []


def test_stream_metrics_whole_result():
    assert stream_metrics([0.25, 0.5, 1.0, 1.5], [1, 2, 2, 3], 2.0, 11) == {
        "ttft_s": 0.25,
        "end_to_end_latency_s": 2.0,
        "inter_token_latency_s": 0.375,  # 1.5 / 4 chunks
        "time_per_output_token_s": 0.25,  # (2.0 - 0.25) / (8 - 1)
        "tokens_per_chunk": 2.0,
        "output_throughput_tps": 4.0,
        "input_tokens": 11,
        "output_tokens": 8,
        "chunks": 4,
        "acceptance_length": 2.0,  # the decode chunks (2, 2): prefill and last chunk left out
        "acceptance_chunks": 2,
    }


def test_stream_metrics_one_chunk_and_zero_end_to_end_latency():
    assert stream_metrics([0.0], [1], 0.0, None) == {
        "ttft_s": 0.0,
        "end_to_end_latency_s": 0.0,
        "inter_token_latency_s": 0.0,
        "time_per_output_token_s": None,
        "tokens_per_chunk": 1.0,
        "output_throughput_tps": None,  # no time elapsed: no rate, not a division by zero
        "input_tokens": None,
        "output_tokens": 1,
        "chunks": 1,
        "acceptance_length": None,
        "acceptance_chunks": 0,
    }
    assert stream_metrics([0.5], [3], 0.5, 7)["output_throughput_tps"] == 6.0


@pytest.mark.parametrize(
    ("times", "tokens", "message"),
    [
        ([], [], "empty completion: no content chunk arrived"),
        ([0.5], [], "chunk_times_s and chunk_tokens differ in length"),
        ([0.5], [1, 2], "chunk_times_s and chunk_tokens differ in length"),
    ],
)
def test_stream_metrics_refuses_what_is_not_a_stream(times, tokens, message):
    with pytest.raises(ValueError) as raised:
        stream_metrics(times, tokens, 1.0, None)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("tokens", "expected"),
    [(0, None), (1, None), (2, 1.5), (3, 0.75), (4, 0.5)],
)
def test_time_per_output_token_from_exactly_two_tokens(tokens, expected):
    assert time_per_output_token(0.5, 2.0, tokens) == expected


def test_figure_definitions_stored_in_run_json_are_pinned():
    # run.json stores these words as what each figure means: changing one changes what every later run
    # claims, so it is a deliberate edit here too, never a slip.
    assert records.FIGURE_DEFINITIONS == {
        "ttft_s": "request written to first content chunk",
        "end_to_end_latency_s": "request written to the end of the stream",
        "chunks": "content chunks: streamed events that delivered output, one per server step: non-empty text, or (usage on every "
        "event) a rise in completion_tokens under empty text (a character's first byte-level token, the end-of-sequence token); "
        "role-only and usage-only frames excluded",
        "output_tokens": "content tokens, no BOS; counted as token_count_source says",
        "inter_token_latency_s": "per content chunk: (last content chunk - sent) / chunks",
        "time_per_output_token_s": "per content token: (end-to-end - TTFT) / (output_tokens - 1)",
        "tokens_per_chunk": "output_tokens / chunks",
        "output_throughput_tps": "output_tokens / end-to-end",
        "chunk_times_s": "arrival of each content chunk after the request was sent (empty for imported llmperf files)",
        "acceptance_length": "stream acceptance: mean content tokens per decode chunk (first and last chunk excluded); "
        "accepted drafts + 1 on a server streaming one chunk per target step",
        "acceptance_chunks": "decode chunks acceptance_length averages (content chunks - 2, 0 below 3 chunks)",
        "llmperf_ttft_s": "llmperf's: from before requests.post (session and connection set-up included) to the first content chunk",
        "llmperf_end_to_end_latency_s": "llmperf's: from before requests.post to the end of the stream",
        "llmperf_chunks": "llmperf's count: every data line but [DONE] (role and finish frames included)",
        "llmperf_output_tokens": "llmperf's count: len(Llama-2 tokenizer.encode(text)), BOS included",
        "llmperf_inter_token_latency_s": "llmperf's: summed gaps / llmperf_chunks, as its token_benchmark_ray.py",
        "llmperf_output_throughput_tps": "llmperf's: llmperf_output_tokens / end-to-end",
    }
