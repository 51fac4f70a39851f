"""Dataset-backed suites (issue 13): pinned sources fetched, checked and cached; seeded samples per
class; a bad source is one clear error before any traffic; run.json names sources, revisions,
licences and sampled ids; everything offline (package fixtures, a loopback server as the hub)."""

import contextlib
import functools
import hashlib
import http.server
import json
from pathlib import Path

import pytest

from specbench import cli
from specbench.emulator.server import EmulatorServer, default_profiles
from specbench.prompts import datasets
from specbench.prompts.suite import SuiteError, load_suite, parse_suite
from specbench.results.records import read_jsonl
from specbench.results.store import LocalStore, RunStore
from tests.loopback import serve
from tests.runs import emulated_run_args

FIXTURE = Path(__file__).parents[1] / "specbench" / "prompts" / "fixtures" / "classes.jsonl"
FIXTURE_SHA = hashlib.sha256(FIXTURE.read_bytes()).hexdigest()
REVISION = "0123456789abcdef0123456789abcdef01234567"


def hub_suite(**source_changes):
    source = {
        "hub": "specbench/classes",
        "revision": REVISION,
        "path": "classes.jsonl",
        "sha256": FIXTURE_SHA,
        "licence": "Apache-2.0",
        "id_field": "id",
        "messages_field": "messages",
        "category_field": "category",
        **source_changes,
    }
    cases = [
        {"name": "qa", "prompt_class": "qa", "dataset": "hub", "categories": ["qa"], "sample": 2, "max_tokens": 12},
        {"name": "code", "prompt_class": "code", "dataset": "hub", "categories": ["code"], "sample": 2},
    ]
    return {"name": "hub-suite", "seed": 7, "datasets": {"hub": source}, "test_cases": cases}


@contextlib.contextmanager
def loopback_hub(root: Path):
    """A static server laid out as the hub's resolve URLs: /datasets/{repo}/resolve/{revision}/{path}."""
    folder = root / "datasets" / "specbench" / "classes" / "resolve" / REVISION
    folder.mkdir(parents=True)
    (folder / "classes.jsonl").write_bytes(FIXTURE.read_bytes())
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *args: None
    with serve(handler) as url:
        yield url


def test_the_offline_suite_draws_the_same_pinned_sample_every_time():
    suite = load_suite("builtin:classes-offline").materialize()
    assert [case.prompt_class for case in suite.test_cases] == [
        "multi-turn",
        "translation",
        "summarization",
        "qa",
        "math-reasoning",
        "rag",
        "code",
        "json",
    ]
    assert [item.id for item in suite.test_cases[0].items] == ["mt-2", "mt-1", "mt-3"]
    assert suite.to_dict() == load_suite("builtin:classes-offline").materialize().to_dict()
    assert suite.to_dict()["datasets"] == {
        "fixtures": {
            "url": "package:prompts/fixtures/classes.jsonl",
            "sha256": FIXTURE_SHA,
            "licence": "Apache-2.0 (this project's own text)",
            "format": "jsonl",
            "id_field": "id",
            "messages_field": "messages",
            "category_field": "category",
        }
    }
    multi_turn = suite.test_cases[0].messages(1)  # mt-1: a whole conversation, our own text
    assert [m["role"] for m in multi_turn] == ["system", "user", "assistant", "user"]
    json_case = suite.test_cases[7]
    assert json_case.messages(0)[-1]["content"].startswith('Return only a JSON object with the keys "answer"')
    assert json_case.messages(0)[-1]["content"].endswith(json_case.items[0].messages[-1]["content"])


def test_a_hub_source_is_fetched_by_revision_checked_and_cached(tmp_path):
    suite = parse_suite(hub_suite(), "hub.json")
    cache = datasets.DirCache(tmp_path / "cache")
    with loopback_hub(tmp_path / "hub") as endpoint:
        fetched = suite.materialize(cache, hub_endpoint=endpoint)
    assert (tmp_path / "cache" / FIXTURE_SHA).read_bytes() == FIXTURE.read_bytes()
    # The hub is gone: the rerun reads the cached bytes and draws the same prompts.
    again = suite.materialize(cache, hub_endpoint="http://127.0.0.1:9")
    assert again.to_dict() == fetched.to_dict()
    assert fetched.to_dict()["datasets"]["hub"] == {**hub_suite()["datasets"]["hub"], "format": "jsonl"}
    # Before sampling, the suite's dict is a suite file again (the chart ships it to the Job so).
    assert parse_suite(suite.to_dict(), "again.json") == suite
    assert [len(case.items) for case in fetched.test_cases] == [2, 2]
    assert {item.category for item in fetched.test_cases[1].items} == {"code"}


def test_a_cached_copy_that_does_not_match_is_fetched_again(tmp_path):
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / FIXTURE_SHA).write_bytes(b"tampered")
    with loopback_hub(tmp_path / "hub") as endpoint:
        parse_suite(hub_suite(), "hub.json").materialize(datasets.DirCache(tmp_path / "cache"), hub_endpoint=endpoint)
    assert (tmp_path / "cache" / FIXTURE_SHA).read_bytes() == FIXTURE.read_bytes()


def test_a_wrong_checksum_is_one_error_naming_both_digests(tmp_path):
    with loopback_hub(tmp_path / "hub") as endpoint, pytest.raises(datasets.DatasetError) as raised:
        parse_suite(hub_suite(sha256="0" * 64), "hub.json").materialize(hub_endpoint=endpoint)
    assert str(raised.value) == (
        f"dataset hub: {endpoint}/datasets/specbench/classes/resolve/{REVISION}/classes.jsonl has sha256 {FIXTURE_SHA}, "
        f"the suite pins {'0' * 64}"
    )


def test_an_unreachable_source_and_a_missing_field_are_one_error_each(tmp_path):
    with pytest.raises(
        datasets.DatasetError, match=r"^dataset hub: cannot fetch http://127\.0\.0\.1:9/datasets/specbench/classes/resolve/"
    ):
        parse_suite(hub_suite(), "hub.json").materialize(hub_endpoint="http://127.0.0.1:9")
    with loopback_hub(tmp_path / "hub") as endpoint, pytest.raises(datasets.DatasetError) as raised:
        parse_suite(hub_suite(messages_field="", text_field="question"), "hub.json").materialize(hub_endpoint=endpoint)
    assert str(raised.value) == "dataset hub item 0: text_field 'question' must be a non-empty string"


def test_a_jsonl_line_ends_at_a_newline_only_not_at_a_unicode_line_separator():
    """A prompt may hold U+2028, U+0085 or U+001E raw (JSON allows it); a Windows file ends lines with CRLF."""
    source = datasets.DatasetSource("d", "", "0" * 64, "MIT", "id", url="https://example.com/d.jsonl", text_field="text")
    texts = ["one\u2028line", "next\x85line", "record\x1esep", "plain"]
    data = "\r\n".join(json.dumps({"id": str(i), "text": t}, ensure_ascii=False) for i, t in enumerate(texts)).encode()
    assert [item.text for item in datasets.parse_items(source, data)] == texts


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"revision": "main"}, "hub.json.datasets.hub.revision: 'main' must be a full 40-hex commit (a pinned revision, not a branch)"),
        ({"sha256": "abc"}, "hub.json.datasets.hub.sha256: 'abc' must be the file's 64-hex sha256"),
        ({"licence": ""}, "hub.json.datasets.hub.licence: required (the dataset's licence, e.g. Apache-2.0, MIT)"),
        ({"format": "csv"}, "hub.json.datasets.hub.format: 'csv' is not allowed; allowed: jsonl, json (a .gz path is gunzipped first)"),
        (
            {"github": "a/b"},
            "hub.json.datasets.hub: name exactly one of hub (a Hugging Face dataset id), github (owner/name) or url; got ['hub', 'github']",
        ),
    ],
)
def test_bad_sources_name_the_field(change, message):
    with pytest.raises(SuiteError) as raised:
        parse_suite(hub_suite(**change), "hub.json")
    assert str(raised.value) == message


def test_bad_dataset_cases_name_the_field():
    data = hub_suite()
    data["test_cases"][0]["sample"] = 0
    with pytest.raises(SuiteError, match=r"test_cases\[0\]\.sample: 0 must be an integer >= 1"):
        parse_suite(data, "s.json")
    data = hub_suite()
    data["test_cases"][0]["dataset"] = "nope"
    with pytest.raises(SuiteError, match=r"test_cases\[0\]\.dataset: 'nope' is not a key of the suite's datasets; allowed: hub"):
        parse_suite(data, "s.json")


# --- the whole run, offline ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def servers():
    # Nothing here is timed: the emulated steps only need to be short (0.45 ms at 0.01).
    profiles = default_profiles(time_scale=0.01)
    with EmulatorServer(profiles["qwen-vllm"]) as baseline, EmulatorServer(profiles["qwen-sd-vllm"]) as speculative:
        yield baseline, speculative


def run_args(baseline, speculative, results, *extra):
    return emulated_run_args(baseline, speculative, results, "--no-publish", "--requests", "4", *extra)


def test_a_dataset_suite_runs_offline_and_run_json_names_its_sources(servers, tmp_path):
    code = cli.main(
        run_args(*servers, tmp_path, "--suite", "builtin:classes-offline", "--test-case", "qa", "--test-case", "json", "--run-id", "d1")
    )
    assert code == 0
    store = RunStore(LocalStore(tmp_path), "d1")
    run = json.loads(store.read("run.json"))
    suite = run["plan"]["suite"]
    assert suite["datasets"]["fixtures"]["sha256"] == FIXTURE_SHA and suite["datasets"]["fixtures"]["licence"].startswith("Apache-2.0")
    assert [case["sampled_ids"] for case in suite["test_cases"]] == [["qa-2", "qa-3", "qa-1"], ["qa-3", "qa-1", "qa-2"]]
    assert run["plan"]["load"]["enable_thinking"] is False
    assert run["cases"]["qa"]["outputs_match"] is True  # compared per prompt
    records = read_jsonl(store.read("records/qa.jsonl").splitlines())
    assert [r.prompt_id for r in records if r.variant == "qwen-vllm"] == ["qa-2", "qa-3", "qa-1", "qa-2"]
    assert all(r.ok and r.output_tokens == 96 for r in records)  # the case's own max_tokens
    truth = [t for t in servers[1].truth if t.request_id.startswith("d1-")]
    assert truth and all(t.chat_template_kwargs == {"enable_thinking": False} for t in truth)
    assert {t.acceptance for t in truth} == {0.62, 0.9}  # each class its own acceptance in the emulator


def test_a_bad_source_stops_the_run_before_any_traffic(servers, tmp_path, capsys):
    suite = hub_suite(hub="", url=str(FIXTURE), revision="", sha256="1" * 64)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(suite))
    before = len(servers[0].truth) + len(servers[1].truth)
    code = cli.main(run_args(*servers, tmp_path / "results", "--suite", str(path), "--run-id", "bad"))
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err == f"specbench: dataset hub: {FIXTURE} has sha256 {FIXTURE_SHA}, the suite pins {'1' * 64}"
    assert len(servers[0].truth) + len(servers[1].truth) == before and not (tmp_path / "results").exists()


def test_thinking_mode_is_configurable(servers, tmp_path):
    code = cli.main(
        run_args(*servers, tmp_path, "--suite", "builtin:classes-offline", "--test-case", "code", "--run-id", "t1", "--thinking", "on")
    )
    assert code == 0
    truth = [t for t in servers[0].truth if t.request_id.startswith("t1-")]
    assert len(truth) == 4 and all(t.chat_template_kwargs == {"enable_thinking": True} for t in truth)


def test_the_cluster_config_refuses_a_dataset_suite_the_job_cannot_run(tmp_path):
    from config.validate import dataset_suite_problems

    assert list(dataset_suite_problems("benchmark.suite_file", "builtin:classes", "native")) == []
    (problem,) = dataset_suite_problems("benchmark.suite_file", "builtin:classes", "llmperf")
    assert (problem.key, problem.value, problem.allowed) == ("benchmark.engine", "llmperf", "native")
    local = tmp_path / "local.json"
    local.write_text(json.dumps(hub_suite(hub="", revision="", url="classes.jsonl")))
    (problem,) = dataset_suite_problems("benchmark.suite_file", str(local), "native")
    assert problem.problem == "dataset hub is at classes.jsonl, which the benchmark pod cannot read"


def test_the_s3_cache_stores_by_digest_and_serves_reruns(tmp_path):
    pytest.importorskip("boto3")
    from tests import moto_aws

    with moto_aws.mocked():
        client = moto_aws.bucket("data", "us-east-2")
        cache = datasets.open_cache("s3://data/datasets", region="us-east-2")
        assert cache.location == "s3://data/datasets/" and cache.get(FIXTURE_SHA) is None  # a miss, not an error
        with loopback_hub(tmp_path / "hub") as endpoint:
            first = parse_suite(hub_suite(), "hub.json").materialize(cache, hub_endpoint=endpoint)
        body = client.get_object(Bucket="data", Key=f"datasets/{FIXTURE_SHA}")["Body"].read()
        assert body == FIXTURE.read_bytes()
        again = parse_suite(hub_suite(), "hub.json").materialize(cache, hub_endpoint="http://127.0.0.1:9")
        assert again.to_dict() == first.to_dict()
        with pytest.raises(datasets.DatasetError, match=r"^dataset cache s3://missing/datasets/: "):
            datasets.open_cache("s3://missing/datasets/", region="us-east-2").get(FIXTURE_SHA)


def test_a_cache_that_cannot_be_written_is_one_error(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    with loopback_hub(tmp_path / "hub") as endpoint, pytest.raises(datasets.DatasetError) as raised:
        parse_suite(hub_suite(), "hub.json").materialize(datasets.DirCache(tmp_path / "file" / "cache"), hub_endpoint=endpoint)
    assert str(raised.value).startswith(f"dataset cache {tmp_path / 'file' / 'cache'}: cannot store {FIXTURE_SHA}: ")


def test_the_jobs_settings_snapshot_names_each_source_its_revision_and_licence():
    from charts.spec import benchmark_spec, serving_plan
    from config.loader import load_config

    def snapshot(context):
        config = load_config(context)
        return json.loads(benchmark_spec(config, serving_plan(config, "bucket")).settings_json)["benchmark"]

    pinned = {
        name: (source.get("github") or source.get("hub") or source.get("url"), source["revision"], source["sha256"], source["licence"])
        for name, source in snapshot({"benchmark.suite_file": "builtin:classes"})["datasets"].items()
    }
    assert pinned == {
        "humaneval": (
            "openai/human-eval",
            "463c980b59e818ace59f6f9803cd92c749ceae61",
            "b796127e635a67f93fb35c04f4cb03cf06f38c8072ee7cee8833d7bee06979ef",
            "MIT",
        ),
        "spec-bench": (
            "hemingkx/Spec-Bench",
            "66230f10cb0a02aced5ef3ce1e85163c16160454",
            "4b6d33e79484f9841c487ee87d1cf6aa8c6066f61d5d482ff09e5a007fafdf04",
            "Apache-2.0",
        ),
    }
    assert "datasets" not in snapshot({})  # the reference suite has no sources: the default snapshot is unchanged
