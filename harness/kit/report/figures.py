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


def new_panels(
    width: float, height: float, rows: int = 1, columns: int = 1, sharey: bool = False
) -> tuple[Figure, list[Any]]:
    """A figure of ``rows`` × ``columns`` axes (small multiples), at 110 dpi like ``new_figure``."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=110)
    axes = figure.subplots(rows, columns, squeeze=False, sharey=sharey)
    return figure, [ax for row in axes for ax in row]


def labels_of(figure: Figure) -> list[Any]:
    """Every piece of text a reader must read on ``figure``: tick labels, the texts on the axes
    (bar labels, "n/a"), titles, axis labels and each legend (as one block)."""
    found: list[Any] = [*figure.texts, *figure.legends]
    for ax in figure.axes:
        for axis in (ax.xaxis, ax.yaxis) if ax.axison else ():
            low, high = sorted(axis.get_view_interval())
            span = (high - low) * 1e-6
            found += [
                label
                for location, label in zip(
                    axis.get_majorticklocs(), axis.get_majorticklabels(), strict=False
                )
                if low - span <= location <= high + span  # a tick beyond the limits is not drawn
            ]
        found += list(ax.texts)
        found += [ax.title, *((ax.xaxis.label, ax.yaxis.label) if ax.axison else ())]
        legend = ax.get_legend()
        if legend is not None:
            found.append(legend)
    return [
        item
        for item in found
        if item.get_visible() and (not hasattr(item, "get_text") or item.get_text().strip())
    ]


def overlapping_labels(figure: Figure, tolerance: float = 0.5) -> list[tuple[str, str]]:
    """Pairs of labels (``labels_of``) whose rendered boxes intersect by more than
    ``tolerance`` pixels each way, drawn as ``save_figure`` lays the figure out: none on a
    legible figure."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(figure)
    figure.tight_layout()
    canvas.draw()
    renderer = canvas.get_renderer()
    boxes = [(item, item.get_window_extent(renderer)) for item in labels_of(figure)]
    pairs = []
    for index, (first, one) in enumerate(boxes):
        for second, other in boxes[index + 1 :]:
            width = min(one.x1, other.x1) - max(one.x0, other.x0)
            height = min(one.y1, other.y1) - max(one.y0, other.y0)
            if width > tolerance and height > tolerance:
                pairs.append((_name(first), _name(second)))
    return pairs


def _name(item: Any) -> str:
    if hasattr(item, "get_text"):
        return repr(item.get_text())
    return type(item).__name__


def save_figure(figure: Figure, path: Path) -> Path:
    """``figure`` laid out tightly and written to ``path`` as PNG."""
    figure.tight_layout()
    figure.savefig(path, format="png")
    return path
