"""report.html in a real headless Chromium (Debian's chromium + chromium-driver, installed by
.ci/run): loads from disk without console errors, filters change the visible rows, a probe opens
and shows its raw reply; comparison.html's first screen (1400×900) holds the verdict, the
headline figure and the compact table. Screenshots land in the test's tmp_path."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.kit.results import read_records
from harness.mirage.probing.records import ProbeRecord
from harness.mirage.report import write_report
from harness.mirage.report.compare import result_dirs, write_comparison
from tests.harness.report_support import UNANSWERABLE_REPLIES, write_result_folder
from tests.harness.test_references_e2e import default_run  # noqa: F401 (the default run's shape)

pytestmark = pytest.mark.slow
CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
FIRST_SCREEN = {"width": 1400, "height": 900}


@pytest.fixture
def browser() -> Iterator[Any]:
    if not (Path(CHROMIUM).exists() and shutil.which(DRIVER)):
        pytest.fail("needs Debian's chromium and chromium-driver: apt-get install -y chromium "
                    "chromium-driver (as .ci/run does)")  # fmt: skip
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1400,1000"):  # fmt: skip
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _rows(driver: Any) -> list[Any]:
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, "#probes tbody tr")


def _errors(driver: Any) -> list[dict[str, Any]]:
    return [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]


def test_report_html_filters_and_drill_down(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    page = write_report(write_result_folder(tmp_path / "run")).html
    browser.get(page.as_uri())
    assert _errors(browser) == []
    assert len(_rows(browser)) == 12
    browser.save_screenshot(str(tmp_path / "loaded.png"))

    Select(browser.find_element(By.ID, "filter-outcome")).select_by_value("PF")
    assert len(_rows(browser)) == 2
    Select(browser.find_element(By.ID, "filter-condition")).select_by_value("Cm")
    [row] = _rows(browser)
    row.click()
    raw = browser.find_element(By.ID, "raw-reply")
    assert raw.is_displayed() and raw.text == UNANSWERABLE_REPLIES[2]
    assert "parse failure" in browser.find_element(By.ID, "detail").text
    browser.save_screenshot(str(tmp_path / "probe.png"))

    link = browser.find_element(By.CSS_SELECTOR, "#detail a.state-link")  # S1-d0 of the same
    link.click()
    assert "S1-d0" in browser.find_element(By.CSS_SELECTOR, "#detail h2").text
    assert _errors(browser) == []


def test_comparison_page_filters_by_model(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    run = tmp_path / "run"
    write_result_folder(run, "alpha")
    write_result_folder(run, "beta")
    answerers = {d: read_records(d, ProbeRecord) for d in result_dirs([run])}
    page = write_comparison(answerers, run).html
    browser.get(page.as_uri())
    assert len(_rows(browser)) == 24
    Select(browser.find_element(By.ID, "filter-model")).select_by_value("beta")
    rows = _rows(browser)
    assert len(rows) == 12 and all(r.text.startswith("beta") for r in rows)
    browser.save_screenshot(str(tmp_path / "comparison.png"))
    assert _errors(browser) == []


async def test_pages_of_a_real_two_answerer_run(browser: Any, tmp_path: Path) -> None:
    """A real scripted run (workspace, index, memory server over HTTP, checkpoints) with two
    answerers: its comparison page shows the memory server's log lines behind an R_tool probe."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from harness.mirage.config import RunConfig
    from harness.mirage.run import MirageRun
    from runtime.backbones.scripted import FunctionBackbone
    from tests.harness.test_run_e2e import oracle, summary

    def abstainer(messages: Any, tools: Any) -> str:
        return "ANSWERABLE=NO\nSOURCE=NONE\nANSWER=NONE"

    config = RunConfig(
        models=["oracle", "abstainer"], trunk_model="scripted", summarizer_model="summarizer",
        limit=2, out=tmp_path / "run",
    )  # fmt: skip
    backbones = {
        "oracle": FunctionBackbone(oracle, model="oracle", context_window=8192),
        "abstainer": FunctionBackbone(abstainer, model="abstainer", context_window=8192),
        "summarizer": FunctionBackbone(summary, model="summarizer"),
    }
    folders = await MirageRun(config, backbones=backbones).execute()
    files = write_comparison({f: read_records(f, ProbeRecord) for f in folders}, tmp_path / "run")
    retention = files.comparison.ranking["C0"]["Ret"]
    assert [(r.label, r.value) for r in retention] == [("oracle", 100.0), ("abstainer", None)]

    browser.get(files.html.as_uri())
    Select(browser.find_element(By.ID, "filter-model")).select_by_value("oracle")
    Select(browser.find_element(By.ID, "filter-condition")).select_by_value("Cm")
    Select(browser.find_element(By.ID, "filter-answerability")).select_by_value("YES")
    Select(browser.find_element(By.ID, "filter-state")).select_by_value("S2")
    [row] = _rows(browser)
    row.click()
    detail = browser.find_element(By.ID, "detail").text
    assert "Retrieval path: R_tool" in detail and "artifact_recall" in detail and '"hits"' in detail
    browser.save_screenshot(str(tmp_path / "real-run-probe.png"))
    assert _errors(browser) == []


async def test_visibility_grid_and_path_evidence_of_a_real_scripted_run(
    browser: Any, tmp_path: Path
) -> None:
    """A real scripted-trunk run (its summarizer keeps no artifact): the visibility map of its
    checkpoints is in report.md and report.html; at S2 every artifact is nowhere, so a C0
    probe that made no call is R_none, and its evidence says so on the page."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from harness.mirage.config import RunConfig
    from harness.mirage.probing.visibility import VISIBILITY_FILE, VisibilityMap
    from harness.mirage.run import MirageRun
    from runtime.backbones.scripted import FunctionBackbone
    from tests.harness.test_run_e2e import oracle, summary

    config = RunConfig(
        models=["oracle"], trunk_model="scripted", summarizer_model="summarizer", limit=2,
        out=tmp_path / "run",
    )  # fmt: skip
    backbones = {
        "oracle": FunctionBackbone(oracle, model="oracle", context_window=8192),
        "summarizer": FunctionBackbone(summary, model="summarizer"),
    }
    run = MirageRun(config, backbones=backbones)
    [folder] = await run.execute()
    found = VisibilityMap.model_validate_json((folder / VISIBILITY_FILE).read_bytes())
    artifacts = list(run.pack.artifacts)
    assert list(found.states) == ["S1-d0", "S1-d50k", "S1-d80k", "S2"]
    assert found.grid()["S1-d0"] == dict.fromkeys(artifacts, "verbatim")
    assert found.grid()["S2"] == dict.fromkeys(artifacts, "nowhere")
    report = (folder / "report.md").read_text()
    assert "| State | " + " | ".join(artifacts) + " |" in report
    assert "| S2 | " + " | ".join(["nowhere"] * len(artifacts)) + " |" in report
    cell = run.reports[0].aggregate.states["S2"]["C0"]
    assert cell.R_none == 100.0 and cell.VC_R_none == 100.0  # right, with no access path

    browser.get((folder / "report.html").as_uri())
    cells = browser.find_elements(By.CSS_SELECTOR, "table.visibility td.v-nowhere")
    assert len(cells) == len(artifacts)  # the S2 row
    Select(browser.find_element(By.ID, "filter-path")).select_by_value("R_none")
    Select(browser.find_element(By.ID, "filter-condition")).select_by_value("C0")
    rows = _rows(browser)
    assert rows and all(" S2 " in f" {r.text} " for r in rows)
    rows[0].click()
    reason = browser.find_element(By.ID, "path-reason").text
    assert reason.startswith("R_none: 0 of ") and "no retrieval call" in reason
    assert "nowhere" in browser.find_element(By.ID, "path-evidence").text
    browser.save_screenshot(str(tmp_path / "visibility.png"))
    assert _errors(browser) == []


def test_the_comparison_first_screen_answers(
    browser: Any,
    default_run: tuple[Path, str, float],  # noqa: F811
    tmp_path: Path,
) -> None:
    """The default run's comparison.html at 1400×900, not scrolled: the verdict, the headline
    figure (loaded) and the compact table (one row per answerer and condition) lie wholly
    inside the viewport; everything else starts below them, collapsed."""
    from selenium.webdriver.common.by import By

    out, _, _ = default_run
    browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {**FIRST_SCREEN, "deviceScaleFactor": 1, "mobile": False},
    )
    browser.get((out / "comparison.html").as_uri())
    assert _errors(browser) == []
    viewport = "return [window.innerWidth, window.innerHeight, window.scrollY]"
    assert browser.execute_script(viewport) == [FIRST_SCREEN["width"], FIRST_SCREEN["height"], 0]
    for element_id in ("verdict", "headline-figure", "headline-table"):
        box = browser.execute_script(
            "const r = document.getElementById(arguments[0]).getBoundingClientRect();"
            "return {left: r.left, top: r.top, right: r.right, bottom: r.bottom};",
            element_id,
        )
        assert box["left"] >= 0 and box["top"] >= 0, (element_id, box)
        assert box["right"] <= FIRST_SCREEN["width"], (element_id, box)
        assert box["bottom"] <= FIRST_SCREEN["height"], (element_id, box)
    image = browser.find_element(By.CSS_SELECTOR, "#headline-figure img")
    assert image.is_displayed() and browser.execute_script(
        "return arguments[0].naturalWidth", image
    )
    rows = browser.find_elements(By.CSS_SELECTOR, "#headline-table tbody tr")
    assert len(rows) == 4 * 2  # the model and three references, C0 and Cm
    assert (
        "reference/confabulator, which always answers YES"
        in browser.find_element(By.ID, "verdict").text
    )
    closed = browser.find_elements(By.CSS_SELECTOR, "details.section:not([open])")
    assert closed and all(
        d.rect["y"] >= FIRST_SCREEN["height"] * 0.5 for d in closed
    )  # below the headline
    browser.save_screenshot(str(tmp_path / "comparison-first-screen.png"))
