"""The generated results (docs/results.md in full, the README's first screen) against the answer pack they were
rendered from."""

from __future__ import annotations

from pathlib import Path

from evalmislead_assets.report import readme_summary, results

ROOT = Path(__file__).resolve().parents[2]


def _manifest() -> dict:
    from evalmislead_assets.cli.replay import DEFAULT_PACK
    from evalmislead_assets.llm import answer_pack

    manifest = answer_pack.read_manifest(DEFAULT_PACK)
    assert manifest is not None
    return manifest


def test_the_full_results_come_from_the_bundled_pack_as_it_is_now() -> None:
    """docs/results.md was rendered after the pack's last slice: its provenance line (answer count, dates, git
    commit of the recording) is what the bundled pack renders now, so a pack that grew since fails here."""
    from evalmislead_assets.cli.replay import DEFAULT_PACK
    from evalmislead_assets.llm import answer_pack
    from evalmislead_assets.report.results import _provenance

    page = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    section = page[page.index(results.BEGIN):page.index(results.END)]
    (line,) = _provenance(_manifest(), answer_pack.read_props(DEFAULT_PACK))
    assert line in section, "the pack changed since docs/results.md was written: replay it and run " \
                            "`evalmislead results --write docs/results.md`"


def test_the_readmes_first_screen_is_generated_from_the_same_run() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme[readme.index(readme_summary.BEGIN):readme.index(readme_summary.END)]
    assert readme_summary.short_provenance(_manifest()) in block, \
        "the pack changed since the README was written: replay it and run `evalmislead results --write README.md`"
    assert "| condition " in block and "C1, misleading" in block  # the table and the verdicts, not a stub
    assert results.BEGIN not in readme  # the full Results live in docs/results.md only
