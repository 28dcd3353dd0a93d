"""A small file in the CUE-Mem release format, with answer-stating fields set to a canary."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

CANARY = "CANARY-ANSWER-STATED-7f3a"
INSTRUCTION = "请在 A/B/C/D 中选择最符合的选项。"


def _question(stem: str, options: list[str]) -> str:
    lines = [stem, *(f"{letter}. {text}" for letter, text in zip("ABCD", options, strict=True))]
    return "\n".join([*lines, INSTRUCTION])


def _session(index: int, image_caption: str, voice_caption: str) -> dict[str, Any]:
    d = f"D{index:02d}"
    return {
        "session_id": d,
        "date": f"0{index + 1}/01/2025",
        "explicit_preferences": [CANARY],
        "implicit_preferences": [{"preference": CANARY}],
        "scene_description": CANARY,
        "dialogues": [
            {
                "round": f"{d}:00",
                "user": "My cat Mimi knocked over a glass again.",
                "assistant": "Cats will be cats.",
            },
            {
                "round": f"{d}:01",
                "user": "Look at my desk today.",
                "assistant": "Tidy!",
                "input_image": [f"../image/{d}/{d}-001.png"],
                "image_caption": [image_caption],
                "image_id": [f"{d}-001"],
            },
            {
                "round": f"{d}:02",
                "user": "",
                "user_voice_message_caption": "Remind me to buy milk.",
                "assistant": "Added milk.",
                "input_voice_message": [f"../voice/{d}/{d}-V01.wav"],
                "voice_caption": [voice_caption],
                "voice_id": [f"{d}-V01"],
            },
        ],
    }


def release_profile(
    image_caption: str = "A desk with a laptop; a small cactus at the edge.",
    voice_caption: str = "Remind me to buy milk, with a kettle boiling behind.",
) -> dict[str, Any]:
    qas = [
        {
            "qa_id": "0-Items-1",
            "question": _question(
                "Which plant sits on the user's desk?", ["Cactus", "Fern", "Orchid", "Bonsai"]
            ),
            "answer": "A",
            "point": "entity_img",
            "qa_type": "Items",
            "entity_explicitness": "implicit",
            "clue": ["D00-001", "D01-001", "D02-001"],
            "session_id": "D00",
            "p_id": 0,
            "category": "Items",
            "preference": CANARY,
            "answer_note": CANARY,
        },
        {
            "qa_id": "0-Pets-1",
            "question": _question(
                "What is the user's cat called?", ["Tom", "Mimi", "Luna", "Kiki"]
            ),
            "answer": "B",
            "point": "entity_text",
            "qa_type": "Pets",
            "clue": ["D00:00", "D01:00"],
            "session_id": "D00",
            "p_id": 0,
        },
        {
            "qa_id": "0-Food-1",
            "question": _question(
                "What does the user often add to the list?", ["Bread", "Eggs", "Milk", "Rice"]
            ),
            "answer": "C",
            "point": "pref_text",
            "qa_type": "explicit",
            "clue": ["D00-V01", "D02:02"],
            "session_id": "D00",
            "p_id": 0,
        },
        {
            "qa_id": "0-Home-1",
            "question": _question(
                "Which gift suits the user best?",
                ["A wool rug", "A desk lamp", "A glass vase", "A cat tree"],
            ),
            "answer": "D",
            "point": "rec_img",
            "qa_type": "implicit",
            "clue": ["D00:00"],
            "session_id": "D00",
            "p_id": 0,
        },
        {
            "qa_id": "0-Home-1-adv1",
            "question": _question(
                "Why did the user say they hate cats?",
                ["Allergy", "历史中没有说明", "Noise", "Fur"],
            ),
            "answer": "B",
            "point": "adversarial_text",
            "qa_type": "polarity_flip",
            "expression_type": "explicit",
            "clue": ["D00:00"],
            "session_id": "D00",
            "p_id": 0,
            "trap_reason": CANARY,
            "adversarial_answer": CANARY,
        },
        {
            "qa_id": "0-Items-2",
            "question": _question(
                "What colour is the user's laptop?", ["Grey", "Blue", "Red", "Green"]
            ),
            "answer": "A",
            "point": "entity_img",
            "qa_type": "Items",
            "entity_explicitness": "mixed",
            "clue": ["D00-001"],
            "session_id": "D00",
            "p_id": 0,
        },
    ]
    return {
        "character_profile": {"name": "Lin", "description": "A synthetic test user."},
        "multi_session_dialogues": [_session(i, image_caption, voice_caption) for i in range(3)],
        "human-annotated QAs": qas,
    }


def write_release(directory: Path, payload: dict[str, Any] | None = None, name: str = "p0") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"history_with_qa_{name}.json"
    path.write_text(json.dumps(payload or release_profile(), ensure_ascii=False), encoding="utf-8")
    return path


def mutated(change: Any) -> dict[str, Any]:
    payload = copy.deepcopy(release_profile())
    change(payload)
    return payload
