"""Runs llmperf's own OpenAI chat client code and records what that code keeps to itself.

llmperf's ``OpenAIChatCompletionsClient.llm_request`` (ray-project/llmperf at f1d6bed,
src/llmperf/ray_clients/openai_chat_completions_client.py) times each content chunk but returns
only the sum of the gaps; it counts every ``data:`` line as a token (role and finish frames too);
it prints an exception and returns an empty ``error_msg`` for anything but an HTTP error status.
Its code runs here unchanged, with its module's ``requests`` swapped for a recorder that stamps
when the request was written (urllib3) and every line the stream yields, and its printed error kept.

Self-contained (standard library and requests' urllib3, no specbench imports): Ray pickles this module by value
into its worker processes (``ray.cloudpickle.register_pickle_by_value``), so those need nothing
but llmperf installed.
"""

from __future__ import annotations

import functools
import io
import os
import threading
import time
from typing import Any


def _stamps() -> Any:
    """Per thread (the stand-in in tests runs several clients in one process): when urllib3 last
    wrote a request (``HTTPConnection.request`` returns after the body), the moment the native
    engine starts its clock too. llmperf's own clock starts before ``requests.post``, so it also
    counts building a session and opening a connection. Kept on urllib3's module, not here: this
    module travels pickled by value, and a thread-local cannot be pickled."""
    import urllib3.connection

    connection = urllib3.connection.HTTPConnection
    stamps = getattr(urllib3.connection, "_specbench_written", None)
    if stamps is None:
        stamps = urllib3.connection._specbench_written = threading.local()
        original = connection.request

        def request(self: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(self, *args, **kwargs)
            stamps.at = time.perf_counter()
            return result

        connection.request = request
    return stamps


class _RecordingResponse:
    """A ``requests.Response`` whose ``iter_lines`` stamps each line (``time.perf_counter``) as it yields it."""

    def __init__(self, response: Any, trace: dict[str, Any]) -> None:
        self._response, self._trace = response, trace

    def __getattr__(self, name: str) -> Any:
        return getattr(self._response, name)

    def __enter__(self) -> _RecordingResponse:
        self._response.__enter__()
        return self

    def __exit__(self, *exc_info: Any) -> Any:
        return self._response.__exit__(*exc_info)

    def iter_lines(self, *args: Any, **kwargs: Any) -> Any:
        start, lines = self._trace["written_perf_s"], self._trace["lines"]
        try:
            for line in self._response.iter_lines(*args, **kwargs):
                lines.append((time.perf_counter() - start, line.decode("utf-8", "replace") if isinstance(line, bytes) else line))
                yield line
            self._trace["end_s"] = time.perf_counter() - start
        except Exception as error:
            self._trace["error"] = f"{type(error).__name__}: {error}"
            raise


class RecordingRequests:
    """Stands in for the ``requests`` module inside llmperf's client module: ``post`` is recorded."""

    def __init__(self, requests_module: Any, trace: dict[str, Any]) -> None:
        self._requests, self._trace = requests_module, trace

    def __getattr__(self, name: str) -> Any:
        return getattr(self._requests, name)

    def post(self, *args: Any, **kwargs: Any) -> _RecordingResponse:
        # llmperf starts its clock just before this call (time.monotonic, the same CLOCK_MONOTONIC
        # as perf_counter on Linux); the wall clock is the record's started_at.
        stamps = _stamps()
        if self._trace.get("request_id"):  # as the native engine sends it: vLLM logs it, the emulator keys its truth on it
            kwargs["headers"] = {**(kwargs.get("headers") or {}), "X-Request-Id": self._trace["request_id"]}
        self._trace["sent_wall_s"], self._trace["sent_perf_s"] = time.time(), time.perf_counter()
        stamps.at = None
        try:
            response = self._requests.post(*args, **kwargs)
            written = stamps.at or self._trace["sent_perf_s"]
            self._trace["written_perf_s"] = written
            self._trace["sent_wall_s"] += written - self._trace["sent_perf_s"]
            return _RecordingResponse(response, self._trace)
        except Exception as error:
            self._trace["error"] = f"{type(error).__name__}: {error}"
            raise


def new_trace() -> dict[str, Any]:
    """``sent_perf_s``: llmperf's clock starts about here; ``written_perf_s``: the request was on the
    wire, where line stamps and ``end_s`` (the stream's end) count from, as the native engine's."""
    return {"sent_wall_s": None, "sent_perf_s": None, "written_perf_s": None, "end_s": None, "lines": [], "error": "", "printed": ""}


def traced_request(client_module: Any, llm_request: Any, owner: Any, config: Any) -> tuple[Any, str, Any, dict[str, Any]]:
    """``llm_request(owner, config)`` with ``client_module.requests`` recorded; llmperf's result plus the trace.

    One request at a time per process (a Ray actor runs its calls one by one), so swapping the
    module global is safe there.
    """
    trace = new_trace()
    trace["request_id"] = (getattr(config, "metadata", None) or {}).get("request_id", "")
    real = client_module.requests
    printed = io.StringIO()
    client_module.requests = RecordingRequests(real, trace)
    # What it prints goes to the trace: a module-level ``print`` shadows the builtin for that module only.
    client_module.print = functools.partial(print, file=printed)
    try:
        metrics, text, config = llm_request(owner, config)
    finally:
        client_module.requests = real
        del client_module.print
    trace["printed"] = printed.getvalue()[-2000:]
    return metrics, text, config, trace


class RecordingChatClient:
    """One concurrency slot's client for one endpoint; the engine makes it a Ray actor (``ray.remote``).

    llmperf's client reads the endpoint from the environment: each actor is its own process, so
    setting it here is per endpoint, as llmperf's own runtime_env would be.
    """

    def __init__(self, api_base: str, api_key: str) -> None:
        os.environ["OPENAI_API_BASE"], os.environ["OPENAI_API_KEY"] = api_base, api_key

    def ready(self) -> int:
        from llmperf.ray_clients import openai_chat_completions_client  # noqa: F401 - imported before timing

        return os.getpid()

    def llm_request(self, config: Any) -> tuple[Any, str, Any, dict[str, Any]]:
        from llmperf.ray_clients import openai_chat_completions_client as module

        # The class llmperf decorated with @ray.remote, undecorated (ray/actor.py: ActorClass keeps
        # it as __ray_metadata__.modified_class, a subclass of the original): its llm_request as is.
        llm_request = module.OpenAIChatCompletionsClient.__ray_metadata__.modified_class.llm_request
        return traced_request(module, llm_request, self, config)
