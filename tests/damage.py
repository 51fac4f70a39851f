"""Stored runs damaged in every way a reader meets (tests/test_damaged_runs.py): a small run on disk
as the Job leaves it (tests/runs.py), then one file changed. Each ``Damage`` says which line the
readers must skip (``file:line`` and kind), and gives the ground truth: the same run with that line
or figure removed, whose figures the damaged run's must equal. Only the standard library and
tests/runs.py: the same catalogue can be run against an older checkout to count what it got wrong."""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.results.store import LocalStore, RunStore
from tests import runs

RUN_ID = "20261129T100000Z-damage"
CASES = runs.CASES[:2]  # counting (records lines 1-4 baseline, 5-8 speculative), json
REQUESTS = 4
RECORDS = "records/counting.jsonl"
ACCEPTANCE = "acceptance/counting.json"


_TEMPLATES: dict[tuple[str, tuple[tuple[str, Any], ...]], Path] = {}


def write_small_run(root: Path, run_id: str = RUN_ID, **options: Any) -> RunStore:
    """The small run under ``root/run_id``: written once per test process by tests/runs.py (its
    files are the same bytes every time), then copied, so each case damages a copy of its own
    without paying for the records and the store's fsyncs again."""
    key = (run_id, tuple(sorted(options.items())))
    if key not in _TEMPLATES:
        template = Path(tempfile.mkdtemp(prefix="specbench-small-run-"))
        atexit.register(shutil.rmtree, template, ignore_errors=True)
        runs.write_run(RunStore(LocalStore(template), run_id), cases=CASES, requests=REQUESTS, **options)
        _TEMPLATES[key] = template
    shutil.copytree(_TEMPLATES[key] / run_id, Path(root) / run_id, dirs_exist_ok=True)
    return RunStore(LocalStore(Path(root)), run_id)


@dataclass(frozen=True)
class Damage:
    name: str
    file: str  # inside the run folder
    damage: Callable[[bytes], bytes]
    # The ground truth: the damaged file with the damaged line or figure removed; None: the file is
    # unusable as a whole (run.json), nothing to compare figures with.
    truth: Callable[[bytes], bytes] | None
    line: int | None = None  # the line the readers must name (None: the file as a whole)
    kind: str = ""  # the skip's kind (specbench.results.runfiles.KINDS)


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def edit_line(number: int, change: Callable[[dict], Any]) -> Callable[[bytes], bytes]:
    """Line ``number`` (1-based) replaced: ``change`` returns a dict (written as JSON, NaN allowed) or raw bytes."""

    def apply(data: bytes) -> bytes:
        lines = _lines(data)
        changed = change(json.loads(lines[number - 1]))
        lines[number - 1] = changed if isinstance(changed, bytes) else json.dumps(changed).encode()
        return b"\n".join(lines)

    return apply


def drop_line(number: int) -> Callable[[bytes], bytes]:
    def apply(data: bytes) -> bytes:
        lines = _lines(data)
        del lines[number - 1]
        return b"\n".join(lines)

    return apply


def _set(**values: Any) -> Callable[[dict], dict]:
    return lambda record: {**record, **values}


def _without(name: str) -> Callable[[dict], dict]:
    return lambda record: {k: v for k, v in record.items() if k != name}


def _json_edit(change: Callable[[Any], Any]) -> Callable[[bytes], bytes]:
    return lambda data: json.dumps(change(json.loads(data))).encode()


def _acceptance_without(endpoint: str) -> Callable[[bytes], bytes]:
    return _json_edit(lambda figures: {k: v for k, v in figures.items() if k != endpoint})


def _spec(**values: Any) -> Callable[[Any], Any]:
    return lambda figures: {**figures, runs.SPECULATIVE: {**figures[runs.SPECULATIVE], **values}}


def _plan_edit(change: Callable[[dict], None]) -> Callable[[bytes], bytes]:
    def apply(data: bytes) -> bytes:
        run = json.loads(data)
        change(run)
        return json.dumps(run).encode()

    return apply


def _append_line(number: int) -> Callable[[bytes], bytes]:
    return lambda data: data + _lines(data)[number - 1] + b"\n"


DAMAGED, MALFORMED, IMPOSSIBLE, DUPLICATE = "damaged", "malformed", "impossible", "duplicate"

DAMAGES: tuple[Damage, ...] = (
    # Lines that are not JSON.
    Damage("last line truncated", RECORDS, lambda d: d[: d.rstrip(b"\n").rfind(b"\n") + 200], drop_line(8), 8, DAMAGED),
    Damage(
        "line truncated mid-file",
        RECORDS,
        lambda d: b"\n".join(line[:100] if i == 2 else line for i, line in enumerate(_lines(d))),
        drop_line(3),
        3,
        DAMAGED,
    ),
    Damage("bytes that are not UTF-8", RECORDS, edit_line(2, lambda r: b'{"run_id": "\xff\xfe\x00"}'), drop_line(2), 2, DAMAGED),
    Damage("two records on one line", RECORDS, lambda d: d.replace(b"\n", b"", 1), drop_line(1), 1, DAMAGED),
    # A carriage return is no line break (JSON Lines: "\n" only), on disk as in S3: one damaged line.
    Damage(
        "carriage return inside a record",
        RECORDS,
        edit_line(3, lambda r: json.dumps(r).encode().replace(b'{"', b"{\r", 1)),
        drop_line(3),
        3,
        DAMAGED,
    ),
    # JSON that is not a record.
    Damage("number stored as text", RECORDS, edit_line(5, lambda r: {**r, "ttft_s": str(r["ttft_s"])}), drop_line(5), 5, MALFORMED),
    Damage("integer stored as text", RECORDS, edit_line(6, _set(output_tokens="600")), drop_line(6), 6, MALFORMED),
    Damage("record missing its service", RECORDS, edit_line(2, _without("variant")), drop_line(2), 2, MALFORMED),
    Damage("record missing its index", RECORDS, edit_line(7, _without("request_index")), drop_line(7), 7, MALFORMED),
    Damage("record is a list", RECORDS, edit_line(2, lambda r: [1, 2]), drop_line(2), 2, MALFORMED),
    Damage("request index a fraction", RECORDS, edit_line(5, _set(request_index=1.5)), drop_line(5), 5, MALFORMED),
    Damage("error code as text", RECORDS, edit_line(5, _set(error_code="500")), drop_line(5), 5, MALFORMED),
    Damage("boolean latency", RECORDS, edit_line(5, _set(end_to_end_latency_s=True)), drop_line(5), 5, MALFORMED),
    Damage("chunk times not a list", RECORDS, edit_line(5, _set(chunk_times_s="0.1,0.2")), drop_line(5), 5, MALFORMED),
    # Values no measurement gives.
    Damage("negative latency", RECORDS, edit_line(6, _set(end_to_end_latency_s=-0.5)), drop_line(6), 6, IMPOSSIBLE),
    Damage("NaN latency", RECORDS, edit_line(6, _set(time_per_output_token_s=float("nan"))), drop_line(6), 6, IMPOSSIBLE),
    Damage("infinite TTFT", RECORDS, edit_line(1, _set(ttft_s=float("inf"))), drop_line(1), 1, IMPOSSIBLE),
    Damage(
        "TTFT above end-to-end",
        RECORDS,
        edit_line(5, lambda r: {**r, "ttft_s": r["end_to_end_latency_s"] + 1}),
        drop_line(5),
        5,
        IMPOSSIBLE,
    ),
    Damage("fewer tokens than chunks", RECORDS, edit_line(5, _set(chunks=700)), drop_line(5), 5, IMPOSSIBLE),
    Damage(
        "more tokens than max_tokens",
        RECORDS,
        edit_line(5, _set(output_tokens=runs.OUTPUT_TOKENS + 1, token_count_source="usage")),
        drop_line(5),
        5,
        IMPOSSIBLE,
    ),
    Damage("negative token count", RECORDS, edit_line(2, _set(input_tokens=-64)), drop_line(2), 2, IMPOSSIBLE),
    Damage(
        "chunk arrivals backwards", RECORDS, edit_line(5, _set(chunk_times_s=[0.2, 0.1], chunk_tokens=[1, 1])), drop_line(5), 5, IMPOSSIBLE
    ),
    Damage("empty service name", RECORDS, edit_line(6, _set(variant="")), drop_line(6), 6, IMPOSSIBLE),
    Damage("control character in a name", RECORDS, edit_line(6, _set(test_case="count\u0001ing")), drop_line(6), 6, IMPOSSIBLE),
    # The same request twice.
    Damage("the same line twice", RECORDS, _append_line(5), drop_line(9), 9, DUPLICATE),
    Damage(
        "the same request in another file",
        "records/json.jsonl",
        lambda d: d + (_lines(Path(_current_run).joinpath(RECORDS).read_bytes())[0] + b"\n"),
        drop_line(9),
        9,
        DUPLICATE,
    ),
    # run.json.
    Damage("run.json truncated", "run.json", lambda d: d[: len(d) // 2], None, 1, DAMAGED),
    Damage("run.json empty", "run.json", lambda d: b"", None, 1, DAMAGED),
    Damage("run.json a list", "run.json", lambda d: b"[1, 2]", None, None, MALFORMED),
    Damage("run.json requests as text", "run.json", _plan_edit(lambda r: r["plan"]["load"].update(requests="4")), None, None, MALFORMED),
    Damage("run.json plan as text", "run.json", _plan_edit(lambda r: r.update(plan="reference")), None, None, MALFORMED),
    Damage(
        "run.json variant not an object",
        "run.json",
        _plan_edit(lambda r: r["plan"]["deployment"]["variants"].append(7)),
        None,
        None,
        MALFORMED,
    ),
    Damage(
        "run.json negative k",
        "run.json",
        _plan_edit(lambda r: r["plan"]["deployment"]["variants"][1].update(num_speculative_tokens=-1)),
        None,
        None,
        MALFORMED,
    ),
    Damage("run.json status a number", "run.json", _plan_edit(lambda r: r.update(status=1)), None, None, MALFORMED),
    # acceptance files.
    Damage("acceptance file truncated", ACCEPTANCE, lambda d: d[: len(d) // 2], lambda d: b"{}", 1, DAMAGED),
    Damage("acceptance a list", ACCEPTANCE, lambda d: b"[0.9]", lambda d: b"{}", None, MALFORMED),
    Damage(
        "acceptance rate as text",
        ACCEPTANCE,
        _json_edit(_spec(acceptance_rate="0.8")),
        _acceptance_without(runs.SPECULATIVE),
        None,
        MALFORMED,
    ),
    Damage(
        "acceptance rate above 1",
        ACCEPTANCE,
        _json_edit(_spec(acceptance_rate=1.5)),
        _acceptance_without(runs.SPECULATIVE),
        None,
        IMPOSSIBLE,
    ),
    Damage("negative drafts", ACCEPTANCE, _json_edit(_spec(drafts=-100.0)), _acceptance_without(runs.SPECULATIVE), None, IMPOSSIBLE),
    Damage(
        "acceptance length below 1",
        ACCEPTANCE,
        _json_edit(_spec(mean_acceptance_length=0.5)),
        _acceptance_without(runs.SPECULATIVE),
        None,
        IMPOSSIBLE,
    ),
)

_current_run = ""  # the run folder being damaged (a damage that copies a line from another file reads it)


def apply(damage: Damage, run_dir: Path) -> None:
    global _current_run
    _current_run = str(run_dir)
    path = run_dir / damage.file
    path.write_bytes(damage.damage(path.read_bytes()))


def ground_truth(damage: Damage, run_dir: Path, truth_dir: Path) -> bool:
    """The damaged run's truth in ``truth_dir`` (the run without the damaged part); False if there is none."""
    if damage.truth is None:
        return False
    shutil.copytree(run_dir, truth_dir)
    path = truth_dir / damage.file
    path.write_bytes(damage.truth(path.read_bytes()))
    return True


def stored_lines(run_dir: Path) -> int:
    """Non-blank lines of the records files: what the files hold."""
    return sum(len([line for line in path.read_bytes().split(b"\n") if line.strip()]) for path in (run_dir / "records").glob("*.jsonl"))
