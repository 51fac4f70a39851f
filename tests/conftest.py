"""Shared, expensive fixtures: every synthesized app is built once per session.

The cloud assemblies the selected tests need are built in background processes that start as soon
as collection ends (on a whole-suite run, when the session starts), so they overlap with the
pure-Python tests:
- ``cli``: the real CDK CLI (``cdk synth``, the binary ``npx cdk`` runs) on the defaults, offline,
  in a process of its own;
- ``direct``: ``python app.py`` on the defaults (must equal ``cli``);
- ``rehearsal``: ``python app.py -c env.profile=rehearsal`` (issue 36), acknowledgments on: cdk-nag runs
  at its synth as at the default's, and its templates go through cfn-lint;
- ``variant``: the non-default paths switched on (capacity block, private endpoint, admin
  principals, bucket deleted on destroy, other results settings), synthesized with the project's
  cdk-nag acknowledgments switched off: its templates serve the template tests, its validation
  report shows that the acknowledgments cover exactly what cdk-nag finds.
The last three, when needed together, are built one after the other in one process
(tests/synth_apps.py): 17 s of CPU apart, 9 s together.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import gc
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import kubernetes_validate.utils
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# kubernetes-validate 1.37.0 reads and parses the kind's schema and the version's whole
# _definitions.json on every validate() call (kubernetes_validate/utils.py: validate() calls the
# module's schema_contents(filename, version) twice). The files never change during a session, so
# one parse per file serves every test (the dist's 19 objects at three versions: 0.9 s -> 0.1 s).
kubernetes_validate.utils.schema_contents = functools.lru_cache(maxsize=None)(kubernetes_validate.utils.schema_contents)

# Node 22 from package.json for jsii and the CLI; never probe instance metadata; no telemetry; jsii's
# Node.js started with V8 flags that make aws-cdk-lib's built-in validation cheaper (tests/jsii_node).
OFFLINE_ENV = {
    **os.environ,
    "PATH": f"{ROOT / 'node_modules' / '.bin'}{os.pathsep}{os.environ.get('PATH', '')}",
    "AWS_EC2_METADATA_DISABLED": "true",
    "CDK_DISABLE_CLI_TELEMETRY": "true",
    "JSII_NODE": str(ROOT / "tests" / "jsii_node"),
}
for name in ("CDK_DEFAULT_ACCOUNT", "CDK_DEFAULT_REGION", "AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
    OFFLINE_ENV.pop(name, None)
os.environ.update({k: OFFLINE_ENV[k] for k in ("PATH", "AWS_EC2_METADATA_DISABLED", "CDK_DISABLE_CLI_TELEMETRY", "JSII_NODE")})

ADMIN_ROLE = "arn:aws:iam::123456789012:role/PlatformAdmin"
ADMIN_USER = "arn:aws:iam::123456789012:user/alice"
RESERVATION = "cr-0123456789abcdef0"
HF_TOKEN_SECRET_ARN = "arn:aws:secretsmanager:us-east-2:123456789012:secret:hf/token-AbCdEf"
VARIANT_CONTEXT = {
    "neuron_nodes.capacity_mode": "capacity-block",
    "neuron_nodes.capacity_reservation_id": RESERVATION,
    "neuron_nodes.availability_zone": "us-east-2c",
    "cluster.endpoint_access": "private",
    "cluster.admin_principal_arns": f"{ADMIN_ROLE},{ADMIN_USER}",
    "data.keep_bucket_on_destroy": "false",
    "data.log_retention_days": "90",
    "serving.hf_token_secret_arn": HF_TOKEN_SECRET_ARN,
    # The second serving stack (EAGLE3 head) goes through the full synth, cfn-lint and cdk-nag here,
    # at no extra synthesis.
    "serving.stack": "vllm-neuron",
    "serving.extra_speculative_variants": "qwen-sd-k4:thoughtworks/Qwen3-32B-Eagle3:4",
    "neuron_nodes.max_size": "2",
    # A sweep, started on deploy: the three services fill a node and a half, the second node's
    # other half takes one sweep pod at a time.
    "neuron_nodes.desired_size": "2",
    "sweep.variants": "e3-k5:thoughtworks/Qwen3-32B-Eagle3:5",
    "sweep.start_on_deploy": "true",
    # Staged: its controller (charts/sweep_control.py, stacks/sweep_control.py) goes through the same
    # synth, cfn-lint and cdk-nag; with one variant, stage 1 is the whole grid (the same pods).
    "sweep.strategy": "staged",
    "results.dashboard_name": "SpecDecode-Variant",
    "results.refresh_minutes": "1",
    "results.lookback_hours": "48",
    "results.draft_cost_ratio": "0.25",
    "results.bootstrap_resamples": "500",
}
# The rehearsal profile (config/profiles.py) and nothing else: its templates must pass what the default's do.
REHEARSAL_CONTEXT = {"env.profile": "rehearsal"}


# A synthesis runs as a shell in a process group of its own that leaves its exit code in ``<outdir>.rc`` and its stderr
# in ``<outdir>.stderr``: any process of the session can then wait for it, which is what lets the
# two pytest-xdist workers of `make test` share one synthesis of each app (see _shared_root).
# bash's ``times`` leaves the synthesis's CPU in ``<outdir>.times`` (scripts/bench_suite.py reports it).
_RUN_AND_MARK = (
    'echo $$ > "$0.pid"; "$@" > /dev/null 2> "$0.stderr"; rc=$?; times > "$0.times"; echo $rc > "$0.rc.tmp" && mv "$0.rc.tmp" "$0.rc"'
)


@dataclass
class Assembly:
    """A cloud assembly on disk, synthesized in the background and loaded lazily."""

    outdir: Path
    expected_returncode: int = 0
    _done: bool = False

    def wait(self, stalled_s: float = 120.0) -> Assembly:
        """Wait for the synthesis to end. A slow machine is not a failure: it fails only once the
        synthesis's processes have used no CPU for ``stalled_s`` (a hang), or are gone without an
        exit code. A fixed wall-clock bound (300 s) failed beside six busy loops: at nice 10 in their
        autogroup a synthesis gets ~3% of a core, 10 s of CPU in over 300 s (docs/performance.md)."""
        if not self._done:
            rc_file = self.outdir.with_name(self.outdir.name + ".rc")
            pid_file = self.outdir.with_name(self.outdir.name + ".pid")
            cpu, checked = -1, time.monotonic()
            progressed = checked
            while not rc_file.exists():
                now = time.monotonic()
                if now - checked > 5:  # /proc is read every few seconds, the exit code every 50 ms
                    checked = now
                    pid = pid_file.read_text().strip() if pid_file.exists() else ""
                    used = _group_cpu_ticks(int(pid)) if pid else 0  # no pid yet: still starting
                    if used is None and not rc_file.exists():
                        raise AssertionError(f"synth into {self.outdir} is gone without an exit code")
                    if used != cpu:
                        cpu, progressed = used, now
                    elif now - progressed > stalled_s:
                        raise AssertionError(f"synth into {self.outdir} used no CPU for {stalled_s:.0f} s (hung)")
                time.sleep(0.05)
            returncode = int(rc_file.read_text())
            if returncode != self.expected_returncode:
                stderr = self.outdir.with_name(self.outdir.name + ".stderr").read_text()
                raise AssertionError(f"synth into {self.outdir} failed ({returncode}):\n{stderr[-4000:]}")
            self._done = True
        return self

    def template(self, stack: str) -> dict:
        return json.loads((self.wait().outdir / f"{stack}.template.json").read_text())

    def file(self, name: str) -> Path:
        return self.wait().outdir / name


def _group_cpu_ticks(group: int) -> int | None:
    """The CPU (clock ticks) of the live processes of a process group, with that of the children
    they have reaped (proc(5): /proc/PID/stat fields 5 pgrp, 14-17 utime, stime, cutime, cstime);
    None when no process of the group is left."""
    total, found = 0, False
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
            if int(fields[2]) == group:
                total, found = total + sum(int(f) for f in fields[11:15]), True
    return total if found else None


def _start(names: list[str], root: Path) -> None:
    """Start the named syntheses: ``cli`` in a process of its own, the others together, in the order
    of APPS (tests/synth_apps.py: the variant, its acknowledgments off for the rest of the process,
    last)."""
    if "cli" in names:
        _spawn(root / "cli", _cli_command(root / "cli"))
    apps = [name for name in APPS if name in names]
    if apps:
        jobs = [{"outdir": str(root / name), **APPS[name]} for name in apps]
        # Its own marks (never an app's: the shell's exit code is the script's, not an app's).
        _spawn(root / f"{APPS_MARKS}{'+'.join(apps)}", [sys.executable, str(ROOT / "tests" / "synth_apps.py"), json.dumps(jobs)])


def _spawn(marks: Path, command: list[str]) -> None:
    # At nice 10 in this session's own process group: the syntheses fill the CPU the tests leave
    # idle (waiting on loopback servers) instead of taking it from them. A session of their own
    # (setsid) would put each in its own autogroup, where nice counts for nothing against the
    # tests (Linux sched_autogroup, on by default: every session an equal share), and the workers'
    # start-up and collection, 2 s of CPU each, took 10 s while three syntheses ran.
    wrapped = ["nice", "-n", str(_synth_nice()), "bash", "-c", _RUN_AND_MARK, str(marks), *command]
    _STARTED.append(subprocess.Popen(wrapped, cwd=ROOT, env=OFFLINE_ENV, process_group=0))


def _attach(name: str, outdir: Path) -> Assembly:
    # The variant, synthesized without acknowledgments, must fail validation (app.py exits 1).
    return Assembly(outdir, expected_returncode=1 if name == "variant" else 0)


SYNTH_NICE = 10


@functools.cache
def _synth_nice() -> int:
    """SYNTH_NICE on a machine the suite has to itself; 0 when other work already keeps more tasks
    runnable than there are cores. Beside six busy loops in the suite's autogroup a synthesis at
    nice 10 gets about 3% of a core (weight 110 against 1024 each, Linux sched_prio_to_weight):
    the CLI's synthesis took 303 s there against 55 s at nice 0, and the suite waits for it. The
    least of five samples of /proc/stat's procs_running, less this process, so a passing burst
    does not count (proc(5))."""
    samples = []
    for _ in range(5):
        with contextlib.suppress(OSError, ValueError, StopIteration):
            lines = Path("/proc/stat").read_text().splitlines()
            samples.append(int(next(line for line in lines if line.startswith("procs_running ")).split()[1]) - 1)
        time.sleep(0.02)
    return 0 if samples and min(samples) > len(os.sched_getaffinity(0)) else SYNTH_NICE


_ASSEMBLIES: dict[str, Assembly] = {}
_STARTED: list[subprocess.Popen] = []  # the syntheses this process started, reaped when it finishes


# Which fixtures need which assembly; only the assemblies the selected tests use are built.
_NEEDS = {
    "cli": {"cli_assembly", "platform", "data"},
    "direct": {"direct_assembly"},
    "variant": {"variant_assembly", "variant_platform", "variant_data"},
    "rehearsal": {"rehearsal_assembly"},
}


def _cli_command(outdir: Path) -> list[str]:
    # The CLI binary `npx cdk` starts (package.json's pinned aws-cdk), without npx's own Node.js
    # start-up (~0.45 s of CPU).
    return [str(ROOT / "node_modules" / ".bin" / "cdk"), "synth", "--quiet", "--output", str(outdir)]


# The syntheses tests/synth_apps.py runs, in this order. ``validation``: aws-cdk-lib's built-in
# CloudFormation validation (8 of a lone synthesis's 14 s of CPU when it was measured, mostly
# building its rule engine) changes no template; it runs on the CLI's assembly, which the direct one
# must equal byte for byte, and on the variant's, whose report the acknowledgments are checked
# against (tests/test_lint.py); the rehearsal's templates go through cfn-lint. Off, it alone is off:
# policy-validation plugins, cdk-nag among them, still run (aws-cdk-lib 2.275
# core/lib/private/synthesis-validation.js, defaultValidationEnabled:
# `app._builtinCloudFormationValidation && process.env.CDK_VALIDATION !== "false"`).
APPS_MARKS = "apps-"  # the marks of a process of APPS: apps-direct+rehearsal+variant.rc, ...
APPS = {
    "direct": {"context": {}, "validation": False, "acknowledgments": True},
    "rehearsal": {"context": REHEARSAL_CONTEXT, "validation": False, "acknowledgments": True},
    "variant": {"context": VARIANT_CONTEXT, "validation": True, "acknowledgments": False},
}


def _fixtures_used(item: pytest.Item) -> set[str]:
    """The fixtures a test requests, including those named by a parameter and fetched with
    ``request.getfixturevalue`` (``@pytest.mark.parametrize("fixture", ["platform", ...])``)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    return set(getattr(item, "fixturenames", ())) | {value for value in params.values() if isinstance(value, str)}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that need no synthesized app run first, while the syntheses build in the background,
    and of those the ``servers`` ones first of all: they spend most of their time waiting on loopback
    servers, which costs nothing while the syntheses keep both cores busy (after them, a wait leaves
    a core idle). Right after them the ``long`` ones (seconds of CPU each), the syntheses done by
    then: run last, one of them kept a worker busy for 3-5 s after the other had finished (cfn-lint,
    among the tests that need an app). Stable otherwise. No test runs alone or last: real-time
    checks compare what a client measured with the servers' own record of what they sent (their
    ground truth), which holds on a busy machine, so nothing holds the other xdist worker off."""
    assembly_fixtures = set().union(*_NEEDS.values())

    def phase(item: pytest.Item) -> int:
        if item.get_closest_marker("servers"):
            return 0
        if item.get_closest_marker("long"):
            return 1
        return 3 if assembly_fixtures & _fixtures_used(item) else 2

    items.sort(key=phase)


def _shared_root(config: pytest.Config) -> Path:
    """Where this session's syntheses go: under pytest-xdist, the root all workers share (each
    worker's own temporary directory is one level below it)."""
    base = config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "assemblies"


def _ensure_started(config: pytest.Config, names: set[str]) -> None:
    """Start each named synthesis once per session, whichever worker asks first."""
    root = _shared_root(config)
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        fresh = []
        for name in sorted(names - _ASSEMBLIES.keys()):
            if not (root / f"{name}.started").exists():
                (root / f"{name}.started").touch()
                fresh.append(name)
            _ASSEMBLIES[name] = _attach(name, root / name)
        _start(fresh, root)


def _whole_suite(config: pytest.Config) -> bool:
    """Whether this session runs the configured test paths unfiltered (`make test`, `.ci/run`): then
    every synthesis is needed and can start before anything is collected."""
    option = config.option
    return (
        config.args_source is pytest.Config.ArgsSource.TESTPATHS
        and not option.collectonly
        and not option.keyword
        and not option.markexpr
        and not getattr(option, "lf", False)
        and not getattr(option, "failedfirst", False)
    )


def pytest_configure(config: pytest.Config) -> None:
    """Full garbage collections only when they can pay. By default (thresholds 700, 10, 10) CPython
    3.11 runs one whenever 10 middle-generation collections have passed and the objects promoted
    since the last one reach a quarter of the old generation; a worker's old generation grows to
    ~1 M objects (modules, collected items, session fixtures) and the tests promote parsed templates
    and records by the hundred thousand, so each worker spent 4.1-4.6 s of its CPU re-scanning
    objects that were alive all along (gc.callbacks and time.process_time over a whole `make test`,
    idle machine). With the third threshold at 1000, and gc.freeze() once collection ends (below),
    1.3 s; cyclic garbage is still collected by the two young generations, and the suite's peak
    memory fell (2,558 -> 2,016 MiB, `make bench`)."""
    gc.set_threshold(700, 10, 1000)
    if os.environ.get("PYTEST_XDIST_WORKER") and config.getvalue("loadgroup"):
        config.pluginmanager.register(XdistGroups(), "xdist-groups-on-structured-ids")


class XdistGroups:
    """``--dist loadgroup``'s groups on pytest 9.2's node ids. pytest-xdist 3.8 (xdist/remote.py,
    WorkerInteractor.pytest_collection_modifyitems) appends ``@<group>`` to ``item._nodeid``, which
    pytest 9.2 no longer reads (``Node.nodeid`` is ``str(self._id)``, a structured NodeId), so every
    xdist_group was inert and its tests spread over every worker (pytest-dev/pytest-xdist#1386). This
    does what the proposed fix does (pytest-dev/pytest-xdist#1388: set the structured id): the
    controller's LoadGroupScheduling then reads the group from the suffix, as with older pytest.
    A group keeps tests that share a costly per-process start (moto's EC2 and CloudFormation
    backends: ~1.5 s of CPU in each worker that first calls them) on one worker."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        from _pytest.nodeid import NodeId

        for item in items:
            names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")})
            suffix = f"@{'_'.join(names)}"
            if names and not item.nodeid.endswith(suffix):  # not once more where xdist's own mark took effect
                item._id = NodeId.parse(item.nodeid + suffix)  # type: ignore[attr-defined]


def pytest_sessionstart(session: pytest.Session) -> None:
    """On a whole-suite run, start every synthesis at once, in the process that starts the session
    (under pytest-xdist the controller, before its workers have even started): they build while
    the workers start and collect, instead of after."""
    if not os.environ.get("PYTEST_XDIST_WORKER") and _whole_suite(session.config):
        _ensure_started(session.config, set(_NEEDS))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the needed syntheses in the background as soon as the test selection is known (already
    started on a whole-suite run: see pytest_sessionstart)."""
    if session.config.option.collectonly:
        return
    # Whatever is alive now (modules, the collected items) stays alive to the end: out of the
    # collector's sight (gc.freeze), no full collection scans it again.
    gc.collect()
    gc.freeze()
    used = set().union(*map(_fixtures_used, session.items))
    _ensure_started(session.config, {name for name, fixtures in _NEEDS.items() if used & fixtures})


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop syntheses still running: by the process that ran the tests, or under pytest-xdist by
    the controller once every worker is done (a worker may finish before the other needs one)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        root = session.config._tmp_path_factory.getbasetemp() / "assemblies"  # type: ignore[attr-defined]
        for pid_file in root.glob("*.pid"):
            if not pid_file.with_suffix(".rc").exists():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.killpg(int(pid_file.read_text()), signal.SIGKILL)
    for process in _STARTED:
        process.poll()  # reap what has ended, so its CPU is counted with this process tree's


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Leave quickly: one full collection (whatever is garbage is found now, and an error in a
    ``__del__`` still reaches pytest's unraisable-exception hook, which is still installed), then
    ``gc.freeze()``, so pytest's own final collection (pytest 9.2 _pytest/unraisableexception.py,
    pytest_unconfigure: ``gc_collect_harder``, one ``gc.collect()`` on CPython, which runs after
    this hook only because this one is tryfirst) and the interpreter's at exit skip the ~1 M
    objects still alive. Run after it (trylast), this hook doubled the full collection: 0.9-1.2 s
    each, on the last worker's way out."""
    gc.collect()
    gc.freeze()


def _assembly(name: str, config: pytest.Config) -> Assembly:
    if name not in _ASSEMBLIES:  # requested indirectly, so not started at collection
        _ensure_started(config, {name})
    return _ASSEMBLIES[name]


@pytest.fixture(scope="session")
def cli_assembly(pytestconfig: pytest.Config) -> Assembly:
    return _assembly("cli", pytestconfig).wait()


@pytest.fixture(scope="session")
def direct_assembly(pytestconfig: pytest.Config) -> Assembly:
    return _assembly("direct", pytestconfig).wait()


@pytest.fixture(scope="session")
def variant_assembly(pytestconfig: pytest.Config) -> Assembly:
    return _assembly("variant", pytestconfig).wait()


@pytest.fixture(scope="session")
def rehearsal_assembly(pytestconfig: pytest.Config) -> Assembly:
    """``env.profile=rehearsal``, synthesized with the acknowledgments: exit 0 means cdk-nag found
    nothing they do not cover."""
    return _assembly("rehearsal", pytestconfig).wait()


@pytest.fixture(scope="session")
def platform(cli_assembly: Assembly) -> dict:
    """The default platform template, as the CDK CLI synthesizes it."""
    return cli_assembly.template("SpecDecodePlatform")


@pytest.fixture(scope="session")
def data(cli_assembly: Assembly) -> dict:
    return cli_assembly.template("SpecDecodeData")


@pytest.fixture(scope="session")
def variant_platform(variant_assembly: Assembly) -> dict:
    return variant_assembly.template("SpecDecodePlatform")


@pytest.fixture(scope="session")
def variant_data(variant_assembly: Assembly) -> dict:
    return variant_assembly.template("SpecDecodeData")


# --- serving charts, rendered in-process with cdk8s (no CDK synth) --------------------------------

BUCKET = "specdecode-data-bucket"


@pytest.fixture(scope="session")
def config():
    """The default configuration, as cdk.json gives it."""
    from charts.dist import cdk_context
    from config import load_config

    return load_config(cdk_context([]), {})


@pytest.fixture(scope="session")
def plan(config):
    from charts import serving_plan

    return serving_plan(config, BUCKET)


@pytest.fixture(scope="session")
def dist(config, tmp_path_factory):
    """The dist/ YAML the documented command writes, parsed: {file name: [objects]}."""
    import yaml

    from charts.dist import write_dist

    files = write_dist(config, BUCKET, tmp_path_factory.mktemp("dist"))
    return {f.name: [o for o in yaml.safe_load_all(f.read_text()) if o] for f in files}
