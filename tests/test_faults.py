"""Fault injection (issue 22): misbehaving servers on 127.0.0.1 (tests/faultserver.py), each driven
through ``specbench run`` into a results directory. Per fault class: the bad request becomes a
record of its own kind with nothing measured in it, every other request of that endpoint and of the
other is kept, the run goes on, and the stored records are what run.json counts. Streams that only
look odd (CRLF, split reads, usage on the last chunk only...) stay successes with the right counts."""

from __future__ import annotations

import json

import pytest

from specbench import cli, commands
from specbench.results.records import ERROR_KINDS, read_jsonl
from specbench.results.store import LocalStore, RunStore
from tests.faultserver import CONTENT, GOOD, MODEL, FaultServer, Reply, event, good_events, sse, stream, usage

pytestmark = pytest.mark.servers  # real-time loopback servers: scheduled first (tests/conftest.py)

BAD = 1  # the faulty endpoint's request that gets the fault; 0 and 2 are good
REQUESTS = 3
HTML = (("Content-Type", "text/html"),)


def replace(events, index, new):
    events = list(events)
    events[index] = new
    return events


def content_events(tokens):
    """The good stream with each content chunk's cumulative completion_tokens replaced."""
    events = good_events()
    for index, count in enumerate(tokens):
        events[1 + index]["usage"] = usage(count)
    return events


def split_bytes(reply: Reply, size: int) -> Reply:
    whole = b"".join(reply.pieces)
    return Reply(pieces=[whole[i : i + size] for i in range(0, len(whole), size)])


CHUNKED = (("Content-Type", "text/event-stream"), ("Transfer-Encoding", "chunked"))


def chunked(pieces):
    return [b"%x\r\n%s\r\n" % (len(p), p) for p in pieces] + [b"0\r\n\r\n"]


def nested(depth):
    return b'{"choices": ' + b"[" * depth + b"]" * depth + b"}"


# (id, reply for the bad request, the error kind it must get); kind None: a success.
BAD_EVENTS = [
    ("not-utf8", stream([*good_events()[:2], b'{"choices": [{"delta": {"content": "\xff\xfe"}}]}', *good_events()[2:]]), "malformed_event"),
    ("not-json", stream([*good_events()[:2], b"{oops", *good_events()[2:]]), "malformed_event"),
    ("json-array", stream([b"[1, 2]", *good_events()]), "malformed_event"),
    ("json-string", stream([b'"hello"', *good_events()]), "malformed_event"),
    ("json-null", stream([b"null", *good_events()]), "malformed_event"),
    ("nan", stream(replace(good_events(), 2, event(" two", float("nan")))), "malformed_event"),
    ("usage-string", stream(replace(good_events(), 2, {**event(" two"), "usage": "lots"})), "malformed_event"),
    ("usage-list", stream(replace(good_events(), 2, {**event(" two"), "usage": [2]})), "malformed_event"),
    ("choices-object", stream(replace(good_events(), 2, {**event(" two", 2), "choices": {"0": {}}})), "malformed_event"),
    ("choices-string", stream(replace(good_events(), 2, {**event(" two", 2), "choices": "two"})), "malformed_event"),
    ("choice-not-object", stream(replace(good_events(), 2, {**event(None, 2), "choices": ["two"]})), "malformed_event"),
    (
        "two-choices",
        stream(replace(good_events(), 2, {**event(" two", 2), "choices": [{"delta": {"content": "a"}}] * 2})),
        "malformed_event",
    ),
    ("delta-string", stream(replace(good_events(), 2, {**event(None, 2), "choices": [{"index": 0, "delta": " two"}]})), "malformed_event"),
    ("content-number", stream(replace(good_events(), 2, {**event(None, 2), "choices": [{"delta": {"content": 2}}]})), "malformed_event"),
    (
        "content-list",
        stream(replace(good_events(), 2, {**event(None, 2), "choices": [{"delta": {"content": ["two"]}}]})),
        "malformed_event",
    ),
    ("text-number", stream(replace(good_events(), 2, {**event(None, 2), "choices": [{"index": 0, "text": 7}]})), "malformed_event"),
    ("tokens-string", stream(replace(good_events(), 2, event(" two", "2"))), "malformed_event"),
    ("tokens-bool", stream(replace(good_events(), 2, event(" two", True))), "malformed_event"),
    ("tokens-float", stream(replace(good_events(), 2, event(" two", 2.5))), "malformed_event"),
    ("tokens-negative", stream(replace(good_events(), 1, event(" one", -1))), "malformed_event"),
    ("prompt-tokens-string", stream(replace(good_events(), 2, {**event(" two"), "usage": usage(2, "16")})), "malformed_event"),
    ("model-number", stream(replace(good_events(), 2, event(" two", 2, model=7))), "malformed_event"),
    ("deeply-nested", stream([*good_events()[:2], nested(50_000), *good_events()[2:]]), "malformed_event"),
    (
        "huge-digits",
        stream([*good_events()[:2], b'{"usage": {"completion_tokens": ' + b"9" * 5000 + b"}}", *good_events()[2:]]),
        "malformed_event",
    ),
]
WRONG_FIGURES = [
    ("tokens-backwards", stream(content_events([1, 2, 3, 2, 5])), "tokens_backwards"),
    ("tokens-null-at-end", stream([*good_events()[:-1], {"choices": [], "usage": usage(None)}]), "tokens_missing"),
    ("tokens-missing", stream(replace(good_events(), 3, {**event(" three"), "usage": {"prompt_tokens": 16}})), "tokens_missing"),
    ("content-after-last-usage", stream([good_events()[0], event(" one", 1), event(" two"), event(" three")]), "tokens_missing"),
    ("over-max-tokens", stream([*good_events()[:-1], {"choices": [], "usage": usage(14204)}]), "over_max_tokens"),
    ("over-max-tokens-per-chunk", stream([*content_events([1, 2, 3, 4, 41])[:-2], {"choices": [], "usage": usage(41)}]), "over_max_tokens"),
    ("model-mismatch", stream(good_events(model="Qwen/Qwen3-1.7B")), "model_mismatch"),
    ("model-mismatch-midway", stream(replace(good_events(), 3, event(" three", 3, model="other"))), "model_mismatch"),
    ("chunk-without-token", stream(content_events([1, 2, 2, 3, 4]) + [], done=True), "fewer_tokens_than_chunks"),
    (
        "finish-without-tokens",
        stream([*content_events([0, 0, 0, 0, 0])[:-2], {"choices": [], "usage": usage(0)}]),
        "fewer_tokens_than_chunks",
    ),
    (
        "final-usage-below-chunks",
        stream([*good_events(continuous=False)[:-1], {"choices": [], "usage": usage(3)}]),
        "fewer_tokens_than_chunks",
    ),
]
TRANSPORT = [
    ("http-500", Reply("500 Internal Server Error", HTML, [b"<h1>boom</h1>"]), "http_status"),
    ("http-503-empty", Reply("503 Service Unavailable", (("Content-Length", "0"),)), "http_status"),
    ("http-429", Reply("429 Too Many Requests", (("Content-Type", "application/json"),), [b'{"error": "slow down"}']), "http_status"),
    ("redirect", Reply("302 Found", (("Location", "/elsewhere"), ("Content-Length", "0"))), "http_status"),
    ("html-200", Reply(headers=HTML, pieces=[b"<html>sign in</html>"]), "not_event_stream"),
    ("json-200", Reply(headers=(("Content-Type", "application/json"),), pieces=[json.dumps({"choices": []}).encode()]), "not_event_stream"),
    ("no-content-type", Reply(headers=(), pieces=sse(good_events())), "not_event_stream"),
    ("empty-stream", Reply(), "truncated"),
    ("truncated", stream(good_events()[:3], done=False), "truncated"),
    ("cut-mid-line", Reply(pieces=[*sse(good_events()[:3], done=False), b'data: {"choices": [{"delta": {"cont']), "truncated"),
    # A close-delimited body that ends in a reset may read as its end (aiohttp): either is the truth.
    ("reset-mid-stream", stream(good_events()[:3], done=False, end="reset"), ("connection", "truncated")),
    (
        "reset-mid-chunked-stream",
        Reply(headers=CHUNKED, pieces=chunked(sse(good_events()[:3], done=False))[:-1], end="reset"),
        "connection",
    ),
    ("reset-before-headers", Reply(head=b"", end="reset"), "connection"),
    ("garbage-status-line", Reply(head=b"HTTP/1.1 banana\r\n\r\n"), "connection"),
    ("not-http", Reply(head=b"\x16\x03\x01 hello\r\n\r\n"), "connection"),
    ("never-answers", Reply(silent=True), "timeout"),
    ("headers-then-silence", Reply(pieces=sse(good_events()[:2], done=False), end="hang"), "timeout"),
    ("huge-line", Reply(pieces=[b"data: " + b"x" * (1 << 16)] * 40), "oversized_stream"),
    ("error-event", stream([*good_events()[:2], {"error": {"message": "engine died", "code": 500}}]), "stream_error_event"),
    ("error-event-string", stream([*good_events()[:2], {"error": "overloaded"}]), "stream_error_event"),
    ("done-without-content", stream([good_events()[0], {"choices": [], "usage": usage(0)}]), "empty_completion"),
]
FINE = [
    ("crlf", Reply(pieces=sse(good_events(), newline=b"\r\n")), None),
    ("cr-only", Reply(pieces=sse(good_events(), newline=b"\r")), None),
    ("split-every-byte", split_bytes(GOOD, 1), None),
    ("split-every-7-bytes", split_bytes(GOOD, 7), None),
    ("one-write", Reply(pieces=[b"".join(GOOD.pieces)]), None),
    ("comments-and-fields", Reply(pieces=[b": keep-alive\n\n", b"event: message\nid: 1\nretry: 10\n", *GOOD.pieces]), None),
    ("content-type-case-and-charset", Reply(headers=(("Content-Type", "Text/Event-Stream; charset=utf-8"),), pieces=GOOD.pieces), None),
    ("done-without-newline", Reply(pieces=[*sse(good_events(), done=False), b"data: [DONE]"]), None),
    ("nulls-for-absent", stream([{**e, "usage": e.get("usage"), "choices": e["choices"] or None} for e in good_events()]), None),
    ("unknown-fields", stream([{**e, "system_fingerprint": "x", "prompt_logprobs": None} for e in good_events()]), None),
    ("chunked-encoding", Reply(headers=CHUNKED, pieces=chunked(GOOD.pieces)), None),
]
CASES = BAD_EVENTS + WRONG_FIGURES + TRANSPORT + FINE
SLOW = {"never-answers", "headers-then-silence"}  # the only cases that wait for the request timeout
# Their timeout: long enough for the good requests of the same run (answered at once by the fault
# server) on a busy machine, short enough that the two cases do not idle a second each (issue 24).
SHORT_TIMEOUT = "0.3"


def run_against(tmp_path, baseline: FaultServer, faulty: FaultServer, *extra: str) -> int:
    endpoints = ["--endpoint", f"qwen-vllm={baseline.url}", "--endpoint", f"qwen-sd-vllm={faulty.url}"]
    args = ["run", *endpoints, "--results", str(tmp_path), "--no-progress", "--no-publish", "--ready-timeout", "5", "--run-id", "f"]
    # No test here reads the cost table's intervals: 20 resamples instead of 1000 (issue 24).
    return cli.main([*args, "--output-tokens", "40", "--input-tokens", "16", "--concurrency", "1", "--resamples", "20", *extra])


def stored(tmp_path):
    store = RunStore(LocalStore(tmp_path), "f")
    records = [r for key in store.keys("records/") for r in read_jsonl(store.read(key).splitlines())]
    return records, json.loads(store.read("run.json"))


def assert_counts_match(records, run):
    assert run["counts"]["requests"] == len(records)
    assert run["counts"]["errors"] == sum(not r.ok for r in records)
    kinds = {}
    for record in records:
        if not record.ok:
            kinds[record.error_kind] = kinds.get(record.error_kind, 0) + 1
    assert run["error_kinds"] == dict(sorted(kinds.items()))


@pytest.mark.parametrize(("reply", "kind"), [pytest.param(reply, kind, id=name) for name, reply, kind in CASES])
def test_a_fault_spoils_its_request_only(tmp_path, capsys, reply, kind):
    name = next(n for n, r, _ in CASES if r is reply)
    timeout = SHORT_TIMEOUT if name in SLOW else "30"
    with FaultServer() as baseline, FaultServer(lambda ordinal: reply if ordinal == BAD else GOOD) as faulty:
        code = run_against(tmp_path, baseline, faulty, "--requests", str(REQUESTS), "--test-case", "counting", "--request-timeout", timeout)
        assert faulty.completions == REQUESTS  # the run went on past the fault
    assert code == 0, capsys.readouterr()
    records, run = stored(tmp_path)
    assert run["status"] == "completed" and len(records) == 2 * REQUESTS
    assert_counts_match(records, run)
    good = [r for r in records if not (r.variant == "qwen-sd-vllm" and r.request_index == BAD)]
    assert all(r.ok and r.output_tokens == len(CONTENT) and r.chunks == len(CONTENT) for r in good)
    [bad] = [r for r in records if r.variant == "qwen-sd-vllm" and r.request_index == BAD]
    if kind is None:
        assert bad.ok, bad.error_msg
        assert (bad.output_tokens, bad.chunks, bad.chunk_tokens, bad.token_count_source) == (5, 5, [1] * 5, "usage")
        assert bad.output_sha256 == good[0].output_sha256
        return
    kinds = kind if isinstance(kind, tuple) else (kind,)
    assert not bad.ok and bad.error_kind in kinds, (bad.error_kind, bad.error_msg)
    assert set(kinds) <= set(ERROR_KINDS) and 0 < len(bad.error_msg) <= 500
    # Nothing measured in a failed request may reach a figure.
    assert (bad.ttft_s, bad.output_tokens, bad.end_to_end_latency_s, bad.acceptance_length, bad.chunk_tokens) == (
        None,
        None,
        None,
        None,
        [],
    )
    if kind == "malformed_event":
        assert "malformed server-sent event" in bad.error_msg and "line " in bad.error_msg
        assert "\n" not in bad.error_msg and "\xff" not in bad.error_msg  # the excerpt is escaped


def test_usage_only_on_the_last_chunk_gives_the_total_and_no_acceptance(tmp_path):
    """vLLM without continuous_usage_stats: the total is exact, tokens per chunk unknown: stream
    acceptance unavailable with that reason, never 0.0 (records, the stream figure, the summary)."""
    from specbench.analysis import aggregate, stream_acceptance

    final_only = stream(good_events(continuous=False))
    with FaultServer() as baseline, FaultServer(lambda ordinal: final_only) as faulty:
        assert run_against(tmp_path, baseline, faulty, "--requests", "3", "--test-case", "counting") == 0
    records, run = stored(tmp_path)
    assert_counts_match(records, run)
    spec = [r for r in records if r.variant == "qwen-sd-vllm"]
    base = [r for r in records if r.variant == "qwen-vllm"]
    assert all(r.ok and r.token_count_source == "final-usage" and r.output_tokens == 5 and r.tokens_per_chunk == 1.0 for r in spec)
    assert all(r.acceptance_length is None and r.chunk_tokens == [] and r.acceptance_chunks == 0 for r in spec)
    assert all(r.acceptance_length == 1.0 for r in base)
    figure = stream_acceptance.figure(base, spec, 7)
    assert figure["mean_acceptance_length"] is None and figure["acceptance_rate"] is None and figure["requests"] == 0
    assert figure["reason"].startswith("unavailable: ") and "usage only on the last chunk" in figure["reason"]
    check = stream_acceptance.self_check(spec, base, 7)  # the baseline's role played by the final-usage server
    assert not check.ok and "usage only on the last chunk" in check.reason
    # ... and the run's summary (what the report and the dashboard show) says the same, with no number.
    summary = aggregate.summarize_run(run, records, {}, baseline="qwen-vllm", resamples=100)
    shown = summary.group("counting").variants["qwen-sd-vllm"].stream_acceptance
    assert shown["mean_acceptance_length"] is None and shown["reason"].startswith("unavailable: ")
    assert "usage only on the last chunk" in shown["reason"]


@pytest.mark.parametrize(
    ("reply", "timeout"),
    [
        pytest.param(Reply("503 Service Unavailable", HTML, [b"<h1>loading</h1>"]), "30", id="503"),
        pytest.param(Reply(head=b"", end="reset"), "30", id="resets"),
        pytest.param(Reply(silent=True), SHORT_TIMEOUT, id="never-answers"),
        pytest.param(stream(good_events()[:2], done=False), "30", id="truncated"),
        pytest.param(stream([b"{oops"]), "30", id="malformed"),
        pytest.param(stream(good_events(model="other")), "30", id="model-mismatch"),
    ],
)
def test_an_endpoint_that_fails_every_request_is_stopped_and_the_other_goes_on(tmp_path, capsys, reply, timeout):
    """After --max-consecutive-failures failures in a row nothing more is sent to that endpoint, in
    this test case and the next; every request not sent is a not_sent record; one line says so.
    Each request is parsed as it finishes (before its slot sends the next), so a failure that only
    parsing shows (a malformed event, a truncated stream) counts as soon as a transport failure."""
    threshold, requests = 2, 4
    with FaultServer() as baseline, FaultServer(lambda ordinal: reply) as faulty:
        extra = ["--requests", str(requests), "--test-case", "counting", "--test-case", "json", "--request-timeout", timeout]
        code = run_against(tmp_path, baseline, faulty, "--max-consecutive-failures", str(threshold), *extra)
        sent = faulty.completions
    out = capsys.readouterr().out
    records, run = stored(tmp_path)
    assert code == commands.EXIT_SERVICE_FAILED  # completed, but every request of a service failed
    assert run["status"] == "completed" and len(records) == 2 * 2 * requests
    assert_counts_match(records, run)
    spec = sorted((r for r in records if r.variant == "qwen-sd-vllm"), key=lambda r: (r.test_case != "counting", r.request_index))
    assert all(r.ok for r in records if r.variant == "qwen-vllm")
    expected = threshold
    assert sent == expected  # ground truth: the server received exactly the requests before the breaker opened
    assert [r.error_kind == "not_sent" for r in spec] == [False] * expected + [True] * (2 * requests - expected)
    assert all(r.error_code == -3 and "circuit breaker" in r.error_msg for r in spec[expected:])
    assert run["error_kinds"]["not_sent"] == 2 * requests - expected
    lines = [line for line in out.splitlines() if "circuit breaker open" in line]
    assert len(lines) == 1 and "qwen-sd-vllm" in lines[0] and "2 consecutive failed requests" in lines[0]
    assert not any("not sent" in line for line in out.splitlines())  # one line, not one per request kept back
    [closing] = [line for line in out.splitlines() if line.startswith("stored ")]
    assert closing.startswith(f"stored {len(records)} request records in ") and f"{sum(not r.ok for r in records)} failed: " in closing


def test_the_breaker_counts_consecutive_failures_only(tmp_path):
    """Failures with a success between them never open it; 0 switches it off."""
    alternate = Reply("503 Service Unavailable", HTML, [b"busy"])
    with FaultServer() as baseline, FaultServer(lambda ordinal: alternate if ordinal % 2 else GOOD) as faulty:
        extra = ["--requests", "6", "--test-case", "counting", "--max-consecutive-failures", "2"]
        assert run_against(tmp_path, baseline, faulty, *extra) == 0
        assert faulty.completions == 6
    records, run = stored(tmp_path)
    assert run["error_kinds"] == {"http_status": 3}
    with FaultServer() as baseline, FaultServer(lambda ordinal: alternate) as faulty:
        extra = ["--requests", "5", "--test-case", "counting", "--max-consecutive-failures", "0", "--run-id", "g"]
        run_against(tmp_path, baseline, faulty, *extra)
        assert faulty.completions == 5


def json_reply(data, status="200 OK"):
    return Reply(status, (("Content-Type", "application/json"),), [json.dumps(data).encode()])


@pytest.mark.parametrize(
    ("tokenize", "kind"),
    [
        pytest.param(None, None, id="counted"),
        pytest.param(lambda text: json_reply({"error": "no"}, "500 Internal Server Error"), "tokenize_failed", id="tokenize-500"),
        pytest.param(lambda text: json_reply({"count": 0}), "tokenize_failed", id="tokenize-zero"),
        pytest.param(lambda text: json_reply({"count": "3"}), "tokenize_failed", id="tokenize-string"),
        pytest.param(lambda text: json_reply({"tokens": [1]}), "tokenize_failed", id="tokenize-no-count"),
        pytest.param(lambda text: Reply(headers=HTML, pieces=[b"<html>"]), "tokenize_failed", id="tokenize-html"),
        pytest.param(lambda text: Reply(head=b"", end="reset"), "tokenize_failed", id="tokenize-reset"),
    ],
)
def test_a_stream_without_usage_is_counted_with_tokenize_or_fails_alone(tmp_path, tokenize, kind):
    """No usage at all: each chunk counted afterwards with the server's /tokenize; a /tokenize that
    fails or answers nonsense fails that request with its own kind, the run goes on."""
    no_usage = stream(good_events(continuous=False)[:-1])  # no usage frame either
    plan = lambda ordinal: no_usage if ordinal == BAD else GOOD  # noqa: E731
    with FaultServer() as baseline, FaultServer(plan, tokenize=tokenize) as faulty:
        assert run_against(tmp_path, baseline, faulty, "--requests", str(REQUESTS), "--test-case", "counting") == 0
    records, run = stored(tmp_path)
    assert len(records) == 2 * REQUESTS and run["counts"]["requests"] == len(records)
    assert_counts_match(records, run)
    [bad] = [r for r in records if r.variant == "qwen-sd-vllm" and r.request_index == BAD]
    assert all(r.ok for r in records if r is not bad)
    if kind is None:
        assert bad.ok and bad.token_count_source == "tokenizer" and bad.chunk_tokens == [1] * 5 and bad.acceptance_length == 1.0
    else:
        assert (bad.ok, bad.error_kind, bad.output_tokens) == (False, kind, None), bad.error_msg


def test_a_model_served_under_several_names_streams_its_first_and_that_is_no_mismatch(tmp_path):
    """vLLM names its first --served-model-name in the stream whichever alias was requested
    (serving_models.py model_name); another model, even one the endpoint also lists, is a mismatch."""
    first = stream(good_events(model="qwen3-32b"))
    plan = lambda ordinal: stream(good_events(model="Qwen/Qwen3-1.7B")) if ordinal == BAD else first  # noqa: E731
    with FaultServer() as baseline, FaultServer(plan, models=("qwen3-32b", MODEL, "Qwen/Qwen3-1.7B")) as faulty:
        assert run_against(tmp_path, baseline, faulty, "--requests", str(REQUESTS), "--test-case", "counting") == 0
    records, run = stored(tmp_path)
    assert_counts_match(records, run)
    assert [(r.variant, r.request_index) for r in records if not r.ok] == [("qwen-sd-vllm", BAD)]
    assert run["error_kinds"] == {"model_mismatch": 1}


def test_the_cost_tables_resamples_follow_the_flag(tmp_path, capsys):
    """`run --resamples N`: the cost table printed at the end is the one N resamples of the stored records give."""
    from specbench.outputs.publish import cost_table

    with FaultServer() as baseline, FaultServer() as faulty:
        assert run_against(tmp_path, baseline, faulty, "--requests", "4", "--test-case", "counting", "--resamples", "37") == 0
    printed = capsys.readouterr().out
    records, run = stored(tmp_path)
    settings = run["plan"]["deployment"]
    table = cost_table(records, settings, "qwen-vllm", "c1", resamples=37)
    assert table in printed and table.count("\n") >= 3
