"""Results of a plain llmperf run (the reference write-up's, or anyone's) brought into a stored run,
so they are published, and compared, like specbench's own.

llmperf writes one directory per (service, test case) with ``<model>_<in>_<out>_individual_responses.json``
and ``..._summary.json``. Importing one adds its requests to ``records/<test case>.jsonl`` under the
given variant (replacing that variant's earlier import), keeps the original files under
``llmperf/<variant>/<test case>/``, and notes the import in ``run.json``. Chunk timings and draft
acceptance are not in llmperf's files, so imported records have neither.
"""

from __future__ import annotations

import json
from pathlib import Path

from specbench import jsonfile
from specbench.names import check_name
from specbench.prompts.suite import DEFAULT_SUITE, MAX_CASE_NAME, PROMPT_CLASSES
from specbench.results import runfiles
from specbench.results.llmperf_format import LlmperfFormatError, parse_individual_responses, parse_summary, records_from_rows
from specbench.results.store import RunStore

INDIVIDUAL = "_individual_responses.json"


def prompt_class_of(test_case: str, given: str | None) -> str:
    """The given class, else the reference suite's class of that test case."""
    if given:
        if given not in PROMPT_CLASSES:
            raise ValueError(f"--prompt-class {given!r} is not allowed; allowed: {', '.join(PROMPT_CLASSES)}")
        return given
    known = {case.name: case.prompt_class for case in DEFAULT_SUITE.test_cases}
    if test_case not in known:
        raise ValueError(f"--prompt-class is needed: {test_case!r} is not a reference test case ({', '.join(known)})")
    return known[test_case]


def import_llmperf(directory: Path, store: RunStore, *, variant: str, test_case: str, prompt_class: str | None = None) -> int:
    """Import one llmperf results directory; returns the number of requests imported."""
    for name, value in (("--variant", variant), ("--test-case", test_case)):
        check_name(value, name, MAX_CASE_NAME)
    klass = prompt_class_of(test_case, prompt_class)
    found = sorted(directory.glob(f"*{INDIVIDUAL}"))
    if len(found) != 1:
        raise LlmperfFormatError(f"{directory}: expected one *{INDIVIDUAL} (one llmperf run per directory), found {len(found)}")
    individual = found[0]
    summary_path = individual.with_name(individual.name[: -len(INDIVIDUAL)] + "_summary.json")
    summary_text = summary_path.read_text(encoding="utf-8") if summary_path.exists() else ""
    summary = parse_summary(summary_text, str(summary_path))
    # llmperf stamps its summary when the run ended; the file's time stands in without one.
    started_at = float(summary.get("timestamp") or individual.stat().st_mtime)
    individual_text = individual.read_text(encoding="utf-8")
    rows = parse_individual_responses(individual_text, str(individual))
    records = records_from_rows(rows, run_id=store.run_id, variant=variant, test_case=test_case, prompt_class=klass, started_at=started_at)

    key = f"records/{test_case}.jsonl"
    # The file is rewritten with the other services' records: refuse rather than drop a line it cannot read.
    skipped: list[runfiles.Skipped] = []
    others = [r for r in runfiles.load_records(store, [key], skipped=skipped) if r.variant != variant] if store.keys(key) else []
    existing = runfiles.load_run(store, ["run.json"]) if store.keys("run.json") else None
    damaged = skipped + (existing.skipped if existing else [])
    if damaged:
        raise ValueError(
            f"not imported: {store.location}/{damaged[0]} ({len(damaged)} damaged parts); "
            "importing would rewrite the file without them: repair or move it first"
        )
    merged = sorted([*others, *records], key=lambda r: (r.variant, r.request_index))
    store.write(key, "".join(record.to_json() + "\n" for record in merged))
    store.write(f"llmperf/{variant}/{test_case}/{individual.name}", individual_text)
    if summary_text:
        store.write(f"llmperf/{variant}/{test_case}/{summary_path.name}", summary_text)

    run = json.loads(store.read("run.json")) if store.keys("run.json") else {"run_id": store.run_id, "status": "imported", "imports": []}
    run["imports"] = [i for i in run.get("imports", []) if (i["variant"], i["test_case"]) != (variant, test_case)]
    run["imports"].append(
        {
            "source": str(directory),
            "variant": variant,
            "test_case": test_case,
            "prompt_class": klass,
            "requests": len(records),
            "errors": sum(1 for r in records if not r.ok),
            "model": summary.get("model"),
            "input_tokens": summary.get("mean_input_tokens"),
            "output_tokens": summary.get("mean_output_tokens"),
        }
    )
    store.write("run.json", jsonfile.dumps(run, indent=2, sort_keys=True, default=str))
    return len(records)
