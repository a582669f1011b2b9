"""Every relative link of README.md and docs/*.md leads somewhere: the file exists and, for a
`#anchor` into a Markdown file, a heading of that file makes that anchor (GitHub's rule)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import REPO

LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    found = set()
    for line in page.read_text().splitlines():
        heading = re.match(r"^#+\s+(.*)", line)
        if heading:
            text = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower())
            found.add(text.replace(" ", "-"))
    return found


def broken_links(page: Path) -> list[str]:
    broken, in_code = [], False
    for number, line in enumerate(page.read_text().splitlines(), 1):
        if line.startswith("```"):
            in_code = not in_code
        if in_code:
            continue
        for target in LINK.findall(line):
            if re.match(r"^[a-z]+:", target):  # http:, mailto:
                continue
            path, _, fragment = target.partition("#")
            dest = (page.parent / path) if path else page
            if not dest.exists():
                broken.append(f"{page.name}:{number}: no file {target}")
            elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
                broken.append(f"{page.name}:{number}: no heading for #{fragment} in {dest.name}")
    return broken


def test_every_relative_link_of_the_docs_resolves() -> None:
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    assert len(pages) > 1, "docs/ holds the pages the README links"
    broken = [problem for page in pages for problem in broken_links(page)]
    assert not broken, broken


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# A heading\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](other.md#a-heading) [gone](missing.md) [bad](other.md#nope)\n")
    assert broken_links(page) == [
        "page.md:1: no file missing.md",
        "page.md:1: no heading for #nope in other.md",
    ]
