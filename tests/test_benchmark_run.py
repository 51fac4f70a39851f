"""The benchmark end to end on loopback: the CLI against two emulated vLLM servers, results stored
in a directory or in S3 (moto), faults counted without losing good results, readiness bounded,
a crash keeping what completed, and the native engine's timings checked against the emulator's
ground truth."""

import asyncio
import contextlib
import dataclasses
import json
import statistics
from datetime import datetime, timezone

import pytest
from botocore.exceptions import ClientError

from specbench import cli, commands
from specbench.emulator.process import emulators_in_subprocess, fetch_truth
from specbench.emulator.server import EmulatorServer, default_profiles
from specbench.load.native import NativeEngine
from specbench.load.types import Endpoint, LoadSpec
from specbench.outputs import cloudwatch
from specbench.prompts.suite import DEFAULT_SUITE
from specbench.results.records import INTERRUPTED, RequestRecord, read_jsonl
from specbench.results.store import LocalStore, RunStore
from specbench.runner import EngineFailed, Runner, RunPlan
from tests import moto_aws
from tests.runs import emulated_run_args, wait_for

# Real-time loopback servers: scheduled first (tests/conftest.py); one worker for the file: its module
# fixtures (the emulator servers) are set up once, not in every worker (tests/conftest.py XdistGroups).
pytestmark = [pytest.mark.servers, pytest.mark.xdist_group("benchmark-run")]

SCALE = 0.1  # 4.5 ms target steps: fast, still far above loopback latency
TWO_CASES = ["--test-case", "counting", "--test-case", "shakespeare"]


@pytest.fixture(scope="module")
def servers():
    profiles = default_profiles(time_scale=SCALE)
    with EmulatorServer(profiles["qwen-vllm"]) as baseline, EmulatorServer(profiles["qwen-sd-vllm"]) as speculative:
        yield baseline, speculative


def run_args(baseline, speculative, results, *extra):
    return emulated_run_args(baseline, speculative, results, "--output-tokens", "40", *extra)


def stored(results, run_id):
    store = RunStore(LocalStore(results), run_id)
    records = [r for key in store.keys("records/") for r in read_jsonl(store.read(key).splitlines())]
    return store, records


def test_run_stores_records_acceptance_llmperf_files_and_settings(servers, tmp_path, capsys):
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"services": {"qwen-sd-vllm": {"draft_model": "Qwen/Qwen3-1.7B", "num_speculative_tokens": 7}}}))
    code = cli.main(run_args(*servers, tmp_path, *TWO_CASES, "--run-id", "r1", "--no-publish", "--settings", str(settings)))
    assert code == 0
    store, records = stored(tmp_path, "r1")
    assert len(records) == 2 * 2 * 8 and all(r.ok for r in records)
    assert {(r.variant, r.test_case) for r in records} == {
        (v, c) for v in ("qwen-vllm", "qwen-sd-vllm") for c in ("counting", "shakespeare")
    }
    assert all(r.output_tokens == 40 and r.token_count_source == "usage" and sum(r.chunk_tokens) == 40 for r in records)
    baseline = [r for r in records if r.variant == "qwen-vllm"]
    speculative = [r for r in records if r.variant == "qwen-sd-vllm"]
    assert all(r.tokens_per_chunk == 1 for r in baseline) and all(
        r.tokens_per_chunk > 1.5 for r in speculative if r.test_case == "counting"
    )
    run = json.loads(store.read("run.json"))
    assert run["status"] == "completed" and run["counts"] == {"requests": 32, "errors": 0, "interrupted": 0, "engine_failures": 0}
    assert run["plan"]["deployment"]["services"]["qwen-sd-vllm"]["num_speculative_tokens"] == 7
    assert run["plan"]["load"]["temperature"] == 0.0 and run["plan"]["load"]["seed"] == 11111
    assert run["cases"]["counting"]["prompt_tokens"] == 64 and run["cases"]["counting"]["outputs_match"] is True
    acceptance = json.loads(store.read("acceptance/counting.json"))
    assert acceptance["qwen-vllm"]["source"] == "missing"  # the baseline has no speculative counters: missing, not 0
    assert acceptance["qwen-sd-vllm"]["source"] == "counters" and 0.3 < acceptance["qwen-sd-vllm"]["acceptance_rate"] <= 1
    assert len(acceptance["qwen-sd-vllm"]["per_position"]) == 7
    summary = json.loads(store.read("llmperf/qwen-sd-vllm/counting/Qwen-Qwen3-32B_64_40_summary.json"))
    assert summary["results_num_completed_requests"] == 8 and summary["results_number_errors"] == 0
    out = capsys.readouterr().out
    assert "counting" in out and "TPOT speedup" in out


def test_faults_are_counted_and_every_good_result_is_kept(tmp_path):
    profiles = default_profiles(time_scale=SCALE)
    faulty = dataclasses.replace(
        profiles["qwen-sd-vllm"],
        stall_s=1.2,
        faults={0: "http_500", 1: "drop_mid_stream", 2: "stall", 3: "malformed_sse", 4: "empty_completion"},
    )
    with EmulatorServer(profiles["qwen-vllm"]) as baseline, EmulatorServer(faulty) as speculative:
        code = cli.main(
            run_args(
                baseline,
                speculative,
                tmp_path,
                "--test-case",
                "json",
                "--run-id",
                "f",
                "--no-publish",
                "--request-timeout",
                "1",  # 5x what a good request takes, so a busy machine does not time them out
                "--concurrency",
                "1",
            )
        )
    assert code == 0  # failed requests are counted, not fatal
    store, records = stored(tmp_path, "f")
    failed = sorted((r for r in records if not r.ok), key=lambda r: r.request_index)
    assert len(records) == 16 and len(failed) == 5 and all(r.variant == "qwen-sd-vllm" for r in failed)
    messages = [r.error_msg for r in failed]
    assert failed[0].error_code == 500
    assert "connection" in messages[1] or "before [DONE]" in messages[1]
    assert "timeout" in messages[2]
    assert "malformed server-sent event" in messages[3]
    assert "empty completion" in messages[4]
    assert all(r.ttft_s is None for r in failed) and all(r.ttft_s and r.output_tokens == 40 for r in records if r.ok)
    assert json.loads(store.read("run.json"))["counts"] == {"requests": 16, "errors": 5, "interrupted": 0, "engine_failures": 0}
    rows = json.loads(store.read("llmperf/qwen-sd-vllm/json/Qwen-Qwen3-32B_64_40_individual_responses.json"))
    assert sum(row["error_code"] is not None for row in rows) == 5 and len(rows) == 8


def test_readiness_waits_then_fails_clearly(tmp_path, capsys):
    profiles = default_profiles(time_scale=SCALE)
    late = dataclasses.replace(profiles["qwen-vllm"], ready_after_s=0.4)
    with EmulatorServer(late) as baseline, EmulatorServer(profiles["qwen-sd-vllm"]) as speculative:
        args = run_args(baseline, speculative, tmp_path, "--test-case", "json", "--run-id", "late", "--no-publish")
        assert cli.main(args) == 0  # became ready within --ready-timeout 5
        assert baseline.truth[0].arrival_s - baseline.emulator.started_s >= 0.4  # waited: nothing was sent before it was ready
        dead = ["--endpoint", "qwen-vllm=http://127.0.0.1:9", "--endpoint", f"qwen-sd-vllm={speculative.url}"]
        code = cli.main(
            ["run", *dead, "--results", str(tmp_path), "--run-id", "dead", "--ready-timeout", "0.3", "--no-publish", "--no-progress"]
        )
    assert code == commands.EXIT_NOT_READY
    err = capsys.readouterr().err
    assert "not ready after 0.3 s: qwen-vllm at http://127.0.0.1:9: unreachable" in err
    assert json.loads(RunStore(LocalStore(tmp_path), "dead").read("run.json"))["status"] == "not-ready"


def test_a_crash_keeps_the_test_cases_that_completed(servers, tmp_path):
    class CrashOnSecondCase(NativeEngine):
        async def run(self, endpoint, prepared, load, run_id, on_record):
            if prepared.case.name == "shakespeare":
                raise RuntimeError("node lost")
            return await super().run(endpoint, prepared, load, run_id, on_record)

    plan = RunPlan(
        tuple(Endpoint(n, s.url) for n, s in zip(("qwen-vllm", "qwen-sd-vllm"), servers, strict=False)),
        DEFAULT_SUITE.select(["counting", "shakespeare"]),
        LoadSpec("Qwen/Qwen3-32B", 20, 4, 4, 10.0),
        64,
        "native",
        5.0,
    )
    store = RunStore(LocalStore(tmp_path), "crash")
    with pytest.raises(RuntimeError, match="node lost"):
        asyncio.run(Runner(plan, CrashOnSecondCase(), store, progress=False).run())
    run = json.loads(store.read("run.json"))
    assert run["status"] == "failed" and "node lost" in run["error"]
    assert run["counts"] == {"requests": 8, "errors": 0, "interrupted": 0, "engine_failures": 2}
    assert len(read_jsonl(store.read("records/counting.jsonl").splitlines())) == 8


def two_endpoint_plan(servers, requests=4, concurrency=4, tokens=20, cases=("counting",)):
    return RunPlan(
        tuple(Endpoint(n, s.url) for n, s in zip(("qwen-vllm", "qwen-sd-vllm"), servers, strict=True)),
        DEFAULT_SUITE.select(list(cases)),
        LoadSpec("Qwen/Qwen3-32B", tokens, concurrency, requests, 10.0),
        64,
        "native",
        5.0,
    )


def test_one_endpoints_engine_failure_keeps_every_record_of_the_other(servers, tmp_path):
    """The baseline's engine produces its records on another thread (as the llmperf engine does),
    slowly; the speculative endpoint's engine raises once the first baseline record exists. Every
    baseline record, including those produced after the failure, is stored and counted."""
    import threading
    import time

    first_record = threading.Event()

    class OneEndpointFails:
        name = "native"

        async def run(self, endpoint, prepared, load, run_id, on_record):
            if endpoint.name == "qwen-sd-vllm":
                await asyncio.to_thread(first_record.wait, 5)
                raise RuntimeError("ray.init twice")
            return await asyncio.to_thread(self.produce, endpoint, prepared, load, run_id, on_record)

        def produce(self, endpoint, prepared, load, run_id, on_record):
            records = []
            for index in range(load.requests):
                record = RequestRecord(run_id, endpoint.name, prepared.case.name, prepared.case.prompt_class, "native", index, 1.0)
                record.error_code, record.error_msg = (None, "") if index else (-1, "client error")
                on_record(record)
                records.append(record)
                first_record.set()
                time.sleep(0.05)  # the other endpoint fails meanwhile
            return records

    store = RunStore(LocalStore(tmp_path), "fails")
    with pytest.raises(EngineFailed, match=r"failed for qwen-sd-vllm \(RuntimeError: ray.init twice\)") as failure:
        asyncio.run(Runner(two_endpoint_plan(servers, requests=6), OneEndpointFails(), store, progress=False).run())
    # The closing line says what was stored, not that every endpoint's records were (issue 22).
    assert str(failure.value).endswith("; 6 of 12 records stored (missing: qwen-sd-vllm 0 of 6)")
    stored_records = read_jsonl(store.read("records/counting.jsonl").splitlines())
    assert [(r.variant, r.request_index) for r in stored_records] == [("qwen-vllm", i) for i in range(6)]
    run = json.loads(store.read("run.json"))
    assert run["status"] == "failed" and "qwen-sd-vllm (RuntimeError: ray.init twice)" in run["error"]
    assert run["counts"] == {"requests": 6, "errors": 1, "interrupted": 0, "engine_failures": 1}
    assert run["engine_failures"] == [{"test_case": "counting", "endpoint": "qwen-sd-vllm", "error": "RuntimeError: ray.init twice"}]
    assert run["cases"]["counting"]["requests"] == 6


def test_requests_in_flight_when_stopped_are_stored_as_interrupted_and_counted(servers, tmp_path):
    """Cancel (what SIGTERM does) once three requests have finished: with four in flight per endpoint,
    the others are mid-stream. Each sent request is stored exactly once, and run.json counts what is stored."""

    class CancelAfterThree(NativeEngine):
        finished = 0

        async def collect(self, *args):
            await super().collect(*args)
            CancelAfterThree.finished += 1
            if CancelAfterThree.finished == 3:
                main.cancel()

    async def run(runner):
        global main
        main = asyncio.current_task()
        return await runner.run()

    store = RunStore(LocalStore(tmp_path), "stop")
    runner = Runner(
        two_endpoint_plan(servers, requests=8, tokens=200, cases=("counting", "json")), CancelAfterThree(), store, progress=False
    )
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(run(runner))
    records = read_jsonl(store.read("records/counting.jsonl").splitlines())
    interrupted = [r for r in records if r.error_code == INTERRUPTED]
    assert sum(r.ok for r in records) == 3 and len(interrupted) == len(records) - 3 >= 4  # 4 a side were in flight
    assert all(r.error_msg.startswith("interrupted: the run was stopped while this request was in flight") for r in interrupted)
    for variant in ("qwen-vllm", "qwen-sd-vllm"):  # every sent request once: indices are sent in order
        indices = sorted(r.request_index for r in records if r.variant == variant)
        assert indices == list(range(len(indices))) and len(indices) >= 4
    run = json.loads(store.read("run.json"))
    assert run["status"] == "interrupted" and not store.keys("records/json.jsonl")
    n = len(records)
    assert run["counts"] == {"requests": n, "errors": n - 3, "interrupted": n - 3, "engine_failures": 0}
    assert run["cases"]["counting"]["requests"] == n


def test_native_timings_agree_with_the_emulators_ground_truth():
    """Per request, the client's stamps against the server's own record of the same request, with
    the servers in their own process (as in a deployment): exact tokens per chunk, the request sent
    before the server received it, every chunk and [DONE] read after the server wrote it (one
    monotonic clock), and TTFT and time per output token derived from those stamps. No wall-clock
    bound: a busy machine stretches the loopback's transit but cannot turn it around (issue 24);
    scripts/bench_client.py measures the transit itself."""
    with emulators_in_subprocess(time_scale=0.2) as urls:
        plan = RunPlan(
            tuple(Endpoint(name, url) for name, url in urls.items()),
            DEFAULT_SUITE.select(["hello-world"]),
            LoadSpec("Qwen/Qwen3-32B", 30, 4, 8, 30.0),
            64,
            "native",
            10.0,
        )
        result = asyncio.run(Runner(plan, NativeEngine(), RunStore(MemoryStore(), "truth"), progress=False).run())
        truth = {t["request_id"]: t for url in urls.values() for t in fetch_truth(url)}
    assert len(result.records) == 16 and all(r.ok for r in result.records)
    lead = []
    for record in result.records:
        t = truth[f"truth-{record.variant}-hello-world-{record.request_index}"]
        where = (record.variant, record.request_index)
        assert record.chunk_tokens == t["chunk_tokens"], where  # exact tokens per chunk from usage
        sent, arrival = record.sent_monotonic_s, t["arrival_s"]
        read = [sent + offset + 1e-6 for offset in record.chunk_times_s]  # offsets are stored to the microsecond
        written = [arrival + offset for offset in t["chunk_offsets_s"]]
        # The client stamps "sent" just after its write returns, the server "arrival" once it has
        # read the request: a client preempted between its write and its stamp can stamp after the
        # server, never after the server answered. Hard bound per request, the order on the median.
        assert sent <= arrival + t["ttft_s"], where
        lead.append(arrival - sent)
        assert all(w <= r for w, r in zip(written, read, strict=True)), (where, written, read)
        assert arrival + t["e2e_s"] <= sent + record.end_to_end_latency_s + 1e-6, where
        assert record.ttft_s >= t["ttft_s"] and record.ttft_s == pytest.approx(record.chunk_times_s[0], abs=2e-6), where
        expected_tpot = (record.end_to_end_latency_s - record.ttft_s) / (record.output_tokens - 1)
        assert record.time_per_output_token_s == pytest.approx(expected_tpot, rel=1e-9), where
    assert statistics.median(lead) >= 0, lead


class MemoryStore:
    location = "memory"

    def __init__(self):
        self.data = {}

    def write_text(self, key, text):
        self.data[key] = text

    def read_text(self, key):
        return self.data[key]

    def keys(self, prefix=""):
        return sorted(k for k in self.data if k.startswith(prefix))


@pytest.fixture
def aws(monkeypatch):
    """moto in-process through tests/moto_aws.py: the boto3 clients the run and publish make come from
    one session whose service models are loaded once per test process (moto's own ``mock_aws``
    drops boto3's default session, so each would build a new one and read its models again)."""
    moto_aws.offline_environment(monkeypatch)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-2")
    with moto_aws.mocked():
        yield


def test_run_to_s3_then_cloudwatch_with_every_value(servers, aws):
    s3 = moto_aws.bucket("data", "us-east-2")
    code = cli.main(run_args(*servers, "s3://data/results/", "--test-case", "json", "--run-id", "s3run", "--region", "us-east-2"))
    assert code == 0
    keys = {item["Key"] for item in s3.list_objects_v2(Bucket="data", Prefix="results/s3run/")["Contents"]}
    assert {"results/s3run/run.json", "results/s3run/records/json.jsonl", "results/s3run/acceptance/json.json",
            "results/s3run/publish.json", "results/s3run/unpublished.json",
            "results/s3run/llmperf/qwen-sd-vllm/json/Qwen-Qwen3-32B_64_40_individual_responses.json"} <= keys  # fmt: skip
    cloudwatch = moto_aws.client("cloudwatch", "us-east-2")
    names = {m["MetricName"] for m in cloudwatch.list_metrics(Namespace="Qwen/LLMPerf")["Metrics"]}
    assert {"TTFT", "InterTokenLatency", "TimePerOutputToken", "EndToEndLatency", "OutputThroughput", "InputTokens",
            "OutputTokens", "TokensPerChunk", "Errors", "AcceptanceRate", "MeanAcceptanceLength"} <= names  # fmt: skip
    records = read_jsonl(s3.get_object(Bucket="data", Key="results/s3run/records/json.jsonl")["Body"].read().decode().splitlines())
    start = min(r.started_at for r in records)

    def statistic(name, stat, variant, **more):
        dimensions = [{"Name": "Variant", "Value": variant}, {"Name": "PromptClass", "Value": "structured"}]
        dimensions += [{"Name": k, "Value": v} for k, v in more.items()]
        query = {
            "Id": "q",
            "MetricStat": {
                "Metric": {"Namespace": "Qwen/LLMPerf", "MetricName": name, "Dimensions": dimensions},
                "Period": 60,
                "Stat": stat,
            },
        }
        result = cloudwatch.get_metric_data(MetricDataQueries=[query], StartTime=datetime.fromtimestamp(start - 600, timezone.utc),
                                            EndTime=datetime.fromtimestamp(start + 600, timezone.utc))["MetricDataResults"][0]  # fmt: skip
        return sum(result["Values"])

    assert statistic("TTFT", "SampleCount", "qwen-sd-vllm", TestCase="json") == 8
    assert statistic("Errors", "SampleCount", "qwen-vllm") == 8 and statistic("Errors", "Sum", "qwen-vllm") == 0
    expected_tokens = sum(r.output_tokens for r in records if r.variant == "qwen-vllm")
    assert statistic("OutputTokens", "Sum", "qwen-vllm", TestCase="json") == expected_tokens
    assert statistic("AcceptanceRate", "SampleCount", "qwen-sd-vllm", TestCase="json") == 1
    assert statistic("AcceptanceRate", "SampleCount", "qwen-vllm", TestCase="json") == 0  # missing on the baseline: nothing, not 0


def test_a_failed_publish_keeps_the_batches_and_publish_sends_only_those(servers, tmp_path, aws, monkeypatch, capsys):
    class Refusing:
        def put_metric_data(self, **_):
            raise ClientError(
                {"Error": {"Code": "AccessDenied", "Message": "not allowed"}, "ResponseMetadata": {"HTTPStatusCode": 403}}, "PutMetricData"
            )

    real_make_client = cloudwatch.make_client
    monkeypatch.setattr(cloudwatch, "make_client", lambda region: Refusing())
    code = cli.main(run_args(*servers, tmp_path, "--test-case", "json", "--run-id", "denied"))
    assert code == commands.EXIT_UNPUBLISHED
    assert "NOT PUBLISHED" in capsys.readouterr().out
    store = RunStore(LocalStore(tmp_path), "denied")
    kept = json.loads(store.read("unpublished.json"))
    assert kept and kept[0]["error_code"] == "AccessDenied"
    monkeypatch.setattr(cloudwatch, "make_client", real_make_client)
    assert cli.main(["publish", str(tmp_path / "denied"), "--region", "us-east-2"]) == 0
    out = capsys.readouterr().out
    assert "publishing what an earlier attempt left" in out
    published = json.loads(store.read("publish.json"))
    assert published["datums_published"] == sum(len(batch["datums"]) for batch in kept) and json.loads(store.read("unpublished.json")) == []


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--settings", "/nonexistent/settings.json"], "specbench: --settings /nonexistent/settings.json: does not exist\n"),
        (["--settings", "/"], "specbench: --settings /: is a directory; expected a JSON file\n"),
        (["--results", "ftp://somewhere/"], "allowed are a directory path or s3://BUCKET/PREFIX/"),
        (["--test-case", "nope"], "test case nope not in suite 'reference'"),
        (["--endpoint", "qwen-vllm=localhost:8000"], "expected NAME=http(s)://HOST:PORT"),
    ],
)
def test_bad_arguments_are_one_line_errors(extra, message, capsys):
    with pytest.raises(SystemExit) if extra[0] == "--endpoint" else contextlib.nullcontext():
        assert cli.main(["run", "--no-publish", *extra]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_settings_that_are_not_a_json_object_name_the_flag_and_the_file(tmp_path, capsys):
    for text, message in (("{bad", "is not valid JSON (Expecting property name"), ("[1]", "expected a JSON object")):
        path = tmp_path / "settings.json"
        path.write_text(text)
        assert cli.main(["run", "--no-publish", "--settings", str(path)]) == cli.EXIT_USAGE
        err = capsys.readouterr().err
        assert err.startswith(f"specbench: --settings {path}: {message}") and err.count("\n") == 1


def test_unwritable_results_say_nothing_was_stored_there(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code = cli.main(["run", "--results", str(blocker / "results"), "--run-id", "x", "--no-publish", "--no-progress"])
    assert code == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert (
        err
        == f"specbench: --results {blocker / 'results'}: cannot write {blocker / 'results' / 'x' / '.lock'}: Not a directory; nothing was stored there\n"
    )


@contextlib.contextmanager
def html_server():
    """Answers /health and /v1/models like vLLM, but /v1/chat/completions with an HTML page (a proxy's
    login page, a wrong port): a 200 that is not an event stream."""
    import threading

    from aiohttp import web

    async def models(request):
        return web.json_response({"data": [{"id": "Qwen/Qwen3-32B"}]})

    async def page(request):
        return web.Response(text="<html><body>Sign in to continue</body></html>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/health", page)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", page)
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = site._server.sockets[0].getsockname()[1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def test_a_non_sse_answer_records_status_and_content_type_and_a_dead_service_exits_non_zero(servers, tmp_path, capsys):
    with html_server() as url:
        args = ["run", "--endpoint", f"qwen-vllm={servers[0].url}", "--endpoint", f"qwen-sd-vllm={url}", "--results", str(tmp_path)]
        code = cli.main([*args, "--test-case", "json", "--run-id", "h", "--output-tokens", "20", "--no-publish", "--no-progress"])
    assert code == commands.EXIT_SERVICE_FAILED
    _, records = stored(tmp_path, "h")
    failed = [r for r in records if not r.ok]
    assert len(records) == 16 and {r.variant for r in failed} == {"qwen-sd-vllm"} and len(failed) == 8
    assert {(r.error_code, r.error_msg) for r in failed} == {
        (
            -1,
            "HTTP 200, Content-Type text/html; charset=utf-8 (expected 200 text/event-stream): <html><body>Sign in to continue</body></html>",
        )
    }
    out = capsys.readouterr().out
    assert "specbench: every request to qwen-sd-vllm failed; first error: -1: HTTP 200, Content-Type text/html" in out


def test_publish_without_region_or_credentials_is_one_line(tmp_path, monkeypatch, capsys):
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    store = RunStore(LocalStore(tmp_path), "r")
    store.write("run.json", "{}")
    assert cli.main(["publish", str(tmp_path / "r")]) == commands.EXIT_CRASHED
    assert capsys.readouterr().err == "specbench: not published: no AWS region: pass --region or set AWS_REGION\n"
    assert cli.main(["publish", str(tmp_path / "r"), "--region", "us-east-2"]) == commands.EXIT_CRASHED
    err = capsys.readouterr().err
    assert err == "specbench: not published: no AWS credentials found (environment, profile, Pod Identity or instance role)\n"


def test_emulate_on_a_port_in_use_is_one_line(capsys):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert cli.main(["emulate", "--baseline-port", str(port), "--only", "baseline"]) == commands.EXIT_CRASHED
    err = capsys.readouterr().err
    assert err.startswith("specbench emulate: [Errno 98] error while attempting to bind on address") and err.count("\n") == 1


def test_sigterm_stores_requests_in_flight_as_interrupted_and_counts_match_the_files(servers, tmp_path):
    """The Job's deadline or `kubectl delete`: a real SIGTERM to `specbench run` mid-request."""
    import os
    import signal
    import subprocess
    import sys

    args = run_args(*servers, tmp_path, "--run-id", "term", "--no-publish", "--output-tokens", "600")
    process = subprocess.Popen(
        [sys.executable, "-m", "specbench", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ
    )
    try:
        # The servers' own record: four requests of this run streaming (2.7 s each), none finished.
        # Read live, not through ``server.truth``: that deep-copies every record the module's servers
        # hold (~7 ms a poll, ~0.3 s of CPU over the wait); a record's fields are only ever set, so
        # one seen with chunks and no end is streaming.
        def streaming():
            mine = [t for server in servers for t in server.emulator.truth if t.request_id.startswith("term-")]
            return sum(1 for t in mine if t.chunk_offsets_s and t.e2e_s is None) >= 4

        assert wait_for(streaming, 30), process.poll()
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == commands.EXIT_CRASHED
    assert f"interrupted: what completed is stored in {tmp_path / 'term'} (requests in flight recorded as interrupted)" in err
    assert "Traceback" not in err
    store, records = stored(tmp_path, "term")
    run = json.loads(store.read("run.json"))
    interrupted = sum(r.error_code == INTERRUPTED for r in records)
    assert run["status"] == "interrupted" and interrupted >= 4
    assert run["counts"] == {
        "requests": len(records),
        "errors": sum(not r.ok for r in records),
        "interrupted": interrupted,
        "engine_failures": 0,
    }
