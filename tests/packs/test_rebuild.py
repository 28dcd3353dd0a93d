"""`mirage pack build` regenerates the committed bundled packs: every file byte for byte, except
the PDFs, whose bytes depend on matplotlib's PDF writer (3.11 embeds its fonts differently from
3.10): those must hold the same pages and the same text, which is all the memory index reads."""

from __future__ import annotations

from pathlib import Path

import pypdf
import pytest

from harness.kit.packsums import SUMS_FILE
from harness.mirage.packs.build import BUNDLED_PACKS, build_pack
from harness.mirage.packs.pack import BUNDLED_DIR


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def _pdf_pages(path: Path) -> list[str]:
    return [page.extract_text() for page in pypdf.PdfReader(path).pages]


def _sums_without_pdfs(data: bytes) -> list[str]:
    return [line for line in data.decode().splitlines() if not line.endswith(".pdf")]


@pytest.mark.parametrize("name", BUNDLED_PACKS)
def test_rebuild_is_identical(name: str, tmp_path: Path) -> None:
    root = build_pack(name, tmp_path)
    built, committed = _files(root), _files(BUNDLED_DIR / name)
    assert sorted(built) == sorted(committed)
    pdfs = [path for path in built if path.endswith(".pdf")]
    different = [
        path
        for path in built
        if path not in pdfs and path != SUMS_FILE and built[path] != committed[path]
    ]
    assert different == []
    assert _sums_without_pdfs(built[SUMS_FILE]) == _sums_without_pdfs(committed[SUMS_FILE])
    for path in pdfs:
        assert _pdf_pages(root / path) == _pdf_pages(BUNDLED_DIR / name / path), path


def test_unknown_pack_name_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(KeyError, match="unknown bundled pack"):
        build_pack("mirage-nope", tmp_path)
