"""PNG figures of a CUE report (matplotlib Agg, through the kit's figure helpers,
``harness.kit.report.figures``): accuracy by task × setting, Memory Avg with EI-Gap, retrieval
Recall@k, and the contrasts with their bootstrap intervals."""

from __future__ import annotations

from pathlib import Path

from harness.cue.metrics import RETRIEVAL_CUTOFFS, ConditionMetrics
from harness.cue.schema import TASK_LABELS, Setting, Task
from harness.cue.stats import ContrastResult
from harness.kit.report.figures import new_figure, save_figure

SETTING_COLOURS = {Setting.explicit: "#4c78a8", Setting.implicit: "#f58518"}


def accuracy_by_task(metrics: dict[str, ConditionMetrics], path: Path) -> Path:
    figure, ax = new_figure(9.0, 4.5)
    groups = [(t, s) for t in Task for s in Setting]
    width = 0.8 / max(len(metrics), 1)
    for index, (name, m) in enumerate(metrics.items()):
        positions = [g + (index - (len(metrics) - 1) / 2) * width for g in range(len(groups))]
        values = [m.cells[t][s].accuracy or 0.0 for t, s in groups]
        ax.bar(positions, values, width=width, label=name)
    labels = [f"{TASK_LABELS[t]}\n{s.value}" for t, s in groups]
    ax.set_xticks(range(len(groups)), labels, fontsize=6)
    ax.axhline(25, color="grey", linewidth=0.8, linestyle="--")
    ax.set_ylim(0, 100)
    ax.set_ylabel("accuracy (%)")
    ax.set_title("Accuracy by task and setting (dashed: chance)")
    ax.legend(fontsize=6)
    return save_figure(figure, path)


def memory_avg(metrics: dict[str, ConditionMetrics], path: Path) -> Path:
    figure, ax = new_figure()
    names = list(metrics)
    for offset, setting in ((-0.2, Setting.explicit), (0.2, Setting.implicit)):
        values = [metrics[n].memory_avg[setting] or 0.0 for n in names]
        ax.bar(
            [i + offset for i in range(len(names))],
            values,
            width=0.4,
            color=SETTING_COLOURS[setting],
            label=setting.value,
        )
    for i, name in enumerate(names):
        gap = metrics[name].ei_gap
        if gap is not None:
            ax.annotate(f"EI-Gap {gap:+.1f}", (i, 95), ha="center", fontsize=7)
    ax.set_xticks(range(len(names)), names, fontsize=6)
    ax.set_ylim(0, 100)
    ax.set_ylabel("Memory Avg (%)")
    ax.set_title("Memory Avg by setting")
    ax.legend(fontsize=7)
    return save_figure(figure, path)


def retrieval_recall(metrics: dict[str, ConditionMetrics], path: Path) -> Path:
    figure, ax = new_figure()
    for name, m in metrics.items():
        for setting in Setting:
            cut = m.retrieval[setting.value]
            points = [(k, cut[k].recall) for k in RETRIEVAL_CUTOFFS if cut[k].recall is not None]
            if points:
                style = "-" if setting is Setting.explicit else "--"
                ax.plot(
                    [k for k, _ in points],
                    [v for _, v in points],
                    style,
                    marker="o",
                    label=f"{name} ({setting.value})",
                )
    ax.set_xticks(list(RETRIEVAL_CUTOFFS))
    ax.set_ylim(0, 100)
    ax.set_xlabel("k")
    ax.set_ylabel("Recall@k of clue rounds (%)")
    ax.set_title("Retrieval recall (solid explicit, dashed implicit)")
    if ax.lines:
        ax.legend(fontsize=6)
    return save_figure(figure, path)


def contrast_intervals(contrasts: list[ContrastResult], path: Path) -> Path:
    figure, ax = new_figure(7.0, 0.5 + 0.45 * max(len(contrasts), 1))
    shown = [c for c in contrasts if c.estimate is not None]
    for row, contrast in enumerate(shown):
        assert contrast.estimate is not None and contrast.ci_low is not None
        assert contrast.ci_high is not None
        ax.plot([contrast.ci_low, contrast.ci_high], [row, row], color="black")
        ax.plot([contrast.estimate], [row], "o", color="#e45756")
    ax.axvline(0, color="grey", linewidth=0.8)
    ax.set_yticks(range(len(shown)), [c.name for c in shown], fontsize=6)
    ax.set_xlabel("difference (points), 95% bootstrap interval")
    ax.set_title("Contrasts")
    return save_figure(figure, path)


def draw_figures(
    metrics: dict[str, ConditionMetrics], contrasts: list[ContrastResult], directory: Path
) -> list[Path]:
    figures = [
        accuracy_by_task(metrics, directory / "accuracy_by_task.png"),
        memory_avg(metrics, directory / "memory_avg.png"),
        retrieval_recall(metrics, directory / "retrieval_recall.png"),
    ]
    if contrasts:
        figures.append(contrast_intervals(contrasts, directory / "contrasts.png"))
    return figures
