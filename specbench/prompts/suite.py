"""Test suites are data: named test cases, each a text repeated to fill the prompt and tagged with
its prompt class. The eight reference test cases ship as the default suite; users pass their own
JSON file, validated here with errors that name the field and the allowed values.

Suite file format::

    {"test_cases": [
        {"name": "counting", "prompt_class": "structured", "text": "counting numbers from 1 "},
        ...
    ]}

A suite may also draw real prompts from pinned dataset files (specbench.prompts.datasets)::

    {"seed": 1,
     "datasets": {"spec-bench": {"github": "hemingkx/Spec-Bench", "revision": "<40-hex commit>", "path": "...",
                                 "sha256": "<64 hex>", "licence": "Apache-2.0", "id_field": "question_id",
                                 "turns_field": "turns", "category_field": "category"}},
     "test_cases": [{"name": "translation", "prompt_class": "translation", "dataset": "spec-bench",
                     "categories": ["translation"], "sample": 8, "max_tokens": 128}]}

A dataset test case sends its sampled prompts in turn (request i the (i mod sample)-th), through the
chat API; ``template`` (with ``{prompt}``) wraps each prompt's last user message, ``max_tokens``
overrides the run's output length for that case.
"""

from __future__ import annotations

import json
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from specbench.jsonfile import JsonFileError, read_json_file
from specbench.names import allowed, echo, name_problem
from specbench.prompts import datasets

STRUCTURED = "structured"
OPEN_ENDED = "open-ended"
# Spec-Bench's six classes (Xia et al. 2024), then code and structured output (JSON).
DATASET_CLASSES = ("multi-turn", "translation", "summarization", "qa", "math-reasoning", "rag", "code", "json")
PROMPT_CLASSES = (STRUCTURED, OPEN_ENDED, *DATASET_CLASSES)
CASE_FIELDS = ("name", "prompt_class", "text", "dataset", "categories", "sample", "max_tokens", "template")
MAX_CASE_NAME = 64  # a test case's name: a CloudWatch dimension and a file name (specbench/names.py)
# A class weight is relative (the mix is normalised), so this bound loses nothing and keeps every sum
# of weights, and every weight times a cost, finite (1e308 + 1e308 is inf; float(10**400) raises).
MAX_CLASS_WEIGHT = 1e6


class SuiteError(ValueError):
    """A suite file that cannot be used; the message names the field and what is allowed."""


@dataclass(frozen=True)
class TestCase:
    name: str
    prompt_class: str
    text: str = ""
    dataset: str = ""  # a key of the suite's datasets; "" for a text case
    categories: tuple[str, ...] = ()
    sample: int = 0
    max_tokens: int | None = None  # this case's output length; None: the run's
    template: str = ""
    items: tuple[datasets.PromptItem, ...] = ()  # the sampled prompts, once the suite is materialized

    __test__ = False  # not a pytest class

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "prompt_class": self.prompt_class}
        if not self.dataset:
            return {**data, "text": self.text, **({"max_tokens": self.max_tokens} if self.max_tokens else {})}
        data.update(dataset=self.dataset, categories=list(self.categories), sample=self.sample, max_tokens=self.max_tokens)
        if self.template:
            data["template"] = self.template
        return {**data, "sampled_ids": [item.id for item in self.items]} if self.items else data

    def messages(self, index: int) -> tuple[dict[str, str], ...]:
        """The chat messages of request ``index``: the sampled prompts in turn, the template applied."""
        item = self.items[index % len(self.items)]
        messages = [dict(m) for m in item.messages]
        if self.template:
            messages[-1]["content"] = self.template.replace("{prompt}", messages[-1]["content"])
        return tuple(messages)


@dataclass(frozen=True)
class Suite:
    name: str
    test_cases: tuple[TestCase, ...]
    sources: tuple[datasets.DatasetSource, ...] = ()
    seed: int = 0
    base_dir: str = field(default="", compare=False)  # where relative dataset paths are resolved: the suite file's directory
    # The traffic mix a staged sweep optimises (prompt class -> weight >= 0; sweep.class_weights overrides it).
    class_weights: tuple[tuple[str, float], ...] = ()

    def select(self, names: list[str]) -> Suite:
        """The named test cases only, in suite order; unknown names are an error listing the known ones."""
        if not names:
            return self
        known = [case.name for case in self.test_cases]
        unknown = sorted(set(names) - set(known))
        if unknown:
            raise SuiteError(f"test case {', '.join(unknown)} not in suite {self.name!r}; allowed: {', '.join(known)}")
        kept = tuple(case for case in self.test_cases if case.name in names)
        used = {case.dataset for case in kept}
        return replace(self, test_cases=kept, sources=tuple(s for s in self.sources if s.name in used))

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "test_cases": [case.to_dict() for case in self.test_cases]}
        if self.sources:
            # The sources as the suite file gives them (source, revision, sha256, licence, fields): run.json
            # records them, and the chart's copy of the suite parses back to the same suite.
            data["seed"] = self.seed
            data["datasets"] = {s.name: s.definition() for s in self.sources}
        if self.class_weights:
            data["class_weights"] = dict(self.class_weights)
        return data

    def materialize(self, cache: datasets.Cache | None = None, hub_endpoint: str | None = None) -> Suite:
        """Fetch every dataset source (checked, cached) and draw each dataset case's sample; a text
        suite is returned as it is. DatasetError before any traffic when a source is unusable."""
        if not self.sources:
            return self
        loaded = datasets.load_sources(
            {s.name: s for s in self.sources}, cache, Path(self.base_dir) if self.base_dir else None, hub_endpoint
        )
        cases = tuple(
            replace(case, items=tuple(datasets.sample(loaded[case.dataset], case.categories, case.sample, self.seed, case.name)))
            if case.dataset
            else case
            for case in self.test_cases
        )
        return replace(self, test_cases=cases)


def parse_suite(data: Any, source: str = "suite", base_dir: str = "") -> Suite:
    """A Suite from decoded JSON, or SuiteError naming the offending field."""
    if not isinstance(data, dict) or not isinstance(data.get("test_cases"), list) or not data["test_cases"]:
        raise SuiteError(f"{source}: expected an object with a non-empty list 'test_cases'")
    unknown_top = sorted(set(data) - {"name", "test_cases", "datasets", "seed", "class_weights"})
    if unknown_top:
        raise SuiteError(f"{source}: unknown field {', '.join(unknown_top)}; allowed: name, test_cases, datasets, seed, class_weights")
    raw_sources = data.get("datasets", {})
    if not isinstance(raw_sources, dict):
        raise SuiteError(f"{source}.datasets: expected an object of named dataset sources")
    try:
        sources = tuple(datasets.parse_source(key, value, source) for key, value in raw_sources.items())
    except datasets.DatasetError as error:
        raise SuiteError(str(error)) from None
    seed = data.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise SuiteError(f"{source}.seed: {seed!r} must be an integer")
    cases: list[TestCase] = []
    for index, item in enumerate(data["test_cases"]):
        case = _parse_case(item, f"{source}: test_cases[{index}]", {s.name for s in sources})
        if any(other.name == case.name for other in cases):
            raise SuiteError(f"{source}: test_cases[{index}].name: {case.name!r} is used twice; test case names must be unique")
        cases.append(case)
    name = data.get("name", Path(source).stem)
    if not isinstance(name, str) or not name:
        raise SuiteError(f"{source}: name must be a non-empty string")
    return Suite(
        name, tuple(cases), sources, seed, base_dir, _class_weights(data.get("class_weights", {}), source, {c.prompt_class for c in cases})
    )


def echo_weight(weight: Any) -> str:
    """A weight as the error shows it: a huge integer's repr is thousands of digits."""
    text = repr(weight)
    return text if len(text) <= 30 else f"{text[:27]}..."


def _class_weights(raw: Any, source: str, classes: set[str]) -> tuple[tuple[str, float], ...]:
    """``class_weights``: an object of the suite's prompt classes -> weights >= 0, one of them > 0."""
    where = f"{source}.class_weights"
    if not isinstance(raw, dict):
        raise SuiteError(f"{where}: expected an object of prompt class -> weight")
    for cls, weight in raw.items():
        if cls not in classes:
            raise SuiteError(f"{where}: {cls!r} is not a prompt class of the suite; allowed: {', '.join(sorted(classes))}")
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 <= weight <= MAX_CLASS_WEIGHT:
            raise SuiteError(f"{where}.{cls}: {echo_weight(weight)} must be a number >= 0 and at most {MAX_CLASS_WEIGHT:g}")
    if raw and not any(w > 0 for w in raw.values()):
        raise SuiteError(f"{where}: every weight is 0; at least one class needs a weight > 0")
    return tuple((cls, float(w)) for cls, w in raw.items())


def _parse_case(item: Any, where: str, sources: set[str]) -> TestCase:
    if not isinstance(item, dict):
        raise SuiteError(f"{where}: expected an object with name, prompt_class, text (or dataset)")
    unknown = sorted(set(item) - set(CASE_FIELDS))
    if unknown:
        raise SuiteError(f"{where}: unknown field {', '.join(unknown)}; allowed: {', '.join(CASE_FIELDS)}")
    name, prompt_class, text = item.get("name"), item.get("prompt_class"), item.get("text")
    problem = name_problem(name, MAX_CASE_NAME)
    if problem:
        raise SuiteError(f"{where}.name: {echo(name)} must be {allowed(MAX_CASE_NAME)} (it {problem})")
    if prompt_class not in PROMPT_CLASSES:
        raise SuiteError(f"{where}.prompt_class: {prompt_class!r} is not allowed; allowed: {', '.join(PROMPT_CLASSES)}")
    max_tokens = item.get("max_tokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1):
        raise SuiteError(f"{where}.max_tokens: {max_tokens!r} must be an integer >= 1")
    dataset = item.get("dataset")
    if dataset is None:
        extra = sorted(set(item) & {"categories", "sample", "template"})
        if extra:
            raise SuiteError(f"{where}: {', '.join(extra)} need a dataset")
        if not isinstance(text, str) or not text.strip():
            raise SuiteError(f"{where}.text: must be a non-empty string")
        return TestCase(name, prompt_class, text, max_tokens=max_tokens)
    if text is not None:
        raise SuiteError(f"{where}: give text or dataset, not both")
    if dataset not in sources:
        raise SuiteError(
            f"{where}.dataset: {dataset!r} is not a key of the suite's datasets; allowed: {', '.join(sorted(sources)) or 'none'}"
        )
    categories = item.get("categories", [])
    if not isinstance(categories, list) or not all(isinstance(c, str) and c for c in categories):
        raise SuiteError(f"{where}.categories: must be a list of non-empty strings")
    size = item.get("sample")
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise SuiteError(f"{where}.sample: {size!r} must be an integer >= 1 (prompts drawn from the dataset)")
    template = item.get("template", "")
    if not isinstance(template, str) or (template and "{prompt}" not in template):
        raise SuiteError(f"{where}.template: must be a string containing {{prompt}}")
    return TestCase(name, prompt_class, "", dataset, tuple(categories), size, max_tokens, template)


def builtin_suite(name: str) -> Suite:
    """A suite shipped in specbench/prompts/suites/ (read through the package loader: works from the zip too)."""
    try:
        data = pkgutil.get_data("specbench.prompts", f"suites/{name}.json")
    except OSError:
        data = None
    if data is None:
        raise SuiteError(f"built-in suite {name!r} not found; shipped: reference, rehearsal, classes, classes-offline")
    return parse_suite(json.loads(data), f"specbench/prompts/suites/{name}.json")


# The reference run's eight test cases (../shared/REFERENCE.md section 2), each tagged by class;
# "shakespeare" is the opening of llmperf's default text (its bundled sonnets).
DEFAULT_SUITE = builtin_suite("reference")


BUILTIN_PREFIX = "builtin:"  # builtin:NAME names a suite shipped with specbench (e.g. builtin:classes-offline)


def load_suite(path: str | Path | None) -> Suite:
    """The default suite for None or "", a shipped one for builtin:NAME, else the validated suite in a JSON file."""
    if not path:
        return DEFAULT_SUITE
    if str(path).startswith(BUILTIN_PREFIX):
        return builtin_suite(str(path)[len(BUILTIN_PREFIX) :])
    try:
        data = read_json_file(path)
    except JsonFileError as error:
        raise SuiteError(f"suite file {path} {error}") from None
    return parse_suite(data, str(path), str(Path(path).parent))


# llmperf's prompt opening (utils.randomly_sample_sonnet_lines_prompt); the reference run swapped only
# the text after it, so keeping it makes the traffic the same as the reference's.
LLMPERF_PREAMBLE = "Randomly stream lines from the following text with {output_tokens} output tokens. Don't generate eos tokens:\n\n"


def fill_prompt(text: str, target_tokens: int, count_tokens: Callable[[str], int], preamble: str = "") -> tuple[str, int]:
    """``preamble`` then the longest prefix of ``text`` repeated with at most ``target_tokens`` tokens in all.

    Binary search over characters: about log2(len) tokenizer calls, so a remote tokenizer
    (vLLM's /tokenize, the served model's own) is affordable. Returns the prompt and its count.
    """
    if target_tokens < 1:
        raise ValueError("target_tokens must be at least 1")
    # Tokens are at least one character, so target_tokens + 1 repetitions always overshoot.
    long_text = preamble + text * (target_tokens + 1)
    low, high = len(preamble) + 1, min(len(long_text), len(preamble) + target_tokens * 64)
    best = (long_text[:low], count_tokens(long_text[:low]))
    while low <= high:
        middle = (low + high) // 2
        count = count_tokens(long_text[:middle])
        if count <= target_tokens:
            best = (long_text[:middle], count)
            low = middle + 1
        else:
            high = middle - 1
    return best
