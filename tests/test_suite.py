"""Test suites are data: the reference suite ships, user suites are validated with clear errors."""

import json
import re

import pytest

from config.errors import echo
from specbench.prompts.suite import DEFAULT_SUITE, LLMPERF_PREAMBLE, OPEN_ENDED, STRUCTURED, SuiteError, fill_prompt, load_suite


def words(text):
    return len(re.findall(r"\w+|[^\w\s]", text))


def test_default_suite_is_the_eight_reference_cases_tagged_by_class():
    assert len(DEFAULT_SUITE.test_cases) == 8
    classes = {case.name: case.prompt_class for case in DEFAULT_SUITE.test_cases}
    assert classes["json"] == STRUCTURED and classes["counting"] == STRUCTURED
    assert classes["shakespeare"] == OPEN_ENDED and classes["python-skeleton"] == OPEN_ENDED and classes["cat-on-mat"] == OPEN_ENDED
    assert load_suite("") is DEFAULT_SUITE


def test_user_suite_loads_and_selects(tmp_path):
    path = tmp_path / "mine.json"
    path.write_text(
        json.dumps(
            {
                "test_cases": [
                    {"name": "sql", "prompt_class": "structured", "text": "SELECT * FROM t; "},
                    {"name": "poem", "prompt_class": "open-ended", "text": "Write a poem "},
                ]
            }
        )
    )
    suite = load_suite(path)
    assert suite.name == "mine" and [c.name for c in suite.select(["poem"]).test_cases] == ["poem"]
    with pytest.raises(SuiteError, match="test case nope not in suite 'mine'; allowed: sql, poem"):
        suite.select(["nope"])


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"test_cases": []}, "non-empty list 'test_cases'"),
        (
            {"test_cases": [{"name": "a", "prompt_class": "creative", "text": "x"}]},
            r"test_cases\[0\].prompt_class: 'creative' is not allowed; allowed: structured, open-ended",
        ),
        ({"test_cases": [{"name": "a b", "prompt_class": "structured", "text": "x"}]}, r"test_cases\[0\].name: 'a b' must be"),
        ({"test_cases": [{"name": "a", "prompt_class": "structured", "text": "  "}]}, r"test_cases\[0\].text: must be a non-empty string"),
        (
            {"test_cases": [{"name": "a", "prompt_class": "structured", "text": "x", "temp": 1}]},
            "unknown field temp; allowed: name, prompt_class, text",
        ),
        ({"test_cases": [{"name": "a", "prompt_class": "structured", "text": "x"}] * 2}, r"test_cases\[1\].name: 'a' is used twice"),
        ({"cases": []}, "non-empty list 'test_cases'"),
    ],
)
def test_bad_suites_name_the_field_and_allowed_values(tmp_path, data, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SuiteError, match=message):
        load_suite(path)


def test_missing_and_non_json_files(tmp_path):
    with pytest.raises(SuiteError, match="does not exist"):
        load_suite(tmp_path / "none.json")
    (tmp_path / "x.json").write_text("{nope")
    with pytest.raises(SuiteError, match="not valid JSON"):
        load_suite(tmp_path / "x.json")


@pytest.mark.parametrize("case", DEFAULT_SUITE.test_cases, ids=lambda c: c.name)
def test_prompts_fill_exactly_to_the_target_with_the_preamble(case):
    preamble = LLMPERF_PREAMBLE.format(output_tokens=600)
    prompt, count = fill_prompt(case.text, 64, words, preamble)
    assert prompt.startswith(preamble) and count == words(prompt) == 64
    assert case.text.strip().split()[0] in prompt[len(preamble) :]


def test_the_reference_suite_is_a_data_file_read_by_the_same_parser():
    from pathlib import Path

    assert load_suite(Path(__file__).parents[1] / "specbench" / "prompts" / "suites" / "reference.json") == DEFAULT_SUITE


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d, "is a directory; expected a JSON file"),
        (
            lambda d: (d / "bin.json").write_bytes(b"\x7fELF\x02\x01\xd0\xfe\x00") and d / "bin.json",
            "is not UTF-8 text; expected a JSON file",
        ),
    ],
    ids=["directory", "binary"],
)
def test_a_suite_that_is_not_a_text_file_is_one_line_on_every_path(tmp_path, capsys, make, message):
    """load_suite, the CLI (`specbench suite`, `run`) and synth (config validation) all say it in one line."""
    from config import ConfigError, load_config
    from specbench import cli

    path = make(tmp_path)
    with pytest.raises(SuiteError) as error:
        load_suite(path)
    assert str(error.value) == f"suite file {path} {message}"
    for command in (["suite", "--suite", str(path)], ["run", "--suite", str(path), "--no-publish", "--results", str(tmp_path / "r")]):
        assert cli.main(command) == cli.EXIT_USAGE
        captured = capsys.readouterr()
        assert captured.err == f"specbench: suite file {path} {message}\n"
    with pytest.raises(ConfigError) as problem:
        load_config({"benchmark.suite_file": str(path)}, {})
    assert f"benchmark.suite_file={echo(str(path))}: suite file {path} {message}; allowed: a JSON suite file" in str(problem.value)
    assert "Traceback" not in str(problem.value)
