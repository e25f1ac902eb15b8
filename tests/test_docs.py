"""The README and docs/ name only files that exist, and every shipped YAML builds."""
import glob
import re

import pytest

from tests.helpers.tiny_runs import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# a repository path: configs/..., tools/..., docs/..., hydra_dense/... (globs allowed)
PATH = re.compile(r"(?<![\w/.~-])((?:configs|tools|docs|hydra_dense)/[\w*./-]*[\w*/])")


def test_readme_is_a_front_page_linking_the_docs():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 150
    assert "./run.sh demo" in text and "./run.sh test" in text
    for page in PAGES[1:]:
        assert f"docs/{page.name}" in text, f"README does not link docs/{page.name}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_path_a_page_names_exists(page):
    named = {m.group(1) for m in PATH.finditer(page.read_text())}
    assert named, f"{page.name} names no repository path"
    missing = sorted(p for p in named if not glob.glob(str(ROOT / p)))
    assert not missing, f"{page.name} names paths that do not exist: {missing}"


def test_relative_links_resolve():
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target:
                assert (page.parent / target).exists(), f"{page.name}: link {target} is broken"


def _heading_anchors(page) -> set:
    """GitHub's anchors for a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    prose = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)  # a shell comment is no heading
    headings = re.findall(r"^#+ (.*)$", prose, flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_link_anchors_name_a_heading():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    broken = []
    for page in pages:
        for target, anchor in re.findall(r"\]\(([^)#\s]*)#([^)\s]+)\)", page.read_text()):
            linked = page.parent / target if target else page
            if linked.suffix == ".md" and anchor not in _heading_anchors(linked):
                broken.append(f"{page.name}: {target}#{anchor}")
    assert not broken, f"links to headings that do not exist: {broken}"
