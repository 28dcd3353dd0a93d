"""The bundled ``mirage-ext`` pack: six more evidence types (paper A.1) with 55 answerable
questions and 54 matched unanswerable twins."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.kit.packfiles import write_text
from harness.mirage.packs.build import documents as docs
from harness.mirage.packs.build.assemble import (
    SOURCES,
    BuiltArtifact,
    load_source,
    make_artifact,
    write_data,
    write_pack_files,
)
from harness.mirage.packs.build.render import artifact_id
from harness.mirage.packs.build.specs import build_questions, pair_spec_from_yaml
from harness.mirage.packs.schema import DerivedKind, Modality

EXT_SOURCES = SOURCES / "ext"
DESCRIPTION = (
    "Six further evidence types (photo, infographic, code file, email, invoice PDF, report PDF) "
    "with 55 answerable questions and 54 matched unanswerable twins."
)
INTRO = (
    "Hello again. I've got a mixed bag of things to hand over today: a photo, a poster, some "
    "code, an email and a couple of PDFs. Please keep them all in my workspace."
)


def _image(
    render: Callable[[dict[str, Any], Path], None],
    describe: Callable[[str, str, dict[str, Any]], str],
) -> Callable[..., Any]:
    def build(key: str, source: dict[str, Any], data: Any, item_id: str, out: Path) -> Any:
        original = f"artifacts/{item_id}.png"
        render(data, out / original)
        description = f"derived/{item_id}.description.md"
        write_text(out / description, describe(item_id, source["title"], data))
        return original, {description: DerivedKind.description}, description

    return build


def _code(key: str, source: dict[str, Any], data: Any, item_id: str, out: Path) -> Any:
    original = f"artifacts/{item_id}.py"
    write_text(out / original, (EXT_SOURCES / source["file"]).read_text(encoding="utf-8"))
    outline = f"derived/{item_id}.outline.md"
    write_text(out / outline, docs.code_outline(item_id, source["title"], data))
    return original, {outline: DerivedKind.summary}, None


def _email(key: str, source: dict[str, Any], data: Any, item_id: str, out: Path) -> Any:
    original = f"artifacts/{item_id}.eml"
    (out / original).parent.mkdir(parents=True, exist_ok=True)
    (out / original).write_bytes(docs.email_message(data))
    text = f"derived/{item_id}.txt"
    write_text(out / text, docs.email_text(item_id, data))
    return original, {text: DerivedKind.text}, text


def _pdf(
    render: Callable[[dict[str, Any], Path], None], lines: Callable[[dict[str, Any]], list[str]]
) -> Callable[..., Any]:
    def build(key: str, source: dict[str, Any], data: Any, item_id: str, out: Path) -> Any:
        original = f"artifacts/{item_id}.pdf"
        render(data, out / original)
        text = f"derived/{item_id}.txt"
        write_text(out / text, docs.pdf_text(item_id, source["title"], lines(data)))
        return original, {text: DerivedKind.text}, text

    return build


OBJECTS: dict[str, tuple[str, Modality, Callable[..., Any]]] = {
    "bakery_photo": (
        "photo",
        Modality.photo,
        _image(docs.render_bakery_photo, docs.bakery_description),
    ),
    "sleep_infographic": (
        "infographic",
        Modality.infographic,
        _image(docs.render_sleep_infographic, docs.infographic_description),
    ),
    "tide_code": ("code", Modality.code, _code),
    "choir_email": ("email", Modality.email, _email),
    "stationery_invoice": (
        "invoice",
        Modality.document,
        _pdf(docs.render_invoice_pdf, docs.invoice_lines),
    ),
    "beekeepers_report": (
        "report",
        Modality.document,
        _pdf(docs.render_report_pdf, lambda data: [text for _, text in docs.report_lines(data)]),
    ),
}


def _source_data(source: dict[str, Any]) -> Any:
    if source["kind"] == "code":
        code = (EXT_SOURCES / source["file"]).read_text(encoding="utf-8")
        return docs.code_facts(code, source["file"])
    return source["data"]


def build_object(key: str, out_dir: Path) -> BuiltArtifact:
    prefix, modality, build = OBJECTS[key]
    source = load_source(EXT_SOURCES / f"{key}.yaml")
    data = _source_data(source)
    item_id = artifact_id(prefix, data)
    original, derived, text_repr = build(key, source, data, item_id, out_dir)
    data_file = write_data(out_dir, item_id, data)
    artifact = make_artifact(
        item_id,
        modality,
        source["title"],
        original,
        {**derived, data_file: DerivedKind.json},
        source["aliases"],
        text_repr,
    )
    specs = [pair_spec_from_yaml(raw) for raw in source["questions"]]
    return BuiltArtifact(artifact, source["planting"], build_questions(key, item_id, data, specs))


def build_ext(out_dir: Path) -> None:
    built = [build_object(key, out_dir) for key in OBJECTS]
    write_pack_files(out_dir, "mirage-ext", DESCRIPTION, INTRO, built)
