"""cfn-lint over every template; cdk-nag (AwsSolutions) and CloudFormation validation at synth,
with every acknowledgment both justified and needed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import OFFLINE_ENV, ROOT

CFN_LINT = str(Path(sys.executable).with_name("cfn-lint"))


@pytest.mark.long  # cfn-lint over the three assemblies: 3-5 s of CPU, scheduled early (tests/conftest.py)
def test_cfn_lint_reports_nothing_on_any_template(cli_assembly, variant_assembly, rehearsal_assembly):
    """The default's, the variant's and the rehearsal profile's templates (issue 36), in one cfn-lint
    run: its start-up (loading the resource schemas) is most of its CPU."""
    assemblies = (cli_assembly, variant_assembly, rehearsal_assembly)
    templates = [str(p) for a in assemblies for p in sorted(a.outdir.glob("*.template.json"))]
    assert len(templates) == 6
    result = subprocess.run(
        [CFN_LINT, "--regions", "us-east-2", "--format", "parseable", "--", *templates],
        cwd=ROOT,
        env=OFFLINE_ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def _acknowledgments(outdir: Path) -> list[tuple[str, str, str]]:
    found = []
    for metadata in sorted(outdir.glob("*.metadata.json")):
        for path, entries in json.loads(metadata.read_text()).items():
            for entry in entries:
                if entry["type"] == "aws:cdk:acknowledged-rules":
                    found += [(path, rule.removeprefix("Annotation::"), reason) for rule, reason in entry["data"].items()]
    return found


def test_every_acknowledgment_gives_a_real_reason(cli_assembly):
    acks = _acknowledgments(cli_assembly.outdir)
    assert len(acks) >= 15
    for path, rule, reason in acks:
        assert len(reason.split()) >= 8, f"{path} {rule}: reason too thin: {reason!r}"


def validation_conclusions(assembly) -> dict[str, str]:
    """Each validation plugin's conclusion in the assembly's validation-report.json."""
    report = json.loads(assembly.file("validation-report.json").read_text())
    return {p["pluginName"]: p["conclusion"] for p in report["pluginReports"]}


def test_synth_validation_passed(cli_assembly):
    conclusions = validation_conclusions(cli_assembly)
    assert conclusions.get("CloudFormation Validate") == "success"
    assert all(conclusion == "success" for conclusion in conclusions.values())


def test_without_acknowledgments_synth_fails_on_exactly_the_acknowledged_findings(cli_assembly, variant_assembly):
    """Proves cdk-nag is wired in (synth fails without the acknowledgments), that the non-default
    paths of the variant raise no finding the acknowledgments do not cover, and that no
    acknowledgment is stale (each one matches a finding it silences)."""
    report = json.loads(variant_assembly.file("validation-report.json").read_text())
    assert any(p["pluginName"] == "AwsSolutions" and p["conclusion"] == "failure" for p in report["pluginReports"])
    findings = set()
    for plugin in report["pluginReports"]:
        prefix = "CloudFormation-Validate::" if plugin["pluginName"] == "CloudFormation Validate" else ""
        for violation in plugin["violations"]:
            for resource in violation["violatingConstructs"]:
                findings.add((prefix + violation["ruleName"], "/" + resource["constructPath"]))
    # Ours are those that disappear with the switch; aws-cdk-lib acknowledges a few of its own.
    acks = {(rule, path) for path, rule, _ in _acknowledgments(cli_assembly.outdir)}
    acks -= {(rule, path) for path, rule, _ in _acknowledgments(variant_assembly.outdir)}
    assert len(acks) >= 15
    unmatched_findings = {f for f in findings if not any(f[0] == rule and f[1].startswith(path + "/") for rule, path in acks)}
    stale_acks = {a for a in acks if not any(a[0] == rule and path.startswith(a[1] + "/") for rule, path in findings)}
    assert unmatched_findings == set()
    assert stale_acks == set()
