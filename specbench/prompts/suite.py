"""Test suites are data: named test cases, each a text repeated to fill the prompt and tagged with
its prompt class. The eight reference test cases ship as the default suite; users pass their own
JSON file, validated here with errors that name the field and the allowed values.

Suite file format::

    {"test_cases": [
        {"name": "counting", "prompt_class": "structured", "text": "counting numbers from 1 "},
        ...
    ]}
"""

from __future__ import annotations

import json
import pkgutil
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from specbench.jsonfile import JsonFileError, read_json_file

STRUCTURED = "structured"
OPEN_ENDED = "open-ended"
PROMPT_CLASSES = (STRUCTURED, OPEN_ENDED)
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")  # fits a CloudWatch dimension and a file name


class SuiteError(ValueError):
    """A suite file that cannot be used; the message names the field and what is allowed."""


@dataclass(frozen=True)
class TestCase:
    name: str
    prompt_class: str
    text: str

    __test__ = False  # not a pytest class


@dataclass(frozen=True)
class Suite:
    name: str
    test_cases: tuple[TestCase, ...]

    def select(self, names: list[str]) -> Suite:
        """The named test cases only, in suite order; unknown names are an error listing the known ones."""
        if not names:
            return self
        known = [case.name for case in self.test_cases]
        unknown = sorted(set(names) - set(known))
        if unknown:
            raise SuiteError(f"test case {', '.join(unknown)} not in suite {self.name!r}; allowed: {', '.join(known)}")
        return Suite(self.name, tuple(case for case in self.test_cases if case.name in names))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "test_cases": [asdict(case) for case in self.test_cases]}


def parse_suite(data: Any, source: str = "suite") -> Suite:
    """A Suite from decoded JSON, or SuiteError naming the offending field."""
    if not isinstance(data, dict) or not isinstance(data.get("test_cases"), list) or not data["test_cases"]:
        raise SuiteError(f"{source}: expected an object with a non-empty list 'test_cases'")
    unknown_top = sorted(set(data) - {"name", "test_cases"})
    if unknown_top:
        raise SuiteError(f"{source}: unknown field {', '.join(unknown_top)}; allowed: name, test_cases")
    cases: list[TestCase] = []
    for index, item in enumerate(data["test_cases"]):
        where = f"{source}: test_cases[{index}]"
        if not isinstance(item, dict):
            raise SuiteError(f"{where}: expected an object with name, prompt_class, text")
        unknown = sorted(set(item) - {"name", "prompt_class", "text"})
        if unknown:
            raise SuiteError(f"{where}: unknown field {', '.join(unknown)}; allowed: name, prompt_class, text")
        name, prompt_class, text = item.get("name"), item.get("prompt_class"), item.get("text")
        if not isinstance(name, str) or not NAME_PATTERN.match(name):
            raise SuiteError(f"{where}.name: {name!r} must be 1-64 characters of letters, digits, '_', '.', '-', starting alphanumeric")
        if prompt_class not in PROMPT_CLASSES:
            raise SuiteError(f"{where}.prompt_class: {prompt_class!r} is not allowed; allowed: {', '.join(PROMPT_CLASSES)}")
        if not isinstance(text, str) or not text.strip():
            raise SuiteError(f"{where}.text: must be a non-empty string")
        if any(case.name == name for case in cases):
            raise SuiteError(f"{where}.name: {name!r} is used twice; test case names must be unique")
        cases.append(TestCase(name, prompt_class, text))
    name = data.get("name", Path(source).stem)
    if not isinstance(name, str) or not name:
        raise SuiteError(f"{source}: name must be a non-empty string")
    return Suite(name, tuple(cases))


def builtin_suite(name: str) -> Suite:
    """A suite shipped in specbench/prompts/suites/ (read through the package loader: works from the zip too)."""
    data = pkgutil.get_data(__package__ or "specbench.prompts", f"suites/{name}.json")
    if data is None:
        raise SuiteError(f"built-in suite {name!r} not found")
    return parse_suite(json.loads(data), f"specbench/prompts/suites/{name}.json")


# The reference run's eight test cases (../shared/REFERENCE.md section 2), each tagged by class;
# "shakespeare" is the opening of llmperf's default text (its bundled sonnets).
DEFAULT_SUITE = builtin_suite("reference")


def load_suite(path: str | Path | None) -> Suite:
    """The default suite for None or "", else the validated suite in a JSON file."""
    if not path:
        return DEFAULT_SUITE
    try:
        data = read_json_file(path)
    except JsonFileError as error:
        raise SuiteError(f"suite file {path} {error}") from None
    return parse_suite(data, str(path))


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
