"""Textualization: one memory unit per dialogue round, with its images and voice messages as
captions at the chosen levels — what every textual memory system under test ingests.

Above: the memory systems (full context, naive RAG, the memory server's workspace) and the
validation of support. Below: a profile's history (``ProfileHistory``). Only the history is read:
the question bank never reaches this module, so nothing a memory system sees can state an answer
that the user and the assistant did not exchange.

A round becomes (as the release does for text memories, docs/cue.md):

    [D03:01 · 2025-03-14] Maya: Made ramen from scratch tonight!
    Image D03-001: A photo of a bowl of ramen on a kitchen counter. ...
    Assistant: That looks great.

A voice message is written ``Maya (voice message D04-V01): <caption>``; a release voice caption
that repeats the user's voice text is not written twice.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from harness.cue.schema import AudioLevel, ImageLevel, ProfileHistory, Round


class MemoryUnit(BaseModel):
    """One round as text: the unit every system stores, retrieves and counts."""

    model_config = ConfigDict(frozen=True)

    round_id: str
    session_id: str
    date: str
    text: str


def round_text(
    round_: Round, date: str, name: str, image_level: ImageLevel, audio_level: AudioLevel
) -> str:
    lines = []
    voice_text = round_.user_voice.get(audio_level) if round_.user_voice else None
    head = f"[{round_.round} · {date}]"
    if round_.user:
        lines.append(f"{head} {name}: {round_.user}")
    elif voice_text:
        lines.append(f"{head} {name} (voice message): {voice_text}")
    else:
        lines.append(head)
    for image in round_.images:
        lines.append(f"Image {image.id}: {image.captions[image_level]}")
    for voice in round_.voices:
        caption = voice.captions[audio_level]
        if voice_text and caption.strip() in voice_text:
            continue
        speaker = f"{name} (voice message {voice.id})" if not round_.user else f"Voice {voice.id}"
        lines.append(f"{speaker}: {caption}")
    if round_.assistant:
        lines.append(f"Assistant: {round_.assistant}")
    return "\n".join(lines)


def textualize(
    history: ProfileHistory, image_level: ImageLevel, audio_level: AudioLevel
) -> list[MemoryUnit]:
    """Every round of ``history`` in order, as text at the given caption levels."""
    return [
        MemoryUnit(
            round_id=round_.round,
            session_id=session.session_id,
            date=session.date,
            text=round_text(round_, session.date, history.name, image_level, audio_level),
        )
        for session in history.sessions
        for round_ in session.rounds
    ]
