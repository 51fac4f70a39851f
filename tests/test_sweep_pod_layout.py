"""The server-container sweep pod layout for real: the server's supervisor
(specbench/sweep/vllm_supervisor.py --signal-dir) and the client (specbench/sweep/point_runner.py) as
processes run from the zip as the pods run them (charts/code.py run_module), with a fake vLLM server
and the signal files on a real directory. An Indexed Job's pod with restartPolicy Never ends
Succeeded only when every container exited 0 (Kubernetes "Pod phase"), so the exit codes decide."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from charts import code
from charts.sweep import LAUNCHER, RUNNER
from specbench import bundle

pytestmark = pytest.mark.servers  # real-time loopback servers: scheduled first (tests/conftest.py)

# A stand-in for vLLM: serves GET /health on its port (0: none), records its pid, and on SIGTERM
# exits 0 unless told to ignore it; it can also die by itself after a delay with a given code.
FAKE_SERVER = textwrap.dedent(
    """
    import http.server, os, signal, sys, threading, time
    port, die_after, die_code, ignore_term, pid_file = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1", sys.argv[5]
    die_when = sys.argv[6] if len(sys.argv) > 6 else ""  # dies (die_code) once this file exists
    open(pid_file, "w").write(str(os.getpid()))
    if ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    if port:
        class Health(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200 if self.path == "/health" else 404)
                self.end_headers()
            def log_message(self, *args):
                pass
        server = http.server.HTTPServer(("127.0.0.1", port), Health)
        threading.Thread(target=server.serve_forever, daemon=True).start()
    deadline = time.monotonic() + (die_after if die_after > 0 else 60)
    while time.monotonic() < deadline and not (die_when and os.path.exists(die_when)):
        time.sleep(0.02)
    os._exit(die_code if die_after > 0 or die_when else 0)
    """
)
# A stand-in for specbench.pyz: each point sleeps a little, leaves a mark (POINT_MARK) and succeeds.
FAKE_BUNDLE = (
    "import os, sys, time; time.sleep(float(os.environ.get('POINT_SECONDS', '0')))\n"
    "mark = os.environ.get('POINT_MARK')\n"
    "mark and open(mark, 'a').write('point\\n')\n"
    "sys.exit(0)\n"
)
PHASE = {True: "Succeeded", False: "Failed"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def pod(tmp_path):
    """units.json of one unit whose server is the fake, the signal emptyDir, the client's files."""
    signal_dir = tmp_path / "signal"
    signal_dir.mkdir()
    (tmp_path / "server.py").write_text(FAKE_SERVER)
    (tmp_path / "bundle.py").write_text(FAKE_BUNDLE)

    def units(port=0, die_after=0.0, die_code=0, ignore_term=False, points=2, die_when=""):
        unit = {
            "variant": {"name": "v"},
            "command": [sys.executable, str(tmp_path / "server.py")],
            "args": [str(port), str(die_after), str(die_code), "1" if ignore_term else "0", str(tmp_path / "server.pid"), die_when],
            "env": {"FROM_UNIT": "1"},
            "points": [
                {"point_id": f"v-c{i}", "wave": 0, "variant": {"name": "v"}, "load": {"kind": "concurrency", "value": i}, "args": []}
                for i in range(points)
            ],
        }
        (tmp_path / "units.json").write_text(json.dumps([unit]))
        return tmp_path / "units.json"

    return tmp_path, signal_dir, units


def from_zip(folder: Path, module: str, *args: str) -> list[str]:
    """The pod's argv for ``module`` of the code asset, the zip written into ``folder``."""
    zipped = folder / "specbench.pyz"
    if not zipped.exists():
        zipped.write_bytes(bundle.zipapp_bytes())
    return [str(zipped) if a == code.ZIP else a for a in code.run_module(sys.executable, module, *args)]


def supervisor(units: Path, signal_dir: Path, grace: float = 5.0) -> subprocess.Popen:
    argv = from_zip(units.parent, LAUNCHER, str(units), "--signal-dir", str(signal_dir), "--poll", "0.05", "--grace", str(grace))
    return subprocess.Popen(
        argv, env={"JOB_COMPLETION_INDEX": "0", "PATH": "/usr/bin:/bin"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def client(tmp: Path, units: Path, signal_dir: Path, port: int, ready_seconds: float = 20.0, point_seconds: float = 0.0, mark: str = ""):
    env = {
        "JOB_COMPLETION_INDEX": "0",
        "SWEEP_ID": "sweep-x",
        "SWEEP_RESULTS": str(tmp / "results"),
        "SWEEP_UNITS": str(units),
        "SWEEP_BUNDLE": str(tmp / "bundle.py"),
        "SWEEP_SIGNAL_DIR": str(signal_dir),
        "SWEEP_SERVER_URL": f"http://127.0.0.1:{port}",
        "SWEEP_READY_SECONDS": str(ready_seconds),
        "SWEEP_POLL_SECONDS": "0.05",
        "POINT_SECONDS": str(point_seconds),
        "POINT_MARK": mark,
        "PATH": "/usr/bin:/bin",
    }
    return subprocess.Popen(from_zip(units.parent, RUNNER), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(path: Path, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_the_supervisor_stops_the_server_and_exits_0_when_the_client_is_done(pod):
    tmp, signal_dir, units = pod
    proc = supervisor(units(), signal_dir)
    wait_for(tmp / "server.pid")
    pid = int((tmp / "server.pid").read_text())
    (signal_dir / "done").write_text("0\n")
    assert proc.wait(timeout=30) == 0
    assert gone(pid) and not (signal_dir / "server-exited").exists()
    assert "the client is done (0); stopping vLLM" in proc.stdout.read()


def test_a_server_that_ignores_sigterm_is_killed_after_the_grace_period(pod):
    tmp, signal_dir, units = pod
    proc = supervisor(units(ignore_term=True), signal_dir, grace=0.3)
    wait_for(tmp / "server.pid")
    pid = int((tmp / "server.pid").read_text())
    (signal_dir / "done").write_text("1\n")
    assert proc.wait(timeout=30) == 0 and gone(pid)


@pytest.mark.parametrize("die_code, expected", [(7, 7), (0, 1)], ids=["crash", "exit-0-too-early"])
def test_a_server_that_dies_first_fails_the_pod_and_tells_the_client(pod, die_code, expected):
    _, signal_dir, units = pod
    proc = supervisor(units(die_after=0.2, die_code=die_code), signal_dir)
    assert proc.wait(timeout=30) == expected
    assert (signal_dir / "server-exited").read_text() == f"{die_code}\n"
    assert proc.stderr.read().strip() == f"sweep server: vLLM exited with code {die_code} before the client was done"


def test_sigterm_to_the_supervisor_reaches_the_server(pod):
    tmp, signal_dir, units = pod
    proc = supervisor(units(), signal_dir)
    wait_for(tmp / "server.pid")
    pid = int((tmp / "server.pid").read_text())
    proc.send_signal(signal.SIGTERM)  # the kubelet stopping the pod (deadline, deletion)
    assert proc.wait(timeout=30) == 1  # the fake exits 0 on SIGTERM: not a completed sweep
    assert gone(pid)


def test_the_pod_succeeds_when_the_client_has_measured_every_point(pod):
    tmp, signal_dir, units = pod
    port = free_port()
    path = units(port=port, points=3)
    server = supervisor(path, signal_dir)
    measure = client(tmp, path, signal_dir, port)
    codes = (measure.wait(timeout=60), server.wait(timeout=60))
    assert codes == (0, 0) and PHASE[codes == (0, 0)] == "Succeeded"
    assert (signal_dir / "done").read_text() == "0\n"
    assert measure.stdout.read().splitlines()[-1] == "sweep sweep-x: 3 of 3 points measured"


def test_the_pod_fails_when_the_server_dies_and_the_client_stops_measuring(pod):
    tmp, signal_dir, units = pod
    port = free_port()
    # The server dies once the first point is measured (its mark), not after a fixed time: at
    # least one point was measured while it lived, however busy the machine.
    mark = str(tmp / "measured")
    path = units(port=port, die_code=3, points=20, die_when=mark)
    server = supervisor(path, signal_dir)
    measure = client(tmp, path, signal_dir, port, point_seconds=0.1, mark=mark)
    codes = (measure.wait(timeout=60), server.wait(timeout=60))
    assert codes == (1, 3) and PHASE[codes == (0, 0)] == "Failed"
    last = measure.stdout.read().splitlines()[-1]
    assert last.startswith("sweep sweep-x: ") and "(server exited)" in last
    measured = int(last.split(": ")[1].split(" of ")[0])
    assert 0 < measured < 20  # measured while the server lived, then stopped instead of running the rest


def test_a_client_whose_server_never_gets_ready_signals_done_and_fails(pod):
    tmp, signal_dir, units = pod
    path = units(points=2)
    measure = client(tmp, path, signal_dir, free_port(), ready_seconds=0.3)
    assert measure.wait(timeout=30) == 1
    assert (signal_dir / "done").read_text() == "1\n"
    assert measure.stdout.read().splitlines()[-1] == "sweep sweep-x: 0 of 2 points measured: the server was not ready within 0.3 s"
