"""The structured-response protocol: prompt wording per profile, the tolerant (lenient) reply
parser, and the paper parser's own rules (its parity with the released scorer is
tests/harness/test_scoring_parity.py)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.mirage.protocol import (
    PROFILE_NAMES,
    ProfileName,
    parse_response,
    probe_prompt,
    probe_template,
)


@pytest.mark.parametrize(
    "reply",
    [
        "ANSWERABLE=YES\nSOURCE=chart_1\nANSWER=42",
        "answerable = yes\nsource = chart_1\nanswer = 42",
        "**ANSWERABLE**: YES\n**SOURCE**: `chart_1`\n**ANSWER**: **42**",
        "```text\nANSWERABLE=YES\nSOURCE=chart_1\nANSWER=42\n```",
        "ANSWERABLE=YES SOURCE=chart_1 ANSWER=42",
        "- ANSWERABLE: Yes.\n- SOURCE: chart_1\n- ANSWER: 42",
        "<think>ANSWERABLE=NO maybe?</think>\nANSWERABLE=YES\nSOURCE=chart_1\nANSWER=42",
        "Template: ANSWERABLE=YES | NO\nANSWERABLE=YES\nSOURCE=chart_1\nANSWER=42",
        "  __ANSWERABLE__=YES  \n\n  SOURCE=  chart_1 \n ANSWER = 42 ",
        '```json\n{"answerable": "yes", "Source": "chart_1", "ANSWER": 42}\n```',
    ],
)
def test_tolerated_formats(reply: str) -> None:
    outcome = parse_response(reply, "lenient")
    assert not outcome.pf, outcome.pf_reason
    assert outcome.parsed.answerable == "YES"
    assert outcome.parsed.source == "chart_1"
    assert outcome.parsed.answer == "42"


def test_none_values_are_normalised_not_missing() -> None:
    outcome = parse_response("ANSWERABLE=no\nSOURCE=none\nANSWER=None", "lenient")
    assert not outcome.pf
    assert outcome.parsed.model_dump() == {"answerable": "NO", "source": "NONE", "answer": "NONE"}


def test_answer_keeps_inner_text() -> None:
    outcome = parse_response(
        "ANSWERABLE=YES\nSOURCE=ui_profile\nANSWER=Lee Lin (user: leelin)", "lenient"
    )
    assert outcome.parsed.answer == "Lee Lin (user: leelin)"


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("", "empty reply"),
        (None, "empty reply"),
        ("The answer is 42.", "missing field(s): ANSWERABLE, SOURCE, ANSWER"),
        ("ANSWERABLE=YES\nSOURCE=chart_1", "missing field(s): ANSWER"),
        ("ANSWERABLE=YES\nSOURCE=\nANSWER=42", "empty field(s): SOURCE"),
        (
            "ANSWERABLE=MAYBE\nSOURCE=chart_1\nANSWER=42",
            "ANSWERABLE must be YES or NO, got 'MAYBE'",
        ),
        ("<think>ANSWERABLE=YES\nSOURCE=a\nANSWER=1</think>", "missing field(s)"),
    ],
)
def test_parse_failures_carry_a_reason(reply: str | None, reason: str) -> None:
    outcome = parse_response(reply, "lenient")
    assert outcome.pf
    assert outcome.pf_reason is not None and outcome.pf_reason.startswith(reason)


def test_partial_fields_are_kept_on_pf() -> None:
    for profile in PROFILE_NAMES:
        outcome = parse_response("ANSWERABLE=YES\nSOURCE=chart_1", profile)
        assert outcome.parsed.answerable == "YES" and outcome.parsed.answer is None


@pytest.mark.parametrize("profile", PROFILE_NAMES)
def test_prompts_differ_only_by_the_retrieval_instruction(profile: ProfileName) -> None:
    c0, cm = probe_prompt("What is X?", "C0", profile), probe_prompt("What is X?", "Cm", profile)
    for prompt in (c0, cm):
        assert "What is X?" in prompt
        assert all(f in prompt for f in ("ANSWERABLE=", "SOURCE=", "ANSWER="))
    assert "artifact_recall" in cm and "artifact_recall" not in c0


def test_paper_wording_is_the_released_harness_wording() -> None:
    """Question, blank line, 'Return exactly:' and the three template lines; under Cm the
    released CitationForce query prefix comes first."""
    template = (
        "Return exactly:\nANSWERABLE=YES | NO\nSOURCE=<artifact_id or NONE>\n"
        "ANSWER=<short value or NONE>"
    )
    assert probe_prompt(" What is X? ", "C0") == "What is X?\n\n" + template
    cm = probe_prompt("What is X?", "Cm")
    assert cm.startswith("[IMPORTANT — CitationForce protocol is active for this query]\n")
    assert cm.endswith('"I was unable to locate the artifact."\n\nWhat is X?\n\n' + template)
    assert "example_00000000" not in cm  # no filled example for a small model to copy
    assert probe_template("C0", "paper") == "{question}\n\n" + template


def test_question_braces_are_kept_verbatim() -> None:
    assert probe_prompt("What is {x}?", "C0").startswith("What is {x}?\n")


def test_prompt_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="empty"):
        probe_prompt("  ", "C0")
    with pytest.raises(ValueError, match="unknown condition"):
        probe_prompt("Q?", "C9")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown scoring profile 'strict'"):
        probe_prompt("Q?", "C0", "strict")  # type: ignore[arg-type]


@pytest.mark.parametrize("profile", PROFILE_NAMES)
def test_prompt_reply_round_trip(profile: ProfileName) -> None:
    """The three lines the prompt asks for, filled in, are exactly what the parser accepts."""
    prompt = probe_prompt("Q?", "C0", profile)
    fields = [line for line in prompt.splitlines() if "=" in line][:3]
    filled = "\n".join(
        line.split("=")[0] + "=" + value
        for line, value in zip(fields, ["NO", "NONE", "NONE"], strict=True)
    )
    outcome = parse_response(filled, profile)
    assert not outcome.pf and outcome.parsed.answerable == "NO"


def test_lenient_format_example_is_itself_valid() -> None:
    example = [line for line in probe_prompt("Q?", "C0", "lenient").splitlines() if "=" in line]
    assert not parse_response("\n".join(example[3:]), "lenient").pf


_FIELD_WORD = re.compile(r"answer|source|think|```|~~~", re.IGNORECASE)
_VALUE = st.text(
    alphabet=st.characters(
        blacklist_categories=("Cc", "Cs", "Zl", "Zp"), blacklist_characters="*_`'\"=:"
    ),
    min_size=1,
    max_size=30,
).filter(lambda v: v.strip(" \t.;,") == v and v.strip() and not _FIELD_WORD.search(v))


@given(
    answerable=st.sampled_from(["YES", "NO", "yes", "No"]),
    source=_VALUE,
    answer=_VALUE,
    template=st.sampled_from(
        [
            "ANSWERABLE={z}\nSOURCE={s}\nANSWER={a}",
            "**ANSWERABLE:** {z}\n**SOURCE:** {s}\n**ANSWER:** {a}",
            "```\nANSWERABLE = {z}\nSOURCE = `{s}`\nANSWER = {a}\n```",
            "Sure.\n\nANSWERABLE={z} SOURCE={s} ANSWER={a}",
        ]
    ),
)
def test_well_formed_replies_round_trip(
    answerable: str, source: str, answer: str, template: str
) -> None:
    outcome = parse_response(template.format(z=answerable, s=source, a=answer), "lenient")
    assert not outcome.pf, outcome.pf_reason
    assert outcome.parsed.answerable == answerable.upper()
    expected_source = (
        "NONE" if source.strip().upper() in {"NONE", "<NONE>", "[NONE]"} else source.strip()
    )
    assert outcome.parsed.source == expected_source
