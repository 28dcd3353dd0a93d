"""report.html: one self-contained page with the probes embedded and every drill-down field."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import typer
from typer.testing import CliRunner

from harness.mirage.report import write_report
from mirage.cli.report import register
from tests.cli_errors import assert_one_line_error
from tests.harness.report_support import ANSWERABLE, write_result_folder


def _page_data(html: str) -> dict:
    match = re.search(
        r'<script type="application/json" id="report-data">(.*?)</script>', html, re.S
    )
    assert match is not None
    return json.loads(match.group(1))


def test_report_html_is_self_contained_and_embeds_every_probe(tmp_path: Path) -> None:
    folder = write_result_folder(tmp_path / "run")
    files = write_report(folder)
    html = files.html.read_text(encoding="utf-8")
    assert not re.search(r'(src|href)="(https?:)?//', html), "no network asset"
    assert html.count('src="data:image/png;base64,') == len(files.figures)
    assert "<script>alert(1)</script>" not in html  # a reply cannot break out of the data
    probes = _page_data(html)["probes"]
    assert len(probes) == 12
    outcomes = {p["outcome"] for p in probes}
    assert outcomes == {"grounded", "ungrounded-but-correct", "hallucinated", "refused", "PF"}


def test_a_probe_carries_its_drill_down(tmp_path: Path) -> None:
    folder = write_result_folder(tmp_path / "run")
    probes = _page_data(write_report(folder).html.read_text(encoding="utf-8"))["probes"]
    probe = next(
        p for p in probes
        if p["state"] == "S1-d0" and p["condition"] == "Cm" and p["answerability"] == "YES"
    )  # fmt: skip
    assert probe["question"] == ANSWERABLE.question
    assert probe["outcome"] == "grounded" and probe["path"] == "R_tool"
    assert probe["raw_output"].startswith("ANSWERABLE=YES")
    assert [line["tool"] for line in probe["server_log"]] == ["artifact_recall"]
    assert probe["server_log"][0]["hits"] == [ANSWERABLE.gold_source]
    assert probe["tool_calls"][0]["arguments"]["query"] == ANSWERABLE.question
    rules = {r["name"]: r for r in probe["rules"]}
    assert rules["GC"]["value"] == 1 and "SC·VC" in rules["GC"]["rule"]
    assert rules["HR"]["value"] is None and rules["HR"]["facts"] == "not applicable"
    assert (probe["eit"], probe["cached_tokens"], probe["latency_s"]) == (3000, 2048, 0.25)


def test_a_pf_probe_says_why_its_indicators_are_null(tmp_path: Path) -> None:
    folder = write_result_folder(tmp_path / "run")
    probes = _page_data(write_report(folder).html.read_text(encoding="utf-8"))["probes"]
    pf = next(p for p in probes if p["outcome"] == "PF")
    assert all(r["value"] is None and "parse failure" in r["facts"] for r in pf["rules"])


@pytest.mark.slow
def test_mirage_view_serves_the_page_on_loopback(tmp_path: Path) -> None:
    folder = write_result_folder(tmp_path / "run")
    command = [sys.executable, "-m", "mirage", "view", str(folder), "--port", "0"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # "serving http://127.0.0.1:PORT/report.html ..."
        url = line.split()[1]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/report.html")
        page = httpx.get(url, timeout=30).text
        assert _page_data(page)["probes"]
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_mirage_view_without_results_says_what_to_do(tmp_path: Path) -> None:
    app = typer.Typer()
    register(app)
    result = CliRunner().invoke(app, ["view", str(tmp_path)], env={"COLUMNS": "400"})
    assert_one_line_error(result, "no report.html in", "run mirage report", exit_code=2)
