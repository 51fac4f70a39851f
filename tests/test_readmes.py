"""The docs hold together: a short README, no dead links or anchors, every docs page reachable from
the README, every module named in its package's README."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import ROOT

MAX_README_LINES = 300
PACKAGES = ("stacks", "charts", "specbench")
NOT_MODULES = {"__init__.py", "__main__.py"}

_FENCE = re.compile(r"^(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
# Inline links and images, [text](target) / ![alt](target), with an optional "title".
_LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_CODE_SPAN = re.compile(r"`+[^`]*`+")
_MODULE_TOKEN = re.compile(r"[\w./-]+\.py\b")


def markdown_files() -> list[Path]:
    """README.md, every docs page and every package README."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *(ROOT / p / "README.md" for p in PACKAGES)]


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks (a `#` there is a shell comment, not a heading)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def github_slug(heading: str) -> str:
    """GitHub's anchor for a heading: the rendered text, lower-cased, every character but word
    characters, hyphens and spaces removed, spaces turned into hyphens (html-pipeline's TocFilter,
    jch/html-pipeline lib/html/pipeline/toc_filter.rb: ``PUNCTUATION_REGEXP = /[^\\p{Word}\\- ]/u``;
    the same rule in github-slugger). Markup is rendered away first: code spans keep their text,
    links their link text, emphasis markers go."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "")
    text = re.sub(r"(\*\*|__|\*|(?<!\w)_|_(?!\w))", "", text)
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading's anchor; a repeated slug gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    found = set()
    for line in prose_lines(text):
        match = _HEADING.match(line)
        if not match:
            continue
        slug = github_slug(match.group(2))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def links(text: str) -> list[str]:
    """Targets of every inline link and image outside code (fenced blocks and code spans); a link's
    text may wrap onto the next line."""
    return [m.group(1) for m in _LINK.finditer(_CODE_SPAN.sub("", "\n".join(prose_lines(text))))]


def dead_links(path: Path) -> list[str]:
    """``target: why`` for each relative link of ``path`` that points at no file or no heading."""
    dead = []
    for target in links(path.read_text()):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        if not resolved.exists():
            dead.append(f"{target}: no such file")
        elif anchor and resolved.suffix != ".md":
            dead.append(f"{target}: an anchor into a file that is not Markdown")
        elif anchor and anchor not in anchors(resolved.read_text()):
            dead.append(f"{target}: no heading with anchor #{anchor} in {resolved.name}")
    return dead


def modules(package: Path) -> list[str]:
    """Every module of ``package``, recursively, as a path relative to it (``addons/vpc_cni.py``)."""
    return sorted(p.relative_to(package).as_posix() for p in package.rglob("*.py") if p.name not in NOT_MODULES)


def unnamed_modules(package: Path) -> list[str]:
    """The modules of ``package`` its README does not name by their path (relative to the package,
    or from the repository root with the package's prefix)."""
    named = {token.removeprefix(f"{package.name}/") for token in _MODULE_TOKEN.findall((package / "README.md").read_text())}
    return [module for module in modules(package) if module not in named]


# --- the checker itself ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        ("Deploy", "deploy"),
        ("Results: the dashboard and the report", "results-the-dashboard-and-the-report"),
        ("What `cdk deploy` builds", "what-cdk-deploy-builds"),
        ("See the output first, offline: `make demo`", "see-the-output-first-offline-make-demo"),
        ("Benchmark: why a stock image and a ConfigMap", "benchmark-why-a-stock-image-and-a-configmap"),
        ("Capacity Blocks & ODCR", "capacity-blocks--odcr"),
        ("Reserved capacity: Capacity Blocks and ODCR", "reserved-capacity-capacity-blocks-and-odcr"),
        ("snake_case and **bold** [a link](x.md)", "snake_case-and-bold-a-link"),
    ],
)
def test_slugs_follow_github(heading, slug):
    assert github_slug(heading) == slug


def test_repeated_headings_and_code_blocks():
    text = "# Notes\n\n## Notes\n\n```sh\n# not a heading\n```\n"
    assert anchors(text) == {"notes", "notes-1"}


def test_checker_catches_dead_anchors_files_and_images(tmp_path):
    (tmp_path / "page.md").write_text("# Page\n\n## Known limits\n")
    (tmp_path / "img.png").write_bytes(b"")
    readme = tmp_path / "README.md"
    readme.write_text(
        "# Top\n\n"
        "[ok](page.md#known-limits) [ok](#top) [web](https://example.com/#x) ![ok](img.png)\n"
        "[dead anchor](page.md#known-limit) [dead self](#nowhere) [gone](missing.md)\n"
        "![gone](images/none.png) [not md](img.png#x) [wrapped\n  text](page.md#wrapped)\n"
        "`[in code](also-missing.md)`\n\n```md\n[in a block](missing-too.md)\n```\n"
    )
    assert [d.split(":")[0] for d in dead_links(readme)] == [
        "page.md#known-limit",
        "#nowhere",
        "missing.md",
        "images/none.png",
        "img.png#x",
        "page.md#wrapped",
    ]


def test_module_check_names_what_is_missing(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    for name in ("__init__.py", "a.py", "b.py", "sub/__init__.py", "sub/c.py", "sub/d.py"):
        (package / name).write_text("")
    # a.py by its own path, sub/c.py with the package prefix; b.py only inside another path;
    # sub/d.py only by its file name.
    (package / "README.md").write_text("`a.py`, `pkg/sub/c.py`, `other/b.py`, `d.py`\n")
    assert unnamed_modules(package) == ["b.py", "sub/d.py"]


# --- the repository's docs ------------------------------------------------------------------------


def test_readme_is_a_landing_page_of_at_most_300_lines():
    count = len((ROOT / "README.md").read_text().splitlines())
    assert count <= MAX_README_LINES, f"README.md has {count} lines; move detail into docs/"


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_dead_links(path):
    assert dead_links(path) == []


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in links((ROOT / "README.md").read_text()) if not t.startswith("#")}
    pages = sorted((ROOT / "docs").glob("*.md"))
    assert pages, "docs/ has no pages"
    assert [p.name for p in pages if p.resolve() not in linked] == []


@pytest.mark.parametrize("package", PACKAGES)
def test_every_module_is_named_in_its_package_readme(package):
    missing = unnamed_modules(ROOT / package)
    assert missing == [], f"{package}/README.md does not name: {', '.join(missing)}"
