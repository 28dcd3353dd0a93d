"""The CUE report: ``summary.json``, ``report.md`` and ``figures/`` for one run folder.

Above: the end of ``mirage cue run`` and ``mirage cue report DIR``. Below: ``run.json`` (the
resolved configuration: conditions, contrasts, bootstrap) and ``results.jsonl`` of the folder,
the metrics (``harness.cue.metrics``), the statistics (``harness.cue.stats``) and the kit's
markdown table helpers (``harness.kit.report.tables``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from harness.cue.config import CueRunConfig
from harness.cue.metrics import RETRIEVAL_CUTOFFS, ConditionMetrics, all_metrics, stratum_outcomes
from harness.cue.records import RESULTS_FILE, CueRecord
from harness.cue.schema import MEMORY_TASKS, TASK_LABELS, Setting, Task
from harness.cue.stats import ContrastResult, apply_holm, bootstrap_contrast
from harness.kit.provenance import Provenance, provenance_markdown
from harness.kit.report.tables import fmt, markdown_table
from harness.kit.results import read_records
from runtime.backbones.base import LOCAL_PREFIX

SUMMARY_FILE = "summary.json"
REPORT_FILE = "report.md"
FIGURES_DIR = "figures"
SMALL_MODEL_NOTE = (
    "The embedded default answerer, SmolLM2-135M, is far too small to use a memory of this kind: "
    "expect accuracy near chance (25% on four options) and noise in every contrast. The numbers "
    "show that the pipeline — textualization, the memory systems, answering, parsing, metrics "
    "and statistics — runs end to end; point `--model` at a capable model for results that mean "
    "something."
)


class CueReportFiles(BaseModel):
    summary: Path
    report: Path
    figures: list[Path]
    metrics: dict[str, ConditionMetrics]
    contrasts: list[ContrastResult]


def load_run(directory: Path) -> tuple[CueRunConfig, dict[str, Any]]:
    path = directory / "run.json"
    if not path.is_file():
        raise FileNotFoundError(f"no run.json in {directory}; is it a `mirage cue run` folder?")
    payload = json.loads(path.read_text(encoding="utf-8"))
    return CueRunConfig.model_validate(payload["config"]), payload


def compute_contrasts(config: CueRunConfig, records: list[CueRecord]) -> list[ContrastResult]:
    results = []
    for index, contrast in enumerate(config.contrasts):
        outcomes = [
            stratum_outcomes(r for r in records if r.condition == c) for c in contrast.conditions
        ]
        estimate, low, high, p, used = bootstrap_contrast(
            contrast.difference,
            outcomes,
            replicates=config.bootstrap.replicates,
            seed=config.bootstrap.seed,
            index=index,
        )
        results.append(
            ContrastResult(
                name=contrast.name,
                kind=contrast.kind,
                description=contrast.describe(),
                estimate=estimate,
                ci_low=low,
                ci_high=high,
                p=None if p is None else round(p, 4),
                questions=used,
                note=None if estimate is not None else "not estimable: a metric has no questions",
            )
        )
    return apply_holm(results)


def summary_payload(
    config: CueRunConfig,
    run: dict[str, Any],
    metrics: dict[str, ConditionMetrics],
    contrasts: list[ContrastResult],
) -> dict[str, Any]:
    return {
        "provenance": run.get("provenance"),
        "pack": run["pack"],
        "pack_digest": run["pack_digest"],
        "model": config.model,
        "conditions": list(config.conditions),
        "bootstrap": config.bootstrap.model_dump(),
        "metrics": {name: m.model_dump(mode="json") for name, m in metrics.items()},
        "contrasts": [c.model_dump(mode="json") for c in contrasts],
    }


def _write_json(path: Path, payload: object) -> None:
    temp = path.with_name(path.name + ".tmp")
    temp.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(temp, path)


def summary_table(metrics: dict[str, ConditionMetrics]) -> str:
    """Per condition: Memory Avg explicit / implicit, EI-Gap, refusal accuracy, tokens, n."""
    rows = []
    for name, m in metrics.items():
        rows.append(
            [
                name,
                fmt(m.memory_avg[Setting.explicit]),
                fmt(m.memory_avg[Setting.implicit]),
                fmt(m.ei_gap, signed=True),
                fmt(m.refusal[Setting.explicit]),
                fmt(m.refusal[Setting.implicit]),
                fmt(m.memory_tokens_mean),
                str(m.scored),
                str(
                    sum(v for k, v in m.parse_rules.items() if k in ("none", "ambiguous", "empty"))
                ),
            ]
        )
    header = [
        "Condition",
        "MemAvg E",
        "MemAvg I",
        "EI-Gap",
        "Refusal E",
        "Refusal I",
        "Mem. tokens/q",
        "n",
        "unparsed",
    ]
    return markdown_table(header, rows)


def task_table(metrics: dict[str, ConditionMetrics]) -> str:
    header = [
        "Condition",
        *(f"{TASK_LABELS[t]} {s.value[0].upper()}" for t in Task for s in Setting),
    ]
    rows = [
        [name, *(fmt(m.cells[t][s].accuracy) for t in Task for s in Setting)]
        for name, m in metrics.items()
    ]
    return markdown_table(header, rows)


def retrieval_table(metrics: dict[str, ConditionMetrics]) -> str:
    header = [
        "Condition",
        "Setting",
        *(f"R@{k}" for k in RETRIEVAL_CUTOFFS),
        *(f"P@{k}" for k in RETRIEVAL_CUTOFFS),
        "clue coverage",
        "n",
    ]
    rows = []
    for name, m in metrics.items():
        for group, cut in m.retrieval.items():
            if all(v.n == 0 for v in cut.values()):
                continue
            rows.append(
                [
                    name,
                    group,
                    *(fmt(cut[k].recall) for k in RETRIEVAL_CUTOFFS),
                    *(fmt(cut[k].precision) for k in RETRIEVAL_CUTOFFS),
                    fmt(m.clue_coverage) if group == "all" else "",
                    str(cut[RETRIEVAL_CUTOFFS[0]].n),
                ]
            )
    return (
        markdown_table(header, rows) if rows else "No condition ranks rounds (full context only)."
    )


def contrast_table(contrasts: list[ContrastResult]) -> str:
    rows = [
        [
            c.name,
            c.description,
            fmt(c.estimate, signed=True),
            f"[{fmt(c.ci_low, signed=True)}, {fmt(c.ci_high, signed=True)}]",
            fmt(c.p, 4),
            fmt(c.p_holm, 4),
            str(c.questions),
        ]
        for c in contrasts
    ]
    header = ["Contrast", "What", "Δ (points)", "95% CI", "p", "p (Holm)", "questions"]
    return markdown_table(header, rows) if rows else "No contrasts declared."


def _provenance(run: dict[str, Any]) -> Provenance | None:
    block = run.get("provenance")
    try:
        return Provenance.model_validate(block) if block is not None else None
    except ValidationError:
        return None


def render_markdown(
    config: CueRunConfig,
    run: dict[str, Any],
    metrics: dict[str, ConditionMetrics],
    contrasts: list[ContrastResult],
    figures: list[Path],
) -> str:
    memory_tasks = ", ".join(TASK_LABELS[t] for t in MEMORY_TASKS)
    sections = [
        f"# CUE-Mem report — {run['pack']} · {config.model}",
        provenance_markdown(_provenance(run)),
        SMALL_MODEL_NOTE if config.model.startswith(LOCAL_PREFIX) else "",
        "Definitions: docs/cue.md. Accuracy in percent, profiles equally weighted within a task; "
        f"Memory Avg = mean of {memory_tasks}; EI-Gap = explicit − implicit Memory Avg (points); "
        "Answer Refusal apart. Unparsed replies count as wrong; failed calls are not scored.",
        "## Summary",
        summary_table(metrics),
        "## Accuracy by task × setting (E explicit, I implicit)",
        task_table(metrics),
        "## Retrieval against the clue ids (non-refusal questions)",
        "Recall@k and Precision@k over the rounds each system ranked; clue coverage = share of "
        "clue rounds that reached the prompt.",
        retrieval_table(metrics),
        "## Contrasts (stratified bootstrap, Holm)",
        f"{config.bootstrap.replicates} replicates, seed {config.bootstrap.seed}; questions "
        "resampled within profile × task × setting; condition contrasts paired on shared "
        "questions; p two-sided, Holm-adjusted over the contrasts below.",
        contrast_table(contrasts),
        "## Figures",
        "\n".join(f"![{p.stem}]({FIGURES_DIR}/{p.name})" for p in figures) or "None.",
    ]
    return "\n\n".join(s for s in sections if s) + "\n"


def write_cue_report(directory: str | os.PathLike[str]) -> CueReportFiles:
    """Recompute every metric and contrast from ``results.jsonl`` and write the report files."""
    from harness.cue.figures import draw_figures

    out = Path(directory)
    config, run = load_run(out)
    records = read_records(out / RESULTS_FILE, CueRecord)
    metrics = all_metrics(records, list(config.conditions))
    contrasts = compute_contrasts(config, records)
    figure_dir = out / FIGURES_DIR
    figure_dir.mkdir(exist_ok=True)
    figures = draw_figures(metrics, contrasts, figure_dir)
    files = CueReportFiles(
        summary=out / SUMMARY_FILE,
        report=out / REPORT_FILE,
        figures=figures,
        metrics=metrics,
        contrasts=contrasts,
    )
    _write_json(files.summary, summary_payload(config, run, metrics, contrasts))
    files.report.write_text(
        render_markdown(config, run, metrics, contrasts, figures), encoding="utf-8"
    )
    return files
