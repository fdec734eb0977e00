"""Every relative link in the README and the manual reaches a file, and every #anchor a heading."""

import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PAGES = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors (lower case, punctuation dropped, spaces to dashes) and
    explicit ``<a id>`` anchors."""
    anchors = set()
    in_code = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if not in_code and line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    # explicit HTML anchors, as <a id="health"></a> before a paragraph
    anchors.update(re.findall(r'<a (?:id|name)="([^"]+)"', page.read_text()))
    return anchors


def _links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return [m for m in LINK.findall(text) if not m.startswith(("http://", "https://", "mailto:"))]


def test_the_manual_has_pages():
    assert len(PAGES) > 10


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_resolve(page: Path):
    broken = []
    for link in _links(page):
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        missing_anchor = bool(anchor) and target.suffix == ".md" and anchor not in _anchors(target)
        if not target.exists() or missing_anchor:
            broken.append(link)
    assert not broken, f"{page.name}: broken links {broken}"


def test_readme_stays_an_entry_point():
    assert len((REPO_ROOT / "README.md").read_text().splitlines()) <= 400
