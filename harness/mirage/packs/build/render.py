"""Deterministic rendering primitives shared by the pack builders.

Every output must be byte-identical across rebuilds on the same library versions: matplotlib
figures are drawn with the Agg canvas (no pyplot state), fixed fonts, DPI and rc settings, and
saved without the ``Software``/date metadata; Pillow images use a font shipped with matplotlib
and PNG files without timestamps (those helpers and ``write_text`` are the kit's,
``harness.kit.packfiles``, shared with CUE's builder); PDFs carry no creation/modification
dates or producer.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness.kit.packfiles import save_pil_png

DPI = 100
RC_PARAMS: dict[str, Any] = {
    "font.family": "DejaVu Sans",
    "font.size": 10,
    "axes.titlesize": 12,
    "axes.labelsize": 10,
    "pdf.fonttype": 42,
    "pdf.compression": 6,
    "svg.hashsalt": "mirage",
    "path.simplify": False,
}
PDF_METADATA: dict[str, Any] = {
    "Creator": None,
    "Producer": None,
    "CreationDate": None,
    "ModDate": None,
}


def canonical_json(data: Any) -> str:
    return json.dumps(data, sort_keys=True, ensure_ascii=False, indent=2) + "\n"


def artifact_id(prefix: str, data: Any) -> str:
    """``prefix_`` + the first 8 hex digits of the sha256 of the canonical data JSON."""
    digest = hashlib.sha256(canonical_json(data).encode("utf-8")).hexdigest()
    return f"{prefix}_{digest[:8]}"


@contextmanager
def figure_style() -> Iterator[None]:
    import matplotlib

    matplotlib.use("Agg", force=False)
    with matplotlib.rc_context(RC_PARAMS):  # type: ignore[arg-type]
        yield


def new_figure(width: float, height: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(figure)
    return figure


def save_png_figure(figure: Any, path: Path) -> None:
    from PIL import Image

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    buffer.seek(0)
    save_pil_png(Image.open(buffer), path)


def save_pdf(figures: Sequence[Any], path: Path) -> None:
    from matplotlib.backends.backend_pdf import PdfPages

    path.parent.mkdir(parents=True, exist_ok=True)
    with PdfPages(path, metadata=PDF_METADATA) as pdf:
        for figure in figures:
            pdf.savefig(figure)
