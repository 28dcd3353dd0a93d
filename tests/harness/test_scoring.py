"""Scorer edge cases: the lenient profile's value rules, source canonicalisation, and the
indicator definitions (the same under every profile). The paper profile's reading of replies
is pinned by tests/harness/test_scoring_parity.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.mirage.protocol import PROFILE_NAMES, ProfileName
from harness.mirage.scoring import (
    ChainResolver,
    Gold,
    KnownIdResolver,
    MappingResolver,
    canonical_source,
    score_reply,
)
from harness.mirage.scoring.values import (
    default_tolerance,
    parse_quantities,
    unit_multiplier,
    value_matches,
)


@pytest.mark.parametrize(
    ("predicted", "gold", "expected"),
    [
        ("42", "42", True),
        ("$1,234.50", "1234.5", True),
        ("€ 1 234", "1234", False),  # a plain space is not a thousands separator
        ("1\u202f234", "1234", True),
        ("USD 516.40", "516.4", True),
        ("45%", "45", True),
        ("45 percent", "45%", True),
        ("5k", "5000", True),
        ("5K steps", "5,000", True),
        ("1.2M", "1200000", True),
        ("1.2 million", "1,200,000", True),
        ("3.4bn", "3400000000", True),
        ("3.4 billion", "3.4B", True),
        ("516.4 billion USD", "516.40", True),  # gold read off a chart in billions
        ("2 trillion", "2T", True),
        ("5 m", "5000000", False),  # lower-case m is metres, not millions
        ("about 42", "42", True),
        ("~42", "42", True),
        ("approximately 42 kg", "42", True),
        ("≈ 42", "42", True),
        ("3,5", "3.5", True),  # decimal comma
        ("-12", "-12", True),
        ("−12", "-12", True),
        ("12", "-12", False),
        ("40-45", "42", False),  # a range is two numbers
        ("42 (or 43)", "42", False),
        ("no idea", "42", False),
        ("NONE", "42", False),
    ],
)
def test_numeric_rules(predicted: str, gold: str, expected: bool) -> None:
    assert value_matches(predicted, gold, "numeric") is expected


@pytest.mark.parametrize(
    ("predicted", "gold", "tolerance", "expected"),
    [
        ("100.9", "100", None, True),  # 1% of 100 = 1.0
        ("101.1", "100", None, False),
        ("10.4", "10", None, True),  # floor of 0.5
        ("10.6", "10", None, False),
        ("10.6", "10", 1.0, True),  # per-question tolerance
        ("10", "10.2", 0.0, False),
        ("1010", "1000", None, True),
        ("1011", "1000", None, False),
    ],
)
def test_numeric_tolerance(
    predicted: str, gold: str, tolerance: float | None, expected: bool
) -> None:
    assert value_matches(predicted, gold, "numeric", tolerance=tolerance) is expected


def test_default_tolerance_formula() -> None:
    assert default_tolerance(10) == 0.5
    assert default_tolerance(-300) == pytest.approx(3.0)


def test_quantities_keep_magnitude_apart() -> None:
    (quantity,) = parse_quantities("$3.4bn")
    assert (quantity.mantissa, quantity.multiplier, quantity.value) == (3.4, 1e9, 3.4e9)


@pytest.mark.parametrize(
    ("predicted", "gold", "expected"),
    [
        ("2019", "2019", True),
        ("In 2019.", "2019", True),
        ("FY2019", "2019", True),
        ("2020", "2019", False),
        ("2019.4", "2019", False),  # years are exact, not numeric with tolerance
        ("2018 or 2019", "2019", False),
    ],
)
def test_year_rules(predicted: str, gold: str, expected: bool) -> None:
    assert value_matches(predicted, gold, "year") is expected


@pytest.mark.parametrize(
    ("predicted", "gold", "expected"),
    [
        ("2024-03-05", "2024-03-05", True),
        ("March 5, 2024", "2024-03-05", True),
        ("5th of March 2024", "2024-03-05", True),
        ("Tuesday, Mar 5 2024", "2024-03-05", True),
        ("05/03/2024", "2024-03-05", True),  # d/m/y reading
        ("03/05/2024", "2024-03-05", True),  # m/d/y reading
        ("2024-03-06", "2024-03-05", False),
        ("March 2024", "2024-03-05", False),  # coarser than the gold
        ("March 2024", "2024-03", True),
        ("2024-03-17", "2024-03", True),
        ("April 2024", "2024-03", False),
    ],
)
def test_date_rules(predicted: str, gold: str, expected: bool) -> None:
    assert value_matches(predicted, gold, "date") is expected


@pytest.mark.parametrize(
    ("predicted", "gold", "answer_type", "expected"),
    [
        ("LeeLin", "leelin", "string", True),
        ('"Lee  Lin."', "lee lin", "string", True),
        ("@leelin", "leelin", "string", True),
        ("Lee Lin", "leelin", "string", False),
        ("Café", "CAFÉ", "string", True),
        ("ﬁtness", "fitness", "string", True),  # NFKC ligature
        ("Bar chart", "bar chart", "enum", True),
        ("bar", "bar chart", "enum", False),
    ],
)
def test_string_and_enum_rules(predicted: str, gold: str, answer_type: str, expected: bool) -> None:
    assert value_matches(predicted, gold, answer_type) is expected  # type: ignore[arg-type]


def test_aliases_are_accepted_answers() -> None:
    assert value_matches("Lee", "leelin", "string", aliases=("lee",))


RESOLVER = KnownIdResolver(["chart_3f9a1c20", "ui_profile_4a1d"])


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("chart_3f9a1c20", "chart_3f9a1c20"),
        ("CHART_3F9A1C20", "chart_3f9a1c20"),
        ("`artifacts/chart_3f9a1c20.png`", "chart_3f9a1c20"),
        ("derived/chart_3f9a1c20.table.csv", "chart_3f9a1c20"),
        ("memory/2024-05-01.md#chart_3f9a1c20", "chart_3f9a1c20"),
        ("ui_profile_4a1d.summary.md", "ui_profile_4a1d"),
        ("chart_3f9a1c20 and ui_profile_4a1d", "chart_3f9a1c20 and ui_profile_4a1d"),
        ("chart_3f9a1c200", "chart_3f9a1c200"),  # no partial-token matches
        ("NONE", None),
        ("  ", None),
    ],
)
def test_known_id_canonicalisation(source: str, expected: str | None) -> None:
    assert canonical_source(source, RESOLVER) == expected


def test_resolver_chain_and_mapping() -> None:
    mapping = MappingResolver({"memory/2024-05-01.md#L3": "chart_3f9a1c20"})
    chain = ChainResolver(mapping, RESOLVER)
    assert canonical_source("'memory/2024-05-01.md#L3'", chain) == "chart_3f9a1c20"
    assert canonical_source("ui_profile_4a1d.png", chain) == "ui_profile_4a1d"
    assert canonical_source("elsewhere.md", chain) == "elsewhere.md"


def test_workspace_resolver_satisfies_the_protocol(tmp_path: Path) -> None:
    """The memory server's Workspace canonicalises derived files, notes and anchors."""
    workspace_module = pytest.importorskip("memory_server.workspace")
    (tmp_path / "artifacts").mkdir()
    (tmp_path / "artifacts" / "chart_3f9a1c20.png").write_bytes(b"\x89PNG")
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "2024-05-01.md").write_text("# GDP\nSee chart_3f9a1c20 for GDP.\n")
    workspace = workspace_module.Workspace.open(tmp_path)
    gold = Gold(answerable="YES", source="chart_3f9a1c20", answer="516.4", answer_type="numeric")
    for source in (
        "artifacts/chart_3f9a1c20.png",
        "chart_3f9a1c20.png",
        "memory/2024-05-01.md#gdp",
    ):
        score = score_reply(f"ANSWERABLE=YES\nSOURCE={source}\nANSWER=516.4", gold, workspace)
        assert (score.canonical_source, score.SC, score.GC) == ("chart_3f9a1c20", 1, 1), source


ANSWERABLE = Gold(answerable="YES", source="chart_3f9a1c20", answer="516.40", answer_type="numeric")
UNANSWERABLE = Gold(answerable="NO")


def _score(reply: str, gold: Gold, profile: ProfileName) -> dict[str, int | None]:
    score = score_reply(reply, gold, RESOLVER, profile)
    assert score.scoring == profile
    return {n: getattr(score, n) for n in ("AC", "SC", "VC", "GC", "WS", "HR")}


@pytest.mark.parametrize("profile", PROFILE_NAMES)
def test_grounded_answer(profile: ProfileName) -> None:
    reply = "ANSWERABLE=YES\nSOURCE=artifacts/chart_3f9a1c20.png\nANSWER=$516.4B"
    got = _score(reply, ANSWERABLE, profile)
    assert got == {"AC": 1, "SC": 1, "VC": 1, "GC": 1, "WS": 0, "HR": None}


@pytest.mark.parametrize("profile", PROFILE_NAMES)
def test_outcome_preserving_mirage_has_vc_without_gc(profile: ProfileName) -> None:
    got = _score("ANSWERABLE=YES\nSOURCE=NONE\nANSWER=516.4", ANSWERABLE, profile)
    assert got == {"AC": 1, "SC": 0, "VC": 1, "GC": 0, "WS": 1, "HR": None}


@pytest.mark.parametrize("profile", PROFILE_NAMES)
def test_ws_counts_none_and_wrong_sources(profile: ProfileName) -> None:
    assert _score("ANSWERABLE=YES\nSOURCE=NONE\nANSWER=1", ANSWERABLE, profile)["WS"] == 1
    wrong = "ANSWERABLE=YES\nSOURCE=ui_profile_4a1d\nANSWER=1"
    assert _score(wrong, ANSWERABLE, profile)["WS"] == 1
    refusal = "ANSWERABLE=NO\nSOURCE=chart_3f9a1c20\nANSWER=NONE"
    assert _score(refusal, ANSWERABLE, profile)["WS"] == 0


@pytest.mark.parametrize("profile", PROFILE_NAMES)
def test_answerable_refusal(profile: ProfileName) -> None:
    got = _score("ANSWERABLE=NO\nSOURCE=NONE\nANSWER=NONE", ANSWERABLE, profile)
    assert got == {"AC": 0, "SC": 0, "VC": 0, "GC": 0, "WS": 1, "HR": None}


@pytest.mark.parametrize(
    ("reply", "ac", "hr"),
    [
        ("ANSWERABLE=NO\nSOURCE=NONE\nANSWER=NONE", 1, 0),
        ("ANSWERABLE=NO\nSOURCE=NONE\nANSWER=42", 1, 1),  # an answer counts even with NO
        ("ANSWERABLE=YES\nSOURCE=NONE\nANSWER=NONE", 0, 1),
        ("ANSWERABLE=YES\nSOURCE=chart_3f9a1c20\nANSWER=42", 0, 1),
    ],
)
@pytest.mark.parametrize("profile", PROFILE_NAMES)
def test_unanswerable_indicators(reply: str, ac: int, hr: int, profile: ProfileName) -> None:
    got = _score(reply, UNANSWERABLE, profile)
    assert got == {"AC": ac, "SC": None, "VC": None, "GC": None, "WS": None, "HR": hr}


@pytest.mark.parametrize(
    ("profile", "reason"), [("paper", "missing ANSWER"), ("lenient", "missing field(s): ANSWER")]
)
def test_parse_failure_has_null_indicators(profile: ProfileName, reason: str) -> None:
    score = score_reply("ANSWERABLE=YES\nSOURCE=chart_3f9a1c20", ANSWERABLE, RESOLVER, profile)
    assert score.outcome.pf and score.outcome.pf_reason == reason
    assert all(getattr(score, n) is None for n in ("AC", "SC", "VC", "GC", "WS", "HR"))


def test_gold_validation() -> None:
    with pytest.raises(ValueError, match="source and an answer"):
        Gold(answerable="YES", source="chart_1")
    assert Gold(answerable="NO", source="NONE", answer="none").answer is None
    with pytest.raises(ValueError):
        Gold(answerable="YES", source="c", answer="1", answer_type="colour")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("predicted", "expected"),
    [
        ("47.3", True),
        ("47.3 thousand tonnes", True),
        ("47,300 tonnes", True),
        ("47.3k", True),
        ("47.34", True),  # within the question's tolerance of 0.05
        ("47.4", False),
        ("47.3 million tonnes", False),
        ("47.3 tonnes (thousands)", True),
    ],
)
def test_gold_unit_carries_a_magnitude(predicted: str, expected: bool) -> None:
    got = value_matches(predicted, "47.3", "numeric", tolerance=0.05, unit="thousand tonnes")
    assert got is expected


def test_unit_multiplier() -> None:
    assert unit_multiplier("thousand tonnes") == 1e3
    assert unit_multiplier("USD bn") == 1e9
    assert unit_multiplier("M users") == 1e6
    assert (
        unit_multiplier("m") == 1.0
        and unit_multiplier("kg") == 1.0
        and unit_multiplier(None) == 1.0
    )


@pytest.mark.parametrize("profile", PROFILE_NAMES)
@pytest.mark.parametrize("pack_name", ["mirage-core", "mirage-ext"])
def test_bundled_pack_golds_score_as_grounded(pack_name: str, profile: ProfileName) -> None:
    """Every question of the bundled pack: its own gold reply is grounded, a refusal is right
    exactly for the unanswerable ones, and a perturbed value is not accepted."""
    packs = pytest.importorskip("harness.mirage.packs")
    pack = packs.load_pack(pack_name)
    resolver = KnownIdResolver(pack.artifacts)
    for question in pack.questions:
        gold = Gold.from_question(question)
        if gold.answerable == "YES":
            reply = f"ANSWERABLE=YES\nSOURCE={gold.source}\nANSWER={gold.answer} {gold.unit or ''}"
            assert score_reply(reply, gold, resolver, profile).GC == 1, question.id
            if gold.answer_type in ("numeric", "year"):
                wrong_value = float(gold.answer or 0) * 3 + 7
                wrong = f"ANSWERABLE=YES\nSOURCE={gold.source}\nANSWER={wrong_value}"
                assert score_reply(wrong, gold, resolver, profile).VC == 0, question.id
        else:
            refusal = "ANSWERABLE=NO\nSOURCE=NONE\nANSWER=NONE"
            score = score_reply(refusal, gold, resolver, profile)
            assert (score.AC, score.HR) == (1, 0), question.id
