"""Statistical charts for evidence packs: source tables (CSV + YAML) -> data JSON, PNG, derived
table/summary, and the chart's paired questions.

A chart source names its table, labels, credit and a list of compact question specs
(``kind`` + arguments + ``missing`` overrides for the unanswerable twin); question text comes
from the chart's own templates and every gold from ``resolve.derive`` over the data JSON.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from harness.mirage.packs.build.render import figure_style, new_figure, save_png_figure
from harness.mirage.packs.build.specs import QuestionSpec
from harness.mirage.packs.schema import AnswerType, Difficulty

SERIES_COLOURS = ("#1f5f99", "#d9822b", "#3a8f4b", "#8e44ad")


class ChartSource(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["line", "bar", "hbar"]
    table: str
    title: str
    subtitle: str
    x_label: str
    y_label: str
    unit: str
    source: str
    aliases: list[str]
    planting: str
    templates: dict[str, str]
    questions: list[dict[str, Any]] = Field(min_length=1)


def read_table(path: Path) -> tuple[str, list[str], dict[str, dict[str, float]]]:
    """(x column name, x values in order, {series: {x: value}}) from a wide CSV."""
    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))
    header, body = rows[0], rows[1:]
    x_values = [row[0] for row in body]
    series = {
        name: {row[0]: float(row[index]) for row in body}
        for index, name in enumerate(header[1:], start=1)
    }
    return header[0], x_values, series


def chart_data(source: ChartSource, table_path: Path) -> dict[str, Any]:
    x_name, x_values, series = read_table(table_path)
    return {
        "title": source.title,
        "subtitle": source.subtitle,
        "x_label": source.x_label,
        "y_label": source.y_label,
        "unit": source.unit,
        "source": source.source,
        "x_name": x_name,
        "x": x_values,
        "series": series,
    }


def table_csv(data: dict[str, Any]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    names = list(data["series"])
    writer.writerow([data["x_name"], *names])
    for x in data["x"]:
        writer.writerow([x, *(_label(data["series"][name][x]) for name in names)])
    return buffer.getvalue()


def summary_markdown(artifact_id: str, data: dict[str, Any], kind: str) -> str:
    names = ", ".join(data["series"])
    shape = {"line": "Line chart", "bar": "Bar chart", "hbar": "Horizontal bar chart"}[kind]
    lines = [
        f"# {data['title']}",
        "",
        f"- Artifact: {artifact_id}",
        f"- Type: {shape}",
        f"- Subtitle: {data['subtitle']}",
        f"- X axis: {data['x_label']} ({data['x'][0]} to {data['x'][-1]})",
        f"- Y axis: {data['y_label']}",
        f"- Series: {names}",
        f"- Source: {data['source']}",
        "",
        "Values as labelled on the chart:",
        "",
        table_csv(data).rstrip("\n"),
    ]
    return "\n".join(lines) + "\n"


def _label(value: float) -> str:
    return f"{value:.1f}" if value != int(value) or "." in repr(value) else str(int(value))


def render_chart(source: ChartSource, data: dict[str, Any], path: Path) -> None:
    with figure_style():
        figure = new_figure(8.0, 5.0)
        axes = figure.add_axes((0.09, 0.2, 0.88, 0.64))
        if source.kind == "line":
            _draw_lines(axes, data)
        elif source.kind == "bar":
            _draw_bars(axes, data, horizontal=False)
        else:
            axes.set_position((0.27, 0.2, 0.7, 0.64))
            _draw_bars(axes, data, horizontal=True)
        _decorate(figure, axes, source, data)
        save_png_figure(figure, path)


def _draw_lines(axes: Any, data: dict[str, Any]) -> None:
    """Lines with every point labelled: the lowest series at each x below its point, the
    others above, so labels of close series never overlap."""
    x_positions = list(range(len(data["x"])))
    series = data["series"]
    for colour, (name, values) in zip(SERIES_COLOURS, series.items(), strict=False):
        ys = [values[x] for x in data["x"]]
        axes.plot(x_positions, ys, marker="o", color=colour, linewidth=2, markersize=4, label=name)
        for x_position, x, y in zip(x_positions, data["x"], ys, strict=True):
            lowest = len(series) > 1 and y == min(v[x] for v in series.values())
            axes.annotate(
                _label(y),
                (x_position, y),
                textcoords="offset points",
                xytext=(0, -14 if lowest else 7),
                ha="center",
                fontsize=8,
                color=colour,
                fontweight="bold",
                bbox={"boxstyle": "square,pad=0.1", "facecolor": "white", "edgecolor": "none"},
            )
    monthly = len(data["x"]) == 12
    axes.set_xticks(x_positions, [str(x)[:3] if monthly else str(x) for x in data["x"]])
    low = min(min(v.values()) for v in series.values())
    high = max(max(v.values()) for v in series.values())
    axes.set_ylim(max(0.0, low - (high - low) * 0.25), high + (high - low) * 0.18)


def _draw_bars(axes: Any, data: dict[str, Any], horizontal: bool) -> None:
    names = list(data["series"])
    width = 0.8 / len(names)
    positions = range(len(data["x"]))
    for index, (colour, name) in enumerate(zip(SERIES_COLOURS, names, strict=False)):
        offsets = [p - 0.4 + width * (index + 0.5) for p in positions]
        values = [data["series"][name][x] for x in data["x"]]
        draw = axes.barh if horizontal else axes.bar
        bars = draw(offsets, values, width * 0.92, color=colour, label=name)
        axes.bar_label(bars, labels=[_label(v) for v in values], padding=2, fontsize=8)
    labels = [str(x) for x in data["x"]]
    high = max(max(v.values()) for v in data["series"].values())
    if horizontal:
        axes.set_yticks(list(positions), labels)
        axes.invert_yaxis()
        axes.set_xlim(0, high * 1.15)
    else:
        axes.set_xticks(list(positions), labels)
        axes.set_ylim(0, high * 1.15)


def _decorate(figure: Any, axes: Any, source: ChartSource, data: dict[str, Any]) -> None:
    figure.text(0.02, 0.95, data["title"], fontsize=13, fontweight="bold", ha="left")
    figure.text(0.02, 0.9, data["subtitle"], fontsize=9.5, color="#444444", ha="left")
    figure.text(0.02, 0.03, f"Source: {data['source']}", fontsize=8.5, color="#555555")
    if source.kind == "hbar":
        axes.set_xlabel(data["y_label"])
        axes.set_ylabel(data["x_label"])
    else:
        axes.set_xlabel(data["x_label"])
        axes.set_ylabel(data["y_label"])
    axes.legend(
        loc="lower right",
        bbox_to_anchor=(1.0, 1.0),
        fontsize=8.5,
        frameon=False,
        ncol=len(data["series"]),
    )
    axes.grid(axis="x" if source.kind == "hbar" else "y", color="#dddddd", linewidth=0.6)
    axes.set_axisbelow(True)
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)


def _point(series: str, x: str) -> list[str]:
    return ["series", series, x]


def chart_derivation(kind: str, args: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    """The derivation for one chart question kind with its (possibly unsupported) arguments."""
    if kind == "value":
        return {"op": "get", "path": _point(args["series"], args["x"])}
    if kind == "diff_x":
        return {
            "op": "diff",
            "a": _point(args["series"], args["x2"]),
            "b": _point(args["series"], args["x1"]),
        }
    if kind == "diff_series":
        return {
            "op": "diff",
            "a": _point(args["s1"], args["x"]),
            "b": _point(args["s2"], args["x"]),
        }
    if kind == "larger" and "x2" in args:
        return {
            "op": "larger",
            "a": _point(args["s1"], args["x"]),
            "b": _point(args["s1"], args["x2"]),
            "labels": [args["x"], args["x2"]],
        }
    if kind == "larger":
        return {
            "op": "larger",
            "a": _point(args["s1"], args["x"]),
            "b": _point(args["s2"], args["x"]),
            "labels": [args["s1"], args["s2"]],
        }
    if kind in ("argmax", "argmin"):
        return {"op": kind, "path": ["series", args["series"]]}
    if kind == "sum_x":
        return {
            "op": "sum",
            "paths": [_point(args["s1"], args["x"]), _point(args["s2"], args["x"])],
        }
    if kind == "pct_change":
        return {
            "op": "pct_change",
            "from": _point(args["series"], args["x1"]),
            "to": _point(args["series"], args["x2"]),
        }
    if kind == "pct_change_series":
        return {
            "op": "pct_change",
            "from": _point(args["s1"], args["x"]),
            "to": _point(args["s2"], args["x"]),
        }
    if kind == "count_above":
        return {"op": "count", "path": ["series", args["series"]], "above": args["threshold"]}
    if kind == "meta":
        return {"op": "get", "path": [args["field"]]}
    raise ValueError(f"unknown chart question kind {kind!r}")


_KIND_DEFAULTS: dict[str, tuple[Difficulty, str]] = {
    "value": (Difficulty.lookup, "point_lookup"),
    "diff_x": (Difficulty.comparison, "difference_along_axis"),
    "diff_series": (Difficulty.comparison, "difference_between_series"),
    "larger": (Difficulty.comparison, "which_is_larger"),
    "argmax": (Difficulty.comparison, "maximum"),
    "argmin": (Difficulty.comparison, "minimum"),
    "sum_x": (Difficulty.comparison, "sum"),
    "pct_change": (Difficulty.comparison, "percent_change"),
    "pct_change_series": (Difficulty.comparison, "percent_change"),
    "count_above": (Difficulty.comparison, "threshold_count"),
    "meta": (Difficulty.lookup, "chart_text"),
}


def _answer_type(kind: str, args: dict[str, Any], data: dict[str, Any]) -> AnswerType:
    if kind in (
        "value",
        "diff_x",
        "diff_series",
        "sum_x",
        "pct_change",
        "pct_change_series",
        "count_above",
    ):
        return AnswerType.numeric
    if kind == "larger":
        return AnswerType.enum
    if kind in ("argmax", "argmin") and data["x_name"] == "Year":
        return AnswerType.year
    return AnswerType.string


def chart_question_specs(source: ChartSource, data: dict[str, Any]) -> list[QuestionSpec]:
    specs = []
    for raw in source.questions:
        args = {k: v for k, v in raw.items() if k not in ("missing", "risk", "difficulty")}
        kind = args.pop("kind")
        template = source.templates[args.pop("template", kind)]
        missing = dict(raw["missing"])
        twin_template = source.templates[missing.pop("template", raw.get("template", kind))]
        twin_args = {**args, **missing}
        difficulty, query_type = _KIND_DEFAULTS[kind]
        answer_type = _answer_type(kind, args, data)
        specs.append(
            QuestionSpec(
                question=template.format(**args),
                derivation=chart_derivation(kind, args, data),
                twin_question=twin_template.format(**twin_args),
                twin_derivation=chart_derivation(kind, twin_args, data),
                answer_type=answer_type,
                unit=data["unit"]
                if answer_type is AnswerType.numeric
                and kind != "count_above"
                and not kind.startswith("pct")
                else None,
                choices=_choices(kind, args),
                twin_choices=_choices(kind, twin_args),
                difficulty=Difficulty(raw.get("difficulty", difficulty)),
                query_type=query_type,
                shortcut_risk=raw.get("risk", []),
            )
        )
    return specs


def _choices(kind: str, args: dict[str, Any]) -> list[str] | None:
    if kind != "larger":
        return None
    return [args["x"], args["x2"]] if "x2" in args else [args["s1"], args["s2"]]
