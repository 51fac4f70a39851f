"""The pods' zip holds the commands the pods run and nothing only a laptop's command needs.

specbench/bundle.py builds it from JOB_ENTRIES: the dispatcher (cli.py, which imports a command's
module by name only when it is chosen) and the modules of the pods' commands (``run``, ``publish``,
``sweep`` for ``sweep control``). A laptop's command (the report and its matplotlib charts, the
emulator, what reads config/) must stay out: it is not what the pods run, and an edit to it must not
rename (and so rerun) the deployed Job. In the zip such a command is refused in one line, exit 2.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

import pytest

from conftest import ROOT
from specbench import bundle, cli

# One worker for this file (its module fixtures: the pod's dependency folder and the zip, set up once, not in every worker; tests/conftest.py XdistGroups).
pytestmark = pytest.mark.xdist_group("bundle-closure")

# The modules of specbench/commands/ the pods run, and those their commands share; every other one
# (report, emulate, predict, plan, preflight, sweep_next, ...) is a laptop's.
POD_COMMANDS = ("run", "publish", "sweep")
SHARED = ("__init__", "common")


def laptop_commands(package_dir: Path) -> list[str]:
    return sorted(p.stem for p in (package_dir / "commands").glob("*.py") if p.stem not in (*POD_COMMANDS, *SHARED))


# The llmperf engine's modules run in its own environment (specbench/requirements-llmperf.txt: ray, llmperf).
LLMPERF = ("specbench.load.llmperf_engine", "specbench.load.llmperf_actor")


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()  # PEP 503's name normalization


def pinned_distributions() -> list[metadata.Distribution]:
    """This environment's installs of what specbench/requirements.lock pins: what the pod's pinned,
    hashed ``pip install --target`` provides (charts/benchmark.py install_requirements); a pin whose
    marker excludes this Python (async-timeout: python_version < "3.11") is not installed here."""
    text = (ROOT / "specbench" / "requirements.lock").read_text()
    names = sorted({_normalized(m.group(1)) for m in re.finditer(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==", text, re.M)})
    found = []
    for name in names:
        try:
            found.append(metadata.distribution(name))
        except metadata.PackageNotFoundError:
            continue
    assert {"boto3", "aiohttp", "botocore"} <= {_normalized(d.metadata["Name"]) for d in found}
    return found


def _top_levels(distribution: metadata.Distribution) -> set[str]:
    """The top-level files and folders a distribution installed (its RECORD), not scripts or caches."""
    return {f.parts[0] for f in distribution.files or () if f.parts[0] not in ("..", "__pycache__")}


def lock_imports() -> frozenset[str]:
    """The top-level import names requirements.lock's distributions provide."""
    tops = {top for d in pinned_distributions() for top in _top_levels(d) if not top.endswith((".dist-info", ".pth"))}
    return frozenset(top.split(".")[0] for top in tops)


def pod_deps(target: Path) -> Path:
    """A folder laid out as the pod's ``pip install --target``: requirements.lock's distributions
    only (links to this environment's installs), nothing else of site-packages."""
    target.mkdir()
    for distribution in pinned_distributions():
        for top in _top_levels(distribution):
            source = Path(distribution.locate_file(top))
            if source.exists() and not (target / top).exists():
                (target / top).symlink_to(source)
    return target


def module_of(member: str) -> str:
    return member.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def problems(package_dir: Path, allowed: Iterable[str]) -> list[str]:
    """What is wrong with the Job's zip built from ``package_dir``: a pod's command missing, a
    laptop's module in it (a command module not in POD_COMMANDS, the emulator, anything whose followed
    imports reach matplotlib), or, for the command line's part of the zip, an import the pod's
    environment (the standard library and ``allowed``) cannot satisfy."""
    root, name = package_dir.parent, package_dir.name
    members = set(bundle.sources(package_dir))
    found = [
        f"missing: {name}/{m}"
        for m in ("__main__.py", "cli.py", *(f"commands/{c}.py" for c in POD_COMMANDS))
        if f"{name}/{m}" not in members
    ]
    laptop = {f"{name}/commands/{c}.py" for c in laptop_commands(package_dir)}
    found += [f"a laptop's module: {m}" for m in sorted(members) if m in laptop or m.startswith(f"{name}/emulator/")]
    functions = {m.replace(bundle.PACKAGE, name, 1): f for m, f in bundle.JOB_FUNCTIONS.items()}
    modules = sorted(module_of(m) for m in members if m.endswith(".py"))
    for module in modules:
        path = bundle.module_file(module, root)
        if "matplotlib" in bundle.external_imports(path, root, functions.get(module)):
            found.append(f"imports matplotlib: {module}")
    # The command line's part (what the dispatcher and the pods' commands import): the pod installs
    # specbench/requirements.lock only. The other pods' modules (bundle.py) run in their own images.
    entries = [e.replace(bundle.PACKAGE, name, 1) for e in bundle.JOB_ENTRIES]
    commands = [e for e in entries if e in (f"{name}.__main__", f"{name}.cli") or e.startswith(f"{name}.commands.")]
    environment = set(allowed) | set(sys.stdlib_module_names)
    for module in sorted(bundle.imported_closure(commands, root, functions)):
        if module.replace(name, bundle.PACKAGE, 1) in LLMPERF:
            continue
        outside = bundle.external_imports(bundle.module_file(module, root), root, functions.get(module)) - environment
        found += [f"{module} imports {other}, which requirements.lock does not install" for other in sorted(outside)]
    return found


# Run with the standard library, the zip and the pod's requirements only (no site-packages: -S):
# every module of the zip is imported; what failed and what got loaded is printed.
IMPORT_ALL = """
import importlib, json, sys
zip_path, deps, modules = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
sys.path[:0] = [zip_path, deps]
failed = {}
for module in modules:
    try:
        importlib.import_module(module)
    except Exception as error:
        failed[module] = f"{type(error).__name__}: {error}"
outside = [n for n, m in sys.modules.items() if n.startswith("specbench") and getattr(m, "__file__", None) and not m.__file__.startswith(zip_path)]
print(json.dumps({"failed": failed, "loaded": sorted(sys.modules), "outside": outside}))
"""


def import_all(zip_path: Path, deps: Path) -> dict:
    members = zipfile.ZipFile(zip_path).namelist()
    # __main__ runs the command line; llmperf_actor needs ray and llmperf (LLMPERF's environment).
    modules = [module_of(m) for m in members if m.startswith("specbench/") and m.endswith(".py")]
    modules = [m for m in modules if m not in ("specbench.__main__", "specbench.load.llmperf_actor")]
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-c", IMPORT_ALL, str(zip_path), str(deps), json.dumps(modules)],
        cwd=zip_path.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def allowed() -> frozenset[str]:
    return lock_imports()


@pytest.fixture(scope="module")
def deps(tmp_path_factory) -> Path:
    return pod_deps(tmp_path_factory.mktemp("pod") / "deps")


@pytest.fixture(scope="module")
def job_zip(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("zip") / "specbench.pyz"
    path.write_bytes(bundle.zipapp_bytes())  # the zip as the pod fetches it
    return path


def test_the_zip_holds_the_pods_commands_and_no_laptop_module(allowed):
    laptop = laptop_commands(bundle.PACKAGE_DIR)
    assert {"report", "emulate", "predict", "plan", "preflight", "sweep_next", "sweep_report", "import_llmperf", "suite"} <= set(laptop)
    assert problems(bundle.PACKAGE_DIR, allowed) == []


def test_every_module_of_the_zip_imports_with_only_the_pods_requirements(job_zip, deps):
    imported = import_all(job_zip, deps)
    assert imported["failed"] == {} and imported["outside"] == []
    tops = {name.split(".")[0] for name in imported["loaded"]}
    assert "matplotlib" not in tops and "config" not in tops
    assert not [name for name in imported["loaded"] if name.startswith("specbench.emulator")]
    assert {f"specbench.commands.{c}" for c in POD_COMMANDS} <= set(imported["loaded"])


@pytest.mark.parametrize(
    ("module", "line", "expected"),
    [
        ("run", "def _leak():\n    from specbench.emulator import server\n", "a laptop's module: specbench/emulator/server.py"),
        ("publish", "import matplotlib\n", "specbench.commands.publish imports matplotlib, which requirements.lock does not install"),
        ("sweep", "def _leak():\n    from specbench.commands import report\n", "a laptop's module: specbench/commands/report.py"),
    ],
    ids=["emulator", "matplotlib", "laptop-command"],
)
def test_a_leak_into_the_zip_is_named(tmp_path, allowed, deps, module, line, expected):
    """The checks above fail when a pod's command starts importing a laptop's code."""
    package = tmp_path / "specbench"
    shutil.copytree(bundle.PACKAGE_DIR, package, ignore=shutil.ignore_patterns("__pycache__"))
    path = package / "commands" / f"{module}.py"
    path.write_text(path.read_text() + "\n\n" + line)
    found = problems(package, allowed)
    assert expected in found, found
    if module == "publish":  # and the import itself fails as it would in the pod
        zip_path = tmp_path / "leaky.pyz"
        zip_path.write_bytes(bundle.zipapp_bytes(package))
        failed = import_all(zip_path, deps)["failed"]
        assert "specbench.commands.publish" in failed and "matplotlib" in failed["specbench.commands.publish"]


def _zip_cli(job_zip: Path, *args: str) -> subprocess.CompletedProcess:
    # Not isolated: the benchmark's requirements come from this environment, as from the pod's install.
    env = {"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, str(job_zip), *args], cwd=job_zip.parent, env=env, capture_output=True, text=True, timeout=60)


# The zip's own command line, in one process for many command lines (a Python start each would be
# 0.1 s of CPU for the same dispatcher): each line's exit code, stdout and stderr, as the zip's
# ``__main__`` would give them (``raise SystemExit(main())``; argparse's --help exits 0 itself).
RUN_LINES = """
import contextlib, io, json, sys
sys.path.insert(0, sys.argv[1])
from specbench.cli import main
results = []
for argv in json.loads(sys.argv[2]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as done:
            code = done.code
    results.append([code, out.getvalue(), err.getvalue()])
print(json.dumps(results))
"""


def _zip_lines(job_zip: Path, lines: list[list[str]]) -> list[tuple[int, str, str]]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
    ran = subprocess.run(
        [sys.executable, "-c", RUN_LINES, str(job_zip), json.dumps(lines)],
        cwd=job_zip.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    return [tuple(result) for result in json.loads(ran.stdout)]


REFUSED = "specbench: {}: this command is not in the pod bundle (the zip holds only the commands the pods run); run it from a checkout of the project\n"


def test_the_zip_lists_every_command_and_refuses_a_laptops_in_one_line(job_zip):
    listed = _zip_cli(job_zip, "--help")
    assert listed.returncode == 0, listed.stderr
    for name, _, help_text in cli.COMMANDS:
        assert name in listed.stdout and help_text[:40] in " ".join(listed.stdout.split()), name
    # A laptop's command and a laptop's sweep subcommand, each as the pod's shell runs the zip.
    for args, command in ((["report", "r1"], "report"), (["sweep", "next", "--sweep-id", "s1"], "sweep next")):
        ran = _zip_cli(job_zip, *args)
        assert (ran.returncode, ran.stdout, ran.stderr) == (2, "", REFUSED.format(command)), args
    # Every other laptop's command the same way, and the pods' commands' help, from the zip's code.
    refused = {"emulate": ["emulate"], "sweep stage-job": ["sweep", "stage-job", "--stage", "x.json"], "predict": ["predict"]}
    helps = [["run", "--help"], ["publish", "--help"], ["sweep", "control", "--help"]]
    results = _zip_lines(job_zip, [*refused.values(), *helps])
    for command, result in zip(refused, results[: len(refused)], strict=True):
        assert result == (2, "", REFUSED.format(command)), (command, result)
    for args, (code, out, err) in zip(helps, results[len(refused) :], strict=True):
        assert code == 0 and out.startswith(f"usage: specbench {' '.join(args[:-1])}"), (args, err)
