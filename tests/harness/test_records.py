"""results.jsonl: keyed append-only writes, resume after a kill, rescoring from raw outputs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from structlog.testing import capture_logs
from typer.testing import CliRunner

from harness.kit.agents.base import ToolCallRecord
from harness.kit.agents.context import BootItem, ContextMessage, ProbeContext
from harness.kit.results import ResultsLog, ResultsLogError, read_records, rewrite_records
from harness.mirage.probing.records import (
    SCHEMA_VERSION,
    ProbeRecord,
    RecordKey,
    binary_path,
    build_record,
    provider_error_record,
    rescore_record,
)
from harness.mirage.scoring import Gold, KnownIdResolver
from mirage.cli import app
from tests.cli_errors import assert_one_line_error

GOLD = Gold(answerable="YES", source="chart_1", answer="42", answer_type="numeric")
RESOLVER = KnownIdResolver(["chart_1"])
REPLY = "ANSWERABLE=YES\nSOURCE=chart_1.png\nANSWER=about 42"


def _record(question: int, repeat: int = 0, reply: str = REPLY) -> ProbeRecord:
    key = RecordKey("S1-d0", "C0", f"q{question}", repeat)
    return build_record(key, reply, GOLD, RESOLVER, latency_s=0.1)


def test_append_is_keyed_and_durable(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    with ResultsLog(path, ProbeRecord) as results:
        assert results.append(_record(1))
        assert not results.append(_record(1, reply="ANSWERABLE=NO\nSOURCE=NONE\nANSWER=NONE"))
        assert results.append(_record(1, repeat=1))
        assert RecordKey("S1-d0", "C0", "q1", 0) in results
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    records = read_records(path, ProbeRecord)
    assert [r.key for r in records] == [("S1-d0", "C0", "q1", 0), ("S1-d0", "C0", "q1", 1)]
    assert records[0].GC == 1 and records[0].canonical_source == "chart_1"


def test_resume_skips_done_keys(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    with ResultsLog(path, ProbeRecord) as results:
        for question in range(3):
            results.append(_record(question))
    with ResultsLog(path, ProbeRecord) as resumed:
        assert len(resumed.keys) == 3
        written = [resumed.append(_record(q)) for q in range(5)]
    assert written == [False, False, False, True, True]
    assert len(read_records(path, ProbeRecord)) == 5


def test_torn_last_line_is_ignored_then_repaired(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    with ResultsLog(path, ProbeRecord) as results:
        for question in range(3):
            results.append(_record(question))
    complete = path.stat().st_size
    torn = _record(3).model_dump_json().encode()[:57]
    with open(path, "ab") as handle:
        handle.write(torn)
    assert len(read_records(path, ProbeRecord)) == 3
    assert path.stat().st_size == complete + len(torn)  # reading never modifies
    with ResultsLog(path, ProbeRecord) as resumed:
        assert path.stat().st_size == complete
        assert resumed.append(_record(3))
    assert [r.question_id for r in read_records(path, ProbeRecord)] == ["q0", "q1", "q2", "q3"]


def test_corrupt_middle_line_is_a_one_line_error_and_nothing_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text(
        _record(0).model_dump_json() + "\n{not json}\n" + _record(1).model_dump_json() + "\n"
    )
    before = path.read_bytes()
    with pytest.raises(ResultsLogError, match=rf"^{path}:2: corrupt probe record \(") as caught:
        read_records(path, ProbeRecord)
    assert "\n" not in str(caught.value) and "delete it" in str(caught.value)
    with pytest.raises(ResultsLogError, match=r"results.jsonl:2"):
        ResultsLog(path, ProbeRecord)
    assert path.read_bytes() == before
    with ResultsLog(
        tmp_path / "other.jsonl", ProbeRecord
    ):  # the refused open released its lock and fd
        pass


def test_a_valid_json_last_line_that_is_no_record_is_an_error_not_a_tear(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text(_record(0).model_dump_json() + '\n{"state": "S1-d0"}\n')
    with pytest.raises(ResultsLogError, match=r"results.jsonl:2: corrupt probe record \(condition"):
        ResultsLog(path, ProbeRecord)


@pytest.mark.parametrize(
    "tail",
    [
        b'{"state": "S1-d0", "condi',
        b'{"state": "S1-d0", "condi\n',
        b"\x00" * 600,
        b"\x00" * 80 + b"\n\n",
    ],
    ids=["unterminated", "terminated-not-json", "zero-filled", "zero-filled-line"],
)
def test_a_torn_last_line_is_dropped_with_one_warning_and_rerun(
    tmp_path: Path, tail: bytes
) -> None:
    path = tmp_path / "results.jsonl"
    with ResultsLog(path, ProbeRecord) as results:
        for question in range(3):
            results.append(_record(question))
    intact = path.read_bytes()
    path.write_bytes(intact + tail)
    with capture_logs() as logs:
        assert [r.question_id for r in read_records(path, ProbeRecord)] == ["q0", "q1", "q2"]
        with ResultsLog(path, ProbeRecord) as resumed:
            assert path.read_bytes() == intact
            assert _record(3).key not in resumed
            assert resumed.append(_record(3))
    warnings = [entry for entry in logs if entry["log_level"] == "warning"]
    assert [w["event"] for w in warnings] == [
        "results.torn_last_line_ignored",
        "results.torn_last_line_dropped",
    ]
    assert warnings[0]["line"] == 4
    assert path.read_bytes().startswith(intact)
    assert [r.question_id for r in read_records(path, ProbeRecord)] == ["q0", "q1", "q2", "q3"]


def test_report_of_a_corrupt_results_file_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text(
        _record(0).model_dump_json() + "\n" + '{"state": 3}\n' + _record(1).model_dump_json() + "\n"
    )
    for command in ("report", "rescore"):
        result = CliRunner().invoke(app, [command, str(tmp_path)])
        assert_one_line_error(result, f"error: {path}:2: corrupt probe record", exit_code=2)


def test_duplicate_lines_keep_the_first(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    first, second = _record(0), _record(0, reply="ANSWERABLE=NO\nSOURCE=NONE\nANSWER=NONE")
    path.write_text(first.model_dump_json() + "\n" + second.model_dump_json() + "\n")
    (record,) = read_records(path, ProbeRecord)
    assert record.AC == 1


def test_second_writer_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    with ResultsLog(path, ProbeRecord), pytest.raises(ResultsLogError, match="another run"):
        ResultsLog(path, ProbeRecord)


def test_rewrite_is_refused_while_a_run_writes(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    with ResultsLog(path, ProbeRecord) as results:
        results.append(_record(0))
        with pytest.raises(ResultsLogError, match="rescore later"):
            rewrite_records(path, [_record(1)])
    rewrite_records(path, [_record(1), _record(1)])
    assert [r.question_id for r in read_records(path, ProbeRecord)] == ["q1"]


WRITER = textwrap.dedent(
    """
    import sys
    from harness.kit.results import ResultsLog
    from harness.mirage.probing.records import ProbeRecord, RecordKey, build_record
    from harness.mirage.scoring import Gold
    gold = Gold(answerable="YES", source="chart_1", answer="42", answer_type="numeric")
    with ResultsLog(sys.argv[1], ProbeRecord) as results:
        for i in range(100000):
            key = RecordKey("S1-d0", "C0", f"q{i}", 0)
            record = build_record(key, "ANSWERABLE=YES\\nSOURCE=chart_1\\nANSWER=42", gold, None)
            if results.append(record):
                print(i, flush=True)
    """
)


def test_resume_after_kill_9(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    root = str(Path(__file__).resolve().parents[2])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
    }
    child = subprocess.Popen(
        [sys.executable, str(script), str(path)], stdout=subprocess.PIPE, text=True, env=env
    )
    assert child.stdout is not None
    acknowledged = [int(child.stdout.readline()) for _ in range(30)]
    child.send_signal(signal.SIGKILL)
    child.wait()
    with ResultsLog(path, ProbeRecord) as resumed:
        done = {key.question_id for key in resumed.keys}
        assert {f"q{i}" for i in acknowledged} <= done  # every acknowledged record survived
        indices = sorted(int(q[1:]) for q in done)
        assert indices == list(range(len(indices)))  # a gap-free prefix, no duplicates
        assert resumed.append(_record(len(indices)))
    assert len(read_records(path, ProbeRecord)) == len(indices) + 1


def test_record_validation() -> None:
    record = _record(0)
    with pytest.raises(ValueError, match="PF"):
        ProbeRecord.model_validate({**record.model_dump(), "pf": True})
    with pytest.raises(ValueError, match="do not apply"):
        ProbeRecord.model_validate({**record.model_dump(), "HR": 0})
    with pytest.raises(ValueError, match="gold"):
        ProbeRecord.model_validate({**record.model_dump(), "gold_answerable": "NO"})
    with pytest.raises(ValueError):
        ProbeRecord.model_validate({**record.model_dump(), "condition": "C7"})


def test_rescore_recomputes_from_raw_output() -> None:
    stale = _record(0).model_copy(
        update={"VC": 0, "GC": 0, "SC": 0, "WS": 1, "canonical_source": "chart_1.png"}
    )
    fresh = rescore_record(stale, RESOLVER)
    assert (fresh.SC, fresh.VC, fresh.GC, fresh.WS) == (1, 1, 1, 0)
    assert fresh.canonical_source == "chart_1"
    without_resolver = rescore_record(stale, None)
    assert (without_resolver.SC, without_resolver.canonical_source) == (0, "chart_1.png")


def test_rescore_needs_gold() -> None:
    record = _record(0).model_copy(update={"gold": None})
    with pytest.raises(ValueError, match="no gold"):
        rescore_record(record, RESOLVER)


def test_provider_errors_are_not_rescored() -> None:
    key = RecordKey("S2", "Cm", "q1", 0)
    record = provider_error_record(key, GOLD, "rate_limit: 429 after 3 retries", latency_s=3.0)
    assert rescore_record(record, RESOLVER) == record
    assert not record.scored


def test_binary_path_needs_an_executed_retrieval_call() -> None:
    recall = ToolCallRecord(name="artifact_recall", arguments={"query": "gdp"}, executed=True)
    pseudo = ToolCallRecord(name="artifact_recall", label="pseudo_tool", executed=False)
    other = ToolCallRecord(name="calculator", executed=True)
    assert binary_path([recall]) == "R_tool"
    assert binary_path([pseudo, other]) == "R_context"
    record = build_record(
        RecordKey("S2", "Cm", "q1", 0), REPLY, GOLD, RESOLVER, tool_calls=[recall.model_dump()]
    )
    assert record.path == "R_tool" and record.tool_calls[0].name == "artifact_recall"


def test_version_1_lines_load_as_lenient_and_rescore_to_the_current_schema(tmp_path: Path) -> None:
    """results.jsonl written before scoring profiles existed (no schema_version) still loads:
    those records were scored by the rules now called lenient, and rescoring brings them to the
    current schema under the chosen profile."""
    old = _record(0).model_dump(
        mode="json", exclude={"schema_version", "scoring", "prompt_template"}
    )
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps(old) + "\n")
    (loaded,) = read_records(path, ProbeRecord)
    assert (loaded.schema_version, loaded.scoring, loaded.prompt_template) == (1, "lenient", None)
    assert loaded.GC == 1
    fresh = rescore_record(loaded, RESOLVER, "paper")
    assert (fresh.schema_version, fresh.scoring) == (SCHEMA_VERSION, "paper")
    rewrite_records(path, [fresh])
    assert read_records(path, ProbeRecord)[0].schema_version == SCHEMA_VERSION


def test_records_built_in_code_are_current() -> None:
    key = RecordKey("S2", "Cm", "q1", 0)
    record = provider_error_record(key, GOLD, "timeout", "lenient", prompt_template="{question}")
    assert (record.schema_version, record.scoring) == (SCHEMA_VERSION, "lenient")
    assert _record(1).schema_version == SCHEMA_VERSION and _record(1).scoring == "paper"


def test_a_newer_schema_is_refused_with_the_line(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text(_record(0).model_copy(update={"schema_version": 99}).model_dump_json() + "\n")
    expected = r"results.jsonl:1: corrupt probe record \(schema_version"
    with pytest.raises(ResultsLogError, match=expected):
        read_records(path, ProbeRecord)


def test_the_path_is_four_way_from_what_the_probe_had() -> None:
    """A probe whose artifact's content is not in its context and that made no call is R_none
    (the two-way label called it R_context); content in context is R_context; an unknown
    context never is."""
    gold = GOLD.model_copy(update={"artifact": "chart_1", "keywords": ("41.2", "Elmbrook")})
    key = RecordKey("S2", "C0", "q1", 0)
    summary = ContextMessage(role="user", text="[Compacted] chart_1 was shared", summary=True)
    gone = ProbeContext(source="restored_session", messages=(summary,))
    record = build_record(key, REPLY, gold, RESOLVER, context=gone)
    assert (record.path, record.path_source) == ("R_none", "probe")
    assert binary_path(record.tool_calls) == "R_context"
    assert record.path_evidence is not None and record.path_evidence.keywords == [
        "41.2",
        "Elmbrook",
    ]
    kept = ContextMessage(role="user", text="Elmbrook grew 41.2 kt")
    here = ProbeContext(source="restored_session", messages=(summary, kept))
    assert build_record(key, REPLY, gold, RESOLVER, context=here).path == "R_context"
    unknown = ProbeContext.missing("not readable", boot=[BootItem(source="MEMORY.md", text="x")])
    assert build_record(key, REPLY, gold, RESOLVER, context=unknown).path == "R_none"
    boot = ProbeContext.missing("not readable", boot=[BootItem(source="MEMORY.md", text="chart_1")])
    assert build_record(key, REPLY, gold, RESOLVER, context=boot).path == "R_boot"
    stored = json.loads(record.model_dump_json())
    old = {**stored, "schema_version": 2, "path": "R_context"}
    for field in ("path_evidence", "path_source"):
        old.pop(field)
    loaded = ProbeRecord.from_line(json.dumps(old))
    assert (loaded.path, loaded.path_source) == ("R_context", "binary")
    assert ProbeRecord.from_line(record.model_dump_json()).path_evidence == record.path_evidence
