"""The README stays a short first read whose links lead somewhere: every relative link in README.md, docs/ and
tests/README.md names a file that exists (and, with #anchor, a heading in it, as GitHub spells anchors), every
file path a promise names exists, and every docs/ page is in docs/README.md's map."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "tests" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
README_MAX_BYTES = 8000  # the detail lives in docs/; the README is the what, the set-up and the map


def anchors(page: Path) -> set[str]:
    """GitHub's anchors for a page's headings: lower case, punctuation dropped, spaces as hyphens, a repeated
    heading's anchor suffixed -1, -2, ..."""
    seen: dict[str, int] = {}
    out = set()
    in_code = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not re.match(r"#{1,6} ", line):
            continue
        slug = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def broken_links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    out = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):  # https:, mailto:: not this repository's
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            out.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            out.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    return out


def test_every_relative_link_names_a_file_and_heading_that_exist():
    problems = [p for page in PAGES for p in broken_links(page)]
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_the_anchor_of_a_heading_is_github_s():
    page = ROOT / "docs" / "config.md"
    assert {"pipelinesnamesink", "kafka-connects-jdbc-sink", "acls-eosctl-needs"} <= anchors(page)


def test_every_file_a_promise_names_exists():
    text = (ROOT / "docs" / "promises.md").read_text(encoding="utf-8")
    named = re.findall(r"`((?:tests|eosctl|auditors|tui)/[\w/]+\.py)`", text)
    assert len(named) >= 10
    assert [p for p in named if not (ROOT / p).exists()] == []


def test_every_docs_page_is_in_the_map_and_the_readme_stays_short():
    listed = set(re.findall(r"^\| \[([\w.]+\.md)\]", (ROOT / "docs" / "README.md").read_text(), re.M))
    pages = {p.name for p in (ROOT / "docs").glob("*.md")} - {"README.md"}
    assert pages - listed == set(), "docs/ pages missing from docs/README.md's map"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.encode()) < README_MAX_BYTES, "move the detail to a docs/ page and link it"
    for command in ("make demo", "make test", "make check"):
        assert command in readme
