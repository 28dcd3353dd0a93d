"""The bundled packs: counts, ids, golds re-derived from the source data, derived files that
match their data, the workspace and the planting turns."""

from __future__ import annotations

import csv
import functools
import hashlib
import io
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.mirage.packs import load_pack
from harness.mirage.packs.build.documents import code_facts
from harness.mirage.packs.pack import Pack
from harness.mirage.packs.resolve import NoSupport, derive, format_answer
from harness.mirage.packs.schema import Answerability, AnswerType
from harness.mirage.packs.validate import validate_pack

SOURCES = Path(__file__).resolve().parents[2] / "harness" / "mirage" / "packs" / "sources"
EXPECTED = {"mirage-core": (6, 100, 100), "mirage-ext": (6, 55, 54)}


@pytest.fixture(scope="module", params=sorted(EXPECTED))
def pack(request: pytest.FixtureRequest) -> Pack:
    return load_pack(request.param)


def test_bundled_packs_validate(pack: Pack) -> None:
    assert validate_pack(pack.name) == []


def test_counts_and_families(pack: Pack) -> None:
    artifacts, answerable, unanswerable = EXPECTED[pack.name]
    labels = Counter(q.gold_answerable for q in pack.questions)
    assert len(pack.artifacts) == artifacts
    assert labels[Answerability.YES] == answerable and labels[Answerability.NO] == unanswerable
    families = {(q.artifact, q.gold_answerable) for q in pack.questions}
    assert len(families) == 12


def test_every_unanswerable_has_a_matched_answerable_twin(pack: Pack) -> None:
    by_pair: dict[str, list[Any]] = {}
    for question in pack.questions:
        if question.pair_id:
            by_pair.setdefault(question.pair_id, []).append(question)
    for members in by_pair.values():
        yes, no = sorted(members, key=lambda q: q.gold_answerable.value, reverse=True)
        assert (yes.gold_answerable, no.gold_answerable) == (Answerability.YES, Answerability.NO)
        assert yes.artifact == no.artifact and yes.answer_type == no.answer_type
        assert yes.question != no.question
    paired_no = sum(1 for m in by_pair.values() for q in m if q.gold_answerable is Answerability.NO)
    assert paired_no == EXPECTED[pack.name][2]


def _chart_source_data(meta: dict[str, Any]) -> dict[str, Any]:
    rows = list(csv.reader(io.StringIO((SOURCES / "core" / meta["table"]).read_text())))
    header, body = rows[0], rows[1:]
    return {
        "title": meta["title"],
        "subtitle": meta["subtitle"],
        "x_label": meta["x_label"],
        "y_label": meta["y_label"],
        "unit": meta["unit"],
        "source": meta["source"],
        "x_name": header[0],
        "x": [row[0] for row in body],
        "series": {
            name: {row[0]: float(row[i]) for row in body}
            for i, name in enumerate(header[1:], start=1)
        },
    }


@functools.cache
def source_data(title: str) -> Any:
    """The generating data of the artifact titled ``title``, read straight from the sources."""
    for path in sorted(SOURCES.glob("*/*.yaml")):
        meta = yaml.safe_load(path.read_text(encoding="utf-8"))
        if meta["title"] != title:
            continue
        if "table" in meta:
            return _chart_source_data(meta)
        if meta["kind"] == "code":
            return code_facts((path.parent / meta["file"]).read_text(), meta["file"])
        return meta["data"]
    raise AssertionError(f"no source for {title!r}")


def test_ids_are_prefix_plus_sha256_of_the_data(pack: Pack) -> None:
    for artifact in pack.spec.artifacts:
        data = source_data(artifact.title)
        canonical = json.dumps(data, sort_keys=True, ensure_ascii=False, indent=2) + "\n"
        digest = hashlib.sha256(canonical.encode()).hexdigest()[:8]
        assert artifact.id.endswith(f"_{digest}")
        assert pack.data_for(artifact.id) == data


def test_answerable_golds_are_rederived_from_the_source_data(pack: Pack) -> None:
    for question in pack.questions:
        if question.gold_answerable is not Answerability.YES:
            continue
        assert question.derivation is not None
        data = source_data(pack.artifact(question.artifact).title)
        gold = question.gold_answer
        places = len(gold.split(".")[1]) if "." in gold else 0
        derived = format_answer(derive(data, question.derivation), question.answer_type, places)
        assert derived == gold, question.id
        if question.answer_type is AnswerType.numeric:
            assert question.tolerance is not None and question.tolerance < 1


def test_unanswerables_have_no_support_in_the_source_data(pack: Pack) -> None:
    for question in pack.questions:
        if question.gold_answerable is Answerability.NO:
            assert question.derivation is not None
            data = source_data(pack.artifact(question.artifact).title)
            with pytest.raises(NoSupport):
                derive(data, question.derivation)


def test_chart_tables_match_the_committed_source_tables() -> None:
    pack = load_pack("mirage-core")
    charts = [a for a in pack.spec.artifacts if a.modality.value == "chart"]
    assert len(charts) == 4
    for chart in charts:
        table = next(d.path for d in chart.derived if d.kind.value == "table_csv")
        source_table = source_data(chart.title)
        rows = list(csv.reader(io.StringIO((pack.root / table).read_text())))
        assert rows[0][1:] == list(source_table["series"])
        for row in rows[1:]:
            for name, cell in zip(rows[0][1:], row[1:], strict=True):
                assert float(cell) == source_table["series"][name][row[0]]


def test_text_representations_carry_every_answerable_value(pack: Pack) -> None:
    """A text-only model can answer every answerable lookup from the derived text."""
    for question in pack.questions:
        if question.gold_answerable is Answerability.YES and question.derivation["op"] == "get":
            text = pack.text_representation(question.artifact)
            if question.answer_type is AnswerType.date:
                continue  # dates are written out in words in the documents
            assert question.gold_answer in text, question.id


def test_materialized_workspace_has_files_and_manifest(pack: Pack, tmp_path: Path) -> None:
    manifest_path = pack.materialize_workspace(tmp_path / "ws")
    manifest = yaml.safe_load(manifest_path.read_text())
    assert list(manifest) == ["artifacts"]
    for entry, artifact in zip(manifest["artifacts"], pack.spec.artifacts, strict=True):
        assert list(entry) == ["id", "title", "modality", "files", "aliases"]
        assert entry["id"] == artifact.id and entry["files"][0] == artifact.originals[0]
        for relative in entry["files"]:
            assert (tmp_path / "ws" / relative).read_bytes() == (pack.root / relative).read_bytes()


def test_planting_turns_attach_every_artifact(pack: Pack) -> None:
    turns = pack.planting_turns()
    attached = [a for turn in turns for a in turn.attachments]
    assert sorted(a.artifact_id for a in attached) == sorted(pack.artifacts)
    for attachment in attached:
        assert attachment.path.is_file()
        assert (
            attachment.artifact_id in attachment.text_representation
            or pack.artifact(attachment.artifact_id).modality.value == "code"
        )
    message = turns[1].to_user_message()
    assert message.content[0].text == turns[1].text
    assert len(message.content) == 2


def test_pack_stays_small_on_disk(pack: Pack) -> None:
    size = sum(p.stat().st_size for p in pack.root.rglob("*") if p.is_file())
    assert size < 600_000
