"""The results aggregator in the data stack: its Lambda, least-privilege role, triggers and deployment
package. Reads the session's synthesized templates (tests/conftest.py); nothing is synthesized here."""

from __future__ import annotations

import ast
import io
import json
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT
from specbench import bundle
from templates import only, props, resources

ENVIRONMENT = (
    "RESULTS_BUCKET",
    "RESULTS_PREFIX",
    "DASHBOARD_NAME",
    "METRICS_NAMESPACE",
    "CLUSTER_NAME",
    "SERVING_NAMESPACE",
    "BASELINE_VARIANT",
    "DRAFT_COST_RATIO",
    "LOOKBACK_HOURS",
    "BOOTSTRAP_RESAMPLES",
    # the dashboard's Deployment state row (specbench/outputs/deployment_state.py)
    "SERVICES",
    "BUDGET_NODE_HOURS",
    "ENV_PROFILE",
    "SWEEP_STRATEGY",
    "SWEEP_FIRST_JOB_POINTS",
    "SWEEP_FIRST_JOB_NODE_HOURS",
)
# What the Lambda's modules may import besides each other: the runtime ships boto3 and botocore.
RUNTIME_PACKAGES = {"boto3", "botocore"}


def _function(template):
    return only(template, "AWS::Lambda::Function", lambda r: props(r).get("Handler") == "handler.handler")


def _data_bucket(template):
    return only(template, "AWS::S3::Bucket", lambda r: "VersioningConfiguration" in props(r))


def _rule(template, key):
    return only(template, "AWS::Events::Rule", lambda r: key in props(r))


def _asset(assembly, template) -> bytes:
    _, function = _function(template)
    return assembly.file(function["Metadata"]["aws:asset:path"]).read_bytes()


# --- the function ----------------------------------------------------------------------------------


def test_function_runtime_handler_architecture_and_environment(data, variant_data):
    bucket, _ = _data_bucket(data)
    _, function = _function(data)
    p = props(function)
    assert (p["Runtime"], p["Handler"], p["Architectures"]) == ("python3.14", "handler.handler", ["arm64"])
    assert (p["MemorySize"], p["Timeout"]) == (1024, 300)
    assert "ReservedConcurrentExecutions" not in p
    assert p["Environment"]["Variables"] == {
        "RESULTS_BUCKET": {"Ref": bucket},
        "RESULTS_PREFIX": "results/",
        "DASHBOARD_NAME": "SpecDecode-Benchmark",
        "METRICS_NAMESPACE": "Qwen/LLMPerf",
        "CLUSTER_NAME": "specdecode-trn2",
        "SERVING_NAMESPACE": "specdecode",
        "BASELINE_VARIANT": "qwen-vllm",
        "DRAFT_COST_RATIO": "0.1",
        "LOOKBACK_HOURS": "24",
        "BOOTSTRAP_RESAMPLES": "2000",
        "SERVICES": "qwen-vllm,qwen-sd-vllm",
        "BUDGET_NODE_HOURS": "48.0",
        "ENV_PROFILE": "",
        "SWEEP_STRATEGY": "none",
        "SWEEP_FIRST_JOB_POINTS": "0",
        "SWEEP_FIRST_JOB_NODE_HOURS": "0.0",
    }
    variables = props(_function(variant_data)[1])["Environment"]["Variables"]
    assert tuple(variables) == ENVIRONMENT
    assert [variables[k] for k in ("DASHBOARD_NAME", "DRAFT_COST_RATIO", "LOOKBACK_HOURS", "BOOTSTRAP_RESAMPLES")] == [
        "SpecDecode-Variant",
        "0.25",
        "48",
        "500",
    ]
    # The variant's services (an extra EAGLE3 one) and its staged sweep (tests/conftest.py), as its configuration plans the first Job.
    from config import load_config
    from config.sweep import first_job
    from conftest import VARIANT_CONTEXT

    strategy, points, hours = first_job(load_config(VARIANT_CONTEXT, {}))
    assert (variables["SERVICES"], variables["SWEEP_STRATEGY"]) == ("qwen-vllm,qwen-sd-vllm,qwen-sd-k4", "staged") and strategy == "staged"
    assert (variables["SWEEP_FIRST_JOB_POINTS"], variables["SWEEP_FIRST_JOB_NODE_HOURS"]) == (str(points), str(hours)) and points > 0


def test_function_logs_to_its_own_log_group_with_the_configured_retention(data, variant_data):
    for template, days in ((data, 30), (variant_data, 90)):
        _, function = _function(template)
        group_id = props(function)["LoggingConfig"]["LogGroup"]["Ref"]
        group = template["Resources"][group_id]
        assert group["Type"] == "AWS::Logs::LogGroup"
        assert props(group)["RetentionInDays"] == days
        assert group["DeletionPolicy"] == "Delete"


# --- the role --------------------------------------------------------------------------------------


def _statements(template, dashboard):
    bucket, _ = _data_bucket(template)
    _, function = _function(template)
    group = props(function)["LoggingConfig"]["LogGroup"]["Ref"]
    bucket_arn = {"Fn::GetAtt": [bucket, "Arn"]}
    return [
        {"Action": ["logs:CreateLogStream", "logs:PutLogEvents"], "Effect": "Allow", "Resource": {"Fn::GetAtt": [group, "Arn"]}},
        {"Action": "s3:ListBucket", "Condition": {"StringLike": {"s3:prefix": "results/*"}}, "Effect": "Allow", "Resource": bucket_arn},
        {"Action": "s3:GetObject", "Effect": "Allow", "Resource": {"Fn::Join": ["", [bucket_arn, "/results/*"]]}},
        {"Action": "s3:PutObject", "Effect": "Allow", "Resource": {"Fn::Join": ["", [bucket_arn, "/results/*/aggregate.json"]]}},
        {"Action": ["cloudwatch:GetMetricData", "cloudwatch:ListMetrics"], "Effect": "Allow", "Resource": "*"},
        {
            "Action": "cloudwatch:PutMetricData",
            "Condition": {"StringEquals": {"cloudwatch:namespace": "Qwen/LLMPerf"}},
            "Effect": "Allow",
            "Resource": "*",
        },
        {
            "Action": ["cloudwatch:GetDashboard", "cloudwatch:PutDashboard"],
            "Effect": "Allow",
            "Resource": f"arn:aws:cloudwatch::123456789012:dashboard/{dashboard}",
        },
    ]


@pytest.mark.parametrize("which, dashboard", [("data", "SpecDecode-Benchmark"), ("variant_data", "SpecDecode-Variant")])
def test_role_has_exactly_the_listed_permissions_and_no_managed_policy(which, dashboard, request):
    template = request.getfixturevalue(which)
    _, function = _function(template)
    role_id = props(function)["Role"]["Fn::GetAtt"][0]
    role = props(template["Resources"][role_id])
    assert role["AssumeRolePolicyDocument"]["Statement"] == [
        {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}}
    ]
    assert "ManagedPolicyArns" not in role and "Policies" not in role
    assert not [r for r in resources(template, "AWS::IAM::ManagedPolicy").values() if {"Ref": role_id} in props(r).get("Roles", [])]
    (policy,) = [r for r in resources(template, "AWS::IAM::Policy").values() if {"Ref": role_id} in props(r)["Roles"]]
    key = lambda s: json.dumps(s, sort_keys=True)  # noqa: E731
    assert sorted(props(policy)["PolicyDocument"]["Statement"], key=key) == sorted(_statements(template, dashboard), key=key)


# --- triggers --------------------------------------------------------------------------------------


@pytest.mark.parametrize("minutes, expression", [(1, "rate(1 minute)"), (15, "rate(15 minutes)"), (60, "rate(60 minutes)")])
def test_schedule_expression(minutes, expression):
    from stacks.results import schedule_expression  # aws_cdk: imported by this test, not at collection

    assert schedule_expression(minutes) == expression


def test_schedule_follows_the_configuration_and_targets_the_function(data, variant_data):
    for template, expression in ((data, "rate(15 minutes)"), (variant_data, "rate(1 minute)")):
        function_id, _ = _function(template)
        _, rule = _rule(template, "ScheduleExpression")
        assert props(rule)["ScheduleExpression"] == expression
        (target,) = props(rule)["Targets"]
        assert target["Arn"] == {"Fn::GetAtt": [function_id, "Arn"]}
        assert target["RetryPolicy"] == {"MaximumEventAgeInSeconds": 3600, "MaximumRetryAttempts": 2}
        assert "Input" not in target


def test_publish_json_in_the_bucket_triggers_the_function(data):
    bucket, _ = _data_bucket(data)
    function_id, _ = _function(data)
    rule_id, rule = _rule(data, "EventPattern")
    assert props(rule)["EventPattern"] == {
        "source": ["aws.s3"],
        "detail-type": ["Object Created"],
        "detail": {"bucket": {"name": [{"Ref": bucket}]}, "object": {"key": [{"wildcard": "results/*/publish.json"}]}},
    }
    (target,) = props(rule)["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": [function_id, "Arn"]}
    # EventBridge may invoke the function for both rules, and for nothing else.
    permissions = [props(r) for r in resources(data, "AWS::Lambda::Permission").values()]
    schedule_id, _ = _rule(data, "ScheduleExpression")
    assert sorted(json.dumps(p["SourceArn"]) for p in permissions if p["FunctionName"] == {"Fn::GetAtt": [function_id, "Arn"]}) == sorted(
        json.dumps({"Fn::GetAtt": [lid, "Arn"]}) for lid in (rule_id, schedule_id)
    )


def test_bucket_sends_its_events_to_eventbridge_without_a_notifications_lambda(data, variant_data):
    for template in (data, variant_data):
        _, bucket = _data_bucket(template)
        assert props(bucket)["NotificationConfiguration"] == {"EventBridgeConfiguration": {"EventBridgeEnabled": True}}
        assert not resources(template, "Custom::S3BucketNotifications")


def test_outputs_name_the_dashboard_and_the_function(data, variant_data):
    function_id, _ = _function(data)
    assert data["Outputs"]["AggregatorFunctionName"]["Value"] == {"Ref": function_id}
    for template, name in ((data, "SpecDecode-Benchmark"), (variant_data, "SpecDecode-Variant")):
        assert template["Outputs"]["DashboardUrl"]["Value"] == (
            f"https://us-east-2.console.aws.amazon.com/cloudwatch/home?region=us-east-2#dashboards:name={name}"
        )
    assert "results dashboard" in data["Description"]


# --- the deployment package -----------------------------------------------------------------------


def _names(archive: bytes) -> list[str]:
    return zipfile.ZipFile(io.BytesIO(archive)).namelist()


# What the handler imports, directly or not: the aggregation, its statistics and model, the
# dashboard, the run's files and their store, the retry policy, and the packages that hold them.
LAMBDA_MODULES = (
    "__init__.py",
    "analysis/__init__.py",
    "analysis/aggregate.py",
    "analysis/cost.py",
    "analysis/loads.py",
    "analysis/prices.py",
    "analysis/stats.py",
    "analysis/stream_acceptance.py",
    "analysis/theory.py",
    "aws_retry.py",
    "jsonfile.py",
    "outputs/__init__.py",
    "outputs/dashboard.py",
    "outputs/deployment_state.py",
    "results/__init__.py",
    "results/records.py",
    "results/runfiles.py",
    "results/store.py",
    "results/validity.py",
)


def test_lambda_zip_holds_the_handler_at_the_root_and_what_it_imports():
    first, second = bundle.lambda_zip_bytes(), bundle.lambda_zip_bytes()
    assert first == second
    handlers = sorted(p.name for p in (ROOT / "lambdas" / "aggregate").glob("*.py") if p.name != "__init__.py")
    assert "handler.py" in handlers and "__init__.py" not in _names(first)
    assert _names(first) == sorted(handlers + [f"specbench/{m}" for m in LAMBDA_MODULES])
    for info in zipfile.ZipFile(io.BytesIO(first)).infolist():
        assert (info.date_time, info.external_attr >> 16) == (bundle.FIXED_TIME, 0o100644), info.filename


def _package(package_dir: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (package_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (package_dir / name).write_text(text)


def test_lambda_zip_follows_imports_leaves_out_caches_and_reports_a_missing_module(tmp_path):
    handler_dir, package_dir = tmp_path / "aggregate", tmp_path / "specbench"
    (handler_dir / "__pycache__").mkdir(parents=True)
    (handler_dir / "handler.py").write_text("import json\nfrom specbench.analysis import aggregate\ndef handler(event, context): ...\n")
    (handler_dir / "__pycache__" / "handler.cpython-311.pyc").write_bytes(b"\0")
    _package(
        package_dir,
        {
            "__init__.py": "",
            "cli.py": "",  # imported by nothing the handler imports
            "analysis/__init__.py": "",
            "analysis/aggregate.py": "import boto3\nfrom . import theory\ndef run():\n    from specbench.results.store import S3Store\n",
            "analysis/theory.py": "",
            "analysis/__pycache__/theory.cpython-311.pyc": "",
            "results/__init__.py": "",
            "results/store.py": "S3Store = None\n",
        },
    )
    assert _names(bundle.lambda_zip_bytes(handler_dir, package_dir)) == [
        "handler.py",
        "specbench/__init__.py",
        "specbench/analysis/__init__.py",
        "specbench/analysis/aggregate.py",
        "specbench/analysis/theory.py",
        "specbench/results/__init__.py",
        "specbench/results/store.py",
    ]
    (package_dir / "analysis" / "theory.py").unlink()
    with pytest.raises(FileNotFoundError, match=r"imports specbench\.analysis\.theory, which is neither a module nor a name"):
        bundle.lambda_zip_bytes(handler_dir, package_dir)


def test_deployed_asset_is_the_lambda_zip_and_stable_across_syntheses(cli_assembly, variant_assembly, data, variant_data):
    """Two separate syntheses (other settings, other temporary directories) give the same asset."""
    key = props(_function(data)[1])["Code"]["S3Key"]
    assert key == props(_function(variant_data)[1])["Code"]["S3Key"]
    assert _asset(cli_assembly, data) == _asset(variant_assembly, variant_data) == bundle.lambda_zip_bytes()


def _imports(tree: ast.AST) -> list[tuple[int, str]]:
    """(level, module) of every import that runs: ``from . import x`` is (1, "x"), ``import a.b`` (0, "a.b").
    Blocks under ``if TYPE_CHECKING:`` never run and are skipped."""
    found = []
    pending = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            pending += node.orelse
            continue
        if isinstance(node, ast.Import):
            found += [(0, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            found += [(node.level, f"{base}.{alias.name}".strip(".")) for alias in node.names]
        pending += ast.iter_child_nodes(node)
    return found


def foreign_imports(archive: bytes, package_dir: Path = bundle.PACKAGE_DIR) -> list[str]:
    """Imports in the zip's modules that neither the standard library, the Lambda runtime's boto3 and
    botocore, nor the zip itself provide, as sorted ``file: module`` lines."""
    with zipfile.ZipFile(io.BytesIO(archive)) as zipped:
        contents = {name: zipped.read(name) for name in zipped.namelist()}
    modules = {name.removesuffix(".py").removesuffix("/__init__").replace("/", ".") for name in contents}
    problems = []
    for name, source in contents.items():
        package = name.rpartition("/")[0].replace("/", ".")
        for level, module in _imports(ast.parse(source, name)):
            if level:
                base = package.split(".")[: len(package.split(".")) - (level - 1)] if package else []
                module = ".".join([*base, module])
            if level == 0 and module.split(".")[0] in sys.stdlib_module_names | RUNTIME_PACKAGES:
                continue
            # ``from specbench import X`` imports a module or a name defined in the parent module:
            # either is fine unless X is a module of the package that the zip leaves out.
            parent = module.rpartition(".")[0]
            if module in modules or (parent in modules and not _is_package_module(module, package_dir)):
                continue
            problems.append(f"{name}: {module}")
    return sorted(problems)


def _is_package_module(module: str, package_dir: Path) -> bool:
    first, *rest = module.split(".")
    if first != package_dir.name or not rest:
        return False
    path = package_dir.joinpath(*rest)
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def test_lambda_modules_import_only_the_standard_library_boto3_and_each_other():
    assert foreign_imports(bundle.lambda_zip_bytes()) == []


def test_a_third_party_or_left_out_import_is_caught(tmp_path):
    """The check reads a zip as it is: this one, built by hand, leaves out a module the code imports."""
    package_dir = tmp_path / "specbench"
    modules = ("__init__.py", "records.py", "stats.py", "aggregate.py")
    _package(package_dir, {name: "from __future__ import annotations\nimport boto3\nfrom . import records\n" for name in modules})
    _package(
        package_dir,
        {
            "aggregate.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import mypy_boto3_s3\n"
            "def run():\n    import aiohttp\n    from .stats import bootstrap\n    from . import cli\n",
            "cli.py": "",  # a module of the package, not in the zip
        },
    )
    entries = {"handler.py": "import json\nfrom specbench import aggregate\nfrom specbench.cli import main\n"}
    entries.update({f"specbench/{name}": (package_dir / name).read_text() for name in modules})
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zipped:
        for name, text in entries.items():
            zipped.writestr(name, text)
    assert foreign_imports(archive.getvalue(), package_dir) == [
        "handler.py: specbench.cli.main",
        "specbench/aggregate.py: aiohttp",
        "specbench/aggregate.py: specbench.cli",
    ]


def test_handler_dir_default_is_the_projects_lambda_source():
    assert bundle.LAMBDA_HANDLER_DIR == ROOT / "lambdas" / "aggregate"
    assert Path(bundle.PACKAGE_DIR) == ROOT / "specbench"


def test_adding_a_third_party_import_to_the_real_aggregate_module_is_caught(tmp_path):
    handler_dir, package_dir = tmp_path / "aggregate", tmp_path / "specbench"
    handler_dir.mkdir()
    for path in bundle.LAMBDA_HANDLER_DIR.glob("*.py"):
        (handler_dir / path.name).write_bytes(path.read_bytes())
    _package(package_dir, {name: (bundle.PACKAGE_DIR / name).read_text() for name in LAMBDA_MODULES})
    with (package_dir / "analysis" / "aggregate.py").open("a") as module:
        module.write("\nimport aiohttp\n")
    assert foreign_imports(bundle.lambda_zip_bytes(handler_dir, package_dir), package_dir) == ["specbench/analysis/aggregate.py: aiohttp"]


def test_the_handler_reads_what_the_stack_sets_and_the_demo_sets_the_same(data):
    """The environment is the contract between stacks/results.py, the handler and scripts/demo.py."""
    import importlib.util

    from config import load_config
    from lambdas.aggregate import handler

    deployed = {k: v for k, v in props(_function(data)[1])["Environment"]["Variables"].items() if isinstance(v, str)}
    settings = handler.Settings.from_env({**deployed, "RESULTS_BUCKET": "bucket", "AWS_REGION": "us-east-2"})
    assert (settings.dashboard_name, settings.baseline, settings.bootstrap_resamples) == ("SpecDecode-Benchmark", "qwen-vllm", 2000)
    spec = importlib.util.spec_from_file_location("demo_script", ROOT / "scripts" / "demo.py")
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    from_demo = demo.aggregation_environment(load_config({}))
    assert set(from_demo) == set(ENVIRONMENT)
    # The demo's bucket is moto's, and its c is the emulator's own (0.08), so the model can be checked.
    assert {k: v for k, v in from_demo.items() if k not in ("RESULTS_BUCKET", "DRAFT_COST_RATIO")} == {
        k: v for k, v in deployed.items() if k != "DRAFT_COST_RATIO"
    }


def test_the_dashboard_is_a_stack_resource_that_starts_with_no_data(data, variant_data):
    """cdk destroy deletes it; until the first refresh it says so, and it follows CloudWatch's rules."""
    from specbench.outputs import dashboard

    for template, name in ((data, "SpecDecode-Benchmark"), (variant_data, "SpecDecode-Variant")):
        _, resource = only(template, "AWS::CloudWatch::Dashboard")
        body = json.loads(props(resource)["DashboardBody"])
        assert props(resource)["DashboardName"] == name and dashboard.problems(name, body) == []
        # The Deployment state row on top says it is not read yet; its graphs are live already.
        assert "Not read yet" in body["widgets"][0]["properties"]["markdown"]
        assert "No data yet" in body["widgets"][5]["properties"]["markdown"]
        assert {w["properties"]["region"] for w in body["widgets"] if w["type"] == "metric"} == {"us-east-2"}
        (graph,) = [w for w in body["widgets"] if w["properties"].get("title") == "Neuron node-hours against the budget"]
        assert graph["properties"]["annotations"]["horizontal"][0]["value"] == 48.0
