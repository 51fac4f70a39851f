"""A minimal client of the Kubernetes Jobs API for the staged sweep's controller (issue 36).

Standard library only (the pod runs a stock Python image). In a pod, the API server is
``https://kubernetes.default.svc`` and the service account's token and the cluster's CA are mounted
at /var/run/secrets/kubernetes.io/serviceaccount/ (kubernetes.io/docs/tasks/run-application/
access-api-from-pod/: "the recommended way to locate the API server within the pod is with the
kubernetes.default.svc DNS name"; token, ca.crt and namespace files in that directory). Two calls
(kubernetes.io/docs/reference/kubernetes-api/workload-resources/job-v1/): create, ``POST
/apis/batch/v1/namespaces/{namespace}/jobs`` (201 Created; a Job of that name already there is 409
with ``reason: AlreadyExists``, kubernetes.io/docs/reference/using-api/api-concepts/), and read,
``GET /apis/batch/v1/namespaces/{namespace}/jobs/{name}`` (404 when there is none).
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from specbench.jsonfile import dumps

IN_CLUSTER = "https://kubernetes.default.svc"
ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
LOOPBACK = ("127.0.0.1", "localhost", "::1")
TIMEOUT_S = 30.0


class JobsApiError(RuntimeError):
    """An API answer the controller cannot act on (the message has the status and the server's reason)."""


def _checked_url(url: str) -> str:
    """https, or http to this machine only (the tests' stand-in): the token never travels in clear."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in LOOPBACK):
        return url.rstrip("/")
    raise ValueError(f"--api-url {url!r}: expected https://HOST (http only to 127.0.0.1 or localhost)")


class JobsApi:
    def __init__(self, url: str, namespace: str, token: str, context: ssl.SSLContext | None = None, timeout_s: float = TIMEOUT_S):
        self.url, self.namespace, self.timeout_s = _checked_url(url), namespace, timeout_s
        self._token, self._context = token, context

    @classmethod
    def from_account(cls, url: str = IN_CLUSTER, account: Path = ACCOUNT, namespace: str = "") -> JobsApi:
        """The pod's service account: its token, the cluster CA (verified), its namespace file
        unless ``namespace`` is given."""
        try:
            token = (account / "token").read_text().strip()
            namespace = namespace or (account / "namespace").read_text().strip()
            context = ssl.create_default_context(cafile=str(account / "ca.crt")) if (account / "ca.crt").exists() else None
        except OSError as error:
            raise ValueError(f"service account {account}: cannot be read ({error.strerror or error})") from None
        return cls(url, namespace, token, context)

    def _path(self, name: str = "") -> str:
        base = f"{self.url}/apis/batch/v1/namespaces/{urllib.parse.quote(self.namespace, safe='')}/jobs"
        return f"{base}/{urllib.parse.quote(name, safe='')}" if name else base

    def _call(self, method: str, url: str, body: Mapping[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
        data = None if body is None else dumps(body).encode()
        headers = {"Authorization": f"Bearer {self._token}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s, context=self._context) as response:
                return response.status, _json(response.read())
        except urllib.error.HTTPError as error:  # 4xx/5xx: the body is a Status object
            return error.code, _json(error.read())
        except (urllib.error.URLError, OSError) as error:
            raise JobsApiError(f"{method} {url}: {getattr(error, 'reason', error)}") from None

    def get(self, name: str) -> dict[str, Any] | None:
        """The Job, or None when there is none (404)."""
        status, body = self._call("GET", self._path(name))
        if status == 404:
            return None
        if status != 200:
            raise JobsApiError(f"GET job {name}: {status} {body.get('reason', '')} {body.get('message', '')}".rstrip())
        return body

    def create(self, job: Mapping[str, Any]) -> bool:
        """True: created; False: a Job of that name already exists (409 AlreadyExists): the stage was started."""
        status, body = self._call("POST", self._path(), job)
        if status in (200, 201, 202):
            return True
        if status == 409 and body.get("reason") == "AlreadyExists":
            return False
        raise JobsApiError(
            f"POST job {job.get('metadata', {}).get('name')}: {status} {body.get('reason', '')} {body.get('message', '')}".rstrip()
        )


def _json(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw or b"{}")
    except ValueError:
        return {"message": raw[:200].decode("utf-8", "replace")}
    return value if isinstance(value, dict) else {}


def job_state(job: Mapping[str, Any]) -> str:
    """``complete``, ``failed`` or ``running``: a finished Job has a condition of type Complete or
    Failed with status "True" (kubernetes.io/docs/concepts/workloads/controllers/job/#terminal-job-conditions)."""
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("status") == "True" and condition.get("type") in ("Complete", "Failed"):
            return "complete" if condition["type"] == "Complete" else "failed"
    return "running"
