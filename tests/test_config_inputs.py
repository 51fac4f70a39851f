"""Bad settings, class by class (issue 22): every value is refused by the configuration with one
line naming its key and the reason that applies (never accepted, never a traceback). Tables, not
examples: each class tries many values."""

from __future__ import annotations

import pytest

from config import ConfigError, load_config

ACCOUNT_ARABIC = "١٢٣٤٥٦٧٨٩٠١٢"


def _problems(context: dict) -> list:
    try:
        load_config(context, {})
    except ConfigError as error:
        return error.problems
    return []


def _refused(context: dict, key: str, reason: str = "") -> str:
    problems = _problems(context)
    lines = [str(p) for p in problems if p.key == key]
    assert lines, f"{context} accepted (problems: {[str(p) for p in problems]})"
    if reason:
        assert any(reason in line for line in lines), lines
    return lines[0]


# Digits and letters outside ASCII: Python's int() reads "５" as 5 and "\d" matches "١". (Surrounding
# spaces and newlines of a -c value are stripped by design, config/loader.py's coerce.)
NON_ASCII = [
    ("env.account", ACCOUNT_ARABIC),
    ("env.account", "１２３４５６７８９０１２"),
    ("env.account", "12345678901٢"),
    ("env.region", "us-east-٢"),
    ("env.region", "ｕｓ-east-2"),
    ("cluster.admin_principal_arns", f"arn:aws:iam::{ACCOUNT_ARABIC}:role/admin"),
    ("serving.hf_token_secret_arn", f"arn:aws:secretsmanager:us-east-2:{ACCOUNT_ARABIC}:secret:hf-AbCdEf"),
    ("serving.num_speculative_tokens", "５"),
    ("serving.num_speculative_tokens", "٧"),
    ("serving.num_speculative_tokens", "1_0"),
    ("network.nat_gateways", "１"),
    ("benchmark.request_timeout_seconds", "１２００"),
    ("benchmark.output_tokens", "６００"),
    ("benchmark.temperature", "０.５"),
    ("benchmark.temperature", "nan"),
    ("benchmark.temperature", "inf"),
    ("sweep.slo_ttft_ms", "nan"),
    ("sweep.slo_tpot_ms", "inf"),
    ("sweep.budget_node_hours", "inf"),
    ("sweep.concurrencies", "１,4"),
    ("sweep.request_rates", "０.5"),
    ("cluster.name", "ｃluster"),
    ("cluster.kubernetes_version", "1.3٣"),
    ("addons.vpc_cni_version", "v1.19.٢-eksbuild.1"),
    ("serving.draft_model", "Qwen/Qwen3-１.7B"),
]


@pytest.mark.parametrize(("key", "value"), NON_ASCII, ids=[f"{k}={v!r}" for k, v in NON_ASCII])
def test_non_ascii_digits_and_letters_are_refused(key, value):
    context = {key: value}
    if key.startswith("sweep."):
        context["sweep.variants"] = "q06-k5:Qwen/Qwen3-0.6B:5"
    if key == "neuron_nodes.capacity_reservation_id":
        context["neuron_nodes.capacity_mode"] = "reservation"
    _refused(context, key)


# Keys that look like settings but are spelt with ':' or '/' or carry spaces: never silently ignored.
MISSPELT_KEYS = [
    ("serving:draft_model", "serving.draft_model"),
    ("serving/draft_model", "serving.draft_model"),
    ("serving.draft_model ", "serving.draft_model"),
    (" serving.draft_model", "serving.draft_model"),
    ("serving.draft_model\t", "serving.draft_model"),
    ("benchmark:output_tokens", "benchmark.output_tokens"),
    ("benchmark/output_tokens", "benchmark.output_tokens"),
    ("sweep:variants", "sweep.variants"),
    ("env:account", "env.account"),
    ("serving.draft-model", "serving.draft_model"),
]


@pytest.mark.parametrize(("key", "meant"), MISSPELT_KEYS, ids=[repr(k) for k, _ in MISSPELT_KEYS])
def test_misspelt_keys_are_unknown_with_did_you_mean(key, meant):
    line = _refused({key: "Qwen/Qwen3-1.7B"}, key)
    assert f"did you mean {meant}?" in line


def test_cdk_own_context_keys_are_still_left_alone():
    cdk = {
        "@aws-cdk/core:newStyleStackSynthesis": True,
        "aws:cdk:enable-path-metadata": True,
        "availability-zones:account=123456789012:region=us-east-2": ["us-east-2a"],
        "acknowledged-issue-numbers": [1],
        "cli-telemetry": False,
    }
    assert _problems(cdk) == []


CIDRS = [
    ("network.vpc_cidr", "10.40.0.1/16", "host bits", "10.40.0.0/16"),
    ("network.vpc_cidr", "10.40.7.0/16", "host bits", "10.40.0.0/16"),
    ("cluster.public_access_cidrs", "198.51.100.7/24", "host bits", "198.51.100.0/24"),
    ("cluster.public_access_cidrs", "203.0.113.9/16", "host bits", "203.0.0.0/16"),
    ("cluster.public_access_cidrs", "198.51.100.0/24,198.51.100.0/24", "twice", ""),
    ("cluster.public_access_cidrs", "198.51.100.0/24,198.51.100.0/255.255.255.0", "twice", ""),
    ("cluster.public_access_cidrs", "198.51.100.7/32,198.51.100.7", "twice", ""),
    ("network.vpc_cidr", "10.40.0.0/33", "not an IPv4 CIDR", ""),
]


@pytest.mark.parametrize(("key", "value", "reason", "hint"), CIDRS, ids=[f"{k}={v}" for k, v, _, _ in CIDRS])
def test_a_cidr_gets_the_reason_that_applies(key, value, reason, hint):
    line = _refused({key: value}, key, reason)
    assert hint in line


LONG = [
    ("cluster.name", "x" * 5000),
    ("serving.draft_model", "Qwen/" + "Q" * 3000),
    ("env.account", "1" * 1000),
    ("serving.namespace", "n" * 400),
    ("cluster.public_access_cidrs", ",".join(["198.51.100.7/24"] * 300)),
    ("serving:draft_model" + "x" * 500, "v"),
]


@pytest.mark.parametrize(("key", "value"), LONG, ids=range(len(LONG)))
def test_an_error_line_echoes_at_most_about_80_characters_of_the_value(key, value):
    problems = _problems({key: value})
    assert problems, "accepted"
    for problem in problems:
        line = str(problem)
        assert (len(value) < 90 or value[:90] not in line) and (len(key) < 90 or key[:90] not in line), line[:300]
        assert len(line) < 600, line[:300]


SERVICE_NAMES = [
    ("sweep.variants", "qwen-sd-vllm:Qwen/Qwen3-1.7B:5", {}),
    ("sweep.variants", "qwen-vllm:Qwen/Qwen3-0.6B:5", {}),
    ("sweep.variants", "my-base:Qwen/Qwen3-0.6B:5", {"serving.baseline_service": "my-base"}),
    ("sweep.variants", "q17-k9:Qwen/Qwen3-1.7B:9", {"serving.extra_speculative_variants": "q17-k9:Qwen/Qwen3-1.7B:9"}),
]


@pytest.mark.parametrize(("key", "value", "extra"), SERVICE_NAMES, ids=range(len(SERVICE_NAMES)))
def test_a_sweep_variant_may_not_take_a_services_name(key, value, extra):
    _refused({key: value, **extra}, key, "service")


DRAFTS = [
    "Qwen/Qwen3-30B-A3B",
    "Qwen/Qwen3-235B-A22B",
    "Qwen/Qwen3-Coder-30B-A3B-Instruct",
    "Qwen/Qwen3-30B-A3B-Instruct-2507",
    "Qwen/Qwen3-32B",
    "Qwen/Qwen3-72B",
    "Qwen/Qwen2.5-0.5B",
    "meta-llama/Llama-3.2-1B",
]


@pytest.mark.parametrize("draft", DRAFTS)
@pytest.mark.parametrize("where", ["serving.draft_model", "serving.extra_speculative_variants", "sweep.variants"])
def test_a_draft_must_be_a_smaller_dense_model_of_the_targets_family(draft, where):
    value = draft if where == "serving.draft_model" else f"qx-k5:{draft}:5"
    _refused({where: value}, where)


TIMEOUTS = [
    ({"benchmark.output_tokens": 20000, "benchmark.request_timeout_seconds": 10, "serving.max_model_len": 32768}, "40"),
    ({"benchmark.output_tokens": 100000, "benchmark.request_timeout_seconds": 60, "serving.max_model_len": 131072}, "200"),
    ({"benchmark.output_tokens": 7000, "benchmark.request_timeout_seconds": 13, "serving.max_model_len": 8192}, "14"),
]


@pytest.mark.parametrize(("context", "needed"), TIMEOUTS, ids=range(len(TIMEOUTS)))
def test_a_request_timeout_too_short_for_the_output_tokens_is_refused_with_the_numbers(context, needed):
    line = _refused(context, "benchmark.request_timeout_seconds", "tokens/s")
    assert needed in line and str(context["benchmark.output_tokens"]) in line


def test_a_timeout_that_fits_is_accepted():
    assert [p for p in _problems({"benchmark.output_tokens": 600, "benchmark.request_timeout_seconds": 10}) if "timeout" in p.key] == []


def test_a_suite_file_nested_thousands_deep_is_one_problem(tmp_path):
    path = tmp_path / "suite.json"
    path.write_text("[" * 100000 + "]" * 100000)
    _refused({"benchmark.suite_file": str(path)}, "benchmark.suite_file", "nested too deeply")
