"""The documentation holds together: the README stays short, and every relative link in the
README and in docs/ reaches a file, and a heading where it names one."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README_MAX_LINES = 250

LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def documents() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def anchors(path: Path) -> set[str]:
    """GitHub's anchors of a markdown file's headings: lower case, punctuation dropped,
    spaces to hyphens."""
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    found = set()
    for heading in re.findall(r"^#+ +(.+?) *$", text, re.M):
        found.add(re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-"))
    return found


def broken_links(path: Path) -> list[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    broken = []
    for link in LINK.findall(text):
        if re.match(r"[a-z]+:", link):  # http:, https:, mailto:
            continue
        target, _, anchor = link.partition("#")
        resolved = (path.parent / target).resolve() if target else path
        if not resolved.exists():
            broken.append(f"{link}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{link}: no heading #{anchor}")
    return broken


def test_the_readme_is_at_most_250_lines():
    lines = (REPO / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES


def test_every_relative_link_in_the_docs_resolves():
    problems = [f"{path.relative_to(REPO)}: {problem}" for path in documents() for problem in broken_links(path)]
    assert problems == []


def test_a_broken_link_and_a_missing_heading_are_found(tmp_path):
    (tmp_path / "there.md").write_text("# A heading\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](there.md) [ok](there.md#a-heading) [web](https://example.org/x)\n"
        "[gone](missing.md) [no heading](there.md#nowhere)\n"
        "```\n[in a code block](ignored.md)\n```\n"
    )
    assert broken_links(page) == ["missing.md: no such file", "there.md#nowhere: no heading #nowhere"]


def package_modules(package: Path) -> set[str]:
    """The modules and packages of `package`, and those one level inside each of its packages,
    as the module map names them (`plugin/hooks.py`, `families/rss/`)."""

    def inside(folder: Path, prefix: str) -> set[str]:
        return {f"{prefix}{p.name}" for p in folder.glob("*.py")} | {
            f"{prefix}{p.name}/" for p in folder.iterdir() if p.is_dir() and (p / "__init__.py").exists()
        }

    top = inside(package, "")
    nested = {name for sub in top if sub.endswith("/") for name in inside(package / sub, sub)}
    return top | {name for name in nested if not name.endswith("/__init__.py")}


def test_the_architecture_module_map_names_every_module_of_the_package():
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    mapped = set(re.findall(r"^\| `([\w./]+)` \|", text.split("## Module map", 1)[1], re.M))
    modules = package_modules(REPO / "ragmatrix")
    assert modules - mapped == set(), "modules missing from docs/architecture.md's module map"
    assert mapped - modules == set(), "docs/architecture.md's module map names modules that are gone"


def test_few_modules_stay_at_the_package_root():
    """The folders are the layers: at most four modules beside `__init__.py` and `__main__.py`."""
    root = {p.name for p in (REPO / "ragmatrix").glob("*.py")} - {"__init__.py", "__main__.py"}
    assert len(root) <= 4, sorted(root)
