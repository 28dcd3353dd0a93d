"""Reports a researcher reads in two minutes (issue 49): the comparison opens with the verdict,
the headline figure and one compact table; the rest is one click (or one link) away; no figure
has overlapping labels, whatever the number of summary-format arms; text a model wrote is
quoted, never read as the report's Markdown; one unit scale per table; grammatical openings."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from harness.kit.report.figures import overlapping_labels
from harness.kit.results import read_records
from harness.mirage.probing.records import ProbeRecord
from harness.mirage.report import write_report
from harness.mirage.report.aggregate import aggregate
from harness.mirage.report.compare import ComparisonFiles, result_dirs, write_comparison
from harness.mirage.report.figures import FIGURE_SPECS, state_names
from harness.mirage.report.overview import overview
from tests.harness.reading_support import (
    CALIBRATION_ARMS,
    FIVE_FORMAT_STUDY,
    MODEL,
    READER,
    RETRIEVER,
    write_study,
)

MAX_LINES = 250


def _compare(run: Path) -> ComparisonFiles:
    answerers = {d: read_records(d, ProbeRecord) for d in result_dirs([run])}
    return write_comparison(answerers, run)


def _headings(markdown: str) -> list[str]:
    """The outline a Markdown reader shows: every heading CommonMark finds."""
    tokens = MarkdownIt("js-default").parse(markdown)
    return [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]


@pytest.fixture(scope="module")
def default_shaped(tmp_path_factory: pytest.TempPathFactory) -> ComparisonFiles:
    return _compare(_written(tmp_path_factory.mktemp("default") / "run"))


def _written(run: Path, formats: tuple[str, ...] = ("verbatim", *CALIBRATION_ARMS)) -> Path:
    write_study(run, formats)
    return run


def test_the_markdown_opens_with_the_answer_and_links_the_rest(
    default_shaped: ComparisonFiles,
) -> None:
    text = default_shaped.markdown.read_text()
    lines = text.splitlines()
    assert len(lines) <= MAX_LINES
    opening = text.split("\n## ", 1)[0]  # everything before the first section
    assert "reference/context-reader's GC falls" in opening  # the verdict
    assert "![GC by state per answerer](comparison-figures/gc_headline.png)" in opening
    header = next(line for line in lines if line.startswith("| Answerer | Cond. | GC % S1-d0"))
    assert header.endswith("| Δcomp pp | MI % S1-d80k | PF / probes | Path mix % |")
    assert "[comparison-appendix.md](comparison-appendix.md)" in opening
    appendix = default_shaped.appendix.read_text()
    assert "## Table 1 — metrics per model, state and condition" in appendix
    sections = [line[3:] for line in lines if line.startswith("## ")]
    assert sections[0].startswith("Table 2") and sections[-1] == "Provenance"
    for section in sections:  # each section carries a one-line reading right under it
        after = text.split(f"## {section}\n\n", 1)[1]
        assert after.startswith("*") and after.split("\n", 1)[0].endswith("*"), section


def test_a_summary_is_quoted_never_part_of_the_outline(default_shaped: ComparisonFiles) -> None:
    folder = Path(default_shaped.comparison.answerers[2].directory)  # the context-reader's
    report = write_report(folder).report.read_text()
    for markdown in (report, default_shaped.appendix.read_text()):
        assert "Continue the conversation." in markdown
        assert "Goal" not in _headings(markdown) and "Apple harvest" not in _headings(markdown)
        assert not re.search(
            r"^(#+ (Goal|Progress|Apple)|- \*\*Flagged:\*\* nothing)", markdown, re.M
        )


def test_the_page_shows_no_raw_markdown(default_shaped: ComparisonFiles) -> None:
    page = default_shaped.html.read_text()
    visible = re.sub(r"<script.*?</script>|<pre>.*?</pre>", "", page, flags=re.S)
    assert "**" not in visible and "\n- " not in visible and "\n## " not in visible
    assert "<li><strong>Flagged:</strong>" in page  # the degenerate summary, as a list item
    sections = re.findall(r'<details class="section" id="[^"]+">\n<summary><h2>', page)
    assert len(sections) >= 10
    assert page.count('<span class="reading">') == len(sections) + 1  # + the probes'
    assert page.index('id="headline-figure"') < page.index('id="headline-table"')
    assert page.index('id="headline-table"') < page.index('<details class="section"')


def test_units_are_stated_and_one_scale_per_table(default_shaped: ComparisonFiles) -> None:
    text = default_shaped.markdown.read_text() + default_shaped.appendix.read_text()
    assert "| Model | DS % [95% CI] | Δcomp pp [95% CI] | Ret % [95% CI] |" in text
    assert "| reference/context-reader | 0.0 [0.0, 0.0] | -100.0 [-100.0, -100.0] |" in text
    assert "Δcomp pp vs S1-d80k | probes recorded |" in text  # no fraction beside percentages
    assert "| Model | State | AC % | SC % | VC % | GC % | HR % | WS % | PF | MI % | OG pp |" in text


def test_the_arms_are_named_by_what_wrote_them(default_shaped: ComparisonFiles) -> None:
    text = default_shaped.markdown.read_text()
    assert f"- S2: verbatim by {MODEL}" in text
    assert "- S2·a: verbatim by reference/keep-charts (`S2@verbatim.reference-keep-charts`)" in text


@pytest.mark.parametrize("formats", [("verbatim", *CALIBRATION_ARMS), FIVE_FORMAT_STUDY])
def test_no_figure_has_overlapping_labels(tmp_path: Path, formats: tuple[str, ...]) -> None:
    """Every label's box, drawn by matplotlib's renderer, against every other's: the default
    run's shape (four arms) and a five-format study with the calibration arms (eight)."""
    records = write_study(tmp_path / "run", formats)
    runs = {label: aggregate(rs) for label, rs in records.items()}
    names = state_names([s for agg in runs.values() for s in agg.states])
    assert len([s for s in names.short if "@" in s]) == len(formats) - 1
    for spec in FIGURE_SPECS:
        assert overlapping_labels(spec.draw(runs, names)) == [], spec.name
        assert spec.caption
    single = {"": runs[READER]}  # a run's own report.md figures
    for spec in FIGURE_SPECS:
        assert overlapping_labels(spec.draw(single, None)) == [], spec.name


def test_the_opening_is_grammatical_when_two_references_behave_alike(tmp_path: Path) -> None:
    records = write_study(tmp_path / "run", ("verbatim",), s2_kept=True)
    aggregates = {label: aggregate(rs) for label, rs in records.items()}
    text = overview(aggregates)
    assert f"{READER}'s GC holds (100% at S1-d0, 100% at S2 after compaction), and" in text
    assert f"{RETRIEVER}'s GC likewise holds (100% at S1-d0, 100% at S2" in text
    assert ", while " not in text


def test_an_arm_that_repeats_the_runs_own_s2_is_said_to(tmp_path: Path) -> None:
    """A folder from before runs refused a calibration arm equal to the trunk's own format
    and summarizer: the two states stay, and the key says they are one arm."""
    arm = "verbatim~reference/keep-charts"
    text = _compare(_written(tmp_path / "run", (arm, arm))).markdown.read_text()
    assert "- S2: verbatim by reference/keep-charts\n" in text
    assert "- S2·a: verbatim by reference/keep-charts, the same arm as S2 (`S2@verbatim." in text
