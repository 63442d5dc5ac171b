"""The Dagster UI in headless Chromium (Debian's /usr/bin/chromium through Playwright; no browser download).

Against the real webserver + daemon of the shared one-problem study: the asset graph,
the condition x thinking partitions of test_generations and its launch dialog with one
selector per dimension, the study report's plot, the outcome asset checks, and the
README's UI route for backfilling thinking=on over the whole chain (up to its preview;
test_webserver_e2e runs such a backfill). Screenshots go to EVALMISLEAD_ARTIFACTS/ui
(default: the test's tmp_path).
"""

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from dagster import AssetKey, DagsterEventType, DagsterInstance
from playwright.sync_api import Page, expect, sync_playwright

from evalmislead_assets.study.conditions import CONDITION_NAMES
from evalmislead_tests.dagster_services import Study, shared_study

pytestmark = pytest.mark.slow

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-quic",
]
TIMEOUT_MS = 60_000  # first page loads compile the UI's GraphQL queries on a busy 2-core machine
# pages are awaited by what they show, not by network quiet (the UI polls the instance while a page is open)
expect.set_options(timeout=TIMEOUT_MS)


@pytest.fixture(scope="session")
def study(tmp_path_factory: pytest.TempPathFactory, llama_server: str) -> Iterator[Study]:
    with shared_study(tmp_path_factory.mktemp("study"), llama_server) as s:
        yield s


@pytest.fixture()
def artifacts(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("EVALMISLEAD_ARTIFACTS") or tmp_path) / "ui"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture()
def page(artifacts: Path) -> Iterator[Page]:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1440, "height": 1000})
        context.set_default_timeout(TIMEOUT_MS)
        page = context.new_page()
        try:
            yield page
        finally:
            page.screenshot(path=str(artifacts / "last-page.png"))
            browser.close()


def _materialized(study: Study, asset: str) -> set[str]:
    with DagsterInstance.from_config(str(study.services.home)) as instance:
        return set(instance.get_latest_storage_id_by_partition(AssetKey(asset), DagsterEventType.ASSET_MATERIALIZATION))


def test_asset_graph_partition_grid_and_report_plot(study: Study, page: Page, artifacts: Path) -> None:
    url = study.services.url

    # the global asset graph, with its asset groups
    page.goto(f"{url}/asset-groups", wait_until="load")
    for group in ["problems", "generation", "analysis"]:
        expect(page.get_by_text(group, exact=True).first).to_be_visible()
    page.screenshot(path=str(artifacts / "01-asset-graph.png"))

    # the lineage of the partitioned chain
    page.goto(f"{url}/assets/test_generations?view=lineage", wait_until="load")
    for asset in ["model_specs", "test_generations", "generated_tests"]:
        expect(page.get_by_text(asset, exact=True).first).to_be_visible()
    page.screenshot(path=str(artifacts / "02-chain-lineage.png"))

    # condition x thinking partitions: both dimensions listed, counts as the instance has them
    done = _materialized(study, "test_generations")
    page.goto(f"{url}/assets/test_generations?view=partitions", wait_until="load")
    expect(page.get_by_text(f"Materialized ({len(done)})")).to_be_visible()
    expect(page.get_by_text(f"Missing ({12 - len(done)})")).to_be_visible()
    for value in [*CONDITION_NAMES[:-1], "off", "on"]:  # the last condition's name is cut with an ellipsis
        expect(page.get_by_text(value, exact=True).first).to_be_visible()
    page.screenshot(path=str(artifacts / "03-partitions-condition-x-thinking.png"))

    # the launch dialog: one selector per dimension; all conditions x thinking=on is 6 partitions
    page.get_by_role("button", name=re.compile("Materialize")).first.click()
    confirm = page.get_by_role("button", name="Confirm")
    page.wait_for_timeout(1000)
    if confirm.count():  # upstream partitions of thinking=on may be missing: the UI asks first
        confirm.click()
    dialog = page.locator("[role=dialog]")
    expect(dialog.get_by_text("Partition selection")).to_be_visible()
    for dim in ["condition", "thinking"]:
        expect(dialog.get_by_text(dim, exact=True)).to_be_visible()
    expect(dialog.get_by_text("Select a partition or create one")).to_have_count(2)
    dialog.get_by_role("button", name="All").first.click()
    dialog.get_by_text("Select a partition or create one").click()
    page.get_by_role("menuitem").filter(has_text=re.compile(r"^on")).last.click()
    page.keyboard.press("Escape")
    expect(dialog.get_by_text("6 partitions", exact=True)).to_be_visible()
    page.screenshot(path=str(artifacts / "04-backfill-dialog-thinking-on.png"))
    dialog.get_by_role("button", name="Cancel").click()

    # one partition, picked by its two dimension values, with its materialization metadata
    page.get_by_text("buggy_code", exact=True).first.click()
    page.get_by_text("off", exact=True).first.click()
    expect(page.get_by_text("buggy_code|off").first).to_be_visible()
    expect(page.get_by_text("answers", exact=True).first).to_be_visible()
    page.screenshot(path=str(artifacts / "05-partition-buggy_code-off.png"))

    # the report (a Markdown metadata entry) and its plots, embedded as data: PNGs
    page.goto(f"{url}/assets/study_report", wait_until="load")
    expect(page.get_by_text("plan_sha256", exact=True)).to_be_visible()
    page.screenshot(path=str(artifacts / "06-study-report.png"))
    page.get_by_text("[Show Markdown]").first.click()
    report = page.locator("[role=dialog]")
    expect(report.get_by_text("Rates and counts per condition").first).to_be_visible()
    plot = report.locator("img[src^='data:image/png']").first
    expect(plot).to_be_visible()
    assert plot.evaluate("img => img.complete && img.naturalWidth > 100 && img.naturalHeight > 100")
    plot.scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / "07-study-report-plot.png"))

    # asset health: the outcome checks and their latest results
    page.keyboard.press("Escape")
    page.goto(f"{url}/assets/test_outcomes?view=checks", wait_until="load")
    for check in ["every_test_in_one_cell", "outcomes_for_every_answer", "truncation_counts_consistent"]:
        expect(page.get_by_text(check, exact=True).first).to_be_visible()
    page.screenshot(path=str(artifacts / "08-test-outcomes-checks.png"))

    # route 1 for the whole chain: filter the lineage to it, materialize, pick thinking 'on' for the root
    chain = "key:model_specs or key:test_generations or key:generated_tests or key:test_outcomes"
    page.goto(f"{url}/asset-groups", wait_until="load")
    page.locator(".CodeMirror").first.click()
    page.keyboard.type(chain)
    page.keyboard.press("Enter")
    page.get_by_role("button", name=re.compile("Materialize")).first.click()
    dialog = page.locator("[role=dialog]")
    expect(dialog.get_by_text("Launch runs to materialize 4 assets")).to_be_visible()
    # once loaded, the dialog offers the partitions of the selection's root, model_specs (thinking)
    expect(dialog.get_by_text("Custom", exact=True)).to_be_visible()
    expect(dialog.get_by_text("Select a partition or create one")).to_have_count(1)
    dialog.get_by_text("Select a partition or create one").click()
    page.get_by_role("menuitem").filter(has_text=re.compile(r"^on")).last.click()
    page.keyboard.press("Escape")
    dialog.get_by_role("button", name="Preview").click()
    preview = page.locator("[role=dialog]").filter(has_text="Backfill preview")
    expect(preview.get_by_text("6 partitions")).to_have_count(3)  # every *|on partition of the chain
    page.screenshot(path=str(artifacts / "09-chain-backfill-preview-thinking-on.png"))
