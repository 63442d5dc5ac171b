"""The documentation: a short README that points into docs/, and a MkDocs site built from docs/ with every
warning an error (a broken link or anchor, a page left out of the nav), as the test command runs it."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README_MAX_LINES = 150  # about three screens at 1280 px, generated blocks included

_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    """`mkdocs build --strict` into a temporary folder (mkdocs.yml: docs/ in, every link check a warning)."""
    out = tmp_path_factory.mktemp("docs") / "site"
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--clean", "-d", str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    return out, res


def _page(out: Path, rel: str) -> Path:
    return out / ("" if rel == "index.md" else rel[:-3]) / "index.html"


def _outside_fences(text: str) -> list[str]:
    lines, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def test_the_site_builds_with_no_warning(site) -> None:
    out, res = site
    log = res.stdout + res.stderr
    assert "No module named mkdocs" not in log, "mkdocs is missing: bash scripts/bootstrap.sh installs the test extras"
    assert res.returncode == 0, log
    assert "WARNING" not in log, log
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    for page in pages:  # every page is built (and, by the strict build, in the nav)
        assert _page(out, page).is_file(), f"{page} was not built"


def test_every_table_row_renders_as_a_row(site) -> None:
    """A row that falls out of its table (a blank line, a stray character) renders as plain text; count them."""
    out, res = site
    assert res.returncode == 0, res.stdout + res.stderr
    for page in DOCS.rglob("*.md"):
        rows = [ln for ln in _outside_fences(page.read_text(encoding="utf-8"))
                if ln.startswith("|") and not re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", ln.strip())]
        rel = page.relative_to(DOCS).as_posix()
        html = _page(out, rel).read_text(encoding="utf-8")
        assert html.count("<tr>") == len(rows), f"{rel}: {len(rows)} table rows in the source, {html.count('<tr>')} built"


def test_the_protocol_is_a_page_of_the_site(site) -> None:
    """docs/protocol.md is a link to the repository's PROTOCOL.md, so the two cannot differ."""
    assert (DOCS / "protocol.md").read_text(encoding="utf-8") == (ROOT / "PROTOCOL.md").read_text(encoding="utf-8")
    out, res = site
    assert res.returncode == 0, res.stdout + res.stderr
    html = _page(out, "protocol.md").read_text(encoding="utf-8")
    assert "The study this platform runs" in html and "98.75" in html


def test_the_readme_is_short_and_its_links_resolve() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    # the whole README, its generated first screen of results included; the full Results are in docs/results.md
    assert len(readme.splitlines()) <= README_MAX_LINES
    links = [t for t in _LINK.findall(readme) if not t.startswith(("http://", "https://", "#"))]
    assert any(t.startswith("docs/") for t in links)
    for target in links:
        assert (ROOT / target.split("#", 1)[0]).exists(), f"README links to {target}, which does not exist"
    # where to go next: the site's front page, the recipe and the protocol are one click from the README
    for target in ("docs/index.md", "docs/getting-started.md", "docs/own-model.md", "PROTOCOL.md"):
        assert f"]({target})" in readme, f"the README does not link {target}"


def test_the_two_commands_are_in_the_readme_as_ci_runs_them() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "bash scripts/run-study.sh   # 1." in readme and "bash scripts/test.sh        # 2." in readme
    assert "bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
