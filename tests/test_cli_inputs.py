"""Bad command-line input, class by class (issue 22): each value gets one line naming the flag,
exit 2, and nothing is written. Tables, not examples: every value of a class is tried."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from specbench import cli
from tests.runs import wait_for

RUN = ["run", "--no-publish", "--no-progress", "--endpoint", "a=http://127.0.0.1:9", "--ready-timeout", "0.1", "--test-case", "nope"]


def _main(args: list[str]) -> int:
    try:
        return cli.main(args)
    except SystemExit as exit_:  # argparse's own (one-line) errors
        return int(exit_.code or 0)


def _one_line_naming(capsys, flag: str) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert flag in err, err
    return err


# Names become folders, S3 keys and CloudWatch dimensions (specbench/names.py).
BAD_NAMES = [
    "../../escaped-run",
    "a/b",
    "..",
    ".",
    "",
    "x" * 129,
    "run id",
    "run\n",
    "ｒｕｎ",  # fullwidth letters
    "run١",  # an Arabic-Indic digit
    "-rf",
    ".hidden",
    "a:b",
    "a\\b",
    "é",
    "run\t",
]


@pytest.mark.parametrize("value", BAD_NAMES, ids=range(len(BAD_NAMES)))
def test_a_bad_run_id_is_refused_and_writes_nothing(value, tmp_path, capsys):
    results = tmp_path / "deep" / "results"
    assert _main([*RUN, "--results", str(results), f"--run-id={value}"]) == cli.EXIT_USAGE
    _one_line_naming(capsys, "--run-id")
    assert list(tmp_path.rglob("*")) == []


BAD_ENDPOINT_NAMES = ["a/b", "..", "a b", "é", "x" * 129, "a:b", "q\n", ".x"]
BAD_ENDPOINT_URLS = [
    "http://127.0.0.1:0",
    "http://127.0.0.1:65536",
    "http://127.0.0.1:-1",
    "http://127.0.0.1:８０",
    "http://:80",
    "http://h:x",
]


@pytest.mark.parametrize("value", BAD_ENDPOINT_NAMES, ids=range(len(BAD_ENDPOINT_NAMES)))
def test_a_bad_endpoint_name_is_refused(value, tmp_path, capsys):
    assert _main([*RUN, "--results", str(tmp_path), f"--endpoint={value}=http://127.0.0.1:9"]) == cli.EXIT_USAGE
    _one_line_naming(capsys, "--endpoint")
    assert list(tmp_path.rglob("*")) == []


POINT = json.dumps({"point_id": "q-c4", "wave": 0, "variant": {"name": "q"}, "load": {"kind": "concurrency", "value": 4}})


@pytest.mark.parametrize("url", BAD_ENDPOINT_URLS, ids=range(len(BAD_ENDPOINT_URLS)))
def test_a_bad_endpoint_port_or_host_is_refused(url, tmp_path, capsys):
    assert _main([*RUN, "--results", str(tmp_path), f"--endpoint=b={url}"]) == cli.EXIT_USAGE
    _one_line_naming(capsys, "--endpoint")
    assert list(tmp_path.rglob("*")) == []


OTHER_NAMES = [
    (["import-llmperf", "dir", "--variant", "v", "--test-case", "t", "--run-id=../x"], "--run-id"),
    (["import-llmperf", "dir", "--variant=../x", "--test-case", "t", "--run-id", "r"], "--variant"),
    (["import-llmperf", "dir", "--variant", "v", "--test-case=a/b", "--run-id", "r"], "--test-case"),
    (["sweep-report", "--sweep-id=../x"], "--sweep-id"),
    (["report", ".."], ".."),
    (["report", "results/.."], "results/.."),
    (["publish", "results/.."], "results/.."),
    ([*RUN, "--sweep-id", "abc\n", "--sweep-point", POINT], "--sweep-id"),
    ([*RUN, "--sweep-id", "abc", "--sweep-point", POINT.replace('"name": "q"', '"name": "../q"')], "variant.name"),
]


@pytest.mark.parametrize(("args", "flag"), OTHER_NAMES, ids=range(len(OTHER_NAMES)))
def test_other_names_that_become_folders_are_refused(args, flag, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AWS_REGION", "us-east-2")
    assert _main([*args, "--results", str(tmp_path / "results")] if args[0] in ("import-llmperf", "sweep-report") else args) == 2
    _one_line_naming(capsys, flag)
    assert not (tmp_path / "x").exists() and not (tmp_path / "results").exists()


NON_FINITE = ["nan", "NaN", "inf", "-inf", "1e999", "５", "1_0", "0x10"]
BAD_FLOATS = (
    [("--request-timeout", v) for v in ["0", "-1", *NON_FINITE]]
    + [("--ready-timeout", v) for v in ["0", "-1", *NON_FINITE]]
    + [("--temperature", v) for v in ["-0.1", *NON_FINITE]]
    + [("--request-rate", v) for v in ["0", *NON_FINITE]]
)


@pytest.mark.parametrize(("flag", "value"), BAD_FLOATS, ids=[f"{f}={v}" for f, v in BAD_FLOATS])
def test_a_bad_number_of_run_is_one_line_at_parse(flag, value, tmp_path, capsys):
    assert _main([*RUN, "--results", str(tmp_path), f"{flag}={value}"]) == cli.EXIT_USAGE
    _one_line_naming(capsys, flag)
    assert list(tmp_path.rglob("*")) == []


BAD_INTS = (
    [("--requests", v) for v in ["５", "1.5", "1e3", "0", "-1", "٣"]]
    + [("--seed", v) for v in ["５", "1.0", "٣", "nan"]]
    + [("--concurrency", "٣"), ("--input-tokens", "１０"), ("--output-tokens", "６００")]
)


@pytest.mark.parametrize(("flag", "value"), BAD_INTS, ids=[f"{f}={v}" for f, v in BAD_INTS])
def test_a_bad_whole_number_of_run_is_one_line_at_parse(flag, value, tmp_path, capsys):
    assert _main([*RUN, "--results", str(tmp_path), f"{flag}={value}"]) == cli.EXIT_USAGE
    _one_line_naming(capsys, flag)


OTHER_NUMBERS = [
    (["report", "r", "--draft-cost-ratio=nan"], "--draft-cost-ratio"),
    (["report", "r", "--draft-cost-ratio=inf"], "--draft-cost-ratio"),
    (["sweep-report", "--sweep-id", "s", "--slo-ttft-ms=nan"], "--slo-ttft-ms"),
    (["sweep-report", "--sweep-id", "s", "--slo-tpot-ms=inf"], "--slo-tpot-ms"),
    (["sweep-report", "--sweep-id", "s", "--slo-ttft-ms=５"], "--slo-ttft-ms"),
    (["emulate", "--time-scale=nan"], "--time-scale"),
    (["emulate", "--time-scale=inf"], "--time-scale"),
    (["emulate", "--time-scale=0"], "--time-scale"),
    (["emulate", "--baseline-port=70000"], "--baseline-port"),
    (["emulate", "--baseline-port=65536"], "--baseline-port"),
    (["emulate", "--speculative-port=-1"], "--speculative-port"),
    (["emulate", "--speculative-port=８００１"], "--speculative-port"),
    (["emulate", "--draft-cost-ratio=nan"], "--draft-cost-ratio"),
    (["emulate", "--seed=５"], "--seed"),
]


@pytest.mark.parametrize(("args", "flag"), OTHER_NUMBERS, ids=range(len(OTHER_NUMBERS)))
def test_other_commands_numbers_are_one_line(args, flag, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    stop = __import__("threading").Event()
    stop.set()  # an emulator that got this far would stop at once
    if args[0] == "emulate":
        from specbench.emulator.server import main_emulate

        try:
            code = main_emulate(args[1:], stop)
        except SystemExit as exit_:
            code = int(exit_.code or 0)
    else:
        code = _main(args)
    assert code == 2
    _one_line_naming(capsys, flag)


def test_a_run_id_that_already_holds_a_run_is_refused_naming_it(tmp_path, capsys):
    folder = tmp_path / "r1"
    (folder / "records").mkdir(parents=True)
    (folder / "records" / "json.jsonl").write_text("{}\n")
    (folder / "run.json").write_text('{"status": "completed"}')
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    assert _main([*RUN[:-2], "--results", str(tmp_path), "--run-id", "r1"]) == cli.EXIT_USAGE
    err = _one_line_naming(capsys, "--run-id r1")
    assert f"{folder} already holds a run (2 files" in err
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before


def test_ctrl_c_exits_130_and_keeps_what_completed(tmp_path):
    """A real SIGINT to `specbench run` mid-test-case."""
    import dataclasses

    from specbench.emulator.server import EmulatorServer, default_profiles
    from tests.runs import emulated_run_args

    profiles = default_profiles(time_scale=0.1)
    stall = {3: "stall"}
    base = dataclasses.replace(profiles["qwen-vllm"], faults=stall, stall_s=600.0)
    spec = dataclasses.replace(profiles["qwen-sd-vllm"], faults=stall, stall_s=600.0)
    with EmulatorServer(base) as baseline, EmulatorServer(spec) as speculative:
        args = emulated_run_args(baseline, speculative, tmp_path, "--run-id", "ctrlc", "--no-publish", "--test-case", "counting")
        args += ["--concurrency", "1", "--requests", "4", "--output-tokens", "20"]
        # A shell's background job (`make test &`, nohup, some CI runners) starts with SIGINT
        # ignored, an ignored signal stays ignored across exec, and Python then installs no
        # KeyboardInterrupt handler (signal(7), execve(2)): the run would rightly ignore the Ctrl-C. A
        # handled signal is reset to its default at exec, so the child gets Ctrl-C as a terminal
        # would give it, whatever this process inherited.
        inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "specbench", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        finally:
            signal.signal(signal.SIGINT, inherited)
        try:
            assert wait_for(lambda: len(baseline.truth) >= 4 and len(speculative.truth) >= 4)
            os.kill(process.pid, signal.SIGINT)
            _, err = process.communicate(timeout=60)
        finally:
            process.kill()
    assert process.returncode == cli.EXIT_INTERRUPTED, err
    assert "Traceback" not in err
    run = json.loads((tmp_path / "ctrlc" / "run.json").read_text())
    assert run["status"] == "interrupted" and run["counts"]["requests"] == 8 and run["counts"]["interrupted"] == 2


CDK_JSON = ["[1, 2]", '"x"', "3", "null", '{"context": []}', '{"context": "x"}', '{"context": 5}', "[" * 100000 + "]" * 100000, "{bad"]


@pytest.mark.parametrize("text", CDK_JSON, ids=range(len(CDK_JSON)))
def test_plan_on_a_cdk_json_that_is_not_an_object_with_a_context_is_one_line(text, tmp_path, capsys):
    path = tmp_path / "cdk.json"
    path.write_text(text)
    assert _main(["plan", "--cdk-json", str(path)]) == cli.EXIT_USAGE
    _one_line_naming(capsys, f"--cdk-json {path}")


NESTED = [
    "[" * 100000 + "]" * 100000,
    '{"a":' * 50000 + "1" + "}" * 50000,
    '{"name": "s", "test_cases": ' + "[" * 60000 + "]" * 60000 + "}",
]


@pytest.mark.parametrize("text", NESTED, ids=range(len(NESTED)))
def test_a_suite_nested_thousands_deep_is_one_line(text, tmp_path, capsys):
    path = tmp_path / "suite.json"
    path.write_text(text)
    assert _main(["suite", "--suite", str(path)]) == cli.EXIT_USAGE
    _one_line_naming(capsys, str(path))
    assert _main([*RUN, "--results", str(tmp_path / "r"), "--suite", str(path)]) == cli.EXIT_USAGE
    _one_line_naming(capsys, str(path))


@pytest.mark.parametrize(
    "argv",
    [
        ["run"],
        ["run", "--test-case", "json", "--test-case", "code", "--concurrency", "1", "--concurrency", "4"],
        ["plan", "-c", "sweep.variants=a:b:5"],
        ["predict"],
        ["report", "r1", "--no-charts"],
    ],
)
def test_main_parses_with_one_parser_and_no_call_shares_a_list_with_the_next(argv):
    """main() reuses one parser per process: each call's arguments equal a fresh parser's, and no list
    (the parser's [] defaults included) is handed to two calls."""
    first, second = cli._parse(argv), cli._parse(argv)
    assert vars(first) == vars(second) == vars(cli.parser().parse_args(argv))
    lists = [name for name, value in vars(first).items() if isinstance(value, list)]
    assert all(getattr(first, name) is not getattr(second, name) for name in lists)
    assert argv[0] not in ("run", "plan", "predict") or "test_case" in lists or "context" in lists
    assert cli._shared_parser() is cli._shared_parser()


def test_help_lists_every_command_as_its_module_registers_it():
    """--help comes from cli.COMMANDS without importing a command's module: the table's help, names
    and order are what the modules' own register() give, and a command's parser is the same whether
    it is built alone (as main() builds it) or beside every other."""
    assert cli.parser(()).format_help() == cli.parser().format_help()
    full = cli.parser()._subparsers._group_actions[0].choices  # argparse keeps the subparsers here
    assert list(full) == [name for name, _, _ in cli.COMMANDS]
    for name in full:
        alone = cli.parser((name,))._subparsers._group_actions[0].choices[name]
        assert alone.format_help() == full[name].format_help(), name


LOADED = """
import json, sys
from specbench import cli
try:
    cli.main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""


@pytest.mark.parametrize(
    ("argv", "commands"),
    [(["--help"], []), (["run", "--help"], ["common", "run"]), (["sweep", "control", "--help"], ["common", "sweep"])],
    ids=["help", "run", "sweep-control"],
)
def test_only_the_chosen_commands_module_is_imported(argv, commands):
    """`specbench run` never imports the report's matplotlib, the emulator or config/ (issue 35)."""
    root = Path(cli.__file__).resolve().parents[1]
    result = subprocess.run([sys.executable, "-c", LOADED, *argv], cwd=root, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout.splitlines()[-1])
    assert [m.removeprefix("specbench.commands.") for m in loaded if m.startswith("specbench.commands.")] == commands
    assert not [m for m in loaded if m.split(".")[0] in ("matplotlib", "config") or m.startswith("specbench.emulator")]


@pytest.mark.parametrize(
    "args, prefix",
    [
        (["predict", "--rank", "--tp", "1"], "--tp"),  # would be --tp-beta 1: another model, no error
        (["predict", "--rank", "--rank-t", "4"], "--rank-t"),  # --rank-tp
        ([*RUN, "--concurr", "4"], "--concurr"),  # --concurrency
    ],
)
def test_an_abbreviated_flag_is_refused_not_taken_for_the_flag_it_begins(args, prefix, capsys):
    """argparse's prefix matching is off: a flag is spelt in full or refused in one line."""
    with pytest.raises(SystemExit) as stop:
        cli.main(args)
    assert stop.value.code == cli.EXIT_USAGE
    (line,) = capsys.readouterr().err.splitlines()
    assert "unrecognized arguments" in line and prefix in line
