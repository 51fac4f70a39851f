"""Mutation testing of the measurement math and the configuration rules (`make mutation`).

For each module in scripts/mutation.toml (or those named on the command line): copy the work tree to
a temporary folder (mutmut 2 edits the file it mutates in place; the work tree is never touched), run
mutmut there against the module's own fast tests, and print its score: killed (and timed-out)
mutants over all mutants less the equivalent ones allow-listed in scripts/mutation.toml. Surviving
mutants not on the list are printed as diffs. Exit 1 when a module is below its minimum.

mutmut 2 rather than 3: 3.x mutates only inside functions (not the rules' module-level patterns
and limits), takes one configuration for the whole project from pyproject.toml and forks as many
workers as there are cores; 2.x takes the module and the test command on its command line, one
mutant at a time.

Runs at the lowest CPU priority (nice 19), one mutant at a time, with hypothesis derandomized (its
"ci" profile, as in CI), so a kill is reproducible.

    python scripts/mutation.py [--keep] [module ...]
    python scripts/mutation.py --reuse /tmp/mutation-XXXX module   # after adding tests: the kept
        copy's cache keeps the killed mutants killed and tests the others again
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "scripts" / "mutation.toml"
STAGE_TIMEOUT_S = 60  # one pytest run of a stage; the slowest takes about 10 s on a busy machine


@dataclass
class Score:
    module: str
    minimum: float
    killed: int = 0
    equivalent: int = 0
    annotations: int = 0  # mutants of annotations only, or not Python at all: set aside
    survivors: list[str] = field(default_factory=list)  # diffs of surviving mutants not allow-listed
    seconds: float = 0.0

    @property
    def counted(self) -> int:
        return self.killed + len(self.survivors)

    @property
    def percent(self) -> float:
        return 100.0 * self.killed / self.counted if self.counted else 100.0


def changed_lines(diff: str) -> tuple[str, str]:
    """The original and mutated line of a one-line unified diff, stripped."""
    removed = [line[1:].strip() for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    added = [line[1:].strip() for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    return "\n".join(removed), "\n".join(added)


def _without_annotations(tree: ast.AST) -> str:
    for node in ast.walk(tree):
        if isinstance(node, ast.arg):
            node.annotation = None
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            node.returns = None
        elif isinstance(node, ast.AnnAssign):
            node.annotation = ast.Constant(None)
    return ast.dump(tree)


def annotation_only(source: str, diff: str, line_number: int) -> bool:
    """Whether a mutant changes nothing but annotations (``float | None`` to ``float & None``): with
    ``from __future__ import annotations`` they are never evaluated, so no test can see them."""
    lines = source.splitlines()
    removed = [line[1:] for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    added = [line[1:] for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    if "from __future__ import annotations" not in source or len(removed) != 1 or len(added) != 1:
        return False
    if not 0 < line_number <= len(lines) or lines[line_number - 1] != removed[0]:
        return False
    mutated = "\n".join([*lines[: line_number - 1], added[0], *lines[line_number:]])
    try:
        return _without_annotations(ast.parse(source)) == _without_annotations(ast.parse(mutated))
    except SyntaxError:  # not Python (``{**a}`` to ``{*a}``): the runner exits 0 before any test (run_module)
        return True


def equivalents(table: dict, module: str) -> set[tuple[str, str]]:
    return {(entry["original"], entry["mutant"]) for entry in table.get("equivalent", []) if entry["module"] == module}


def copy_tree(destination: Path) -> None:
    """The tracked and new (not ignored) files of the work tree, as they are now."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT, check=True, capture_output=True
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file() and not source.is_symlink():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def run_module(module: str, target: dict, table: dict, keep: bool, reuse: Path | None = None) -> Score:
    score = Score(module, float(target["minimum"]))
    started = time.monotonic()
    work = reuse or Path(tempfile.mkdtemp(prefix="mutation-"))
    keep = keep or reuse is not None
    try:
        copy_tree(work)
        # mutmut 2 counts a mutant killed only on exit status 1 (mutmut/__init__.py, tests_pass:
        # `returncode != 1`), so a mutant that breaks the import (pytest's 2, a collection error) or
        # hits the stage timeout (124) would count as survived: any failure exits 1. A mutant that is
        # not Python exits 0 before any test, to be set aside with the annotation-only ones.
        parses = shlex.join([sys.executable, "-c", "import ast, sys; ast.parse(open(sys.argv[1]).read())", module])
        stages = " && ".join(shlex.join(pytest_command(work, stage)) for stage in target["tests"])
        runner = shlex.join(["sh", "-c", f"{parses} 2>/dev/null || exit 0; {stages} || exit 1"])
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        mutmut = [sys.executable, "-m", "mutmut"]
        arguments = ["--paths-to-mutate", module, "--tests-dir", "tests", "--runner", runner, "--no-progress", "--simple-output"]
        run = subprocess.run([*mutmut, "run", *arguments], cwd=work, env=env, capture_output=True, text=True)
        if run.returncode & 1:
            raise SystemExit(f"{module}: mutmut failed (exit {run.returncode}):\n{run.stdout[-3000:]}{run.stderr[-3000:]}")
        report = junit_report(mutmut, work, env)
        # mutmut 2.5.1 queues only mutants whose cached status is "untested", and reads those statuses
        # keyed by the line's text alone (mutmut/cache.py, get_cached_mutation_statuses:
        # `line_obj_by_line[mutation_id.line]`): a mutant on a line repeating an earlier one (a second
        # `@dataclass(frozen=True)`) takes the first one's status and is never run, left untested (or
        # survived from a run against older tests). `mutmut run <id>` looks its mutant up by text and
        # line number (cached_mutation_status): it runs it when its result is missing or stale and
        # skips one already tested against these tests.
        unsettled = unsettled_ids(report)
        for mutant_id in unsettled:
            single = subprocess.run([*mutmut, "run", mutant_id, *arguments], cwd=work, env=env, capture_output=True, text=True)
            if single.returncode & 1:
                raise SystemExit(f"{module}: mutmut failed on mutant {mutant_id} (exit {single.returncode}):\n{single.stdout[-3000:]}")
        if unsettled:
            report = junit_report(mutmut, work, env)
        allowed = equivalents(table, module)
        source = (work / module).read_text()
        for case in ElementTree.fromstring(report).iter("testcase"):
            survived = case.find("failure")
            if survived is None:  # killed, timed out (an error element) or suspicious (slow but killed)
                score.killed += 1
            elif annotation_only(source, survived.text or "", int(case.get("line", "0"))):
                score.annotations += 1
            elif changed_lines(survived.text or "") in allowed:
                score.equivalent += 1
            else:
                score.survivors.append(survived.text or "")
    finally:
        if keep:
            print(f"{module}: work copy kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    score.seconds = time.monotonic() - started
    return score


def junit_report(mutmut: list[str], work: Path, env: dict[str, str]) -> str:
    """Every mutant as a JUnit test case; survived and untested ones carry a failure element whose
    message is the status (mutmut/cache.py, create_junitxml_report)."""
    command = [*mutmut, "junitxml", "--suspicious-policy", "ignore", "--untested-policy", "failure"]
    return subprocess.run(command, cwd=work, env=env, check=True, capture_output=True, text=True).stdout


def unsettled_ids(report: str) -> list[str]:
    """The ids of the mutants the report gives as untested or survived (test cases named
    ``Mutant #<id>``): the ones to run again by id."""
    ids = []
    for case in ElementTree.fromstring(report).iter("testcase"):
        failure = case.find("failure")
        if failure is not None and failure.get("message") in ("untested", "bad_survived"):
            ids.append(case.get("name", "").removeprefix("Mutant #"))
    return [i for i in ids if i.isdigit()]


def pytest_command(work: Path, stage: list[str]) -> list[str]:
    """One pytest run of a stage. Importing hypothesis costs more than most test files: a stage whose
    files do not use it runs without its plugin; one that does gets hypothesis's own "ci" profile
    (derandomize=True, what it loads when CI is set), so a kill is reproducible:
    https://github.com/HypothesisWorks/hypothesis/blob/master/hypothesis-python/src/hypothesis/_settings.py"""
    files = [work / argument.split("::")[0] for argument in stage if argument.startswith("tests/")]
    uses_hypothesis = any(re.search(r"^(from|import) hypothesis\b", path.read_text(), re.MULTILINE) for path in files)
    plugin = ["--hypothesis-profile=ci"] if uses_hypothesis else ["-p", "no:hypothesispytest"]
    # mutmut's own timeout (10x the unmutated run) kills the shell, not this pytest: a mutant that
    # loops forever (max_azs never stopping) would keep a core busy, so each run has its own limit.
    limit = ["timeout", "--kill-after=5", str(STAGE_TIMEOUT_S)]
    return [*limit, sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *plugin, *stage]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help="modules of scripts/mutation.toml to run (default: all)")
    parser.add_argument("--keep", action="store_true", help="keep each work copy (to inspect with `mutmut show`)")
    parser.add_argument("--reuse", type=Path, help="a work copy kept by --keep, of the one module named: test again only its survivors")
    args = parser.parse_args(argv)
    table = tomllib.loads(TABLE.read_text())
    targets = table["targets"]
    unknown = [module for module in args.modules if module not in targets]
    if unknown:
        parser.error(f"not in scripts/mutation.toml: {', '.join(unknown)}; allowed: {', '.join(targets)}")
    if args.reuse and len(args.modules) != 1:
        parser.error("--reuse takes the one module its work copy was made for")
    os.nice(19)  # the machine's other work (timing measurements) comes first
    scores = []
    for module in args.modules or list(targets):
        score = run_module(module, targets[module], table, args.keep, args.reuse)
        scores.append(score)
        for diff in score.survivors:
            print(diff)
        print(_line(score), flush=True)
    print("\nmodule                        score  killed  survived  equivalent  annotations  minimum  time")
    for score in scores:
        print(_line(score))
    return 0 if all(score.percent >= score.minimum for score in scores) else 1


def _line(score: Score) -> str:
    return (
        f"{score.module:<28} {score.percent:5.1f}%  {score.killed:6d}  {len(score.survivors):8d}  {score.equivalent:10d}"
        f"  {score.annotations:11d}  {score.minimum:6.0f}%  {score.seconds:4.0f} s"
    )


if __name__ == "__main__":
    sys.exit(main())
