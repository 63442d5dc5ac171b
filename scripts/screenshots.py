"""The documentation's screenshots, taken with headless Chromium in a 1280 px wide window: the README's first
screen, the top of the study report and the viewer with its filter in use, as PNG files (docs/images/ by default).

    .venv/bin/python scripts/screenshots.py                      # a small replay in a temporary data folder
    .venv/bin/python scripts/screenshots.py --report data/report # the report the first README command wrote
    .venv/bin/python scripts/screenshots.py --out /tmp/shots     # somewhere else than docs/images/
    .venv/bin/python scripts/screenshots.py --keep /tmp/replay   # keep the replay's folder; a second call reuses it

Without --report the script replays the bundled recording of the 1.5B on a few problems (`evalmislead run --replay
--problems ...`) in a temporary data folder, which needs what `bash scripts/bootstrap.sh --browser --model-1.5b`
installs: the bundled 1.5B answers the determinism probe's one live request (minutes on a busy 2-core machine;
everything else comes from the recording). The browser is Debian's chromium
(`--browser`), driven through Playwright as the browser tests drive it. Nothing is fetched from the network: the
README is rendered to HTML here (markdown-it-py, as the report is), the report and the viewer are local files.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.sync_api import Page

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
# the flags of the browser tests (evalmislead_tests/e2e/test_ui_browser.py): no sandbox (root in a container),
# no GPU, no background traffic
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]
WIDTH, HEIGHT = 1280, 800  # one screen of a 1280 px wide window
MAX_BYTES = 300_000  # a larger PNG is stored with a 256-colour palette
REPLAY_PROBLEMS = "0-3,101"  # four problems and the worked example's, which has misleading tests
NAMES = {"readme": "readme-first-screen.png", "report": "report-top.png", "viewer": "viewer-filter.png"}
README_CSS = """body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:16px;line-height:1.5;
color:#1f2328;max-width:980px;margin:0 auto;padding:32px 45px}h1,h2{border-bottom:1px solid #d1d9e0;padding-bottom:.3em}
code,pre{font-family:ui-monospace,monospace;font-size:85%;background:#f6f8fa}pre{padding:16px;overflow:auto}
table{border-collapse:collapse;display:block;overflow:auto}td,th{border:1px solid #d1d9e0;padding:6px 13px}
a{color:#0969da;text-decoration:none}"""


def readme_html(readme: Path) -> str:
    """The README as a page, rendered by markdown-it-py (a dependency: the report's HTML uses it) with tables."""
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark", {"html": True}).enable("table").render(readme.read_text(encoding="utf-8"))
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>README</title>'
            f"<style>{README_CSS}</style></head><body>{body}</body></html>")


def replay_report(folder: Path, problems: str) -> Path:
    """Replay the bundled recording on ``problems`` with the data folder in ``folder``; the report's folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVALMISLEAD_", "DAGSTER_HOME"))}
    env.update(EVALMISLEAD_HOME=str(folder / "data"), DAGSTER_HOME=str(folder / "dagster_home"),
               EVALMISLEAD_PROBE_N="1")  # one live request: the probe's sample is not what the pictures show
    cmd = [sys.executable, "-m", "evalmislead_assets.cli", "run", "--replay", "--problems", problems]
    print(f"screenshots: {' '.join(cmd[2:])} in {folder}", flush=True)
    proc = subprocess.run(cmd, env=env, cwd=ROOT)  # its progress lines go to this terminal
    if proc.returncode != 0:
        sys.exit(f"screenshots: the replay failed (exit {proc.returncode}); its output above says why")
    reports = sorted((folder / "data" / "report").rglob("report.html"))
    if not reports:
        sys.exit(f"screenshots: the replay wrote no report.html under {folder / 'data' / 'report'}")
    return reports[0].parent


def save_png(png: bytes, path: Path) -> Path:
    """Write ``png``; one over MAX_BYTES is quantized to 256 colours (text on flat colours loses nothing visible)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png)
    if len(png) > MAX_BYTES:
        from PIL import Image  # matplotlib's dependency

        with Image.open(path) as img:
            img.convert("RGB").quantize(256).save(path, optimize=True)
    return path


def check_report(report: Path) -> None:
    """Exit with one line when ``report`` lacks report.html or the viewer."""
    for page_file in (report / "report.html", report / "viewer" / "index.html"):
        if not page_file.is_file():
            sys.exit(f"screenshots: {page_file} does not exist; build the report first (or leave --report out)")


def take(report: Path, out: Path, readme: Path = ROOT / "README.md", chromium: str = CHROMIUM) -> list[Path]:
    """The three screenshots of ``report`` (a folder with report.html and viewer/) and ``readme``, into ``out``."""
    from playwright.sync_api import sync_playwright

    check_report(report)
    viewer = report / "viewer" / "index.html"
    written = []
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        readme_page = Path(tmp) / "README.html"
        readme_page.write_text(readme_html(readme), encoding="utf-8")
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
            page.goto(readme_page.as_uri())
            written.append(save_png(page.screenshot(), out / NAMES["readme"]))
            page.goto((report / "report.html").as_uri())
            written.append(save_png(page.screenshot(), out / NAMES["report"]))
            page.goto(viewer.as_uri())
            use_filter(page)
            written.append(save_png(page.screenshot(), out / NAMES["viewer"]))
        finally:
            browser.close()
    return written


def use_filter(page: Page) -> None:
    """Type the function of the viewer's first misleading test (else of its first test) into the filter's
    problem field, as a reader looking for one function's tests would."""
    rows = page.locator("tr[data-task]")
    if rows.count() == 0:
        return
    misleading = page.locator("#misleading + table tr[data-task]")
    row = misleading.first if misleading.count() else rows.first
    page.locator("form.filter input[name=task]").type(row.get_attribute("data-function") or "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "images", help="folder for the PNG files")
    ap.add_argument("--report", type=Path, default=None,
                    help="a report folder (report.html, viewer/); default: replay a few problems in a temporary folder")
    ap.add_argument("--problems", default=REPLAY_PROBLEMS, help=f"the replay's problems (default {REPLAY_PROBLEMS})")
    ap.add_argument("--keep", type=Path, default=None,
                    help="the replay's folder, kept (a second call reuses what the first stored); default: a "
                         "temporary one, removed after")
    ap.add_argument("--readme", type=Path, default=ROOT / "README.md")
    ap.add_argument("--chromium", default=CHROMIUM, help=f"the browser binary (default {CHROMIUM})")
    args = ap.parse_args(argv)
    if args.report is not None:
        check_report(args.report)
    if not Path(args.chromium).is_file():
        sys.exit(f"screenshots: no browser at {args.chromium}; bash scripts/bootstrap.sh --browser installs chromium")
    if args.report is not None:
        paths = take(args.report, args.out, args.readme, args.chromium)
    elif args.keep is not None:
        paths = take(replay_report(args.keep.resolve(), args.problems), args.out, args.readme, args.chromium)
    else:
        with tempfile.TemporaryDirectory(prefix="evalmislead-screenshots-") as tmp:
            paths = take(replay_report(Path(tmp), args.problems), args.out, args.readme, args.chromium)
    for path in paths:
        print(f"screenshots: {path} ({path.stat().st_size // 1000} kB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
