"""The bundled ``mirage-core`` pack: four statistical charts and two UI views (as in the
paper's six ChartQA/ScreenSpot objects), 100 answerable questions and 100 matched twins."""

from __future__ import annotations

from pathlib import Path

from harness.kit.packfiles import write_text
from harness.mirage.packs.build.assemble import (
    SOURCES,
    BuiltArtifact,
    load_source,
    make_artifact,
    write_data,
    write_pack_files,
)
from harness.mirage.packs.build.charts import (
    ChartSource,
    chart_data,
    chart_question_specs,
    render_chart,
    summary_markdown,
    table_csv,
)
from harness.mirage.packs.build.render import artifact_id
from harness.mirage.packs.build.specs import build_questions, pair_spec_from_yaml
from harness.mirage.packs.build.ui import (
    fitness_summary,
    notifications_summary,
    render_fitness_profile,
    render_notifications,
)
from harness.mirage.packs.schema import DerivedKind, Modality

CORE_SOURCES = SOURCES / "core"
CHARTS = ("orchard_harvest", "garden_visitors", "composting", "ferry_crossings")
UI_VIEWS = ("fitness_profile", "notifications")
DESCRIPTION = (
    "Six planted evidence objects (four statistical charts, two UI screenshots) with 100 "
    "answerable questions and 100 matched unanswerable twins; every gold is computed from the "
    "generating data."
)
INTRO = (
    "Morning! Over the next few messages I'll send you some charts and screenshots I collected "
    "this week. Please keep each one in my workspace so we can look things up later."
)


def build_chart(key: str, out_dir: Path) -> BuiltArtifact:
    source = ChartSource.model_validate(load_source(CORE_SOURCES / f"{key}.yaml"))
    data = chart_data(source, CORE_SOURCES / source.table)
    chart_id = artifact_id("chart", data)
    original = f"artifacts/{chart_id}.png"
    render_chart(source, data, out_dir / original)
    table, summary = f"derived/{chart_id}.table.csv", f"derived/{chart_id}.summary.md"
    write_text(out_dir / table, table_csv(data))
    write_text(out_dir / summary, summary_markdown(chart_id, data, source.kind))
    data_file = write_data(out_dir, chart_id, data)
    artifact = make_artifact(
        chart_id,
        Modality.chart,
        source.title,
        original,
        {table: DerivedKind.table_csv, summary: DerivedKind.summary, data_file: DerivedKind.json},
        source.aliases,
        summary,
    )
    questions = build_questions(key, chart_id, data, chart_question_specs(source, data))
    return BuiltArtifact(artifact, source.planting, questions)


def build_ui_view(key: str, out_dir: Path) -> BuiltArtifact:
    source = load_source(CORE_SOURCES / f"{key}.yaml")
    data, title = source["data"], source["title"]
    view_id = artifact_id("ui", data)
    original = f"artifacts/{view_id}.png"
    if source["kind"] == "fitness_profile":
        render_fitness_profile(data, out_dir / original)
        summary_text = fitness_summary(view_id, title, data)
    else:
        render_notifications(data, out_dir / original)
        summary_text = notifications_summary(view_id, title, data)
    summary = f"derived/{view_id}.summary.md"
    write_text(out_dir / summary, summary_text)
    data_file = write_data(out_dir, view_id, data)
    artifact = make_artifact(
        view_id,
        Modality.screenshot,
        title,
        original,
        {summary: DerivedKind.summary, data_file: DerivedKind.json},
        source["aliases"],
        summary,
    )
    specs = [pair_spec_from_yaml(raw) for raw in source["questions"]]
    return BuiltArtifact(artifact, source["planting"], build_questions(key, view_id, data, specs))


def build_core(out_dir: Path) -> None:
    built = [build_chart(key, out_dir) for key in CHARTS]
    built += [build_ui_view(key, out_dir) for key in UI_VIEWS]
    write_pack_files(out_dir, "mirage-core", DESCRIPTION, INTRO, built)
