"""A loopback stand-in of the Kubernetes Jobs API: the two calls specbench/sweep/jobs_api.py makes.

``GET /apis/batch/v1/namespaces/{ns}/jobs/{name}`` (200 or 404) and ``POST .../jobs`` (201, or 409
with ``reason: AlreadyExists`` for a name that exists: kubernetes.io/docs/reference/using-api/
api-concepts/), 401 without the bearer token. Every POST is counted per name, so a test can say no
stage was created twice. ``on_create`` is the cluster behind the API: it is called with each Job
created (the tests run its pods there and set its status). ``hold_posts``: the Job is stored but the
POST is never answered until ``release`` is set, and its pods do not run: a client killed then never
heard that its create worked. ``ttl``: a finished Job is read once, then gone (ttlSecondsAfterFinished).
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler
from typing import Any

from specbench.sweep.jobs_api import job_state
from tests.loopback import serve

COMPLETE = {"conditions": [{"type": "Complete", "status": "True"}]}
FAILED = {"conditions": [{"type": "Failed", "status": "True"}]}


class JobsStandIn:
    def __init__(
        self,
        namespace: str,
        token: str,
        jobs: Iterable[dict[str, Any]] = (),
        *,
        on_create: Callable[[dict[str, Any]], None] | None = None,
        hold_posts: bool = False,
        ttl: bool = False,
    ) -> None:
        self.namespace, self.token = namespace, token
        self.jobs: dict[str, dict[str, Any]] = {job["metadata"]["name"]: job for job in jobs}
        self.posts: Counter[str] = Counter()  # every POST per Job name, the refused ones too
        self.created: list[str] = []
        self.conflicts: list[str] = []
        self.verbs: set[str] = set()  # the RBAC verbs the calls needed (GET one Job: get; POST: create)
        self.on_create, self.hold_posts, self.ttl = on_create, hold_posts, ttl
        self.posted, self.release = threading.Event(), threading.Event()
        self.lock = threading.Lock()
        self.url = ""
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> JobsStandIn:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.release.set()  # a held POST's thread ends
        self._stack.close()

    def start(self) -> JobsStandIn:
        self.url = self._stack.enter_context(serve(self.handler()))
        return self

    def set_status(self, name: str, status: dict[str, Any]) -> None:
        with self.lock:
            self.jobs[name]["status"] = status

    def handler(self) -> type[BaseHTTPRequestHandler]:
        stand_in = self
        base = f"/apis/batch/v1/namespaces/{self.namespace}/jobs"

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _authorised(self) -> bool:
                if self.headers.get("Authorization") != f"Bearer {stand_in.token}" or not self.path.startswith(base):
                    self._send(401 if self.path.startswith(base) else 404, {"kind": "Status", "reason": "Unauthorized"})
                    return False
                return True

            def do_GET(self) -> None:
                stand_in.verbs.add("get")
                if not self._authorised():
                    return
                with stand_in.lock:
                    job = stand_in.jobs.get(self.path[len(base) + 1 :])
                    if job and stand_in.ttl and job_state(job) == "complete":  # ttlSecondsAfterFinished: read once, then gone
                        del stand_in.jobs[job["metadata"]["name"]]
                    body = json.loads(json.dumps(job)) if job else None
                self._send(200, body) if body else self._send(404, {"kind": "Status", "reason": "NotFound"})

            def do_POST(self) -> None:
                stand_in.verbs.add("create")
                if not self._authorised():
                    return
                job = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                name = job["metadata"]["name"]
                with stand_in.lock:
                    stand_in.posts[name] += 1
                    exists = name in stand_in.jobs
                    if exists:
                        stand_in.conflicts.append(name)
                    else:
                        # A real API server refuses a copied selector (it picks its own) and sets status itself.
                        assert "selector" not in job["spec"] and "status" not in job
                        stand_in.jobs[name] = job
                        stand_in.created.append(name)
                if exists:
                    return self._send(409, {"kind": "Status", "reason": "AlreadyExists"})
                if stand_in.hold_posts:  # the Job exists (its pods not run yet); the client is killed before it hears so
                    stand_in.posted.set()
                    stand_in.release.wait(120)
                    return
                if stand_in.on_create is not None:
                    stand_in.on_create(job)
                with contextlib.suppress(OSError):  # a client killed meanwhile
                    self._send(201, job)

        return Handler
