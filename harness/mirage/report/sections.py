"""A report a reader takes in at a glance: the answer first, every detail one click away.

Above: the comparison (``comparison.md``, its appendix and ``comparison.html``). Below: the
report's own Markdown (tables from ``harness.kit.report.tables``) and quoted text (summaries,
model names) that must never be read as the report's own Markdown.

A report is an opening (the verdict, the headline figure and one compact table) and then
sections, each with a heading and a one-line reading that says what it shows and how to read
it. A section's ``body`` stays in the report; its ``appendix`` (the full tables) goes to an
appendix file the report links, and, on the HTML page, into the section's collapsed part.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel


class Section(BaseModel):
    title: str
    reading: str
    body: str = ""
    appendix: str = ""
    figure: Path | None = None

    @property
    def anchor(self) -> str:
        """The section's id on the HTML page and in the appendix (GitHub's heading slugs)."""
        slug = re.sub(r"[^\w\- ]", "", self.title.lower()).strip()
        return re.sub(r"\s", "-", slug)


def quoted(text: str) -> str:
    """``text`` as an indented code block: nothing in it (``## Goal``, ``- **bold**``, a fence)
    is read as the report's own Markdown, and none of its lines starts a line of the report
    (an outline that only looks at line starts, ``grep '^#'``, sees none of its headings)."""
    if not text.strip():
        return "*(empty)*"
    return "\n".join(f"    {line}" if line.strip() else "" for line in text.splitlines())


def _figure_markdown(section: Section, figures_folder: str) -> str:
    if section.figure is None:
        return ""
    return f"![{section.title}]({figures_folder}/{section.figure.name})"


def report_markdown(
    opening: Sequence[str], sections: Sequence[Section], appendix: str, figures_folder: str
) -> str:
    """The report: ``opening`` (title, verdict, headline), then each section with its reading
    and body; a section with an appendix part links to it in ``appendix`` (a file name)."""
    parts = [*opening]
    for section in sections:
        parts += [f"## {section.title}", f"*{section.reading}*"]
        parts += [_figure_markdown(section, figures_folder), section.body]
        if section.appendix:
            parts.append(
                f"Full tables: [{appendix} § {section.title}]({appendix}#{section.anchor})"
            )
    return "\n\n".join(part.strip() for part in parts if part.strip()) + "\n"


def appendix_markdown(title: str, report: str, sections: Sequence[Section]) -> str:
    """The appendix: the full part of every section that has one, in the report's order."""
    parts = [f"# {title}", f"The full tables behind [{report}]({report}), in its order."]
    for section in sections:
        if section.appendix:
            parts += [f"## {section.title}", f"*{section.reading}*", section.appendix]
    return "\n\n".join(part.strip() for part in parts if part.strip()) + "\n"


def markdown_html(markdown: str) -> str:
    """The report's Markdown as HTML: CommonMark with tables; raw HTML is escaped, so text a
    model wrote cannot add markup to the page."""
    from markdown_it import MarkdownIt

    return MarkdownIt("js-default").render(markdown)


def markdown_inline_html(markdown: str) -> str:
    """One line of the report's Markdown (a reading, a caption) as inline HTML, escaped."""
    from markdown_it import MarkdownIt

    return MarkdownIt("js-default").renderInline(markdown)
