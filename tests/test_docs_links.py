"""The README and the docs/ pages it links: every relative link (and image) names a file of the repository, and every
`#anchor` a heading of the page it points into, as GitHub names headings. The README is the front door: a page moved
or a heading renamed must not leave it pointing at nothing."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
INLINE_CODE = re.compile(r"`[^`]*`")
EXTERNAL = ("http://", "https://", "mailto:")


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks, with inline code taken out (a `[x](y)` there is not a link)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(INLINE_CODE.sub("", line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (hyphens, underscores kept), spaces to hyphens."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of a page's headings (outside fenced code), a repeated one numbered as GitHub does."""
    seen: dict[str, int] = {}
    fenced = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"#{1,6} (.+)", line)):
            base = slug(match.group(1))
            seen[base] = seen.get(base, 0) + 1
    return {f"{base}-{n}" if n else base for base, count in seen.items() for n in range(count)}


def links_of(page: Path) -> list[str]:
    return [target for line in prose_lines(page.read_text()) for target in LINK.findall(line)]


def test_slug_follows_github() -> None:
    assert slug("Benchmarks in the console: `b` and `c`") == "benchmarks-in-the-console-b-and-c"
    assert slug("Rolling changes over a group: `--rolling`") == "rolling-changes-over-a-group---rolling"
    assert slug("Editing and restarting (`e`, `r`)") == "editing-and-restarting-e-r"


def test_the_readme_links_every_docs_page() -> None:
    linked = {(ROOT / unquote(t.split("#")[0])).resolve() for t in links_of(ROOT / "README.md")}
    unlinked = [p.name for p in PAGES[1:] if p.resolve() not in linked]
    assert not unlinked, f"docs pages the README does not link: {unlinked}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    targets = links_of(page)
    for target in targets:
        if target.startswith(EXTERNAL):
            continue
        path_part, _, anchor = target.partition("#")
        file = (page.parent / unquote(path_part)).resolve() if path_part else page
        if not file.exists():
            broken.append(f"{target}: no file {file.relative_to(ROOT) if file.is_relative_to(ROOT) else file}")
        elif anchor and anchor not in anchors(file):
            broken.append(f"{target}: no heading with the anchor #{anchor} in {file.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: broken links:\n" + "\n".join(broken)
