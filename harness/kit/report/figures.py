"""A report figure: one matplotlib axes on an off-screen (Agg) figure, saved as PNG.

Above: the protocols' figure modules. Below: matplotlib, imported when a figure is made.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def new_figure(width: float = 7.0, height: float = 4.0) -> tuple[Figure, Any]:
    """A figure of ``width`` × ``height`` inches at 110 dpi and its one axes."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=110)
    return figure, figure.add_subplot(1, 1, 1)


def save_figure(figure: Figure, path: Path) -> Path:
    """``figure`` laid out tightly and written to ``path`` as PNG."""
    figure.tight_layout()
    figure.savefig(path, format="png")
    return path
