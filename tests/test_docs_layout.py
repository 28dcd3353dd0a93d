"""The docs name the code as it is (issue 46, item 4): docs/architecture.md's table of
``harness/mirage`` by stage is generated from the packages' own docstrings and files, its seam
table names each contract's real file and kind, and every path that it and the README's layout
table name exists."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.test_layers import MIRAGE_STAGES

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = ROOT / "docs" / "architecture.md"
README = ROOT / "README.md"
BEGIN = "<!-- mirage-stages:begin (generated: tests/test_docs_layout.py, stages_markdown) -->"
END = "<!-- mirage-stages:end -->"
PACKAGE_DIRS = ("runtime", "compaction", "memory_server", "harness", "mirage", "docs", "tests")


def _summary(docstring: str) -> str:
    """The first sentence of a docstring's first paragraph, in Markdown code spans."""
    first = " ".join(docstring.split("\n\n")[0].split())
    first = re.sub(r"[,;]? one module per (concern|stage):$", ".", first)
    sentence = re.split(r"(?<=[.)])\s(?=[A-Z`])", first)[0]
    return sentence.replace("``", "`").rstrip(":") + ("" if sentence.endswith(".") else ".")


def stages_markdown(root: Path = ROOT) -> str:
    """The table of ``harness/mirage`` by stage, lowest first, as docs/architecture.md holds it."""
    rows = ["| stage | what | modules |", "| --- | --- | --- |"]
    for stage in MIRAGE_STAGES:
        folder = root / "harness" / "mirage" / stage
        init = folder / "__init__.py" if folder.is_dir() else folder.with_suffix(".py")
        docstring = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        if folder.is_dir():
            names = sorted(
                p.relative_to(folder).with_suffix("").as_posix() + ("/" if p.is_dir() else "")
                for p in folder.iterdir()
                if (p.suffix == ".py" and p.name != "__init__.py")
                or (p.is_dir() and (p / "__init__.py").is_file())
            )
            where, modules = f"`harness/mirage/{stage}/`", ", ".join(f"`{n}`" for n in names)
        else:
            where, modules = f"`harness/mirage/{stage}.py`", "—"
        rows.append(f"| {where} | {_summary(docstring)} | {modules} |")
    return "\n".join(rows)


def test_the_stage_table_is_generated_from_the_code() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    assert BEGIN in text and END in text, f"docs/architecture.md lost its {BEGIN} markers"
    held = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert held == stages_markdown(), (
        "docs/architecture.md's stage table is out of step with harness/mirage: paste "
        "tests.test_docs_layout.stages_markdown() between its mirage-stages markers"
    )


def _paths(text: str) -> set[str]:
    """Every repository path a Markdown text names in a code span: a folder (``…/``) or a file
    (``….py``, ``….md``) under one of ``PACKAGE_DIRS`` (``mirage/probe``, an Inspect task, is
    neither)."""
    spans = (span.rstrip(".,:;") for span in re.findall(r"`([^`\s]+)`", text))
    return {
        span
        for span in spans
        if span.split("/")[0] in PACKAGE_DIRS
        and re.fullmatch(r"[\w/.-]+(/|\.\w+)", span)
        and "/" in span
    }


def _layout_section(text: str) -> str:
    return text.split("\n## Layout", 1)[1].split("\n## ", 1)[0]


@pytest.mark.parametrize(
    ("doc", "section"),
    [(ARCHITECTURE, lambda text: text), (README, _layout_section)],
    ids=["architecture", "readme-layout"],
)
def test_every_path_the_docs_name_exists(doc: Path, section: object) -> None:
    assert callable(section)
    named = _paths(section(doc.read_text(encoding="utf-8")))
    assert named, f"{doc.name}: no paths found (did its layout section move?)"
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert not missing, f"{doc.name} names paths that do not exist: {missing}"


def _seam_rows() -> list[tuple[str, str, str]]:
    """(name, kind, contract file) of each row of docs/architecture.md's seam table."""
    table = ARCHITECTURE.read_text(encoding="utf-8").split("| seam | kind |", 1)[1]
    rows = []
    for line in table.split("\n")[2:]:
        if not line.startswith("|"):
            break
        name, kind, contract = (cell.strip() for cell in line.strip("|").split(" | ")[:3])
        rows.append((name.strip("`"), kind, re.findall(r"`([\w/]+\.py)`", contract)[0]))
    return rows


def _kind(path: Path, name: str) -> str | None:
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            bases = {ast.unparse(base).split("[")[0] for base in node.bases}
            return "Protocol" if "Protocol" in bases else "ABC" if "ABC" in bases else "class"
    return None


def test_each_seam_is_declared_where_and_as_the_docs_say() -> None:
    rows = _seam_rows()
    assert len(rows) >= 10
    wrong = [
        f"{name}: docs say {kind} in {file}, the code has {_kind(ROOT / file, name)}"
        for name, kind, file in rows
        if _kind(ROOT / file, name) != kind
    ]
    assert not wrong, "\n".join(wrong)


def test_a_missing_path_or_a_wrong_kind_is_caught(tmp_path: Path) -> None:
    assert _paths("`harness/mirage/nowhere.py`, `docs/x.md`, `mirage/probe`, `plain`") == {
        "harness/mirage/nowhere.py",
        "docs/x.md",
    }
    source = tmp_path / "seam.py"
    source.write_text("from typing import Protocol\nclass Seam(Protocol): ...\nclass Other: ...\n")
    assert (_kind(source, "Seam"), _kind(source, "Other"), _kind(source, "Gone")) == (
        "Protocol",
        "class",
        None,
    )
