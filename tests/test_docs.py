"""README and docs/ hold together: links land, named files and tests exist, the README is short."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 200

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")
OUTSIDE = ("http://", "https://", "mailto:")


def prose_lines(text: str) -> list[str]:
    """The lines of a markdown text outside fenced code blocks."""
    lines, in_code = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            in_code = not in_code
        elif not in_code:
            lines.append(line)
    return lines


def relative_links(page: Path) -> list[str]:
    """Every link target of `page` that points inside the repository, as written."""
    return [target for line in prose_lines(page.read_text())
            for target in LINK.findall(line) if not target.startswith(OUTSIDE)]


def anchor(heading: str) -> str:
    """The id GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {anchor(line.lstrip("#")) for line in prose_lines(page.read_text())
            if line.startswith("#")}


def broken_links(page: Path) -> list[str]:
    """The links of `page` whose file does not exist, or whose #anchor names no heading there."""
    broken = []
    for target in relative_links(page):
        path, _, fragment = target.partition("#")
        destination = (page.parent / path).resolve() if path else page
        if not destination.exists():
            broken.append(target)
        elif fragment and destination.suffix == ".md" and fragment not in anchors(destination):
            broken.append(target)
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_points_at_a_file_and_heading_that_exist(page):
    assert broken_links(page) == []


def test_the_readme_stays_under_two_hundred_lines():
    assert len(README.read_text().splitlines()) < README_MAX_LINES


def test_every_page_of_docs_is_reachable_from_the_readme():
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in relative_links(README)}
    unlinked = [p.name for p in PAGES[1:] if p.resolve() not in linked]
    assert unlinked == []


CODE_PATH = re.compile(r"`((?:agentq|tests|bench|docs)/[\w./-]*)`")
TEST_NAME = re.compile(r"`(test_\w+)`")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_path_of_the_repository_a_page_names_exists(page):
    missing = [path for line in prose_lines(page.read_text())
               for path in CODE_PATH.findall(line) if not (ROOT / path).exists()]
    assert missing == []


def test_every_test_a_page_names_as_proof_exists():
    named = {name for page in PAGES for name in TEST_NAME.findall(page.read_text())}
    defined = set(re.findall(r"def (test_\w+)\(",
                             "\n".join(p.read_text() for p in (ROOT / "tests").rglob("*.py"))))
    assert sorted(named - defined) == []


def test_a_link_to_a_missing_file_or_heading_is_reported_and_code_blocks_are_not_read(tmp_path):
    (tmp_path / "there.md").write_text("# A heading, with `code`\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](there.md) [ok](there.md#a-heading-with-code) [web](https://example.com/x.md)\n"
        "[gone](missing.md) [no heading](there.md#nowhere) ![picture](gone.png)\n"
        "```\n[in code](also-missing.md)\n```\n"
    )
    assert broken_links(page) == ["missing.md", "there.md#nowhere", "gone.png"]
