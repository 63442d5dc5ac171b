"""The README's Results section against the answer pack it was rendered from."""

from __future__ import annotations

from pathlib import Path

from evalmislead_assets.report import results


def test_the_readmes_results_come_from_the_bundled_pack_as_it_is_now() -> None:
    """The README's Results were rendered after the pack's last slice: its provenance line (answer count, dates,
    git commit of the recording) is what the bundled pack renders now, so a pack that grew since fails here."""
    from evalmislead_assets.cli.replay import DEFAULT_PACK
    from evalmislead_assets.llm import answer_pack
    from evalmislead_assets.report.results import _provenance

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index(results.BEGIN):readme.index(results.END)]
    manifest = answer_pack.read_manifest(DEFAULT_PACK)
    assert manifest is not None
    (line,) = _provenance(manifest, answer_pack.read_props(DEFAULT_PACK))
    assert line in section, "the pack changed since the README's Results were written: replay it and run " \
                            "`evalmislead results --write README.md`"
