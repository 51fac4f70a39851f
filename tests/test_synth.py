"""Offline synthesis through the real CDK CLI and directly; the two must agree byte for byte."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import OFFLINE_ENV, ROOT

STACKS = ("SpecDecodeData", "SpecDecodePlatform")


def test_cli_synthesizes_both_stacks_offline(cli_assembly):
    manifest = json.loads(cli_assembly.file("manifest.json").read_text())
    stacks = {name for name, artifact in manifest["artifacts"].items() if artifact["type"] == "aws:cloudformation:stack"}
    assert stacks == set(STACKS)
    for name in STACKS:
        assert manifest["artifacts"][name]["environment"] == "aws://123456789012/us-east-2"


def test_cli_and_direct_synth_produce_identical_templates(cli_assembly, direct_assembly):
    for name in STACKS:
        cli = cli_assembly.file(f"{name}.template.json").read_text()
        direct = direct_assembly.file(f"{name}.template.json").read_text()
        assert cli == direct, f"{name}: `cdk synth` and `python app.py` differ"


def test_no_lookups_are_left_for_the_cli_to_resolve(cli_assembly):
    """A missing context lookup would make `cdk synth` call AWS; there must be none."""
    manifest = json.loads(cli_assembly.file("manifest.json").read_text())
    assert "missing" not in manifest


@pytest.mark.long  # seconds of CPU: scheduled early (tests/conftest.py)
def test_bad_settings_stop_the_cli_with_one_line_each_and_no_traceback(tmp_path):
    # The CDK CLI itself (what `npx cdk` starts), without npx's own Node.js start-up (0.6 s of CPU).
    result = subprocess.run(
        [
            str(ROOT / "node_modules" / ".bin" / "cdk"),
            "synth",
            "--quiet",
            "--output",
            str(tmp_path),
            "-c",
            "serving.tensor_parallel_size=30",
            "-c",
            "serving.max_num_seqs=four",
            "-c",
            "neuron_nodes.capacity_mode=capacity-block",
        ],
        cwd=ROOT,
        env=OFFLINE_ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    errors = [line for line in result.stderr.splitlines() if line.startswith("config error: ")]
    assert errors == [
        "config error: serving.max_num_seqs='four': expected a whole number",
        "config error: neuron_nodes.capacity_reservation_id='': is required with capacity_mode=capacity-block; allowed: the reservation id, cr-<17 hex digits>",
        "config error: serving.tensor_parallel_size=30: is not a whole number of Neuron devices; allowed: a multiple of 4 up to 64 on trn2.48xlarge at LNC=2",
    ]
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "SpecDecodePlatform.template.json").exists()


def test_a_bad_setting_is_reported_before_aws_cdk_is_imported(tmp_path):
    """Checking the settings takes milliseconds, starting jsii over a second: a bad flag must not wait for it."""
    probe = (
        "import sys, app\n"
        f"code = app.main(['--outdir', {str(tmp_path)!r}, '-c', 'serving.max_num_seqs=four'])\n"
        "print(code, sorted(m for m in ('aws_cdk', 'jsii', 'constructs', 'stacks') if m in sys.modules))\n"
    )
    env = {k: v for k, v in OFFLINE_ENV.items() if k not in ("CDK_CONTEXT_JSON", "CDK_OUTDIR", "CONTEXT_OVERFLOW_LOCATION_ENV")}
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.stdout.splitlines() == ["2 []"], result.stderr
    assert result.stderr.splitlines() == ["config error: serving.max_num_seqs='four': expected a whole number"]


def test_the_checked_context_is_read_the_way_aws_cdk_lib_reads_it(tmp_path):
    """App.loadContext: the App's own context, then CDK_CONTEXT_JSON, then the overflow file, each overriding."""
    import app

    overflow = tmp_path / "overflow.json"
    overflow.write_text(json.dumps({"b": "file", "c": "file"}))
    defaults = {"a": "own", "b": "own", "c": "own", "d": "own"}
    environ = {app.CONTEXT_ENV: json.dumps({"b": "env", "c": "env", "e": 5}), app.CONTEXT_OVERFLOW_LOCATION_ENV: str(overflow)}
    assert app.app_context(defaults, environ) == {"a": "own", "b": "file", "c": "file", "d": "own", "e": 5}
    assert app.app_context(defaults, {}) == defaults
    assert app.app_context({}, {app.CONTEXT_ENV: json.dumps({"x": True})}) == {"x": True}
    assert defaults == {"a": "own", "b": "own", "c": "own", "d": "own"}


def test_app_and_build_app_are_found_when_app_py_runs_under_another_runner():
    """Under `python -m cProfile app.py` (or runpy) the script's namespace is not sys.modules["__main__"]:
    main() must find App and build_app in its own namespace (a test's replacement), else import them."""
    import runpy

    lazy = runpy.run_path(str(ROOT / "app.py"), run_name="app_under_a_runner")["_lazy"]  # not in sys.modules
    namespace = lazy.__globals__  # the script's own namespace (run_path returns a copy)
    namespace["__getattr__"] = lambda name: ("imported", name)  # what main() would import, without jsii
    assert namespace["_lazy"]("App") == ("imported", "App")
    assert namespace["_lazy"]("build_app") == ("imported", "build_app")
    replacement = object()
    namespace["App"] = replacement
    assert namespace["_lazy"]("App") is replacement
