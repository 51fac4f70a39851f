"""Hostile and mistaken inputs to every command, counted: ``scripts/adversarial.py --tree DIR``.

Issue 33's measuring harness. Each case is one command line (``python -m specbench ...`` or
``python app.py -c ...``) run with ``cwd=DIR``, so the same table measures any checkout, and an
expectation of what a clean answer is, following the team's rule (docs/cli.md: one line naming the
flag or field, exit 2, no traceback) rather than any tree's wording:

- ``refused``: exit 2, a few lines on stderr, one of the case's names (the flag, the field or the
  path) among them, no traceback;
- ``flagged``: exit 0 with one of the case's markers in the output (the answer says what it
  assumed or left out);
- ``either``: refused or flagged;
- ``ok``: a valid input, exit 0.

Every other answer is unclean, of one kind: ``traceback`` (a Python traceback, or the CLI's
"unexpected <Error>" line), ``hang`` (no answer within the timeout), ``wrong-but-fine`` (exit 0 where
a refusal or a flag was due), ``not-refused`` (went on, another exit code), ``unclear`` (exit 2 but the
field is not named, or many lines), ``false-refusal`` (a valid input refused). ``classify`` is pure
(tests/test_adversarial_classify.py). The fixtures (stored runs, sweeps, stage documents) are made
each time in a temporary folder by the tree's own code: multi-level and one-level runs against the
tree's emulator on loopback ports, synthetic runs and sweep points with tests/runs.py and
tests/sweep_data.py, then damaged copies. Nothing reaches AWS: the AWS endpoint is a closed
loopback port. Not part of ``make test``; docs/checks.md says how to run it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

REFUSED, FLAGGED, EITHER, OK = "refused", "flagged", "either", "ok"
CLEAN = "clean"
TRACEBACK, HANG, WRONG_BUT_FINE, NOT_REFUSED, UNCLEAR, FALSE_REFUSAL = (
    "traceback",
    "hang",
    "wrong-but-fine",
    "not-refused",
    "unclear",
    "false-refusal",
)
KINDS = (TRACEBACK, HANG, WRONG_BUT_FINE, NOT_REFUSED, UNCLEAR, FALSE_REFUSAL)
EXIT_USAGE = 2
MAX_REFUSAL_LINES = 5  # "one line (or a few)": a config error prints one line per problem
# A traceback, or main()'s last-resort line for an exception nothing expected (specbench/cli.py main).
OWN_NAMES = re.compile(r"specbench|stage-job|sweep-report|import-llmperf", re.IGNORECASE)
PATH = re.compile(r"(?<![\w.-])(?:/[^\s/:'\"]+)+/?")  # an absolute path, as far as a space, colon or quote
CRASH = re.compile(r"Traceback \(most recent call last\)|unexpected [A-Za-z_.]*(Error|Exception|Exit|Interrupt)\b")


@dataclass(frozen=True)
class Expect:
    kind: str  # REFUSED, FLAGGED, EITHER or OK
    names: tuple[str, ...] = ()  # a refusal names one of these (flag, field, path), case-insensitive
    markers: tuple[str, ...] = ()  # a flagged answer's output holds one of these, case-insensitive


@dataclass(frozen=True)
class Outcome:
    returncode: int | None  # None: timed out
    stdout: str
    stderr: str


def _has(text: str, words: Sequence[str]) -> bool:
    low = text.lower()
    return any(w.lower() in low for w in words)


def _flags(text: str, markers: Sequence[str], control: str) -> bool:
    """A marker the answer says more often than the valid input's answer (the control) does: words
    such as "left out" also occur in every prediction's list of assumptions."""
    low, base = (PATH.sub("<path>", t).lower() for t in (text, control))  # a path may hold any word
    return any(low.count(m.lower()) > base.count(m.lower()) for m in markers)


def _refusal_clean(expect: Expect, out: Outcome) -> bool:
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    said = OWN_NAMES.sub("", out.stderr)  # a name is not named by the program's own ("specbench" holds "spec")
    return bool(lines) and len(lines) <= MAX_REFUSAL_LINES and (not expect.names or _has(said, expect.names))


def classify(expect: Expect, out: Outcome, control: Outcome | None = None) -> str:
    """CLEAN or the kind of unclean answer (KINDS), from the expectation, what the command did, and
    what it answered to a valid input of the same kind (``control``: a flag must be news)."""
    if out.returncode is None:
        return HANG
    if CRASH.search(out.stderr) or CRASH.search(out.stdout):
        return TRACEBACK
    code, both = out.returncode, out.stdout + "\n" + out.stderr
    if expect.kind == OK:
        return CLEAN if code == 0 else (FALSE_REFUSAL if code == EXIT_USAGE else NOT_REFUSED)
    plain = "" if control is None else control.stdout + "\n" + control.stderr
    flagged = code == 0 and _flags(both, expect.markers, plain)
    if expect.kind in (FLAGGED, EITHER) and flagged:
        return CLEAN
    if code == EXIT_USAGE:
        if expect.kind == FLAGGED:  # refused where a flagged answer was due: not wrong, but not what was asked
            return CLEAN if _refusal_clean(Expect(REFUSED, expect.markers + expect.names), out) else UNCLEAR
        return CLEAN if _refusal_clean(expect, out) else UNCLEAR
    return WRONG_BUT_FINE if code == 0 else NOT_REFUSED


def first_line(out: Outcome) -> str:
    """What a reader sees first: stderr's first line, else stdout's."""
    for text in (out.stderr, out.stdout):
        for line in text.splitlines():
            if line.strip():
                return line.strip()[:200]
    return "(no output)" if out.returncode is not None else "(timed out)"


# --- cases ------------------------------------------------------------------------------------------


@dataclass
class Case:
    id: str
    command: str  # the table's row: run, publish, ..., "sweep next", app.py
    argv: list[str]  # after the interpreter: ["-m", "specbench", ...] or the app.py wrapper
    expect: Expect
    stdin: str = ""
    copy: tuple[str, str] | None = None  # (fixture folder, fresh copy) made before the case: commands that write
    pre: list[list[str]] = field(default_factory=list)  # commands run (unmeasured) after the copy
    control: str = ""  # the valid case whose answer a flag is compared with (default: <command>:valid)
    timeout_s: float = 0.0  # more than --timeout: publish retries the closed AWS endpoint with backoff (~40 s)


def refused(*names: str) -> Expect:
    return Expect(REFUSED, names)


def flagged(*markers: str) -> Expect:
    return Expect(FLAGGED, (), markers)


def either(names: Sequence[str], markers: Sequence[str]) -> Expect:
    return Expect(EITHER, tuple(names), tuple(markers))


OKAY = Expect(OK)
# The app.py wrapper: settings are checked before aws_cdk is imported (app.py main); App and
# build_app replaced on the module (app._lazy reads them from there), so a setting let through
# costs nothing and shows as exit 0 instead of a synth.
APP_STUB = (
    "import sys; import app\n"
    "class _App:\n"
    "    outdir = ''\n"
    "    def __init__(self, *a, **k): pass\n"
    "    def synth(self): pass\n"
    "app.App = _App; app.build_app = lambda a, c: None\n"
    "sys.exit(app.main(sys.argv[1:]))\n"
)
Q17, Q06 = "Qwen/Qwen3-1.7B", "Qwen/Qwen3-0.6B"
VARIANTS = ",".join(f"q17-k{k}:{Q17}:{k}" for k in range(3, 10)) + "," + ",".join(f"q06-k{k}:{Q06}:{k}" for k in range(3, 10))
SWEEP_CTX = [
    *("-c", "neuron_nodes.desired_size=2", "-c", "neuron_nodes.max_size=2", "-c", f"sweep.variants={VARIANTS}"),
    *("-c", "sweep.concurrencies=1", "-c", "sweep.strategy=staged"),
]
PLAN_CTX = ["-c", f"sweep.variants=q17-k5:{Q17}:5", "-c", "neuron_nodes.desired_size=2", "-c", "neuron_nodes.max_size=2"]
PRICE = "node_price_per_hour"
UNSAFE_SWEEP_IDS = (
    ("dotdot", "../x"),
    ("slash", "a/b"),
    ("absolute", "/tmp/x"),
    ("space", "a b"),
    ("empty", ""),
    ("dot", "."),
    ("dotdot-bare", ".."),
    ("long", "s" * 200),
    ("upper", "SW_1"),
    ("newline", "sw\nx"),
)
# The point a damaged sweep's refusal names (_damage_sweep): q17-k7-c1 unless another is made.
DAMAGED_POINT = {"foreign": "q17-k5-c1", "unconfigured-load": "q17-k7-c64", "unconfigured-variant": "q17-k12-c1"}
PATH_UNSAFE_IDS = tuple(item for item in UNSAFE_SWEEP_IDS if item[0] != "upper")  # where the id is only a folder
BAD_NUMBERS = ("nan", "inf", "-1", "-0.5", "1e9", "abc", "1e400", "0x10", "1_0", "\u0663")  # \u0663: an Arabic-Indic 3
SETTINGS_MARKERS = ("settings", "snapshot")
MISMATCH_MARKERS = ("differ", "mismatch", "recorded", "does not match", "instead of", "predicted at", "-c serving.")
LEFT_OUT = ("left out", "skipped", "ignored", "not used", "excluded")


def sb(*args: str) -> list[str]:
    return ["-m", "specbench", *args]


def cases(fx: Path, ports: tuple[int, int]) -> list[Case]:  # noqa: PLR0915 - one table
    out: list[Case] = []
    f = str(fx)
    runs, o = f"{f}/runs", f"{f}/out"

    def add(command: str, name: str, argv: list[str], expect: Expect, **kw) -> None:  # type: ignore[no-untyped-def]
        prefix = command.replace(" ", "-")
        kw.setdefault("control", f"{prefix}:valid")
        out.append(Case(f"{prefix}:{name}", command, argv, expect, **kw))

    # --- run -----------------------------------------------------------------------------------------
    base_url, spec_url = (f"http://127.0.0.1:{p}" for p in ports)
    endpoints = ["--endpoint", f"qwen-vllm={base_url}", "--endpoint", f"qwen-sd-vllm={spec_url}"]
    small = ["--test-case", "counting", "--requests", "1", "--output-tokens", "8", "--no-publish", "--no-progress", "--ready-timeout", "5"]

    def run(name: str, extra: list[str], expect: Expect) -> None:
        add("run", name, sb("run", *endpoints, *small, "--results", f"{o}/run-{name}", *extra), expect)

    good_variant = {"name": "q17-k5", "draft_model": Q17, "k": 5, "method": "draft"}
    good_point = json.dumps({"point_id": "q17-k5-c1", "wave": 1, "variant": good_variant, "load": {"kind": "concurrency", "value": 1}})
    run("valid", [], OKAY)
    run("valid-sweep-point", ["--sweep-id", "sw", "--sweep-point", good_point], OKAY)
    for label, rid in (("dotdot", "../escape"), ("slash", "a/b"), ("empty", ""), ("space", "a b"), ("long", "r" * 200)):
        run(f"run-id-{label}", ["--run-id", rid], refused("--run-id"))
    for label, sid in (
        ("dotdot", "../escape"),
        ("slash", "a/b"),
        ("absolute", "/tmp/x"),
        ("space", "a b"),
        ("dot", ".."),
        ("long", "s" * 200),
    ):
        run(f"sweep-id-{label}", ["--sweep-id", sid, "--sweep-point", good_point], refused("--sweep-id"))
    run("sweep-point-without-id", ["--sweep-point", good_point], refused("--sweep-id", "--sweep-point"))
    run("sweep-point-not-json", ["--sweep-id", "sw", "--sweep-point", "{point"], refused("--sweep-point"))
    bad_points = {
        "point-id-dotdot": {"point_id": "../x"},
        "variant-name-slash": {"variant": {"name": "a/b", "draft_model": Q17, "k": 5, "method": "draft"}},
        "k-negative": {"variant": {"name": "q17-k5", "draft_model": Q17, "k": -1, "method": "draft"}},
        "k-string": {"variant": {"name": "q17-k5", "draft_model": Q17, "k": "5", "method": "draft"}},
        "load-nan": {"load": {"kind": "concurrency", "value": "nan"}},
        "load-huge": {"load": {"kind": "concurrency", "value": 1e400}},
        "wave-negative": {"wave": -1},
    }
    for label, change in bad_points.items():
        point = {**json.loads(good_point), **change}
        text = json.dumps(point).replace("Infinity", "1e400")
        run(f"sweep-point-{label}", ["--sweep-id", "sw", "--sweep-point", text], refused("--sweep-point"))
    for value in ("nan", "-1", "1e9", "abc", "inf"):
        run(f"price-{value}", ["--node-price-per-hour", value], refused("--node-price-per-hour"))
    run("settings-missing", ["--settings", f"{f}/nowhere.json"], refused("--settings", "nowhere.json"))
    run("settings-list", ["--settings", f"{f}/settings/list.json"], refused("--settings", "list.json"))
    run("settings-deep", ["--settings", f"{f}/settings/deep.json"], refused("--settings", "deep.json"))
    for label in ("price-negative", "price-string", "price-nan", "servers-zero", "servers-string"):
        run(
            f"settings-{label}",
            ["--settings", f"{f}/settings/{label}.json"],
            either(("--settings", PRICE, "servers_per_node"), (PRICE, "servers_per_node")),
        )
    run("concurrency-zero", ["--concurrency", "0"], refused("--concurrency"))
    run("rate-nan", ["--request-rate", "nan"], refused("--request-rate"))
    run("rate-zero", ["--request-rate", "0"], refused("--request-rate"))
    run("temperature-nan", ["--temperature", "nan"], refused("--temperature"))
    run("test-case-unknown", ["--test-case", "no-such-case"], refused("--test-case", "no-such-case"))
    run("suite-missing", ["--suite", f"{f}/nowhere-suite.json"], refused("--suite", "nowhere-suite.json"))
    add(
        "run",
        "endpoint-name-dotdot",
        sb("run", "--endpoint", f"../x={base_url}", *small, "--results", f"{o}/run-ep"),
        refused("--endpoint"),
    )
    add(
        "run",
        "endpoint-port",
        sb("run", "--endpoint", "a=http://127.0.0.1:99999", *small, "--results", f"{o}/run-ep2"),
        refused("--endpoint"),
    )
    add("run", "results-is-file", sb("run", *endpoints, *small, "--results", f"{f}/settings/list.json"), refused("--results"))

    # --- publish -------------------------------------------------------------------------------------
    add("publish", "missing", sb("publish", f"{runs}/nowhere"), refused("nowhere"))
    add("publish", "dotdot", sb("publish", f"{runs}/.."), refused("run id", ".."))
    add("publish", "empty", sb("publish", ""), refused("run"))
    # Publishing goes on to CloudWatch (here a closed port, retried with backoff): its exit code, not a hang.
    add("publish", "garbled-run-json", sb("publish", f"{runs}/garbled"), refused("run.json"), timeout_s=120)
    add("publish", "run-json-list", sb("publish", f"{runs}/listrun"), refused("run.json"), timeout_s=120)
    add("publish", "a-file", sb("publish", f"{runs}/synth/run.json"), refused("run.json"))
    add("publish", "sweep-folder", sb("publish", f"{f}/staged/sweeps/sw"), refused("run.json", "sw"))

    # --- report --------------------------------------------------------------------------------------
    def report(name: str, target: str, extra: list[str], expect: Expect) -> None:
        add("report", name, sb("report", target, "--no-charts", "--out", f"{o}/report-{name}", "--resamples", "200", *extra), expect)

    report("valid", f"{runs}/synth", [], OKAY)
    report("valid-bare-id", "synth", ["--results", runs], OKAY)
    report("missing", f"{runs}/nowhere", [], refused("nowhere"))
    report("bare-id-missing", "nowhere", ["--results", runs], refused("nowhere"))
    report("dotdot", "../x", ["--results", runs], refused("../x", "run id"))
    report("garbled-run-json", f"{runs}/garbled", [], refused("run.json"))
    report("run-json-list", f"{runs}/listrun", [], refused("run.json"))
    report("no-records", f"{runs}/norecords", [], either(("records", "norecords"), ("no record", "no request", "no data", "nothing")))
    for value in ("nan", "-1", "1e9", "abc", "inf"):
        report(f"price-{value}", f"{runs}/synth", ["--node-price-per-hour", value], refused("--node-price-per-hour"))
    for value in ("0", "-1", "abc", "1e3", "nan"):
        report(f"servers-{value}", f"{runs}/synth", ["--servers-per-node", value], refused("--servers-per-node"))
    report(
        "servers-absurd",
        f"{runs}/synth",
        ["--servers-per-node", "100000"],
        either(("--servers-per-node",), ("--servers-per-node", "servers per node")),
    )
    for value in ("nan", "2", "0", "-1"):
        report(f"draft-cost-{value}", f"{runs}/synth", ["--draft-cost-ratio", value], refused("--draft-cost-ratio"))
    report("baseline-unknown", f"{runs}/synth", ["--baseline", "no-such"], refused("--baseline"))
    report("resamples-zero", f"{runs}/synth", ["--resamples", "0"], refused("--resamples"))
    report("recorded-price-negative", f"{runs}/price-negative", [], either((PRICE,), (PRICE,)))
    report("recorded-price-string", f"{runs}/price-string", [], either((PRICE,), (PRICE,)))
    report("recorded-servers-zero", f"{runs}/servers-zero", [], either(("servers_per_node",), ("servers_per_node",)))
    report(
        "multi-level-pooled", f"{runs}/ml", [], either(("level",), ("pooled", "load level", "per level", "sweep-report --run", "levels"))
    )
    add(
        "report",
        "out-is-file",
        sb("report", f"{runs}/synth", "--no-charts", "--out", f"{runs}/synth/run.json"),
        refused("--out", "run.json"),
    )

    # --- sweep-report --------------------------------------------------------------------------------
    def sweep_report(name: str, extra: list[str], expect: Expect, results: str = f"{f}/grid") -> None:
        argv = sb("sweep-report", "--results", results, "--no-charts", "--resamples", "200", "--out", f"{o}/sr-{name}", *extra)
        add("sweep-report", name, argv, expect, control="sweep-report:valid-run" if "--run" in extra else "sweep-report:valid")

    sweep_report("valid", ["--sweep-id", "sw"], OKAY)
    sweep_report("valid-run", ["--run", f"{runs}/ml"], OKAY)
    for label, sid in PATH_UNSAFE_IDS:
        sweep_report(f"sweep-id-{label}", ["--sweep-id", sid], refused("--sweep-id"), results=f"{f}/ids-grid/{label}")
    sweep_report("sweep-id-missing", ["--sweep-id", "nowhere"], refused("--sweep-id", "nowhere"))
    sweep_report("run-missing", ["--run", f"{runs}/nowhere"], refused("--run", "nowhere"))
    sweep_report("run-garbled", ["--run", f"{runs}/garbled"], refused("--run", "run.json"))
    sweep_report("run-without-settings", ["--run", f"{runs}/ml-nosettings"], either(("--run", "settings"), SETTINGS_MARKERS))
    for damage, markers in (
        ("foreign", ("other-sweep", "another sweep", "foreign", *LEFT_OUT)),
        ("k-mismatch", MISMATCH_MARKERS + LEFT_OUT),
        ("draft-mismatch", MISMATCH_MARKERS + LEFT_OUT),
        ("locked", ("running", "in progress", "incomplete", *LEFT_OUT)),
        ("failed", ("failed", "incomplete", *LEFT_OUT)),
        ("truncated", ("truncated", "damaged", *LEFT_OUT)),
        ("duplicate", ("duplicate", "twice", *LEFT_OUT)),
        ("unsafe-ids", ("point_id", "variant.name", "not a dns label", *LEFT_OUT)),
    ):
        names = ("--sweep-id", DAMAGED_POINT.get(damage, "q17-k7-c1"))
        sweep_report(f"point-{damage}", ["--sweep-id", "sw"], either(names, markers), results=f"{f}/damaged/{damage}")
    for value in ("nan", "-1", "abc", "1e9"):
        sweep_report(f"price-{value}", ["--sweep-id", "sw", "--node-price-per-hour", value], refused("--node-price-per-hour"))
    for value in ("0", "abc", "inf"):
        sweep_report(f"servers-{value}", ["--sweep-id", "sw", "--servers-per-node", value], refused("--servers-per-node"))
    sweep_report(
        "servers-absurd",
        ["--sweep-id", "sw", "--servers-per-node", "100000"],
        either(("--servers-per-node",), ("--servers-per-node", "servers per node")),
    )
    for value in ("0", "nan", "-1"):
        sweep_report(f"slo-tpot-{value}", ["--sweep-id", "sw", "--slo-tpot-ms", value], refused("--slo-tpot-ms"))
    sweep_report("resamples-zero", ["--sweep-id", "sw", "--resamples", "0"], refused("--resamples"))
    sweep_report("dashboard-name", ["--sweep-id", "sw", "--dashboard", "bad name!"], refused("--dashboard"))
    sweep_report("recorded-price-negative", ["--sweep-id", "sw"], either((PRICE,), (PRICE,)), results=f"{f}/damaged/price-negative")

    # --- import-llmperf ------------------------------------------------------------------------------
    def imp(name: str, directory: str, extra: list[str], expect: Expect) -> None:
        base = ["--variant", "qwen-vllm", "--test-case", "json", "--run-id", "imp"]
        add("import-llmperf", name, sb("import-llmperf", directory, *base, "--results", f"{o}/imp-{name}", *extra), expect)

    imp("valid", f"{f}/llmperf/good", [], OKAY)
    imp("missing", f"{f}/llmperf/nowhere", [], refused("nowhere"))
    imp("empty-dir", f"{f}/llmperf/empty", [], refused("llmperf/empty", "individual"))
    imp("garbled", f"{f}/llmperf/garbled", [], refused("individual_responses", "garbled"))
    imp("rows-not-objects", f"{f}/llmperf/rows", [], refused("individual_responses", "rows"))
    imp("a-file", f"{f}/settings/list.json", [], refused("list.json"))
    imp("variant-dotdot", f"{f}/llmperf/good", ["--variant", "../x"], refused("--variant"))
    imp("test-case-slash", f"{f}/llmperf/good", ["--test-case", "a/b"], refused("--test-case"))
    imp("run-id-dotdot", f"{f}/llmperf/good", ["--run-id", "../x"], refused("--run-id"))
    imp("prompt-class-unknown", f"{f}/llmperf/good", ["--prompt-class", "poetry"], refused("--prompt-class"))

    # --- sweep next ----------------------------------------------------------------------------------
    def nxt(name: str, extra: list[str], expect: Expect, source: str = "staged", ctx: Sequence[str] = SWEEP_CTX, **kw) -> None:  # type: ignore[no-untyped-def]
        fresh = f"{o}/next-{name}"
        argv = sb("sweep", "next", "--results", fresh, "--resamples", "100", *ctx, *extra)
        control = "sweep-next:same-settings-again" if source == "stage2" else "sweep-next:valid"
        add("sweep next", name, argv, expect, copy=(f"{f}/{source}", fresh), control=control, **kw)

    nxt("valid", ["--sweep-id", "sw", "--node-price-per-hour", "0"], OKAY)
    # Each unsafe id with the sweep stored where it leads (ids-staged/): a tree that does not check the
    # id finds points there and decides; "SW_1" is a folder name but not a Job name (a DNS label).
    for label, sid in UNSAFE_SWEEP_IDS:
        nxt(f"sweep-id-{label}", ["--sweep-id", sid, "--node-price-per-hour", "0"], refused("--sweep-id"), source=f"ids-staged/{label}")
    nxt("sweep-id-missing", ["--sweep-id", "nowhere"], refused("--sweep-id", "nowhere"))
    for damage, markers in (
        ("foreign", ("other-sweep", "another sweep", "foreign", *LEFT_OUT)),
        ("k-mismatch", MISMATCH_MARKERS + LEFT_OUT),
        ("draft-mismatch", MISMATCH_MARKERS + LEFT_OUT),
        ("unconfigured-load", ("not configured", "unconfigured", "not a configured", *LEFT_OUT)),
        ("unconfigured-variant", ("not configured", "unconfigured", "not in the sweep", "catalogue", *LEFT_OUT)),
        ("locked", ("running", "in progress", "incomplete", *LEFT_OUT)),
        ("truncated", ("truncated", "damaged", *LEFT_OUT)),
        ("unsafe-ids", ("point_id", "variant.name", "not a dns label", *LEFT_OUT)),
    ):
        nxt(
            f"point-{damage}",
            ["--sweep-id", "sw", "--node-price-per-hour", "0"],
            either(("--sweep-id", DAMAGED_POINT.get(damage, "q17-k7-c1")), markers),
            source=f"damaged-staged/{damage}",
        )
    nxt("same-settings-again", ["--sweep-id", "sw", "--node-price-per-hour", "0"], OKAY, source="stage2")
    redecide = ("differ", "changed", "other settings", "recorded", "earlier stage", "was decided")
    nxt(
        "other-price-than-stage-1",
        ["--sweep-id", "sw", "--node-price-per-hour", "10"],
        either(("--node-price-per-hour", PRICE), redecide),
        source="stage2",
    )
    nxt(
        "other-margin-than-stage-1",
        ["--sweep-id", "sw", "--node-price-per-hour", "0"],
        either(("sweep.decision_margin",), redecide),
        source="stage2",
        ctx=[*SWEEP_CTX, "-c", "sweep.decision_margin=0.2"],
    )
    nxt(
        "other-mix-than-stage-1",
        ["--sweep-id", "sw", "--node-price-per-hour", "0"],
        either(("sweep.class_weights",), redecide),
        source="stage2",
        ctx=[*SWEEP_CTX, "-c", "sweep.class_weights=structured:5,open-ended:1"],
    )
    for value in ("nan", "-1", "abc"):
        nxt(f"price-{value}", ["--sweep-id", "sw", "--node-price-per-hour", value], refused("--node-price-per-hour"))
    for value in ("-1", "nan", "abc", "1e9"):
        nxt(f"setting-price-{value}", ["--sweep-id", "sw", "-c", f"results.{PRICE}={value}"], refused(f"results.{PRICE}"))
    for value in ("structured:1e400", "structured:nan", "structured:1e308,open-ended:1e308", "structured:1_0"):
        nxt(
            f"class-weights-{value.split(':')[1].split(',')[0]}",
            ["--sweep-id", "sw", "-c", f"sweep.class_weights={value}"],
            refused("sweep.class_weights"),
        )
    nxt("resamples-zero", ["--sweep-id", "sw", "--resamples", "0"], refused("--resamples"))
    nxt("context-no-equals", ["--sweep-id", "sw", "-c", "sweep.strategy"], refused("-c", "sweep.strategy"))
    add(
        "sweep next",
        "results-is-file",
        sb("sweep", "next", "--sweep-id", "sw", "--results", f"{f}/settings/list.json", *SWEEP_CTX),
        refused("--results", "list.json"),
    )

    # --- sweep stage-job -----------------------------------------------------------------------------
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "sw-s2", "namespace": "specdecode"},
        "spec": {
            "completionMode": "Indexed",
            "completions": 16,
            "parallelism": 2,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "point", "image": "x", "env": [{"name": "SWEEP_ID", "value": "sw"}]}],
                }
            },
        },
    }
    stage = f"{f}/stages/after-stage-1.json"

    def stage_job(name: str, stdin: str, expect: Expect, stage_file: str = stage) -> None:
        add("sweep stage-job", name, sb("sweep", "stage-job", "--stage", stage_file), expect, stdin=stdin)

    def with_spec(**spec) -> str:  # type: ignore[no-untyped-def]
        return json.dumps({**job, "spec": {**job["spec"], **spec}})

    def with_pod(pod: object) -> str:
        return with_spec(template={"spec": pod})

    # Not "job": the command's own name (stage-job) is in every line it prints.
    stdin_names = ("stdin", "standard input", "kind", "container", "spec", "env", "template", "json", "the job", "a job", "cronjob")
    stage_job("valid", json.dumps(job), OKAY)
    stage_job("stdin-empty", "", refused(*stdin_names))
    stage_job("stdin-not-json", "{kind: Job", refused(*stdin_names))
    stage_job("stdin-list", "[]", refused(*stdin_names))
    stage_job("stdin-string", '"Job"', refused(*stdin_names))
    stage_job("stdin-deep", "[" * 100000 + "]" * 100000, refused(*stdin_names))
    stage_job("stdin-deep-object", '{"a":' * 50000 + "1" + "}" * 50000, refused(*stdin_names))
    stage_job("kind-deployment", json.dumps({**job, "kind": "Deployment"}), refused("kind", "Deployment"))
    stage_job("kind-missing", json.dumps({k: v for k, v in job.items() if k != "kind"}), refused("kind"))
    stage_job("cronjob-itself", json.dumps({**job, "kind": "CronJob", "spec": {"jobTemplate": job["spec"]}}), refused("kind", "CronJob"))
    stage_job("no-containers", with_pod({"restartPolicy": "Never"}), refused("container"))
    stage_job("containers-empty", with_pod({"containers": []}), refused("container"))
    stage_job("containers-string", with_pod({"containers": "point"}), refused("container"))
    stage_job("container-not-object", with_pod({"containers": ["point"]}), refused("container"))
    stage_job("env-string", with_pod({"containers": [{"name": "point", "env": "SWEEP_ID=sw"}]}), refused("env"))
    stage_job("env-item-string", with_pod({"containers": [{"name": "point", "env": ["SWEEP_ID"]}]}), refused("env"))
    stage_job("spec-string", json.dumps({**job, "spec": "x"}), refused("spec"))
    stage_job("template-list", with_spec(template=[]), refused("template", "spec"))
    stage_job("no-sweep-id-env", with_pod({"containers": [{"name": "point", "env": []}]}), refused("SWEEP_ID", "env"))
    stage_job("stage-missing", json.dumps(job), refused("--stage", "nowhere.json"), stage_file=f"{f}/stages/nowhere.json")
    for label in (
        "garbled",
        "list",
        "no-next",
        "unknown-variant",
        "duplicate-variants",
        "unsafe-sweep-id",
        "unsafe-variant",
        "stage-string",
    ):
        names = {
            "duplicate-variants": ("duplicate", "twice"),
            "unsafe-sweep-id": ("sweep_id",),
            "unsafe-variant": ("variant", "name"),
            "unknown-variant": ("q99-k1",),
            "no-next": ("stage document", "no further stage"),
        }
        stage_job(
            f"stage-{label}",
            json.dumps(job),
            refused(*names.get(label, ()), "--stage", f"{label}.json"),
            stage_file=f"{f}/stages/{label}.json",
        )

    # --- plan ----------------------------------------------------------------------------------------
    add("plan", "valid", sb("plan", *PLAN_CTX), OKAY)
    add("plan", "no-sweep", sb("plan"), OKAY)
    for value in BAD_NUMBERS:
        add("plan", f"setting-price-{value}", sb("plan", *PLAN_CTX, "-c", f"results.{PRICE}={value}"), refused(f"results.{PRICE}"))
    for value in ("structured:1e400", "structured:-1", "structured:nan", "structured:1e308,open-ended:1e308", "structured:0x10"):
        label = value.split(":")[1].split(",")[0]
        add(
            "plan",
            f"class-weights-{label}",
            sb("plan", *PLAN_CTX, "-c", "sweep.strategy=staged", "-c", f"sweep.class_weights={value}"),
            refused("sweep.class_weights"),
        )
    add("plan", "variants-bad", sb("plan", "-c", "sweep.variants=q17:Qwen/Qwen3-1.7B:zero"), refused("sweep.variants"))
    add("plan", "concurrency-zero", sb("plan", *PLAN_CTX, "-c", "sweep.concurrencies=0"), refused("sweep.concurrencies"))
    add("plan", "rate-nan", sb("plan", *PLAN_CTX, "-c", "sweep.request_rates=nan"), refused("sweep.request_rates"))
    add("plan", "cdk-json-missing", sb("plan", "--cdk-json", f"{f}/nowhere-cdk.json"), refused("--cdk-json", "nowhere-cdk.json"))
    add("plan", "context-no-equals", sb("plan", "-c", "sweep.variants"), refused("-c", "sweep.variants"))

    # --- predict -------------------------------------------------------------------------------------
    def predict(name: str, extra: list[str], expect: Expect) -> None:
        source = next((flag for flag in ("--from-run", "--from-sweep", "--calibrate", "--profile") if flag in extra), "")
        control = {
            "--from-run": "valid-from-run",
            "--from-sweep": "valid-from-sweep",
            "--calibrate": "valid-calibrate",
            "--profile": "valid-profile",
        }
        add("predict", name, sb("predict", *extra), expect, control=f"predict:{control.get(source, 'valid')}")

    def save(name: str) -> list[str]:  # a file of each case's own: two cases run at once
        return ["--save-profile", f"{o}/profile-{name}.json"]

    predict("valid", [], OKAY)
    predict("valid-acceptance", ["--acceptance", "structured=0.8"], OKAY)
    predict("valid-from-run", ["--from-run", f"{runs}/ml"], OKAY)
    predict("valid-from-sweep", ["--from-sweep", "sw", "--results", f"{f}/grid"], OKAY)
    predict("valid-profile", ["--profile", f"{f}/profiles/good.json"], OKAY)
    predict("valid-calibrate", ["--calibrate", f"{runs}/ml", "--save-profile", f"{o}/p-valid.json"], OKAY)
    predict("from-run-missing", ["--from-run", f"{runs}/nowhere"], refused("--from-run", "nowhere"))
    predict("from-run-garbled", ["--from-run", f"{runs}/garbled"], refused("--from-run", "run.json"))
    predict("from-run-without-settings", ["--from-run", f"{runs}/ml-nosettings"], either(("--from-run", "settings"), SETTINGS_MARKERS))
    predict("from-run-other-deployment", ["--from-run", f"{runs}/tp16"], either(("--from-run", "tensor_parallel_size"), MISMATCH_MARKERS))
    predict("from-sweep-missing", ["--from-sweep", "nowhere", "--results", f"{f}/grid"], refused("--from-sweep", "nowhere"))
    for label, sid in PATH_UNSAFE_IDS:
        predict(f"from-sweep-{label}", ["--from-sweep", sid, "--results", f"{f}/ids-grid/{label}"], refused("--from-sweep"))
    predict(
        "from-sweep-foreign",
        ["--from-sweep", "sw", "--results", f"{f}/damaged/foreign"],
        either(("--from-sweep",), ("other-sweep", "foreign", *LEFT_OUT)),
    )
    predict("calibrate-missing", ["--calibrate", f"{runs}/nowhere", *save("calibrate-missing")], refused("--calibrate", "nowhere"))
    predict("calibrate-garbled", ["--calibrate", f"{runs}/garbled", *save("calibrate-garbled")], refused("--calibrate", "run.json"))
    predict(
        "calibrate-without-settings",
        ["--calibrate", f"{runs}/ml-nosettings", *save("calibrate-without-settings")],
        either(("--calibrate", "settings"), SETTINGS_MARKERS),
    )
    predict(
        "calibrate-one-load",
        ["--calibrate", f"{runs}/one", *save("calibrate-one-load")],
        either(("--calibrate", "load"), ("one load", "single load", "identif", "as many", "exact", "cannot")),
    )
    predict(
        "calibrate-other-deployment",
        ["--calibrate", f"{runs}/tp16", *save("calibrate-other-deployment")],
        either(("--calibrate", "tensor_parallel_size"), MISMATCH_MARKERS),
    )
    predict(
        "calibrate-fit-unknown", ["--calibrate", "writeup", "--fit", "bogus", *save("calibrate-fit-unknown")], refused("--fit", "bogus")
    )
    predict("calibrate-save-to-dir", ["--calibrate", "writeup", "--save-profile", f"{f}/runs"], refused("--save-profile", f"{f}/runs"))
    for setting in ("serving.tensor_parallel_size=16", "serving.max_num_seqs=8", f"serving.draft_model={Q06}"):
        label = setting.split("=")[0].split(".")[1]
        predict(
            f"profile-vs-local-{label}",
            ["--profile", f"{f}/profiles/good.json", "-c", setting],
            either(("--profile", setting.split("=")[0]), MISMATCH_MARKERS),
        )
    predict("profile-missing", ["--profile", f"{f}/profiles/nowhere.json"], refused("--profile", "nowhere.json"))
    for label in ("garbled", "list", "format", "overhead-negative", "overhead-string", "efficiency-nan", "efficiency-huge"):
        predict(f"profile-{label}", ["--profile", f"{f}/profiles/{label}.json"], refused("--profile", f"{label}.json"))
    for value in ("structured=1.5", "structured=nan", "structured=abc", "=0.5", "structured", "structured=-0.1"):
        predict(f"acceptance-{value.replace('=', '-') or 'x'}", ["--acceptance", value], refused("--acceptance"))
    for value in ("0", "-1", "abc", "1e9", "1,,nan", "2.5"):
        predict(f"loads-{value}", ["--loads", value], refused("--loads", "loads"))
    for value in ("nan", "-1", "abc"):
        predict(f"price-{value}", ["--node-price-per-hour", value], refused("--node-price-per-hour"))
    for value in ("-1", "nan", "abc", "1e9"):
        predict(f"setting-price-{value}", ["-c", f"results.{PRICE}={value}"], refused(f"results.{PRICE}"))
    predict("k-max-zero", ["--k-max", "0"], refused("--k-max"))
    predict("prompt-tokens-zero", ["--prompt-tokens", "0"], refused("--prompt-tokens"))
    predict("json-to-dir", ["--json", f"{f}/runs"], refused("--json", f"{f}/runs"))

    # --- preflight (bad settings only: a valid one would read the account) ----------------------------
    for value in ("-1", "nan", "abc"):
        add("preflight", f"setting-price-{value}", sb("preflight", "-c", f"results.{PRICE}={value}"), refused(f"results.{PRICE}"))
    add(
        "preflight",
        "class-weights-overflow",
        sb("preflight", *PLAN_CTX, "-c", "sweep.strategy=staged", "-c", "sweep.class_weights=structured:1e400"),
        refused("sweep.class_weights"),
    )
    for value in ("nan", "0", "-1"):
        add("preflight", f"run-hours-{value}", sb("preflight", "--run-hours", value), refused("--run-hours"))
    add("preflight", "cdk-json-missing", sb("preflight", "--cdk-json", f"{f}/nowhere-cdk.json"), refused("--cdk-json", "nowhere-cdk.json"))
    add("preflight", "context-no-equals", sb("preflight", "-c", "results.node_price_per_hour"), refused("-c"))

    # --- suite ---------------------------------------------------------------------------------------
    add("suite", "valid", sb("suite"), OKAY)
    add("suite", "valid-file", sb("suite", "--suite", f"{f}/suites/good.json"), OKAY)
    add("suite", "missing", sb("suite", "--suite", f"{f}/suites/nowhere.json"), refused("--suite", "nowhere.json"))
    for label, names in (
        ("garbled", ()),
        ("list", ()),
        ("deep", ()),
        ("name-dotdot", ("name", "test_cases")),
        ("class-unknown", ("prompt_class",)),
        ("duplicate-names", ("name", "twice", "duplicate")),
        ("weights-overflow", ("class_weights",)),
        ("weights-string", ("class_weights",)),
        ("weights-negative", ("class_weights",)),
        ("weights-bool", ("class_weights",)),
    ):
        add("suite", label, sb("suite", "--suite", f"{f}/suites/{label}.json"), refused(*names, f"{label}.json"))
    add("suite", "builtin-unknown", sb("suite", "--suite", "builtin:nope"), refused("builtin:nope", "--suite", "nope"))

    # --- app.py -c (synth-time validation) -----------------------------------------------------------
    def app(name: str, context: list[str], expect: Expect) -> None:
        add("app.py", name, ["-c", APP_STUB, *[x for item in context for x in ("-c", item)]], expect)

    app("valid", [], OKAY)
    app("valid-sweep", [f"sweep.variants=q17-k5:{Q17}:5", "neuron_nodes.desired_size=2", "neuron_nodes.max_size=2"], OKAY)
    app("valid-price-zero", [f"results.{PRICE}=0"], OKAY)
    for value in BAD_NUMBERS:
        app(f"price-{value}", [f"results.{PRICE}={value}"], refused(f"results.{PRICE}"))
    staged_ctx = [f"sweep.variants=q17-k5:{Q17}:5", "neuron_nodes.desired_size=2", "neuron_nodes.max_size=2", "sweep.strategy=staged"]
    weights = ("1e400", "inf", "nan", "-1", "abc", "1e308,open-ended:1e308", "1_0", "\u0663", "0,open-ended:0", "true")
    for value in (f"structured:{w}" for w in weights):
        label = value.split(":", 1)[1].replace(",", "-").replace(":", "")
        app(f"class-weights-{label}", [*staged_ctx, f"sweep.class_weights={value}"], refused("sweep.class_weights"))
    for setting in ("sweep.decision_margin=nan", "benchmark.temperature=nan", "serving.max_num_seqs=0", "sweep.slo_tpot_ms=inf"):
        app(setting.split("=")[0], [*staged_ctx, setting], refused(setting.split("=")[0]))
    return out


# --- fixtures ----------------------------------------------------------------------------------------

# Run in the tree's own interpreter with cwd=tree: its tests/runs.py and tests/sweep_data.py write the
# runs and sweep points as that tree stores them; the staged sweep is advanced once by its own CLI.
BUILDER = r"""
import contextlib, io, json, sys
from dataclasses import replace
from pathlib import Path
root = Path(sys.argv[1])
from specbench import cli
from specbench.analysis.sweep import CONCURRENCY, Load
from specbench.results.store import LocalStore, RunStore
from tests import runs
from tests.sweep_data import Truth, store_points, synthetic_points

runs.write_run(RunStore(LocalStore(root / "runs"), "synth"))
Q17, Q06 = "Qwen/Qwen3-1.7B", "Qwen/Qwen3-0.6B"
NAMES = {Q17: "q17", Q06: "q06"}
truth = Truth(classes={"structured": 0.92, "open-ended": 0.7}, drafts={Q17: 0.08, Q06: 0.3}, ks=tuple(range(3, 10)),
              loads=(Load(CONCURRENCY, 1),))
named = []
for p in synthetic_points(truth, requests=10, seed=3):
    if not p.variant.is_baseline:
        name = f"{NAMES[p.variant.draft_model]}-k{p.variant.k}"
        p = replace(p, point_id=f"{name}-{p.load.label}", variant=replace(p.variant, name=name, method="draft"))
    named.append(p)
store_points(LocalStore(root / "grid"), "sw", named)
stage1 = [p for p in named if p.variant.is_baseline or p.variant.name in ("q17-k7", "q06-k6")]
store_points(LocalStore(root / "staged"), "sw", stage1)
# stage2: stage 1 decided (price 0), the proposed stage's points stored: the next step is due.
store_points(LocalStore(root / "stage2"), "sw", stage1)
ctx = json.loads(sys.argv[2])
with contextlib.redirect_stdout(io.StringIO()):
    code = cli.main(["sweep", "next", "--sweep-id", "sw", "--results", str(root / "stage2"), "--node-price-per-hour", "0",
                     "--resamples", "100", *ctx])
assert code == 0, code
doc = json.loads((root / "stage2/sweeps/sw/stages/after-stage-1.json").read_text())
proposed = {v["name"] for v in doc["next_stage"]["variants"]}
store_points(LocalStore(root / "stage2"), "sw", [p for p in named if p.variant.name in proposed])
(root / "stages").mkdir(exist_ok=True)
(root / "stages/after-stage-1.json").write_text(json.dumps(doc))
print(json.dumps(runs.deployment()))
"""


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _edit_json(path: Path, change) -> None:  # type: ignore[no-untyped-def]
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data), encoding="utf-8")


def free_ports(count: int) -> list[int]:
    import socket

    socks = [socket.socket() for _ in range(count)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def wait_ready(url: str, limit_s: float = 60.0) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2):  # noqa: S310 - loopback
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"emulator at {url} never answered /health")


def _damage_sweep(src: Path, dst: Path, damage: str) -> None:
    """A copy of a sweep (``sweeps/sw/``) with one kind of damage."""
    shutil.copytree(src, dst)
    folder = dst / "sweeps" / "sw"
    point = folder / "q17-k7-c1"

    def sweep_of(key: str):  # type: ignore[no-untyped-def]
        def change(run: dict) -> None:
            run["sweep"][key] = {"k-mismatch": 3, "draft-mismatch": None}.get(damage, run["sweep"][key])

        return change

    if damage == "foreign":
        if not (folder / "q17-k5-c1").exists():  # a staged sweep's stage 1 has no k5: a foreign sweep's point copied in
            shutil.copytree(point, folder / "q17-k5-c1")
        _edit_json(folder / "q17-k5-c1/run.json", lambda r: r["sweep"].update(sweep_id="other-sweep", point_id="q17-k5-c1"))
    elif damage == "k-mismatch":
        _edit_json(point / "run.json", lambda r: r["sweep"]["variant"].update(k=3))
    elif damage == "draft-mismatch":
        _edit_json(point / "run.json", lambda r: r["sweep"]["variant"].update(draft_model="Qwen/Qwen3-8B"))
    elif damage == "unconfigured-load":
        shutil.copytree(point, folder / "q17-k7-c64")
        _edit_json(
            folder / "q17-k7-c64/run.json", lambda r: r["sweep"].update(point_id="q17-k7-c64", load={"kind": "concurrency", "value": 64})
        )
    elif damage == "unconfigured-variant":
        shutil.copytree(point, folder / "q17-k12-c1")
        _edit_json(
            folder / "q17-k12-c1/run.json",
            lambda r: r["sweep"].update(
                point_id="q17-k12-c1", variant={"name": "q17-k12", "draft_model": "Qwen/Qwen3-1.7B", "k": 12, "method": "draft"}
            ),
        )
    elif damage == "locked":
        (point / ".lock").mkdir()
        _edit_json(point / "run.json", lambda r: r.update(status="running", heartbeat=time.time()))
    elif damage == "failed":
        _edit_json(point / "run.json", lambda r: r.update(status="failed"))
    elif damage == "truncated":
        for records in (point / "records").glob("*.jsonl"):
            text = records.read_text(encoding="utf-8")
            records.write_text(text[: len(text) // 2], encoding="utf-8")
    elif damage == "duplicate":
        shutil.copytree(point, folder / "q17-k7-c1-again")
    elif damage == "unsafe-ids":
        _edit_json(point / "run.json", lambda r: r["sweep"].update(point_id="../../x", variant={**r["sweep"]["variant"], "name": "../q17"}))
    elif damage == "price-negative":
        for run in folder.glob("*/run.json"):
            _edit_json(run, lambda r: r.setdefault("plan", {}).update(deployment={"cost": {"node_price_per_hour": -5}}))
    else:
        raise ValueError(damage)


def _sweep_at(src: Path, dst: Path, sweep_id: str) -> None:
    """The results folder ``src``'s sweep ``sw`` stored as ``sweep_id`` at ``dst``, at the folder the
    store's key ``sweeps/<sweep_id>/`` leads to (as a string: ``../x``, ``a/b`` and ``.`` go where a
    store that does not check the id would look)."""
    target = Path(f"{dst}/sweeps/{sweep_id}")
    target.mkdir(parents=True, exist_ok=True)
    for point in sorted((src / "sweeps" / "sw").iterdir()):
        if point.name == "stages":
            continue
        shutil.copytree(point, target / point.name, dirs_exist_ok=True)
        _edit_json(target / point.name / "run.json", lambda r: r["sweep"].update(sweep_id=sweep_id))


def _fixture_step(what: str, args: list[str], tree: Path, env: dict[str, str], timeout_s: int) -> str:
    """Run one fixture-making command of the measured tree (at nice 10); its stdout, or RuntimeError."""
    done = subprocess.run(["nice", "-n", "10", *args], cwd=tree, env=env, capture_output=True, text=True, timeout=timeout_s, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout


def build_fixtures(tree: Path, python: str, fx: Path, env: dict[str, str], log) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """Every fixture under ``fx``; the emulator's two ports (it keeps running for the run cases)."""
    fx.mkdir(parents=True, exist_ok=True)
    built = _fixture_step(
        "fixture builder", [python, "-c", BUILDER, str(fx), json.dumps(SWEEP_CTX)], tree, {**env, "PYTHONPATH": str(tree)}, 300
    )
    deployment = json.loads(built.strip().splitlines()[-1])
    runs = fx / "runs"
    # Runs with settings that are not the local ones, with damaged or odd files.
    _write(fx / "settings/good.json", json.dumps(deployment))
    tp16 = json.loads(json.dumps(deployment))
    tp16["serving"].update(tensor_parallel_size=16, max_num_seqs=8)
    _write(fx / "settings/tp16.json", json.dumps(tp16))
    _write(fx / "settings/list.json", "[]")
    _write(fx / "settings/deep.json", "[" * 100000 + "]" * 100000)
    for label, cost in (
        ("price-negative", {PRICE: -5}),
        ("price-string", {PRICE: "abc"}),
        ("price-nan", {PRICE: "NaN"}),
        ("servers-zero", {"servers_per_node": 0}),
        ("servers-string", {"servers_per_node": "two"}),
    ):
        _write(fx / f"settings/{label}.json", json.dumps({**deployment, "cost": cost}))
        shutil.copytree(runs / "synth", runs / label)
        _edit_json(runs / label / "run.json", lambda r, cost=cost: r["plan"]["deployment"].update(cost=cost))
    shutil.copytree(runs / "synth", runs / "garbled")
    _write(runs / "garbled/run.json", '{"run_id": "garbled", "status": ')
    shutil.copytree(runs / "synth", runs / "listrun")
    _write(runs / "listrun/run.json", "[1, 2]")
    (runs / "norecords").mkdir()
    shutil.copy(runs / "synth/run.json", runs / "norecords/run.json")
    for damage in ("foreign", "k-mismatch", "draft-mismatch", "locked", "failed", "truncated", "duplicate", "unsafe-ids", "price-negative"):
        _damage_sweep(fx / "grid", fx / "damaged" / damage, damage)
    for damage in (
        "foreign",
        "k-mismatch",
        "draft-mismatch",
        "unconfigured-load",
        "unconfigured-variant",
        "locked",
        "truncated",
        "unsafe-ids",
    ):
        _damage_sweep(fx / "staged", fx / "damaged-staged" / damage, damage)
    for label, sweep_id in UNSAFE_SWEEP_IDS:
        _sweep_at(fx / "staged", fx / "ids-staged" / label, sweep_id)
        _sweep_at(fx / "grid", fx / "ids-grid" / label, sweep_id)
    # Stage documents: the real one, then damaged copies.
    stages = fx / "stages"
    doc = json.loads((stages / "after-stage-1.json").read_text(encoding="utf-8"))
    _write(stages / "garbled.json", '{"next_stage": ')
    _write(stages / "list.json", "[]")
    _write(stages / "no-next.json", json.dumps({**doc, "next_stage": {"stage": 0, "variants": [], "points": []}}))
    nxt = doc["next_stage"]
    _write(stages / "unknown-variant.json", json.dumps({**doc, "next_stage": {**nxt, "variants": [{"name": "q99-k1"}]}}))
    _write(stages / "duplicate-variants.json", json.dumps({**doc, "next_stage": {**nxt, "variants": [nxt["variants"][0]] * 3}}))
    _write(stages / "unsafe-sweep-id.json", json.dumps({**doc, "sweep_id": "../../other"}))
    catalogue = [{**doc["catalogue"][0], "name": "../evil"}, *doc["catalogue"][1:]]
    _write(
        stages / "unsafe-variant.json",
        json.dumps({**doc, "catalogue": catalogue, "next_stage": {**nxt, "variants": [{"name": "../evil"}]}}),
    )
    _write(stages / "stage-string.json", json.dumps({**doc, "next_stage": {**nxt, "stage": "2; rm -rf /"}}))
    # Profiles: a real one (the tree's own --calibrate writeup), then damaged copies.
    _fixture_step(
        "profile fixture",
        [
            python,
            "-m",
            "specbench",
            "predict",
            "--calibrate",
            "writeup",
            "--save-profile",
            str(fx / "profiles/good.json"),
        ],
        tree,
        env,
        120,
    )
    good = json.loads((fx / "profiles/good.json").read_text(encoding="utf-8"))
    _write(fx / "profiles/garbled.json", '{"format": ')
    _write(fx / "profiles/list.json", "[]")
    _write(fx / "profiles/format.json", json.dumps({**good, "format": "something-else/9"}))
    for label, key, value in (
        ("overhead-negative", "overhead_s", -1),
        ("overhead-string", "overhead_s", "fast"),
        ("efficiency-nan", "bandwidth_efficiency", "NaN"),
        ("efficiency-huge", "compute_efficiency", 1e6),
    ):
        _write(fx / f"profiles/{label}.json", json.dumps({**good, "profile": {**good["profile"], key: value}}).replace('"NaN"', "NaN"))
    # Suites.
    case = {"name": "sql", "prompt_class": "structured", "text": "SELECT * FROM orders; "}
    other = {"name": "poem", "prompt_class": "open-ended", "text": "Once upon a time"}
    suites = {
        "good": {"name": "mine", "test_cases": [case]},
        "name-dotdot": {"name": "mine", "test_cases": [{**case, "name": "../x"}]},
        "class-unknown": {"name": "mine", "test_cases": [{**case, "prompt_class": "poetry"}]},
        "duplicate-names": {"name": "mine", "test_cases": [case, case]},
        "weights-overflow": {"name": "mine", "test_cases": [case, other], "class_weights": {"structured": 1e308, "open-ended": 1e308}},
        "weights-string": {"name": "mine", "test_cases": [case, other], "class_weights": {"structured": "3", "open-ended": 1}},
        "weights-negative": {"name": "mine", "test_cases": [case, other], "class_weights": {"structured": -1, "open-ended": 1}},
        "weights-bool": {"name": "mine", "test_cases": [case, other], "class_weights": {"structured": True, "open-ended": 1}},
    }
    for label, suite in suites.items():
        _write(fx / f"suites/{label}.json", json.dumps(suite))
    _write(fx / "suites/garbled.json", '{"name": "x", ')
    _write(fx / "suites/list.json", "[]")
    _write(fx / "suites/deep.json", '{"name": ' + "[" * 100000 + "]" * 100000 + "}")
    # llmperf directories.
    row = {"error_code": None, "error_msg": "", "ttft_s": 0.05, "end_to_end_latency_s": 1.0, "inter_token_latency_s": 0.01}
    row |= {
        "request_output_throughput_token_per_s": 100.0,
        "number_total_tokens": 164,
        "number_output_tokens": 100,
        "number_input_tokens": 64,
    }
    _write(fx / "llmperf/good/qwen_64_600_individual_responses.json", json.dumps([row, row]))
    _write(fx / "llmperf/good/qwen_64_600_summary.json", json.dumps({"timestamp": 1_795_000_000}))
    (fx / "llmperf/empty").mkdir(parents=True)
    _write(fx / "llmperf/garbled/qwen_64_600_individual_responses.json", "[{")
    _write(fx / "llmperf/rows/qwen_64_600_individual_responses.json", json.dumps([1, "x", None]))
    # Stored runs of the emulator: multi-level with and without settings, one level, other settings.
    ports = tuple(free_ports(2))
    emulator = subprocess.Popen(  # noqa: S603 - the tree's own emulator on loopback
        ["nice", "-n", "10", python, "-m", "specbench", "emulate", "--baseline-port", str(ports[0]), "--speculative-port", str(ports[1]),
         "--time-scale", "0.01"],
        cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        for port in ports:
            wait_ready(f"http://127.0.0.1:{port}")
        endpoints = ["--endpoint", f"qwen-vllm=http://127.0.0.1:{ports[0]}", "--endpoint", f"qwen-sd-vllm=http://127.0.0.1:{ports[1]}"]
        common = [
            "--test-case",
            "counting",
            "--test-case",
            "cat-on-mat",
            "--requests",
            "6",
            "--output-tokens",
            "24",
            "--no-publish",
            "--no-progress",
        ]
        for run_id, extra in (
            ("ml", ["--concurrency", "1", "--concurrency", "4", "--settings", str(fx / "settings/good.json")]),
            ("ml-nosettings", ["--concurrency", "1", "--concurrency", "4"]),
            ("one", ["--concurrency", "1", "--settings", str(fx / "settings/good.json")]),
            ("tp16", ["--concurrency", "1", "--concurrency", "4", "--settings", str(fx / "settings/tp16.json")]),
        ):
            _fixture_step(
                f"emulated run {run_id}",
                [
                    python,
                    "-m",
                    "specbench",
                    "run",
                    *endpoints,
                    *common,
                    *extra,
                    "--results",
                    str(runs),
                    "--run-id",
                    run_id,
                ],
                tree,
                env,
                300,
            )
            log(f"fixture run {run_id} stored")
    except BaseException:
        os.killpg(emulator.pid, 15)
        raise
    build_fixtures.emulator = emulator  # type: ignore[attr-defined]
    return ports  # type: ignore[return-value]


# --- running -----------------------------------------------------------------------------------------


def offline_env() -> dict[str, str]:
    """The environment of every case: no AWS reachable (a closed loopback port, no retries), no
    bytecode written into the tree, matplotlib headless."""
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER")}
    return {
        **keep,
        "PYTHONDONTWRITEBYTECODE": "1",
        "MPLBACKEND": "Agg",
        "AWS_ACCESS_KEY_ID": "adversarial",
        "AWS_SECRET_ACCESS_KEY": "adversarial",
        "AWS_REGION": "us-east-2",
        "AWS_DEFAULT_REGION": "us-east-2",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        "AWS_MAX_ATTEMPTS": "1",
        "AWS_EC2_METADATA_DISABLED": "true",
        "NO_PROXY": "*",
    }


def run_case(case: Case, tree: Path, python: str, env: dict[str, str], timeout_s: float) -> Outcome:
    if case.copy:
        src, dst = case.copy
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(src, dst)
    for pre in case.pre:
        subprocess.run(["nice", "-n", "10", python, *pre], cwd=tree, env=env, capture_output=True, timeout=timeout_s * 3, check=False)
    proc = subprocess.Popen(  # noqa: S603
        ["nice", "-n", "10", python, *case.argv],
        cwd=tree,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(case.stdin, timeout=max(timeout_s, case.timeout_s))
        return Outcome(proc.returncode, stdout, stderr)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)  # the case's own process group, started above
        stdout, stderr = proc.communicate()
        return Outcome(None, stdout, stderr)


# Issue 33's classes of cause, by case id (first match): the unclean list is printed grouped by them.
CAUSES = (
    ("stage-job input not the CronJob's Job, or a bad stage document", r"^sweep-stage-job:"),
    ("a staged sweep re-decided with other settings", r"than-stage-1$"),
    ("recorded settings (run, profile) differ from the local ones, or are missing", r"other-deployment|vs-local|without-settings"),
    ("sweep points not checked (foreign, mismatched, unconfigured, incomplete, duplicated)", r":point-|foreign"),
    (
        "unsafe ids (paths, keys, Job names)",
        r"(sweep-id|run-id|point-id|variant-name|variant|test-case|endpoint-name|from-sweep)-(dotdot|slash|absolute|space|empty|dot|long|upper|newline|dotdot-bare)|unsafe",
    ),
    ("a named source that does not exist or is damaged", r"missing|garbled|list|norecords|no-records|a-file|empty|is-file|to-dir|deep"),
    ("cost inputs (price, servers per node, class weights)", r"price|servers|class-weights|weights-"),
    ("one-load calibration, multi-level runs pooled", r"one-load|multi-level"),
)


def cause_of(case_id: str) -> str:
    return next((cause for cause, pattern in CAUSES if re.search(pattern, case_id)), "other values of a flag or setting")


def table(rows: Sequence[dict]) -> str:
    """Per command: tried, clean, unclean and the unclean by kind."""
    commands = list(dict.fromkeys(r["command"] for r in rows))
    head = ["command", "tried", "clean", "unclean", *KINDS]
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    totals: Counter[str] = Counter()
    for command in [*commands, "total"]:
        mine = rows if command == "total" else [r for r in rows if r["command"] == command]
        count = Counter(r["result"] for r in mine)
        cells = [command, len(mine), count[CLEAN], len(mine) - count[CLEAN], *(count[k] for k in KINDS)]
        lines.append(" | ".join(str(c) for c in cells))
        totals.update(count)
    return "\n".join(f"| {line} |" for line in lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", required=True, help="the checkout to measure (cases run with cwd=TREE)")
    parser.add_argument("--python", default="", help="its interpreter (default: TREE/.venv/bin/python, else this one)")
    parser.add_argument("--json", default="", help="also write every case's result here")
    parser.add_argument("--only", default="", help="run only the cases whose id contains this")
    parser.add_argument("--jobs", type=int, default=2, help="cases in parallel (default: 2; the machine is shared)")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds per case before it counts as a hang")
    parser.add_argument("--keep", action="store_true", help="keep the fixture folder")
    args = parser.parse_args(argv)
    tree = Path(args.tree).resolve()
    python = args.python or (str(tree / ".venv/bin/python") if (tree / ".venv/bin/python").exists() else sys.executable)
    env = offline_env()
    work = Path(tempfile.mkdtemp(prefix="adversarial-"))
    fx = work / "fx"
    started = time.monotonic()
    ports = build_fixtures(tree, python, fx, env, lambda m: print(m, file=sys.stderr, flush=True))
    print(f"fixtures in {fx} ({time.monotonic() - started:.0f} s)", file=sys.stderr, flush=True)
    try:
        every = cases(fx, ports)
        chosen = {c.id for c in every if args.only in c.id}
        todo = [c for c in every if c.id in chosen or any(d.control == c.id for d in every if d.id in chosen)]
        ids = [c.id for c in todo]
        assert len(ids) == len(set(ids)), [i for i, n in Counter(ids).items() if n > 1]
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            outcomes = list(pool.map(lambda c: run_case(c, tree, python, env, args.timeout), todo))
    finally:
        os.killpg(build_fixtures.emulator.pid, 15)  # type: ignore[attr-defined]
        build_fixtures.emulator.wait(10)  # type: ignore[attr-defined]
    rows = []
    answered = {case.id: outcome for case, outcome in zip(todo, outcomes, strict=True)}
    for case, outcome in zip(todo, outcomes, strict=True):
        result = classify(case.expect, outcome, answered.get(case.control))
        rows.append({
            "id": case.id, "command": case.command, "expect": asdict(case.expect), "result": result,
            "returncode": outcome.returncode, "first_line": first_line(outcome),
            "stdout": outcome.stdout[-20000:], "stderr": outcome.stderr[-20000:],
        })  # fmt: skip
    print(f"tree {tree}: {len(rows)} cases in {time.monotonic() - started:.0f} s\n")
    print(table(rows))
    unclean = [r for r in rows if r["result"] != CLEAN]
    if unclean:
        print("\nunclean, by cause:")
        for cause in [*dict.fromkeys(cause_of(r["id"]) for r in unclean)]:
            print(f"- {cause}:")
            for r in (r for r in unclean if cause_of(r["id"]) == cause):
                print(f"  {r['result']:<15} {r['id']:<48} exit {r['returncode']}: {r['first_line']}")
    if args.json:
        Path(args.json).write_text(json.dumps({"tree": str(tree), "cases": rows}, indent=1) + "\n", encoding="utf-8")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"\nfixtures kept in {fx}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
