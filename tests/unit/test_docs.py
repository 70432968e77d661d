"""The README and the pages under docs/ stand on their own: every relative link resolves to a file of the repository
and, where it names one, to a heading of that file; nothing points outside the repository; the functions the design
names on a trajectory's path exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "results" / "README.md"]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    body = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", body, re.M)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # a web address
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists() or (ROOT not in file.parents and file != ROOT):
            broken.append(f"{target}: no such file in the repository")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, broken


def test_the_readme_is_a_user_guide_of_at_most_250_lines():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250


def test_the_benchmark_index_lists_every_script():
    index = (ROOT / "docs" / "benchmarks.md").read_text()
    kinds = [ROOT / "bench" / kind for kind in ("benchmarks", "experiments", "checks")]
    scripts = [p for kind in kinds for p in kind.iterdir() if p.suffix in (".py", ".sh")]
    assert scripts, "no scripts under bench/benchmarks, bench/experiments or bench/checks"
    missing = [str(p.relative_to(ROOT)) for p in scripts if f"`{p.relative_to(ROOT)}`" not in index]
    assert not missing, missing


def test_the_path_of_a_trajectory_in_the_design_names_functions_that_exist():
    """docs/design.md section 4 lists the functions one trajectory passes through; each must be there to follow."""
    import importlib

    text = (ROOT / "docs" / "design.md").read_text()
    path = text[text.index("function by function") : text.index("## 5. Layers")]
    names = re.findall(r"`(graft\.[\w.]+)`", path)
    assert len(names) >= 10
    for name in names:
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):
            try:
                found = importlib.import_module(".".join(parts[:cut]))
                break
            except ModuleNotFoundError:
                continue
        for attribute in parts[cut:]:
            found = getattr(found, attribute)  # AttributeError names what the design names and the code lacks
