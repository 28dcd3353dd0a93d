"""Parity of the ``paper`` profile with the authors' released scorer, reply by reply.

Every case is a realistic probe reply — shapes from the released scorer's own comments and
question bank (prisma-research/MIRAGE), the failure modes of the paper's appendix (pseudo-tool
text, template echoes, PF), and replies of real model families (JSON, markdown, glosses, units,
scale words, NONE variants) — with three outcomes:

- ``released``: what ``parse_and_score`` of the released harness gives. Its ``_DERIVED`` table
  (derived files and memory surrogates -> artifact id) stands for this workspace's manifest:
  every file's name, with the extension the released code strips removed, maps to its artifact;
- ``paper``: what mirage's ``paper`` profile gives — the released outcome, except where a
  documented departure (docs/metrics.md, ids P1-P10) or manifest data (M1-M3) says otherwise;
  the case names that id;
- ``lenient``: what the ``lenient`` profile gives (documented in docs/metrics.md).

Outcomes read "PF", "AC1 SC1 VC1" (answerable) or "AC1 HR0" (unanswerable).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.mirage.probing.records import ProbeRecord
from harness.mirage.protocol import PROFILE_NAMES, ProfileName
from harness.mirage.scoring import Gold, ProbeScore, get_profile, score_reply
from memory_server.workspace import Workspace

CHART = "chart_3f9a1c20"
PROFILE_UI = "ui_profile_4a1d"
NOTIFY_UI = "ui_notify_9b3e"


def _gold(answer: str, answer_type: str = "numeric", source: str = CHART, **extra: object) -> Gold:
    return Gold.model_validate(
        {"answerable": "YES", "source": source, "answer": answer, "answer_type": answer_type}
        | extra
    )


GDP = _gold("556.73")  # released bank tp_c1_01: "What was New Jersey's Real GDP in 2019?"
HARVEST = _gold("47.3", tolerance=0.05, unit="thousand tonnes")  # mirage-core orchard_harvest-01
HARVEST_DROP = _gold("-5.3", tolerance=0.05, unit="thousand tonnes")  # orchard_harvest-06
POINTS = _gold("-1.4", tolerance=0.05, unit="percent")  # mirage-core composting-09
BATTERY = _gold("96%", source=NOTIFY_UI)  # released bank tp_s2_03
DECIMAL = _gold("3.5")
USERS = _gold("1200000")
PEAK = _gold("2019", "year")  # released bank tp_c1_04
STEPS = _gold("2 million steps", "string", PROFILE_UI)  # released bank tp_s1_12
LISTED = _gold("Yes", "string", PROFILE_UI)  # released bank tp_s1_10
TOGGLE = _gold("OFF", "string", NOTIFY_UI)  # released bank tp_s2_01
SWITCH = _gold("false", "string", NOTIFY_UI)  # released bank tp_s2_15
HEIGHT = _gold("181 cm", "string", PROFILE_UI)
CREDIT = _gold("Statista 2021", "string")  # released bank tp_c1_13
UNIT = _gold("billion US dollars", "string")  # released bank tp_c1_08
BADGE = _gold("Gold Pacer", "string", PROFILE_UI)  # mirage-core fitness_profile-02
SHARE = _gold("12%", "string")
MEMBER = _gold("2021-03-14", "date", PROFILE_UI)  # mirage-core fitness_profile-13
VALLEY = _gold("Kestrel", "enum")  # mirage-core orchard_harvest-10
HANDLE = _gold("@trailrunner_maya", "string", PROFILE_UI)  # mirage-core fitness_profile-01
NO = Gold(answerable="NO", artifact=CHART)

_PLAIN = "ANSWERABLE=YES\nSOURCE={src}\nANSWER={ans}"


def plain(answer: str, source: str = CHART) -> str:
    return _PLAIN.format(src=source, ans=answer)


@dataclass(frozen=True)
class Case:
    name: str
    reply: str
    gold: Gold
    released: str
    lenient: str
    paper: str | None = None  # only where a documented departure changes the outcome
    why: str | None = None  # the departure (P*) or manifest-data (M*) id

    @property
    def expected_paper(self) -> str:
        return self.paper if self.paper is not None else self.released


CASES = [
    # --- protocol shapes -----------------------------------------------------------------------
    Case("plain protocol", plain("556.73"), GDP, "AC1 SC1 VC1", "AC1 SC1 VC1"),
    Case(
        "spaces around =",
        "ANSWERABLE = YES\nSOURCE = chart_3f9a1c20\nANSWER = 556.73",
        GDP,
        "AC1 SC1 VC1",
        "AC1 SC1 VC1",
    ),
    Case(
        "lower-case names and values",
        "answerable=yes\nsource=chart_3f9a1c20\nanswer=556.73",
        GDP,
        "AC1 SC1 VC1",
        "AC1 SC1 VC1",
    ),
    Case(
        "all fields on one line",
        "ANSWERABLE=YES SOURCE=chart_3f9a1c20 ANSWER=556.73",
        GDP,
        "AC1 SC1 VC1",
        "AC1 SC1 VC1",
    ),
    Case(
        "one line with commas",
        "ANSWERABLE=YES, SOURCE=chart_3f9a1c20, ANSWER=556.73",
        GDP,
        "AC1 SC0 VC1",
        "AC1 SC1 VC1",
        paper="AC1 SC1 VC1",
        why="P3",
    ),
    Case(
        "one line with pipes",
        "ANSWERABLE=YES | SOURCE=chart_3f9a1c20 | ANSWER=556.73",
        GDP,
        "AC1 SC1 VC1",
        "PF",
    ),
    Case(
        "fenced block (Qwen)",
        "```\nANSWERABLE=YES\nSOURCE=chart_3f9a1c20\nANSWER=556.73\n```",
        GDP,
        "AC1 SC1 VC1",
        "AC1 SC1 VC1",
    ),
    Case(
        "preamble then fields",
        "Based on the chart you shared earlier, here is my answer.\n\n" + plain("556.73"),
        GDP,
        "AC1 SC1 VC1",
        "AC1 SC1 VC1",
    ),
    Case(
        "markdown bullets with ':'",
        "- ANSWERABLE: YES\n- SOURCE: chart_3f9a1c20\n- ANSWER: 556.73",
        GDP,
        "PF",
        "AC1 SC1 VC1",
    ),
    Case(
        "bold names with ':' (GPT-style)",
        "**ANSWERABLE:** YES\n**SOURCE:** chart_3f9a1c20\n**ANSWER:** 556.73",
        GDP,
        "PF",
        "AC1 SC1 VC1",
    ),
    Case(
        "bold whole lines with '='",
        "**ANSWERABLE=YES**\n**SOURCE=chart_3f9a1c20**\n**ANSWER=556.73**",
        GDP,
        "AC1 SC0 VC1",
        "AC1 SC1 VC1",
        paper="AC1 SC1 VC1",
        why="P3",
    ),
    Case(
        "fenced JSON (Gemma)",
        '```json\n{"ANSWERABLE": "YES", "SOURCE": "chart_3f9a1c20", "ANSWER": "556.73"}\n```',
        GDP,
        "AC1 SC1 VC1",
        "AC1 SC1 VC1",
    ),
    Case(
        "bare JSON, lower-case keys",
        '{"answerable": "yes", "source": "chart_3f9a1c20", "answer": "556.73"}',
        GDP,
        "PF",
        "AC1 SC1 VC1",
    ),
    Case(
        "JSON with a number value",
        '{"ANSWERABLE": "Yes", "SOURCE": "artifacts/chart_3f9a1c20.png", "ANSWER": 556.73}',
        GDP,
        "AC1 SC1 VC1",
        "AC1 SC1 VC1",
    ),
    Case(
        "JSON without SOURCE",
        '{"ANSWERABLE": "YES", "ANSWER": "556.73"}',
        GDP,
        "AC1 SC0 VC1",
        "PF",
    ),
    Case(
        "JSON after prose",
        'Here you go:\n```json\n{"ANSWERABLE": "YES", "SOURCE": "chart_3f9a1c20", '
        '"ANSWER": "556.73"}\n```',
        GDP,
        "PF",
        "PF",
    ),
    Case(
        "JSON nulls on an unanswerable probe",
        '{"ANSWERABLE": "NO", "SOURCE": null, "ANSWER": null}',
        NO,
        "AC1 HR0",
        "AC1 HR0",
    ),
    Case(
        "JSON boolean ANSWERABLE",
        '{"ANSWERABLE": true, "SOURCE": "chart_3f9a1c20", "ANSWER": "556.73"}',
        GDP,
        "PF",
        "PF",
    ),
    Case(
        "JSON with an empty ANSWER",
        '{"ANSWERABLE": "NO", "SOURCE": "NONE", "ANSWER": ""}',
        NO,
        "AC1 HR1",
        "PF",
        paper="AC1 HR0",
        why="P2",
    ),
    # --- ANSWERABLE ----------------------------------------------------------------------------
    Case(
        "YES followed by a gloss",
        "ANSWERABLE=YES (the chart was shared earlier)\nSOURCE=chart_3f9a1c20\nANSWER=556.73",
        GDP,
        "AC1 SC1 VC1",
        "PF",
    ),
    Case(
        "Yes with a full stop",
        "ANSWERABLE=Yes.\nSOURCE=chart_3f9a1c20\nANSWER=556.73",
        GDP,
        "AC1 SC1 VC1",
        "AC1 SC1 VC1",
    ),
    Case(
        "NOT SURE on an answerable probe",
        "ANSWERABLE=NOT SURE\nSOURCE=NONE\nANSWER=NONE",
        GDP,
        "AC0 SC0 VC0",
        "PF",
        paper="PF",
        why="P1",
    ),
    Case(
        "NOT SURE on an unanswerable probe",
        "ANSWERABLE=NOT SURE\nSOURCE=NONE\nANSWER=NONE",
        NO,
        "AC1 HR0",
        "PF",
        paper="PF",
        why="P1",
    ),
    Case(
        "ANSWERABLE=NONE",
        "ANSWERABLE=NONE\nSOURCE=NONE\nANSWER=NONE",
        NO,
        "AC1 HR0",
        "PF",
        paper="PF",
        why="P1",
    ),
    Case(
        "ANSWERABLE=Y",
        "ANSWERABLE=Y\nSOURCE=chart_3f9a1c20\nANSWER=556.73",
        GDP,
        "PF",
        "AC1 SC1 VC1",
    ),
    Case(
        "template echoed, then answered",
        "ANSWERABLE=YES | NO\nSOURCE=<artifact_id or NONE>\nANSWER=<short value or NONE>\n\n"
        "ANSWERABLE=NO\nSOURCE=NONE\nANSWER=NONE",
        NO,
        "AC0 HR1",
        "AC1 HR0",
    ),
    Case(
        "template copied unfilled (small model)",
        "ANSWERABLE=YES | NO\nSOURCE=<artifact_id or NONE>\nANSWER=<short value or NONE>",
        NO,
        "AC0 HR1",
        "PF",
    ),
    Case(
        "lenient example copied verbatim (SmolLM2 at S1-d0)",
        "ANSWERABLE=YES\nSOURCE=example_00000000\nANSWER=12.5",
        GDP,
        "AC1 SC0 VC0",
        "AC1 SC0 VC0",
    ),
    Case(
        "reasoning aloud before the fields",
        "I first thought ANSWERABLE=NO, but the chart shows it.\n" + plain("556.73"),
        GDP,
        "AC0 SC1 VC1",
        "AC1 SC1 VC1",
    ),
    Case(
        "think block (reasoning model)",
        "<think>The user asks about GDP. ANSWERABLE=NO maybe?</think>\n" + plain("556.73"),
        GDP,
        "AC0 SC1 VC1",
        "AC1 SC1 VC1",
        paper="AC1 SC1 VC1",
        why="P5",
    ),
    # --- empty fields --------------------------------------------------------------------------
    Case(
        "empty SOURCE line",
        "ANSWERABLE=YES\nSOURCE=\nANSWER=556.73",
        GDP,
        "AC1 SC0 VC1",
        "PF",
        paper="PF",
        why="P2",
    ),
    Case("empty last ANSWER", "ANSWERABLE=NO\nSOURCE=NONE\nANSWER=", NO, "PF", "PF"),
    Case(
        "empty ANSWER, then prose",
        "ANSWERABLE=NO\nSOURCE=NONE\nANSWER=\nI could not find this in our conversation.",
        NO,
        "AC1 HR1",
        "PF",
        paper="PF",
        why="P2",
    ),
    Case(
        "Cm refusal sentence of the released instruction",
        "I was unable to locate the artifact.",
        GDP,
        "PF",
        "PF",
    ),
    # --- SOURCE --------------------------------------------------------------------------------
    Case(
        "SOURCE with a gloss",
        plain("556.73", "chart_3f9a1c20 (NJ GDP line chart)"),
        GDP,
        "AC1 SC1 VC1",
        "AC1 SC1 VC1",
    ),
    Case(
        "SOURCE as prose",
        plain("556.73", "The GDP chart you shared (chart_3f9a1c20)"),
        GDP,
        "AC1 SC0 VC1",
        "AC1 SC1 VC1",
    ),
    Case(
        "SOURCE as the original's path",
        plain("556.73", "artifacts/chart_3f9a1c20.png"),
        GDP,
        "AC1 SC1 VC1",
        "AC1 SC1 VC1",
    ),
    Case(
        "SOURCE as an OpenClaw absolute path",
        plain("556.73", "/home/user/.openclaw/workspace/artifacts/chart_3f9a1c20.png"),
        GDP,
        "AC1 SC1 VC1",
        "AC1 SC1 VC1",
    ),
    Case(
        "SOURCE as a derived table",
        plain("556.73", "derived/chart_3f9a1c20.table.csv"),
        GDP,
        "AC1 SC1 VC1",
        "AC1 SC1 VC1",
    ),
    Case(
        "SOURCE as a derived summary with an anchor",
        plain("556.73", "derived/chart_3f9a1c20.summary.md#L2"),
        GDP,
        "AC1 SC1 VC1",
        "AC1 SC1 VC1",
    ),
    Case(
        "SOURCE as a dated-note anchor",
        plain("556.73", "memory/2026-03-27.md#L4"),
        GDP,
        "AC1 SC0 VC1",
        "AC1 SC1 VC1",
        paper="AC1 SC1 VC1",
        why="M1",
    ),
    Case(
        "SOURCE in backticks",
        plain("556.73", "`artifacts/chart_3f9a1c20.png`"),
        GDP,
        "AC1 SC0 VC1",
        "AC1 SC1 VC1",
        paper="AC1 SC1 VC1",
        why="P3",
    ),
    Case(
        "SOURCE in capitals with its extension",
        plain("556.73", "CHART_3F9A1C20.PNG"),
        GDP,
        "AC1 SC0 VC1",
        "AC1 SC1 VC1",
        paper="AC1 SC1 VC1",
        why="P10",
    ),
    Case(
        "outcome-preserving mirage (paper Table 3, case 1)",
        plain("@trailrunner_maya", "NONE"),
        HANDLE,
        "AC1 SC0 VC1",
        "AC1 SC0 VC1",
    ),
    Case(
        "another artifact as SOURCE",
        plain("556.73", PROFILE_UI),
        GDP,
        "AC1 SC0 VC1",
        "AC1 SC0 VC1",
    ),
    Case(
        "fields, then a Cm citation line",
        plain("556.73", "artifacts/chart_3f9a1c20.png")
        + "\n\n[Source: artifacts/chart_3f9a1c20.png]",
        GDP,
        "AC1 SC1 VC1",
        "AC1 SC1 VC1",
    ),
    Case(
        "pseudo-tool text before the fields (InternVL)",
        '<|im_start|>tool\nartifact_recall {"query": "NJ GDP 2019"}\n' + plain("556.73"),
        GDP,
        "AC1 SC1 VC1",
        "AC1 SC1 VC1",
    ),
    # --- numbers -------------------------------------------------------------------------------
    Case("currency and scale word", plain("$556.73 billion"), GDP, "AC1 SC1 VC1", "AC1 SC1 VC1"),
    Case(
        "number with a parenthesised gloss",
        plain("556.73 (billion USD)"),
        GDP,
        "AC1 SC1 VC1",
        "AC1 SC1 VC1",
    ),
    Case("approximate word", plain("about 557"), GDP, "AC1 SC1 VC1", "AC1 SC1 VC1"),
    Case("approximate sign", plain("≈ 556.7"), GDP, "AC1 SC1 VC1", "AC1 SC1 VC1"),
    Case("within 1%", plain("560"), GDP, "AC1 SC1 VC1", "AC1 SC1 VC1"),
    Case("wrong scale", plain("556,730 million"), GDP, "AC1 SC1 VC0", "AC1 SC1 VC0"),
    Case(
        "number then a sentence",
        plain("556.73 billion US dollars, according to the chart."),
        GDP,
        "AC1 SC1 VC1",
        "AC1 SC1 VC1",
    ),
    Case(
        "full stop after the number",
        plain("556.73."),
        GDP,
        "AC1 SC1 VC0",
        "AC1 SC1 VC1",
        paper="AC1 SC1 VC1",
        why="P6",
    ),
    Case(
        "number inside a sentence",
        plain("The value is 556.73"),
        GDP,
        "AC1 SC1 VC0",
        "AC1 SC1 VC1",
    ),
    Case("number with a year gloss", plain("556.73 (2019)"), GDP, "AC1 SC1 VC1", "AC1 SC1 VC0"),
    Case(
        "markdown-bold number",
        plain("**556.73**"),
        GDP,
        "AC1 SC1 VC0",
        "AC1 SC1 VC1",
        paper="AC1 SC1 VC1",
        why="P3",
    ),
    Case(
        "outside a pack tolerance, inside the paper's rule",
        plain("47.6"),
        HARVEST,
        "AC1 SC1 VC1",
        "AC1 SC1 VC0",
        why="M3",
    ),
    Case(
        "value in the gold unit's base unit",
        plain("47,300 tonnes"),
        HARVEST,
        "AC1 SC1 VC0",
        "AC1 SC1 VC1",
    ),
    Case(
        "value with the gold's unit",
        plain("47.3 thousand tonnes"),
        HARVEST,
        "AC1 SC1 VC1",
        "AC1 SC1 VC1",
    ),
    Case("k suffix", plain("47.3k"), HARVEST, "AC1 SC1 VC1", "AC1 SC1 VC1"),
    Case(
        "negative with a scale word",
        plain("-5.3 thousand tonnes"),
        HARVEST_DROP,
        "AC1 SC1 VC1",
        "AC1 SC1 VC1",
    ),
    Case(
        "negative with a unit",
        plain("-1.4 percentage points"),
        POINTS,
        "AC1 SC1 VC0",
        "AC1 SC1 VC1",
        paper="AC1 SC1 VC1",
        why="P9",
    ),
    Case(
        "Unicode minus",
        plain("−5.3"),
        HARVEST_DROP,
        "AC1 SC1 VC0",
        "AC1 SC1 VC1",
        paper="AC1 SC1 VC1",
        why="P9",
    ),
    Case("percent gold, bare reply", plain("96", NOTIFY_UI), BATTERY, "AC1 SC1 VC1", "AC1 SC1 VC1"),
    Case("percent word", plain("96 percent", NOTIFY_UI), BATTERY, "AC1 SC1 VC1", "AC1 SC1 VC1"),
    Case("fraction for a percent", plain("0.96", NOTIFY_UI), BATTERY, "AC1 SC1 VC0", "AC1 SC1 VC0"),
    Case("decimal comma", plain("3,5"), DECIMAL, "AC1 SC1 VC0", "AC1 SC1 VC1"),
    Case("M suffix", plain("1.2M"), USERS, "AC1 SC1 VC1", "AC1 SC1 VC1"),
    # --- text ----------------------------------------------------------------------------------
    Case(
        "thousands separators in text",
        plain("2,000,000 steps", PROFILE_UI),
        STEPS,
        "AC1 SC1 VC1",
        "AC1 SC1 VC0",
    ),
    Case("CJK scale word", plain("200万步", PROFILE_UI), STEPS, "AC1 SC1 VC1", "AC1 SC1 VC0"),
    Case(
        "quantity gloss in parentheses",
        plain("2 Million Steps (2,000,000 steps)", PROFILE_UI),
        STEPS,
        "AC1 SC1 VC1",
        "AC1 SC1 VC0",
    ),
    Case("true for Yes", plain("True", PROFILE_UI), LISTED, "AC1 SC1 VC1", "AC1 SC1 VC0"),
    Case("disabled for OFF", plain("Disabled", NOTIFY_UI), TOGGLE, "AC1 SC1 VC1", "AC1 SC1 VC0"),
    Case("No for false", plain("No", NOTIFY_UI), SWITCH, "AC1 SC1 VC1", "AC1 SC1 VC0"),
    Case("Yes with a full stop", plain("Yes.", PROFILE_UI), LISTED, "AC1 SC1 VC0", "AC1 SC1 VC1"),
    Case("unit spacing", plain("181cm", PROFILE_UI), HEIGHT, "AC1 SC1 VC1", "AC1 SC1 VC0"),
    Case(
        "percent spacing",
        plain("12 %"),
        SHARE,
        "AC1 SC1 VC0",
        "AC1 SC1 VC1",
        paper="AC1 SC1 VC1",
        why="P8",
    ),
    Case("year in parentheses", plain("Statista (2021)"), CREDIT, "AC1 SC1 VC1", "AC1 SC1 VC1"),
    # lenient's NFKC turns ™ into "TM" ("statistatm 2021")
    Case("trademark sign", plain("Statista™ 2021"), CREDIT, "AC1 SC1 VC1", "AC1 SC1 VC0"),
    Case(
        "dotted abbreviation",
        plain("billion U.S. dollars"),
        UNIT,
        "AC1 SC1 VC1",
        "AC1 SC1 VC0",
    ),
    Case(
        "badge preamble",
        plain("Badge: Gold Pacer", PROFILE_UI),
        BADGE,
        "AC1 SC1 VC1",
        "AC1 SC1 VC0",
    ),
    Case(
        "month-name date", plain("14 March 2021", PROFILE_UI), MEMBER, "AC1 SC1 VC0", "AC1 SC1 VC1"
    ),
    Case("ISO date", plain("2021-03-14", PROFILE_UI), MEMBER, "AC1 SC1 VC1", "AC1 SC1 VC1"),
    Case("enum with a gloss", plain("Kestrel valley"), VALLEY, "AC1 SC1 VC0", "AC1 SC1 VC0"),
    Case(
        "handle without its @",
        plain("trailrunner_maya", PROFILE_UI),
        HANDLE,
        "AC1 SC1 VC0",
        "AC1 SC1 VC1",
    ),
    # --- years ---------------------------------------------------------------------------------
    Case("year", plain("2019"), PEAK, "AC1 SC1 VC1", "AC1 SC1 VC1"),
    Case("year in a phrase", plain("In 2019"), PEAK, "AC1 SC1 VC0", "AC1 SC1 VC1"),
    Case("year with a full stop", plain("2019."), PEAK, "AC1 SC1 VC0", "AC1 SC1 VC1"),
    # --- unanswerable probes -------------------------------------------------------------------
    Case("correct refusal", "ANSWERABLE=NO\nSOURCE=NONE\nANSWER=NONE", NO, "AC1 HR0", "AC1 HR0"),
    Case("N/A answer", "ANSWERABLE=NO\nSOURCE=NONE\nANSWER=N/A", NO, "AC1 HR1", "AC1 HR1"),
    Case(
        "None with a full stop",
        "ANSWERABLE=NO\nSOURCE=NONE\nANSWER=None.",
        NO,
        "AC1 HR1",
        "AC1 HR0",
        paper="AC1 HR0",
        why="P4",
    ),
    Case(
        "NONE in angle brackets",
        "ANSWERABLE=NO\nSOURCE=<NONE>\nANSWER=<NONE>",
        NO,
        "AC1 HR1",
        "AC1 HR0",
        paper="AC1 HR0",
        why="P4",
    ),
    Case(
        "NONE in backticks",
        "ANSWERABLE=NO\nSOURCE=NONE\nANSWER=`NONE`",
        NO,
        "AC1 HR1",
        "AC1 HR0",
        paper="AC1 HR0",
        why="P3",
    ),
    Case(
        "refusal sentence as ANSWER",
        "ANSWERABLE=NO\nSOURCE=NONE\nANSWER=I don't know",
        NO,
        "AC1 HR1",
        "AC1 HR1",
    ),
    Case(
        "hallucinated answer",
        "ANSWERABLE=YES\nSOURCE=chart_3f9a1c20\nANSWER=512.3",
        NO,
        "AC0 HR1",
        "AC0 HR1",
    ),
    Case(
        "answer given with NO",
        "ANSWERABLE=NO\nSOURCE=NONE\nANSWER=512.3",
        NO,
        "AC1 HR1",
        "AC1 HR1",
    ),
    Case("no protocol at all", "New Jersey's GDP in 2019 was $556.73B.", GDP, "PF", "PF"),
    Case("empty reply", "", NO, "PF", "PF"),
]


def outcome(pf: bool, scored: ProbeScore | ProbeRecord) -> str:
    if pf:
        return "PF"
    names = ("AC", "HR") if scored.HR is not None else ("AC", "SC", "VC")
    return " ".join(f"{name}{getattr(scored, name)}" for name in names)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    """A workspace laid out as mirage-core's: originals, derived files, a dated note."""
    root = tmp_path_factory.mktemp("workspace")
    files = {
        f"artifacts/{CHART}.png": "PNG",
        f"derived/{CHART}.table.csv": "year,gdp\n2019,556.73\n",
        f"derived/{CHART}.summary.md": "# NJ real GDP\nLine chart of New Jersey's real GDP.\n",
        f"artifacts/{PROFILE_UI}.png": "PNG",
        f"derived/{PROFILE_UI}.summary.md": "Fitness profile screenshot.\n",
        f"artifacts/{NOTIFY_UI}.png": "PNG",
        "memory/2026-03-27.md": f"# 2026-03-27\n\n## GDP chart\nNJ real GDP ({CHART}): 556.73.\n",
    }
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return Workspace.open(root)


def _score(case: Case, profile: ProfileName, workspace: Workspace) -> ProbeScore:
    rules = get_profile(profile)
    return score_reply(case.reply, case.gold, rules.source_resolver(workspace), rules)


def test_the_suite_is_large_and_covers_every_departure() -> None:
    assert len(CASES) >= 60
    assert len({case.name + case.reply for case in CASES}) == len(CASES)
    documented = set(re.findall(r"\*\*([PM]\d+)\*\*", _metrics_doc()))
    cited = {case.why for case in CASES if case.why}
    assert cited <= documented, cited - documented
    assert {f"P{i}" for i in range(1, 11)} <= cited | {"P7"}  # P7 (a crash) has a unit test


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_paper_gives_the_released_outcome_or_a_documented_departure(
    case: Case, workspace: Workspace
) -> None:
    score = _score(case, "paper", workspace)
    assert outcome(score.outcome.pf, score) == case.expected_paper
    assert (case.paper is None) or case.why, "a departure must name its documented id"


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_lenient_gives_its_documented_outcome(case: Case, workspace: Workspace) -> None:
    score = _score(case, "lenient", workspace)
    assert outcome(score.outcome.pf, score) == case.lenient


def test_scale_expansion_that_cannot_parse_is_left_alone() -> None:
    """P7: the released code raises on "..万" (float('..')) and loses the probe."""
    from harness.mirage.scoring.paper_values import normalise_text, value_matches

    assert normalise_text("..万") == "..万"
    assert not value_matches("..万", "2 million steps", "string")
    assert normalise_text("9" * 400 + " million") == "9" * 400 + " million"  # overflow


def test_docs_list_every_paper_value_rule() -> None:
    """docs/metrics.md is the table of the rules: every text rule by name, every vocabulary."""
    from harness.mirage.scoring import paper_values as rules

    doc = _metrics_doc()
    missing = [rule.name for rule in rules.TEXT_RULES if f"`{rule.name}`" not in doc]
    assert not missing
    words = [*rules.APPROXIMATE_WORDS, *rules.ENGLISH_SCALES, *rules.CJK_SCALES, *rules.SYNONYMS]
    assert [word for word in words if word not in doc] == []


def _metrics_doc() -> str:
    return (Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text()


@pytest.mark.parametrize("profile", PROFILE_NAMES)
def test_mirage_rescore_gives_the_documented_outcomes(
    profile: ProfileName, workspace: Workspace, tmp_path: Path
) -> None:
    """Every parity reply stored in a results file, rescored by the CLI under each profile."""
    import typer
    from typer.testing import CliRunner

    from harness.kit.results import ResultsLog, read_records
    from harness.mirage.probing.records import RecordKey, build_record
    from mirage.cli.report import register

    with ResultsLog(tmp_path / "results.jsonl", ProbeRecord) as results:
        for index, case in enumerate(CASES):
            key = RecordKey("S1-d0", "C0", f"q{index:03d}", 0)
            other: ProfileName = "lenient" if profile == "paper" else "paper"
            results.append(build_record(key, case.reply, case.gold, None, other))
    app = typer.Typer()
    register(app)
    args = ["rescore", str(tmp_path), "--scoring", profile, "--workspace", str(workspace.root)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    records = read_records(tmp_path, ProbeRecord)
    expected = [case.expected_paper if profile == "paper" else case.lenient for case in CASES]
    assert [outcome(record.pf, record) for record in records] == expected
    assert {r.scoring for r in records} == {profile}
