"""Builders that regenerate the bundled packs, byte for byte, from ``harness/mirage/packs/sources``.

Heavy imports (matplotlib, Pillow) happen inside the builders, so importing this package is
cheap.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from harness.kit.packsums import write_sums


def _builders() -> dict[str, Callable[[Path], None]]:
    from harness.mirage.packs.build.core import build_core
    from harness.mirage.packs.build.ext import build_ext

    return {"mirage-core": build_core, "mirage-ext": build_ext}


BUNDLED_PACKS = ("mirage-core", "mirage-ext")


def build_pack(name: str, out_dir: Path) -> Path:
    """Regenerate bundled pack ``name`` into ``out_dir/name`` (replacing what was there)."""
    builders = _builders()
    if name not in builders:
        raise KeyError(f"unknown bundled pack {name!r}; known: {', '.join(sorted(builders))}")
    target = out_dir / name
    with tempfile.TemporaryDirectory(dir=out_dir) as scratch:
        staging = Path(scratch) / name
        builders[name](staging)
        write_sums(staging)
        if target.exists():
            shutil.rmtree(target)
        shutil.move(staging, target)
    return target
