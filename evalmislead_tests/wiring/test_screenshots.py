"""The documentation's screenshots (scripts/screenshots.py): three PNG files of a 1280 px wide window, the README's
first screen, the report's top and the viewer with its filter in use, each small enough to commit; the committed
ones are the same size and the docs show them."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "screenshots.py"
IMAGES = ROOT / "docs" / "images"
NAMES = ("readme-first-screen.png", "report-top.png", "viewer-filter.png")
MAX_BYTES = 300_000


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG file's header; AssertionError when the file is not a PNG."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR", f"{path} is not a PNG"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def test_png_size_refuses_a_file_that_is_not_a_png(tmp_path: Path) -> None:
    fake = tmp_path / "fake.png"
    fake.write_bytes(b"GIF89a" + bytes(40))
    with pytest.raises(AssertionError, match="not a PNG"):
        png_size(fake)


def test_the_committed_screenshots_are_in_the_docs() -> None:
    shown = "\n".join(p.read_text(encoding="utf-8") for p in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
    for name in NAMES:
        path = IMAGES / name
        assert png_size(path) == (1280, 800), name
        assert path.stat().st_size <= MAX_BYTES, f"{name}: {path.stat().st_size} bytes"
        assert f"images/{name}" in shown, f"no page of the docs shows {name}"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_script_writes_three_pngs_of_a_1280_px_window(tmp_path: Path) -> None:
    from evalmislead_assets.report.build import to_html
    from evalmislead_assets.report.viewer import write_viewer
    from evalmislead_tests.report.test_viewer import _frames

    report = tmp_path / "report"
    write_viewer(_frames(), report / "viewer")
    (report / "report.html").write_text(to_html("# Study report\n\nThe four comparisons, then the rates.\n"))
    out = tmp_path / "images"
    done = subprocess.run([sys.executable, str(SCRIPT), "--report", str(report), "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(NAMES)
    for name in NAMES:
        assert png_size(out / name) == (1280, 800), name
        assert (out / name).stat().st_size <= MAX_BYTES
        assert f"{out / name}" in done.stdout  # the script names each file it wrote


def test_the_script_names_a_missing_report_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--report", str(tmp_path / "none"), "--out", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=100)
    assert done.returncode == 1 and "report.html does not exist" in done.stderr, done.stdout + done.stderr
    assert not list(tmp_path.glob("*.png"))
