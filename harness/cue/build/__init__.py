"""``mirage cue build``: regenerate the bundled CUE packs, byte for byte, from
``harness/cue/data/sources/<name>.yaml`` (Pillow is imported only when a photo is drawn)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from harness.cue.pack import BUNDLED_DIR

SOURCES_DIR = Path(__file__).resolve().parent.parent / "data" / "sources"


def bundled_sources() -> list[str]:
    return sorted(path.stem for path in SOURCES_DIR.glob("*.yaml"))


def build_cue_pack(name: str, out_dir: Path = BUNDLED_DIR) -> Path:
    """Build pack ``name`` into ``out_dir/name`` (replacing what was there)."""
    from harness.cue.build.assemble import build_from_source

    source = SOURCES_DIR / f"{name}.yaml"
    if not source.is_file():
        raise KeyError(f"unknown bundled CUE pack {name!r}; known: {', '.join(bundled_sources())}")
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / name
    with tempfile.TemporaryDirectory(dir=out_dir) as scratch:
        staging = Path(scratch) / name
        build_from_source(source, staging)
        if target.exists():
            shutil.rmtree(target)
        shutil.move(staging, target)
    return target
