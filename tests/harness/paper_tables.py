"""The paper's Table 1 and Table 2 (papers/mirage.txt, section 4.2) and per-probe replies built
to match Table 1, for the reproduction test.

``CELLS`` holds, per model and state, integer counts consistent with every printed Table 1 value
(found by a small search over denominators near the design of 100 answerable + 100 unanswerable
questions per state): recorded answerable/unanswerable probes (A, U), parse failures among them
(pf_a, pf_u), and over the parsed probes the SC, VC, GC, HR and AC counts. ``CROSS`` holds the
cross-state facts the paper states in its text: how many S1-d0-correct probes stay correct at
S1-d80k (Ret), mirage counts behind MI (Table 2, Figure 3), transition counts (Figure 4) and
source-drift counts (section 4.2.2). ``build_replies`` turns these into raw model replies with
gold annotations; the test then runs them through the real parser, scorer and aggregation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.mirage.scoring import Gold

STATES = ("S1-d0", "S1-d50k", "S1-d80k", "S2")
MODELS = (
    "GPT-5",
    "Claude-4.5-Haiku",
    "Qwen3-VL-4B",
    "Qwen3-VL-8B",
    "Qwen3-VL-30B",
    "InternVL3.5-20B",
    "Gemma-3-27B",
)
TABLE1_COLUMNS = ("AC", "SC", "VC", "GC", "HR", "WS", "PF")


@dataclass(frozen=True)
class Cell:
    A: int
    U: int
    pf_a: int
    pf_u: int
    s: int
    v: int
    g: int
    h: int
    c: int

    @property
    def a(self) -> int:
        return self.A - self.pf_a

    @property
    def u(self) -> int:
        return self.U - self.pf_u


CELLS: dict[tuple[str, str], Cell] = {
    ("GPT-5", "S1-d0"): Cell(100, 100, 2, 3, 92, 84, 84, 22, 166),
    ("GPT-5", "S1-d50k"): Cell(100, 100, 2, 2, 92, 82, 82, 24, 165),
    ("GPT-5", "S1-d80k"): Cell(100, 100, 1, 0, 93, 83, 82, 25, 167),
    ("GPT-5", "S2"): Cell(100, 100, 1, 1, 96, 85, 84, 19, 175),
    ("Claude-4.5-Haiku", "S1-d0"): Cell(100, 100, 1, 2, 94, 46, 46, 30, 159),
    ("Claude-4.5-Haiku", "S1-d50k"): Cell(100, 100, 2, 0, 82, 43, 43, 42, 145),
    ("Claude-4.5-Haiku", "S1-d80k"): Cell(100, 100, 0, 1, 75, 42, 41, 39, 142),
    ("Claude-4.5-Haiku", "S2"): Cell(100, 100, 0, 0, 73, 40, 36, 39, 146),
    ("Qwen3-VL-4B", "S1-d0"): Cell(100, 100, 0, 1, 71, 61, 54, 27, 154),
    ("Qwen3-VL-4B", "S1-d50k"): Cell(100, 98, 2, 1, 31, 31, 18, 51, 119),
    ("Qwen3-VL-4B", "S1-d80k"): Cell(100, 100, 0, 0, 3, 5, 1, 72, 110),
    ("Qwen3-VL-4B", "S2"): Cell(100, 99, 4, 1, 50, 43, 33, 52, 126),
    ("Qwen3-VL-8B", "S1-d0"): Cell(86, 87, 0, 0, 77, 62, 60, 50, 122),
    ("Qwen3-VL-8B", "S1-d50k"): Cell(100, 100, 0, 0, 78, 60, 54, 89, 109),
    ("Qwen3-VL-8B", "S1-d80k"): Cell(100, 100, 0, 0, 27, 47, 18, 82, 114),
    ("Qwen3-VL-8B", "S2"): Cell(100, 100, 0, 0, 79, 46, 44, 78, 115),
    ("Qwen3-VL-30B", "S1-d0"): Cell(100, 100, 0, 0, 82, 74, 72, 42, 143),
    ("Qwen3-VL-30B", "S1-d50k"): Cell(100, 100, 0, 0, 72, 62, 61, 33, 141),
    ("Qwen3-VL-30B", "S1-d80k"): Cell(100, 100, 0, 0, 47, 44, 41, 20, 131),
    ("Qwen3-VL-30B", "S2"): Cell(100, 100, 2, 1, 52, 39, 37, 28, 125),
    ("InternVL3.5-20B", "S1-d0"): Cell(100, 100, 15, 11, 64, 21, 17, 88, 92),
    ("InternVL3.5-20B", "S1-d50k"): Cell(100, 100, 13, 15, 1, 3, 1, 68, 90),
    ("InternVL3.5-20B", "S1-d80k"): Cell(100, 100, 5, 73, 0, 0, 0, 22, 66),
    ("InternVL3.5-20B", "S2"): Cell(100, 100, 6, 12, 57, 17, 13, 78, 103),
    ("Gemma-3-27B", "S1-d0"): Cell(100, 100, 0, 0, 96, 57, 57, 84, 111),
    ("Gemma-3-27B", "S1-d50k"): Cell(100, 100, 0, 0, 71, 45, 34, 86, 112),
    ("Gemma-3-27B", "S1-d80k"): Cell(100, 100, 1, 0, 70, 38, 29, 82, 114),
    ("Gemma-3-27B", "S2"): Cell(100, 100, 0, 0, 65, 43, 29, 88, 108),
}

# Table 1 as printed: AC SC VC GC HR WS (percent) and PF (count).
TABLE1: dict[tuple[str, str], tuple[float, ...]] = {
    ("GPT-5", "S1-d0"): (85.1, 93.9, 85.7, 85.7, 22.7, 6.1, 5),
    ("GPT-5", "S1-d50k"): (84.2, 93.9, 83.7, 83.7, 24.5, 6.1, 4),
    ("GPT-5", "S1-d80k"): (83.9, 93.9, 83.8, 82.8, 25.0, 6.1, 1),
    ("GPT-5", "S2"): (88.4, 97.0, 85.9, 84.8, 19.2, 3.0, 2),
    ("Claude-4.5-Haiku", "S1-d0"): (80.7, 94.9, 46.5, 46.5, 30.6, 5.1, 3),
    ("Claude-4.5-Haiku", "S1-d50k"): (73.2, 83.7, 43.9, 43.9, 42.0, 16.3, 2),
    ("Claude-4.5-Haiku", "S1-d80k"): (71.4, 75.0, 42.0, 41.0, 39.4, 25.0, 1),
    ("Claude-4.5-Haiku", "S2"): (73.0, 73.0, 40.0, 36.0, 39.0, 27.0, 0),
    ("Qwen3-VL-4B", "S1-d0"): (77.4, 71.0, 61.0, 54.0, 27.3, 29.0, 1),
    ("Qwen3-VL-4B", "S1-d50k"): (61.0, 31.6, 31.6, 18.4, 52.6, 68.4, 3),
    ("Qwen3-VL-4B", "S1-d80k"): (55.0, 3.0, 5.0, 1.0, 72.0, 97.0, 0),
    ("Qwen3-VL-4B", "S2"): (64.9, 52.1, 44.8, 34.4, 53.1, 47.9, 5),
    ("Qwen3-VL-8B", "S1-d0"): (70.5, 89.5, 72.1, 69.8, 57.5, 10.5, 0),
    ("Qwen3-VL-8B", "S1-d50k"): (54.5, 78.0, 60.0, 54.0, 89.0, 22.0, 0),
    ("Qwen3-VL-8B", "S1-d80k"): (57.0, 27.0, 47.0, 18.0, 82.0, 73.0, 0),
    ("Qwen3-VL-8B", "S2"): (57.5, 79.0, 46.0, 44.0, 78.0, 21.0, 0),
    ("Qwen3-VL-30B", "S1-d0"): (71.5, 82.0, 74.0, 72.0, 42.0, 18.0, 0),
    ("Qwen3-VL-30B", "S1-d50k"): (70.5, 72.0, 62.0, 61.0, 33.0, 28.0, 0),
    ("Qwen3-VL-30B", "S1-d80k"): (65.5, 47.0, 44.0, 41.0, 20.0, 53.0, 0),
    ("Qwen3-VL-30B", "S2"): (63.5, 53.1, 39.8, 37.8, 28.3, 46.9, 3),
    ("InternVL3.5-20B", "S1-d0"): (52.9, 75.3, 24.7, 20.0, 98.9, 24.7, 26),
    ("InternVL3.5-20B", "S1-d50k"): (52.3, 1.1, 3.4, 1.1, 80.0, 98.9, 28),
    ("InternVL3.5-20B", "S1-d80k"): (54.1, 0.0, 0.0, 0.0, 81.5, 100.0, 78),
    ("InternVL3.5-20B", "S2"): (56.6, 60.6, 18.1, 13.8, 88.6, 39.4, 18),
    ("Gemma-3-27B", "S1-d0"): (55.5, 96.0, 57.0, 57.0, 84.0, 4.0, 0),
    ("Gemma-3-27B", "S1-d50k"): (56.0, 71.0, 45.0, 34.0, 86.0, 29.0, 0),
    ("Gemma-3-27B", "S1-d80k"): (57.3, 70.7, 38.4, 29.3, 82.0, 29.3, 1),
    ("Gemma-3-27B", "S2"): (54.0, 65.0, 43.0, 29.0, 88.0, 35.0, 0),
}

# Table 2 as printed: DS, delta_comp, Ret, MI_d80k, OG at S1-d0, S1-d50k, S1-d80k, S2.
TABLE2: dict[str, tuple[float, ...]] = {
    "GPT-5": (3.4, 0.02, 94.0, 10.0, 0.00, 0.00, 0.01, 0.01),
    "Claude-4.5-Haiku": (11.8, -0.05, 73.9, 39.0, 0.00, 0.00, 0.01, 0.04),
    "Qwen3-VL-4B": (98.1, 0.33, 1.9, 26.0, 0.07, 0.13, 0.04, 0.10),
    "Qwen3-VL-8B": (74.2, 0.26, 21.7, 78.0, 0.02, 0.06, 0.29, 0.02),
    "Qwen3-VL-30B": (43.1, -0.03, 51.4, 9.0, 0.02, 0.01, 0.03, 0.02),
    "InternVL3.5-20B": (100.0, 0.14, 0.0, 39.0, 0.04, 0.02, 0.00, 0.04),
    "Gemma-3-27B": (48.6, -0.003, 42.1, 67.0, 0.00, 0.11, 0.09, 0.14),
}


@dataclass(frozen=True)
class Cross:
    """Cross-state facts stated in the paper's text, as counts."""

    ret_kept: int  # S1-d0-correct probes still correct at S1-d80k (Ret numerator)
    mirages: dict[str, int] = field(default_factory=dict)  # MI numerators per state
    ttt: int | None = None  # Figure 4: grounded at S1-d0, S1-d80k and S2
    tft: int | None = None  # Figure 4: grounded at S1-d0, lost at S1-d80k, recovered at S2
    drift: int = 0  # both-correct probes whose SOURCE text differs between S1-d0 and S1-d80k


CROSS: dict[str, Cross] = {
    "GPT-5": Cross(ret_kept=79, mirages={"S1-d80k": 10}, ttt=76, drift=24),
    "Claude-4.5-Haiku": Cross(ret_kept=34, mirages={"S1-d80k": 39}, drift=15),
    "Qwen3-VL-4B": Cross(ret_kept=1, mirages={"S1-d80k": 26}),
    "Qwen3-VL-8B": Cross(ret_kept=13, mirages={"S1-d80k": 78}, tft=26, drift=7),
    "Qwen3-VL-30B": Cross(ret_kept=37, mirages={"S1-d80k": 9}, drift=22),
    "InternVL3.5-20B": Cross(ret_kept=0, mirages={"S1-d80k": 39, "S2": 70}),
    "Gemma-3-27B": Cross(ret_kept=24, mirages={"S1-d80k": 67, "S2": 67}, drift=14),
}
# Source drift in percent as stated in section 4.2.2.
DRIFT_PERCENT = {
    "GPT-5": 30,
    "Claude-4.5-Haiku": 44,
    "Qwen3-VL-8B": 54,
    "Qwen3-VL-30B": 59,
    "Gemma-3-27B": 58,
}

ARTIFACTS = (
    "chart_3f9a1c20",
    "chart_b71e4d02",
    "chart_5c0a9e11",
    "chart_e2d8f6a7",
    "ui_profile_4a1d",
    "ui_notify_9b3e",
)
N_QUESTIONS = 100


def answerable_gold(index: int) -> Gold:
    source = ARTIFACTS[index % len(ARTIFACTS)]
    if source.startswith("ui_"):
        return Gold(answerable="YES", source=source, answer=f"user{index}", answer_type="string")
    return Gold(
        answerable="YES", source=source, answer=f"{10 * index + 7}.4", answer_type="numeric"
    )


def unanswerable_gold(index: int) -> Gold:
    return Gold(
        answerable="NO",
        answer_type="numeric" if index % 2 else "string",
        artifact=ARTIFACTS[index % len(ARTIFACTS)],
    )


# Reply shapes both scoring profiles read the same way: the plain protocol, a Gemma-style fenced
# JSON object, a fenced block after a preamble, and all fields on one line.
_TEMPLATES = (
    "ANSWERABLE={z}\nSOURCE={src}\nANSWER={ans}",
    '```json\n{{"ANSWERABLE": "{z_lower}", "SOURCE": "{src}", "ANSWER": "{ans}"}}\n```',
    "Here is my reply.\n```\nANSWERABLE = {z}\nSOURCE = {src}\nANSWER = {ans}\n```",
    "ANSWERABLE={z} SOURCE={src} ANSWER={ans}",
)
_PF_REPLIES = (
    "I believe the value is {ans}.",
    "ANSWERABLE={z}\nSOURCE={src}",
    "ANSWERABLE=MAYBE\nSOURCE={src}\nANSWER={ans}",
    "",
)


def reply(z: str, src: str, ans: str, variant: int) -> str:
    template = _TEMPLATES[variant % len(_TEMPLATES)]
    return template.format(z=z, z_lower=z.lower(), src=src, ans=ans)


def pf_reply(variant: int) -> str:
    return _PF_REPLIES[variant % len(_PF_REPLIES)].format(z="YES", src="NONE", ans="42")


def _correct_value(gold: Gold, variant: int) -> str:
    assert gold.answer is not None
    if gold.answer_type == "string":
        return gold.answer.upper() if variant % 2 else gold.answer
    return ("about " if variant % 3 == 0 else "") + gold.answer


def _wrong_value(gold: Gold, variant: int) -> str:
    if variant % 2:
        return "NONE"
    return "someone" if gold.answer_type == "string" else "99999"


def _right_source(gold: Gold, variant: int) -> str:
    assert gold.source is not None
    forms = (gold.source, f"artifacts/{gold.source}.png", f"derived/{gold.source}.table.csv")
    return forms[variant % len(forms)]


def _wrong_source(gold: Gold, variant: int) -> str:
    if variant % 2:
        return "NONE"
    return next(a for a in ARTIFACTS if a != gold.source)


def correct_sets(model: str) -> dict[str, list[int]]:
    """Answerable question indices grounded (GC=1) per state, honouring CROSS."""
    cells = {state: CELLS[(model, state)] for state in STATES}
    cross = CROSS[model]
    g0, g80, g2 = cells["S1-d0"].g, cells["S1-d80k"].g, cells["S2"].g
    k = cross.ret_kept
    ttt = cross.ttt if cross.ttt is not None else min(k, g2)
    tft = cross.tft if cross.tft is not None else min(g0 - k, g2 - ttt)
    ftt = min(g80 - k, g2 - ttt - tft)
    sizes = {
        (1, 1, 1): ttt, (1, 1, 0): k - ttt, (1, 0, 1): tft, (1, 0, 0): g0 - k - tft,
        (0, 1, 1): ftt, (0, 1, 0): g80 - k - ftt, (0, 0, 1): g2 - ttt - tft - ftt,
    }  # fmt: skip
    assert all(size >= 0 for size in sizes.values()), (model, sizes)
    sets: dict[str, list[int]] = {"S1-d0": [], "S1-d80k": [], "S2": []}
    next_index = 0
    for pattern, size in sizes.items():
        members = list(range(next_index, next_index + size))
        next_index += size
        for state, flag in zip(("S1-d0", "S1-d80k", "S2"), pattern, strict=True):
            if flag:
                sets[state].extend(members)
    sets["S1-d50k"] = list(range(cells["S1-d50k"].g))
    return sets


def _yes_counts(cell: Cell, mirages: int | None) -> tuple[int, int]:
    """(answerable YES, unanswerable NO) among parsed probes, consistent with AC and HR."""
    if mirages is not None:
        yes_a = cell.g + mirages
    else:
        yes_a = cell.c - min(cell.u, max(cell.u - cell.h, cell.c - cell.a))
    no_u = cell.c - yes_a
    assert cell.g <= yes_a <= cell.a and 0 <= cell.u - no_u <= cell.h, (cell, yes_a)
    return yes_a, no_u


@dataclass(frozen=True)
class Probe:
    state: str
    question_id: str
    gold: Gold
    raw_output: str


def _answerable_probes(model: str, state: str, correct: list[int]) -> list[Probe]:
    cell, cross = CELLS[(model, state)], CROSS[model]
    yes_a, _ = _yes_counts(cell, cross.mirages.get(state))
    rest = sorted(set(range(N_QUESTIONS)) - set(correct))
    sc_only, rest = rest[: cell.s - cell.g], rest[cell.s - cell.g :]
    vc_only, rest = rest[: cell.v - cell.g], rest[cell.v - cell.g :]
    neither, rest = (
        rest[: cell.a - cell.s - cell.v + cell.g],
        rest[cell.a - cell.s - cell.v + cell.g :],
    )
    failed = rest[: cell.pf_a]
    claims_yes = set(correct) | set((sc_only + vc_only + neither)[: yes_a - cell.g])
    both = sorted(set(correct_sets(model)["S1-d0"]) & set(correct_sets(model)["S1-d80k"]))
    drifted = set(both[: cross.drift])
    probes = []
    for index in (*correct, *sc_only, *vc_only, *neither):
        gold = answerable_gold(index)
        source_ok, value_ok = (
            index in correct or index in sc_only,
            index in correct or index in vc_only,
        )
        src = _right_source(gold, index) if source_ok else _wrong_source(gold, index)
        if index in both and state in ("S1-d0", "S1-d80k"):
            src = (
                f"artifacts/{gold.source}.png"
                if state == "S1-d80k" and index in drifted
                else str(gold.source)
            )
        ans = _correct_value(gold, index) if value_ok else _wrong_value(gold, index)
        z = "YES" if index in claims_yes else "NO"
        probes.append(Probe(state, f"a{index:03d}", gold, reply(z, src, ans, index)))
    probes += [Probe(state, f"a{i:03d}", answerable_gold(i), pf_reply(i)) for i in failed]
    return probes


def _unanswerable_probes(model: str, state: str) -> list[Probe]:
    cell, cross = CELLS[(model, state)], CROSS[model]
    _, no_u = _yes_counts(cell, cross.mirages.get(state))
    yes_u = cell.u - no_u
    probes = []
    for index in range(cell.U):
        gold = unanswerable_gold(index)
        if index < yes_u:
            raw = reply("YES", ARTIFACTS[index % len(ARTIFACTS)], "42", index)
        elif index < cell.h:
            raw = reply("NO", "NONE", "7", index)
        elif index < cell.u:
            raw = reply("NO", "NONE", "NONE", index)
        else:
            raw = pf_reply(index)
        probes.append(Probe(state, f"u{index:03d}", gold, raw))
    return probes


def build_probes(model: str) -> list[Probe]:
    """Every recorded C0 probe of one model over the four states (one run)."""
    sets = correct_sets(model)
    probes: list[Probe] = []
    for state in STATES:
        probes += _answerable_probes(model, state, sets[state])
        probes += _unanswerable_probes(model, state)
    return probes
