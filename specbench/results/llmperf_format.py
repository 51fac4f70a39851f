"""llmperf's result files, written from our records and read back, so existing llmperf tooling
(and results of the reference run) work with this project.

Per (variant, test case) llmperf writes ``<model>_<in>_<out>_individual_responses.json`` (a list of
per-request dicts) and ``..._summary.json`` (a flat dict: nested keys joined with ``_``). Files in
the wild hold integers written as strings, error rows with zeros, and empty files; the readers
accept all of those.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from specbench import jsonfile
from specbench.results.records import CLIENT_ERROR, COUNT_FROM_LLAMA2, RequestRecord, time_per_output_token

RESULTS_VERSION = "2023-08-31"  # llmperf's own results version string
QUANTILES = (0.25, 0.5, 0.75, 0.9, 0.95, 0.99)
SUMMARY_METRICS = (
    "inter_token_latency_s",
    "ttft_s",
    "end_to_end_latency_s",
    "request_output_throughput_token_per_s",
    "number_input_tokens",
    "number_output_tokens",
)


def file_stem(model: str, input_tokens: int, output_tokens: int) -> str:
    """llmperf's naming: non-word runs become '-', repeated dashes collapse."""
    stem = re.sub(r"[^\w\d-]+", "-", f"{model}_{input_tokens}_{output_tokens}")
    return re.sub(r"-{2,}", "-", stem)


def individual_response(record: RequestRecord) -> dict[str, Any]:
    """One row of individual_responses.json; failed requests carry zeros, as llmperf writes them."""
    if not record.ok:
        return {
            "error_code": record.error_code,
            "error_msg": record.error_msg,
            "inter_token_latency_s": 0,
            "ttft_s": 0,
            "end_to_end_latency_s": 0,
            "request_output_throughput_token_per_s": 0,
            "number_total_tokens": record.input_tokens or 0,
            "number_output_tokens": 0,
            "number_input_tokens": record.input_tokens or 0,
        }
    # A record of the llmperf engine carries llmperf's own figures: its files get those, as llmperf
    # writes them (data lines as chunks, Llama-2 tokens with BOS); other records, their content figures.
    own = record.llmperf_output_tokens is not None
    output_tokens = record.llmperf_output_tokens if own else record.output_tokens
    return {
        "error_code": None,
        "error_msg": "",
        "inter_token_latency_s": record.llmperf_inter_token_latency_s if own else record.inter_token_latency_s,
        "ttft_s": record.llmperf_ttft_s if own else record.ttft_s,
        "end_to_end_latency_s": record.llmperf_end_to_end_latency_s if own else record.end_to_end_latency_s,
        "request_output_throughput_token_per_s": record.llmperf_output_throughput_tps if own else record.output_throughput_tps,
        "number_total_tokens": (record.input_tokens or 0) + (output_tokens or 0),
        "number_output_tokens": output_tokens,
        "number_input_tokens": record.input_tokens,
    }


def quantile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks: pandas' (and numpy's) default, as llmperf uses."""
    position = (len(sorted_values) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def metric_summary(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"quantiles": {f"p{int(q * 100)}": None for q in QUANTILES}, "mean": None, "min": None, "max": None, "stddev": None}
    ordered = sorted(values)
    mean = sum(ordered) / len(ordered)
    # pandas' std is the sample standard deviation (ddof=1): undefined for one value.
    stddev = math.sqrt(sum((v - mean) ** 2 for v in ordered) / (len(ordered) - 1)) if len(ordered) > 1 else None
    return {
        "quantiles": {f"p{int(q * 100)}": quantile(ordered, q) for q in QUANTILES},
        "mean": mean,
        "min": ordered[0],
        "max": ordered[-1],
        "stddev": stddev,
    }


def flatten(data: dict[str, Any], parent: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{parent}_{key}" if parent else key
        if isinstance(value, dict):
            flat.update(flatten(value, name))
        else:
            flat[name] = value
    return flat


@dataclass(frozen=True)
class LlmperfRun:
    """What llmperf writes about a (variant, test case) besides its rows: its arguments and timing."""

    model: str
    input_tokens: int
    output_tokens: int
    concurrency: int
    sampling_params: dict[str, Any]
    elapsed_s: float
    timestamp: int  # wall clock, seconds: llmperf's own "timestamp"
    metadata: dict[str, Any] = field(default_factory=dict)  # llmperf's user metadata

    @property
    def stem(self) -> str:
        return file_stem(self.model, self.input_tokens, self.output_tokens)


def summary(rows: list[dict[str, Any]], run: LlmperfRun) -> dict[str, Any]:
    """summary.json from individual rows, computed the way llmperf's metrics_summary does."""
    good = [row for row in rows if row.get("error_code") is None]
    results: dict[str, Any] = {key: metric_summary([row[key] for row in good if row.get(key) is not None]) for key in SUMMARY_METRICS}
    error_codes = [row["error_code"] for row in rows if row.get("error_code") is not None]
    frequency: dict[Any, int] = {}
    for code in error_codes:
        frequency[code] = frequency.get(code, 0) + 1
    output_sum = sum(row["number_output_tokens"] or 0 for row in good)
    elapsed = run.elapsed_s
    results.update(
        {
            "num_requests_started": len(rows),
            "error_rate": len(error_codes) / len(rows) if rows else 0,
            "number_errors": len(error_codes),
            "error_code_frequency": str(frequency),
            "mean_output_throughput_token_per_s": output_sum / elapsed if elapsed > 0 else 0,
            "num_completed_requests": len(good),
            "num_completed_requests_per_min": len(good) / elapsed * 60 if elapsed > 0 else 0,
        }
    )
    document = {
        "version": RESULTS_VERSION,
        "name": f"{run.stem}_summary",
        "model": run.model,
        "mean_input_tokens": run.input_tokens,
        "stddev_input_tokens": 0,
        "mean_output_tokens": run.output_tokens,
        "stddev_output_tokens": 0,
        "num_concurrent_requests": run.concurrency,
        "additional_sampling_params": run.sampling_params,
        "results": results,
        **run.metadata,
        "timestamp": run.timestamp,
    }
    return flatten(document)


def result_files(records: list[RequestRecord], run: LlmperfRun) -> dict[str, str]:
    """File name -> JSON text of both llmperf files for one (variant, test case)."""
    rows = [individual_response(record) for record in records]
    return {
        f"{run.stem}_summary.json": jsonfile.dumps(summary(rows, run), indent=4, default=str),
        f"{run.stem}_individual_responses.json": jsonfile.dumps(rows, indent=4),
    }


# Reading -------------------------------------------------------------------------------------

INT_FIELDS = ("number_input_tokens", "number_output_tokens", "number_total_tokens")
FLOAT_FIELDS = ("inter_token_latency_s", "ttft_s", "end_to_end_latency_s", "request_output_throughput_token_per_s")


class LlmperfFormatError(ValueError):
    """A file that is not llmperf output; the message says which file and row."""


def _number(value: Any, kind: type, where: str) -> Any:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise LlmperfFormatError(f"{where}: expected a number, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise LlmperfFormatError(f"{where}: expected a number, got {value!r}") from None
    if math.isnan(number):
        return None
    return int(number) if kind is int else number


def _error_code(value: Any, where: str) -> int | None:
    if value is None or value == "" or (isinstance(value, float) and math.isnan(value)):
        return None
    code = _number(value, int, where)
    return CLIENT_ERROR if code is None else code


def _load(text: str, source: str, kind: type, expected: str) -> Any:
    """Decoded JSON of ``kind``, an empty one for an empty file, or LlmperfFormatError naming the file."""
    if not text.strip():
        return kind()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise LlmperfFormatError(f"{source}: not JSON ({error})") from None
    if not isinstance(data, kind):
        raise LlmperfFormatError(f"{source}: expected {expected}")
    return data


def parse_individual_responses(text: str, source: str = "individual_responses.json") -> list[dict[str, Any]]:
    """Rows with numbers as numbers and ``error_code`` None for successes; an empty file is no rows."""
    data = _load(text, source, list, "a list of per-request objects")
    rows = []
    for index, item in enumerate(data):
        where = f"{source}[{index}]"
        if not isinstance(item, dict):
            raise LlmperfFormatError(f"{where}: expected an object")
        row = {"error_code": _error_code(item.get("error_code"), f"{where}.error_code"), "error_msg": str(item.get("error_msg") or "")}
        for key in INT_FIELDS:
            row[key] = _number(item.get(key), int, f"{where}.{key}")
        for key in FLOAT_FIELDS:
            row[key] = _number(item.get(key), float, f"{where}.{key}")
        rows.append(row)
    return rows


def parse_summary(text: str, source: str = "summary.json") -> dict[str, Any]:
    """The flat summary with numeric strings turned into numbers; an empty file is an empty dict."""
    data = _load(text, source, dict, "an object")
    parsed: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, str) and key.startswith("results_") and key != "results_error_code_frequency":
            try:
                number = float(value)
                value = int(number) if number.is_integer() and "." not in value else number
            except ValueError:
                pass
        parsed[key] = value
    return parsed


def records_from_rows(
    rows: Iterable[dict[str, Any]], *, run_id: str, variant: str, test_case: str, prompt_class: str, started_at: float
) -> list[RequestRecord]:
    """Our records from llmperf rows (chunk timings are not in llmperf's files, so they stay empty).

    llmperf's figures go to the ``llmperf_*`` fields as they are; output tokens become content
    tokens by dropping the BOS its Llama-2 count includes. Its files have no content-chunk count:
    ``inter_token_latency_s`` stays llmperf's per-data-line figure and ``chunks`` stays 0.
    """
    records = []
    for index, row in enumerate(rows):
        record = RequestRecord(
            run_id=run_id,
            variant=variant,
            test_case=test_case,
            prompt_class=prompt_class,
            engine="llmperf",
            request_index=index,
            started_at=started_at,
            error_code=row["error_code"],
            error_msg=row["error_msg"],
            input_tokens=row["number_input_tokens"],
            token_count_source=COUNT_FROM_LLAMA2,
        )
        if record.ok:
            record.ttft_s = row["ttft_s"]
            record.end_to_end_latency_s = row["end_to_end_latency_s"]
            record.inter_token_latency_s = row["inter_token_latency_s"]
            llmperf_tokens = row["number_output_tokens"]
            record.llmperf_output_tokens = llmperf_tokens
            record.llmperf_ttft_s, record.llmperf_end_to_end_latency_s = record.ttft_s, record.end_to_end_latency_s
            record.llmperf_inter_token_latency_s = row["inter_token_latency_s"]
            record.llmperf_output_throughput_tps = row["request_output_throughput_token_per_s"]
            record.output_tokens = None if llmperf_tokens is None else max(llmperf_tokens - 1, 0)
            e2e = record.end_to_end_latency_s
            record.output_throughput_tps = record.output_tokens / e2e if (record.output_tokens is not None and e2e) else None
            if record.ttft_s is not None and e2e is not None and record.output_tokens is not None:
                record.time_per_output_token_s = time_per_output_token(record.ttft_s, record.end_to_end_latency_s, record.output_tokens)
        records.append(record)
    return records
