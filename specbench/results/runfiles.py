"""A stored run's files read back (``<results>/<run_id>/`` through a specbench.results.store.RunStore):
run.json, every record and every acceptance figure. Standard library only: the benchmark Job, the
aggregation Lambda, the report and sweep-report all read runs this way.

Reading survives damaged files: records are read line by line, and a line that is not UTF-8, not
JSON (a truncated last line), not a record (a missing field, a number stored as text), impossible
(specbench.results.validity) or the same request twice is left out and kept as a ``Skipped`` with
its ``file:line`` and the reason; a damaged run.json or acceptance file likewise, and the rest is
used. ``RunFiles.quality()`` counts them for the data-quality part of the summary.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from specbench.results import validity
from specbench.results.records import RequestRecord
from specbench.results.store import effective_status

# Why a line or file was left out.
DAMAGED = "damaged"  # not UTF-8, not JSON: a truncated line or file
MALFORMED = "malformed"  # JSON, but not what the file holds: a missing field, a wrong type
IMPOSSIBLE = "impossible"  # values no measurement can give (specbench.results.validity)
DUPLICATE = "duplicate"  # the same request a second time
KINDS = (DAMAGED, MALFORMED, IMPOSSIBLE, DUPLICATE)
RUN_FILE = "run.json"
SHOWN_SKIPS = 20  # skips listed by name in a summary (all are counted)


@dataclass(frozen=True)
class Skipped:
    """One line (or a whole file, ``line`` None) a reader left out, and why."""

    file: str  # the key inside the run folder: records/counting.jsonl
    line: int | None
    reason: str
    kind: str
    variant: str = ""  # the service the line named, when it could be read

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file

    def __str__(self) -> str:
        return f"{self.where}: {self.reason}"


@dataclass
class RunFiles:
    """What ``summarize_run`` reads from a run folder (a specbench.results.store.RunStore), the
    folder's keys, and what was left out."""

    run: dict[str, Any]
    records: list[RequestRecord]
    acceptance: dict[str, dict[str, dict[str, Any]]]
    keys: list[str]
    skipped: list[Skipped] = field(default_factory=list)
    record_lines: int = 0  # non-blank lines of the records files: used + skipped records
    keys_prefix: str = ""  # where the folder lies inside a larger listing (a sweep point's id and "/")
    sources: list[tuple[str, int]] = field(default_factory=list)  # (file, line) of each record

    def drop_records(self, reason: str) -> None:
        """Leave every record out (a sweep point that cannot be placed), each kept as a skip."""
        pairs = zip(self.records, self.sources, strict=True)
        self.skipped += [Skipped(file, line, reason, MALFORMED, record.variant) for record, (file, line) in pairs]
        self.records, self.sources = [], []

    def quality(self) -> dict[str, Any]:
        return data_quality(self.skipped, self.record_lines, len(self.records))


def data_quality(skipped: Sequence[Skipped], record_lines: int, records_used: int) -> dict[str, Any]:
    """The data-quality part of a run's summary: what was read, used and left out, and why."""
    in_records = [s for s in skipped if s.file.startswith("records/")]
    return {
        "record_lines": record_lines,
        "records_used": records_used,
        "records_skipped": len(in_records),
        # Requests whose figures are missing (a duplicate loses nothing): the run is not whole.
        "records_lost": sum(1 for s in in_records if s.kind != DUPLICATE),
        "skipped": len(skipped),
        "by_kind": {kind: count for kind in KINDS if (count := sum(1 for s in skipped if s.kind == kind))},
        "by_file": dict(sorted(Counter(s.file for s in skipped).items())),
        "by_service": dict(sorted(Counter(s.variant for s in skipped if s.variant).items())),
        "skips": [str(s) for s in skipped[:SHOWN_SKIPS]],
    }


# --- one record line -----------------------------------------------------------------------------

_REQUIRED = tuple(f.name for f in fields(RequestRecord) if f.default is MISSING and f.default_factory is MISSING)
_TYPES = {f.name: str(f.type).replace(" ", "") for f in fields(RequestRecord)}


def _kind_problem(name: str, value: Any, annotation: str) -> str:
    """Why a JSON value cannot be the RequestRecord field of that annotation ("" if it can)."""
    nullable = annotation.endswith("|None")
    base = annotation[: -len("|None")] if nullable else annotation
    if value is None:
        return "" if nullable else f"{name} is null"
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    expected = {
        "str": ("a text", isinstance(value, str)),
        "int": ("an integer", number and isinstance(value, int)),
        "float": ("a number", number),
        "list[float]": ("a list of numbers", isinstance(value, list)),
        "list[int]": ("a list of integers", isinstance(value, list)),
    }.get(base)
    if expected is None or expected[1]:
        return ""  # a field this reader does not know the type of is passed on as stored
    shown = repr(value) if len(repr(value)) <= 30 else repr(value)[:27] + "..."
    what = "text" if isinstance(value, str) else "object" if isinstance(value, dict) else type(value).__name__
    return f"{name} is {what} {shown}, expected {expected[0]}"


def parse_record(data: Any) -> RequestRecord | str:
    """A record from one parsed JSON line, or why it is not one (a missing field, a wrong type)."""
    if not isinstance(data, dict):
        return f"not a record: a JSON {type(data).__name__}, expected an object"
    missing = [name for name in _REQUIRED if name not in data]
    if missing:
        return f"not a record: missing {', '.join(missing)}"
    for name, value in data.items():
        if name in _TYPES and (problem := _kind_problem(name, value, _TYPES[name])):
            return problem
    return RequestRecord.from_dict(data)


def _lines(store: Any, key: str) -> list[tuple[int, str | None]]:
    """(line number, text) of a file split at newlines; text None for a line that is not UTF-8."""
    try:
        return list(enumerate(store.read(key).split("\n"), 1))
    except UnicodeDecodeError as error:
        # The stores decode a whole file at once, so the error holds all of its bytes: decode line by line.
        raw = error.object if isinstance(error.object, bytes) else b""
        lines: list[tuple[int, str | None]] = []
        for number, chunk in enumerate(raw.split(b"\n"), 1):
            try:
                lines.append((number, chunk.decode("utf-8")))
            except UnicodeDecodeError:
                lines.append((number, None))
        return lines


def _json_problem(error: json.JSONDecodeError) -> str:
    return f"not valid JSON (truncated or damaged): {error.msg} at column {error.colno}"


class _RecordReader:
    """Every records file of a run, line by line, with the skips; max_tokens_of for validity."""

    def __init__(self, max_tokens_of: Any) -> None:
        self.max_tokens_of = max_tokens_of
        self.records: list[RequestRecord] = []
        self.skipped: list[Skipped] = []
        self.lines = 0
        self.sources: list[tuple[str, int]] = []
        self.seen: dict[tuple[str, str, str, int], str] = {}

    def read(self, store: Any, key: str) -> None:
        for number, text in _lines(store, key):
            if text is not None and not text.strip():
                continue
            self.lines += 1
            if text is None:
                self.skipped.append(Skipped(key, number, "not UTF-8 text", DAMAGED))
                continue
            try:
                parsed = parse_record(json.loads(text))
            except json.JSONDecodeError as error:
                self.skipped.append(Skipped(key, number, _json_problem(error), DAMAGED))
                continue
            except RecursionError:
                self.skipped.append(Skipped(key, number, "not a record: JSON nested too deep", MALFORMED))
                continue
            if isinstance(parsed, str):
                self.skipped.append(Skipped(key, number, parsed, MALFORMED))
                continue
            problem = validity.record_problem(parsed, self.max_tokens_of(parsed.test_case))
            if problem:
                self.skipped.append(Skipped(key, number, problem, IMPOSSIBLE, parsed.variant))
                continue
            request = validity.request_key(parsed)
            if request in self.seen:
                self.skipped.append(Skipped(key, number, f"the same request as {self.seen[request]}", DUPLICATE, parsed.variant))
                continue
            self.seen[request] = f"{key}:{number}"
            self.records.append(parsed)
            self.sources.append((key, number))


def load_records(
    store: Any, keys: Sequence[str] | None = None, *, skipped: list[Skipped] | None = None, max_tokens_of: Any = None
) -> list[RequestRecord]:
    """Every usable record of ``records/*.jsonl``; what was left out is appended to ``skipped``."""
    reader = _RecordReader(max_tokens_of or (lambda case: None))
    for key in store.keys("records/") if keys is None else keys:
        if key.startswith("records/") and key.endswith(".jsonl"):
            reader.read(store, key)
    if skipped is not None:
        skipped.extend(reader.skipped)
    return reader.records


# --- JSON files ----------------------------------------------------------------------------------


def _read_json(store: Any, key: str, skipped: list[Skipped]) -> Any:
    """The parsed file, or None (and a skip) when it is not UTF-8 JSON."""
    lines = _lines(store, key)
    if any(text is None for _, text in lines):
        skipped.append(Skipped(key, next(n for n, text in lines if text is None), "not UTF-8 text", DAMAGED))
        return None
    try:
        return json.loads("\n".join(text or "" for _, text in lines))
    except json.JSONDecodeError as error:
        skipped.append(Skipped(key, error.lineno, _json_problem(error), DAMAGED))
    except RecursionError:
        skipped.append(Skipped(key, None, "JSON nested too deep", MALFORMED))
    return None


def load_acceptance(
    store: Any, keys: Sequence[str] | None = None, *, skipped: list[Skipped] | None = None
) -> dict[str, dict[str, dict[str, Any]]]:
    """test case -> endpoint -> acceptance figures; damaged files and impossible figures left out."""
    skipped = [] if skipped is None else skipped
    figures: dict[str, dict[str, dict[str, Any]]] = {}
    for key in store.keys("acceptance/") if keys is None else keys:
        if not (key.startswith("acceptance/") and key.endswith(".json")):
            continue
        data = _read_json(store, key, skipped)
        if data is None:
            continue
        if not isinstance(data, dict):
            skipped.append(Skipped(key, None, f"a JSON {type(data).__name__}, expected an object of endpoints", MALFORMED))
            continue
        kept = {}
        for endpoint, value in data.items():
            problem = validity.acceptance_problem(value)
            if problem:
                kind = MALFORMED if "expected" in problem else IMPOSSIBLE
                skipped.append(Skipped(key, None, f"{endpoint}: {problem}", kind, endpoint))
            else:
                kept[endpoint] = value
        figures[key.rsplit("/", 1)[-1][: -len(".json")]] = kept
    return figures


# run.json: the fields the readers use and their types; {} is an object whose contents are not checked.
TEXT, INTEGER, NUMBER = "text", "integer", "number"
RUN_SCHEMA: dict[str, Any] = {
    "run_id": TEXT,
    "status": TEXT,
    "error": TEXT,
    "started": TEXT,
    "finished": TEXT,
    "plan": {
        "endpoints": [{"name": TEXT, "url": TEXT}],
        "suite": {"name": TEXT, "test_cases": [{"name": TEXT, "prompt_class": TEXT, "max_tokens": INTEGER}]},
        "load": {
            "model": TEXT,
            "max_tokens": INTEGER,
            "concurrency": INTEGER,
            "requests": INTEGER,
            "temperature": NUMBER,
            "seed": INTEGER,
            "request_rate": NUMBER,
            "api": TEXT,
        },
        "input_tokens": INTEGER,
        "engine": TEXT,
        "roles": {},  # endpoint -> role, as run's --role flags said it (specbench/results/roles.py reads it)
        "deployment": {
            "serving": {},
            "variants": [
                {
                    "name": TEXT,
                    "target_model": TEXT,
                    "draft_model": TEXT,
                    "num_speculative_tokens": INTEGER,
                    "stack": TEXT,
                    "method": TEXT,
                    "speculator": TEXT,
                }
            ],
        },
    },
    "sweep": {
        "point_id": TEXT,
        "wave": INTEGER,
        "variant": {"name": TEXT, "draft_model": TEXT, "k": INTEGER, "method": TEXT, "tp": INTEGER},
        "load": {"kind": TEXT, "value": NUMBER},
    },
}


def _scalar_ok(kind: str, value: Any) -> bool:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == TEXT:
        return isinstance(value, str)
    # Every number run.json holds (counts, tokens, k, a load, a temperature) is finite and not negative.
    if kind == INTEGER:
        return number and isinstance(value, int) and value >= 0
    return number and value == value and value not in (float("inf"), float("-inf")) and value >= 0


def _described(value: Any) -> str:
    what = {str: "text", dict: "an object", list: "a list", bool: "a boolean"}.get(type(value), type(value).__name__)
    shown = repr(value) if not isinstance(value, (dict, list)) else ""
    return f"{what} {shown[:30]}".rstrip()


def _conform(value: Any, schema: Any, path: str, problems: list[str]) -> Any:
    """``value`` with every part that breaks ``schema`` left out, and each such part named in ``problems``."""
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            problems.append(f"{path} is {_described(value)}, expected an object")
            return {}
        kept = dict(value)
        for name, inner in schema.items():
            if name not in value:
                continue
            if value[name] is None and not isinstance(inner, (dict, list)):
                continue  # null: the field is absent, which every reader allows
            conformed = _conform(value[name], inner, f"{path}.{name}" if path else name, problems)
            if conformed is _DROP:
                del kept[name]
            else:
                kept[name] = conformed
        return kept
    if isinstance(schema, list):
        if not isinstance(value, list):
            problems.append(f"{path} is {_described(value)}, expected a list")
            return []
        items = [_conform(item, schema[0], f"{path}[{index}]", problems) for index, item in enumerate(value)]
        # An item that is not an object is left out whole; an object keeps its good fields.
        return [item for item, original in zip(items, value, strict=True) if isinstance(original, dict)]
    if not _scalar_ok(schema, value):
        article = {TEXT: "a", INTEGER: "a non-negative"}.get(schema, "a finite non-negative")
        problems.append(f"{path} is {_described(value)}, expected {article} {schema}")
        return _DROP
    return value


_DROP = object()


def clean_run(data: Any) -> tuple[dict[str, Any], list[str]]:
    """run.json with the fields that break RUN_SCHEMA left out, and what was wrong. A status that is
    not a text becomes "unreadable" (a run whose state is unknown is not complete)."""
    problems: list[str] = []
    if not isinstance(data, dict):
        return {"status": "unreadable", "error": f"run.json is {_described(data)}, expected an object"}, [
            f"a JSON {type(data).__name__}, expected an object"
        ]
    run = _conform(data, RUN_SCHEMA, "", problems)
    if "status" in data and "status" not in run:
        run["status"] = "unreadable"
    return run, problems


def max_tokens_of(run: Mapping[str, Any]) -> Any:
    """test case -> the max_tokens its requests were sent with (its own, else the run's; None unknown)."""
    plan = run.get("plan") or {}
    default = (plan.get("load") or {}).get("max_tokens")
    own = {c.get("name"): c.get("max_tokens") for c in (plan.get("suite") or {}).get("test_cases", []) if c.get("max_tokens")}
    return lambda case: own.get(case, default)


def run_json_problem(store: Any) -> str:
    """Why a run folder's run.json cannot be read as a run (not UTF-8, not JSON, not an object), or "".
    A command that would send the run anywhere (publish) refuses it before the first write."""
    skipped: list[Skipped] = []
    data = _read_json(store, RUN_FILE, skipped)
    if data is None:
        return str(skipped[-1]) if skipped else f"{RUN_FILE}: empty"
    if not isinstance(data, dict):
        return f"{RUN_FILE}: a JSON {type(data).__name__}, expected an object"
    return ""


def load_run(store: Any, keys: Sequence[str] | None = None) -> RunFiles:
    """run.json (empty when absent: an imported run), every record and every acceptance file; the
    folder is listed once (or ``keys`` is its listing). Damaged parts are skipped and kept in
    ``RunFiles.skipped``; a run.json that cannot be read gives status "unreadable"."""
    keys = list(store.keys()) if keys is None else list(keys)
    skipped: list[Skipped] = []
    run: dict[str, Any] = {}
    if RUN_FILE in keys:
        data = _read_json(store, RUN_FILE, skipped)
        if data is None:
            run = {"status": "unreadable", "error": str(skipped[-1])}
        else:
            run, problems = clean_run(data)
            skipped += [Skipped(RUN_FILE, None, problem, MALFORMED) for problem in problems]
            status = effective_status(run, store)
            if run and status != run.get("status"):  # "running", but its writer is gone: killed (issue 22)
                run = {**run, "status": status, "error": run.get("error") or "the run's process ended before it finished (killed?)"}
    reader = _RecordReader(max_tokens_of(run))
    for key in keys:
        if key.startswith("records/") and key.endswith(".jsonl"):
            reader.read(store, key)
    skipped += reader.skipped
    acceptance = load_acceptance(store, keys, skipped=skipped)
    return RunFiles(run, reader.records, acceptance, keys, skipped, reader.lines, sources=reader.sources)
