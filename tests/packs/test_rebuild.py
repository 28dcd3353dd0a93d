"""`mirage pack build` regenerates the committed bundled packs byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.mirage.packs.build import BUNDLED_PACKS, build_pack
from harness.mirage.packs.pack import BUNDLED_DIR


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@pytest.mark.parametrize("name", BUNDLED_PACKS)
def test_rebuild_is_byte_identical(name: str, tmp_path: Path) -> None:
    built = _files(build_pack(name, tmp_path))
    committed = _files(BUNDLED_DIR / name)
    assert sorted(built) == sorted(committed)
    different = [path for path in built if built[path] != committed[path]]
    assert different == []


def test_unknown_pack_name_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(KeyError, match="unknown bundled pack"):
        build_pack("mirage-nope", tmp_path)
