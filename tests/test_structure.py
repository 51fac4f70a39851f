"""The project's modules import each other without cycles, and specbench's top level stays small.

The import graph is read with ``ast`` (specbench/bundle.py's walk, the one that builds the zips):
every import statement that can run, at module level and inside functions (lazy imports), so a
cycle that only closes when a function runs counts too, and those under ``if TYPE_CHECKING:``: a
module that needs another's types sits above it, not beside it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

from conftest import ROOT
from specbench import bundle

# What the project is made of (tests/ imports it, nothing imports tests/ but the benchmarks' scripts).
PROJECT = ("app.py", "stacks", "charts", "config", "lambdas", "specbench", "scripts")
MAX_TOP_LEVEL = 10


def project_files(root: Path = ROOT, parts: Iterable[str] = PROJECT) -> list[Path]:
    files = []
    for part in parts:
        path = root / part
        files += [path] if path.suffix == ".py" else sorted(p for p in path.rglob("*.py") if "__pycache__" not in p.parts)
    return files


def import_graph(root: Path = ROOT, parts: Iterable[str] = PROJECT) -> dict[str, set[str]]:
    """Module -> the project modules it imports (only those among ``parts``)."""
    files = project_files(root, parts)
    names = {bundle.module_name(path, root) for path in files}
    return {bundle.module_name(path, root): bundle.project_imports(path, root, type_checking=True) & names for path in files}


def find_cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """One cycle per strongly connected component that has one, as [a, b, ..., a], sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def connect(node: str) -> None:  # Tarjan's algorithm; the graph is a few hundred modules
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                connect(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            components.append(component)

    for node in sorted(graph):
        if node not in index:
            connect(node)
    cycles = []
    for component in components:
        start = min(component)
        if len(component) == 1 and start not in graph.get(start, ()):
            continue
        cycles.append(_cycle_through(start, component, graph))
    return sorted(cycles)


def _cycle_through(start: str, component: set[str], graph: Mapping[str, Iterable[str]]) -> list[str]:
    """The shortest path start -> ... -> start inside the component (breadth first)."""
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for succ in sorted(graph.get(node, ())):
                if succ == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start] if node != start else [start, start]
                if succ in component and succ not in previous:
                    previous[succ] = node
                    following.append(succ)
        frontier = following
    raise AssertionError(f"{start} is in a component without a cycle")


def test_cycle_finder_names_each_cycle():
    graph = {
        "a": {"b"},
        "b": {"c"},
        "c": {"a", "d"},  # a -> b -> c -> a
        "d": set(),
        "e": {"e"},  # a module importing itself
        "f": {"g"},
        "g": {"h"},
        "h": set(),
    }
    assert find_cycles(graph) == [["a", "b", "c", "a"], ["e", "e"]]
    assert find_cycles({"f": {"g"}, "g": {"h"}, "h": set()}) == []


def test_import_graph_reads_lazy_and_relative_imports(tmp_path):
    """The two cycles issue 12 removed, as they were: one closed only by a lazy import."""
    package = tmp_path / "pkg"
    (package / "engines").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "endpoints.py").write_text("from .engines import Endpoint\ncount = None\n")
    (package / "engines" / "__init__.py").write_text("Endpoint = object\ndef make():\n    from .native import Native\n")
    (package / "engines" / "native.py").write_text("from ..endpoints import count\nNative = object\n")
    (package / "report.py").write_text("def write():\n    from pkg.report_charts import draw\nNAME = 'x'\n")
    (package / "report_charts.py").write_text("from pkg.report import NAME\ndraw = None\n")
    graph = import_graph(tmp_path, ["pkg"])
    assert graph["pkg.engines.native"] == {"pkg.endpoints"}
    assert find_cycles(graph) == [
        ["pkg.endpoints", "pkg.engines", "pkg.engines.native", "pkg.endpoints"],
        ["pkg.report", "pkg.report_charts", "pkg.report"],
    ]


def test_import_graph_counts_type_checking_imports(tmp_path):
    """Issue 24: charts/serving_stack.py imported charts/spec.py only under TYPE_CHECKING, and spec.py
    imported it back; the graph skipped the first and saw no cycle."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "spec.py").write_text("from .stack import flags\nclass Spec: ...\n")
    (package / "stack.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .spec import Spec\ndef flags(spec: Spec): ...\n"
    )
    assert import_graph(tmp_path, ["pkg"])["pkg.stack"] == {"pkg.spec"}
    assert find_cycles(import_graph(tmp_path, ["pkg"])) == [["pkg.spec", "pkg.stack", "pkg.spec"]]
    # The zips ship only what runs: there the type-checking import is left out.
    assert bundle.project_imports(package / "stack.py", tmp_path) == set()


def test_imports_are_found_in_every_kind_of_statement_body(tmp_path):
    """The walk follows statement lists only (imports are statements): each place one can stand is
    covered, and an import under TYPE_CHECKING counts only when asked for."""
    names = [f"m{i}" for i in range(17)]
    for name in names:
        (tmp_path / f"{name}.py").write_text("")
    source = """
import m0
from typing import TYPE_CHECKING
class C:
    import m1
    def method(self):
        import m2
async def f():
    async with x:
        import m3
    async for _ in y:
        import m4
    else:
        import m5
try:
    import m6
except ImportError:
    import m7
else:
    import m8
finally:
    import m9
while x:
    import m10
else:
    import m11
with x:
    import m12
match x:
    case 1:
        import m13
    case _:
        if y:
            pass
        else:
            from m14 import *
if TYPE_CHECKING:
    import m15
else:
    import m16
"""
    (tmp_path / "all.py").write_text(source)
    assert bundle.project_imports(tmp_path / "all.py", tmp_path) == set(names) - {"m15"}
    assert bundle.project_imports(tmp_path / "all.py", tmp_path, type_checking=True) == set(names)


def test_named_functions_limit_the_lazy_imports_followed(tmp_path):
    (tmp_path / "cli.py").write_text("import json\ndef run():\n    import runner\ndef emulate():\n    import emulator\n")
    for name in ("runner", "emulator"):
        (tmp_path / f"{name}.py").write_text("")
    assert bundle.project_imports(tmp_path / "cli.py", tmp_path) == {"runner", "emulator"}
    assert bundle.project_imports(tmp_path / "cli.py", tmp_path, {"run"}) == {"runner"}
    with pytest.raises(ValueError, match="no top-level function command_run to follow"):
        bundle.project_imports(tmp_path / "cli.py", tmp_path, {"run", "command_run"})


def test_no_import_cycle_between_project_modules():
    graph = import_graph()
    assert {"app", "specbench.cli", "lambdas.aggregate.handler", "charts.spec", "scripts.demo"} <= graph.keys()
    assert "specbench.prompts.suite" in graph["charts.spec"]  # the graph sees across packages
    cycles = find_cycles(graph)
    assert cycles == [], "import cycles: " + "; ".join(" -> ".join(cycle) for cycle in cycles)


def test_specbench_top_level_stays_small():
    modules = sorted(path.name for path in (ROOT / "specbench").glob("*.py"))
    assert len(modules) <= MAX_TOP_LEVEL, (
        f"specbench/ has {len(modules)} top-level modules: {', '.join(modules)}; put new ones in a stage folder"
    )


@pytest.mark.parametrize("stage", ["prompts", "load", "results", "analysis", "outputs", "emulator"])
def test_each_stage_is_a_package(stage):
    assert (ROOT / "specbench" / stage / "__init__.py").is_file()


def test_specbench_stages_import_one_way():
    """Collapsed to its folders (and top-level modules), specbench's graph has no cycle either:
    a stage imports only the stages before it (the data flow of specbench/README.md)."""
    stages: dict[str, set[str]] = {}
    for module, imported in import_graph().items():
        if module.startswith("specbench."):
            stage = module.split(".")[1]
            stages.setdefault(stage, set()).update(
                m.split(".")[1] for m in imported if m.startswith("specbench.") and m.split(".")[1] != stage
            )
    # Top-level leaves (modules importing nothing of the project: jsonfile.py's strict JSON writer,
    # names.py's safe-name rule) are shared utilities, not stages: any stage may use them.
    leaves = {name for name, imported in stages.items() if not imported and (ROOT / "specbench" / f"{name}.py").is_file()}
    assert stages["results"] - leaves == {"prompts"} and stages["analysis"] - leaves == {"results"}
    assert find_cycles(stages) == []
