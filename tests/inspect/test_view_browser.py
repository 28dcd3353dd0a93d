"""Exported eval logs in ``inspect view`` (Inspect's own log viewer), loaded in a real headless
Chromium (Debian's chromium + chromium-driver, installed by .ci/run): the log opens, its probes
are listed with their mirage scores. Screenshots land in the test's tmp_path."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.kit.results import read_records
from harness.mirage.probing.records import ProbeRecord
from tests.harness.report_support import write_result_folder
from tests.harness.test_report_browser import browser  # noqa: F401  (the Chromium fixture)

pytest.importorskip("inspect_ai")

pytestmark = pytest.mark.slow
START_TIMEOUT_S = 60.0
PAGE_TIMEOUT_S = 60.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def viewer(tmp_path: Path) -> Iterator[tuple[str, list[ProbeRecord]]]:
    """``inspect view`` on the exported log of a result folder; its URL and the records."""
    from harness.mirage.inspect.export import export_runs

    folder = write_result_folder(tmp_path / "run")
    export_runs([folder], tmp_path / "logs")
    port = _free_port()
    command = [sys.executable, "-m", "inspect_ai", "view", "--log-dir", str(tmp_path / "logs"),
               "--host", "127.0.0.1", "--port", str(port)]  # fmt: skip
    server = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("inspect view did not start") from None
                time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/", read_records(folder, ProbeRecord)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=10)


def _page_text(driver: Any, needle: str) -> str:
    from selenium.webdriver.common.by import By

    deadline = time.monotonic() + PAGE_TIMEOUT_S
    text = ""
    while time.monotonic() < deadline:
        text = driver.find_element(By.TAG_NAME, "body").text
        if needle in text:
            return text
        time.sleep(0.5)
    raise AssertionError(f"{needle!r} never showed; the page reads: {text[:500]!r}")


def test_inspect_view_lists_the_exported_probes(
    browser: Any,  # noqa: F811
    viewer: tuple[str, list[ProbeRecord]],
    tmp_path: Path,
) -> None:
    url, records = viewer
    browser.get(url)
    text = _page_text(browser, f"{len(records)} Samples")
    browser.save_screenshot(str(tmp_path / "inspect-view.png"))
    assert "mirage/probe" in text
    shown = [r for r in records if (r.tag or "")[:20] in text]
    assert shown, "no probe id is listed"
    for column in ("AC", "GC", "PATH"):
        assert column in text
    errors = [
        e for e in browser.get_log("browser")
        if e["level"] == "SEVERE" and "/api/flow" not in e["message"]  # no flow file: a 404
    ]  # fmt: skip
    assert errors == []
