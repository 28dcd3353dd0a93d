"""Photos and voice messages from their descriptions, with every caption level written from the
same description — so a caption says exactly what the picture or the recording holds.

Image levels (paper C.3): ``brief`` names the dominant subject and the place; ``medium`` adds
the background objects; ``detailed`` also enumerates the peripheral objects at the edges of
the frame (where implicit cues sit). Audio levels: ``asr`` is the speech alone; ``hint``
describes speech and background together; ``split`` gives the speech and a separately captioned
background track.

Photos are drawn with Pillow (font shipped with matplotlib, palette PNG without timestamps), so
a rebuild is byte-identical: a labelled shape per object, the foreground large in the middle,
background objects behind it, peripheral objects small along the edges among clutter.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from harness.kit.packfiles import pil_font, save_pil_png, wrap_text

WIDTH, HEIGHT = 400, 260
INK = (34, 34, 40)


class Scene(BaseModel):
    model_config = ConfigDict(frozen=True)

    place: str
    foreground: str
    background: tuple[str, ...]
    peripheral: tuple[str, ...] = ()


class Recording(BaseModel):
    model_config = ConfigDict(frozen=True)

    speech: str
    background: str | None = None


def join_items(items: tuple[str, ...] | list[str]) -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def image_captions(scene: Scene) -> dict[str, str]:
    brief = f"A photo of {scene.foreground} {scene.place}."
    medium = f"{brief[:-1]}, with {join_items(scene.background)} behind it."
    detailed = medium
    if scene.peripheral:
        detailed += f" Around the edges of the frame: {join_items(scene.peripheral)}."
    return {"brief": brief, "medium": medium, "detailed": detailed}


def audio_captions(recording: Recording) -> dict[str, str]:
    speech, background = recording.speech, recording.background
    if background:
        hint = f'The user says "{speech}" while {background} can be heard in the background.'
        split = f'Speech: "{speech}" Background sound: {background}.'
    else:
        hint = f'The user says "{speech}" in a quiet room.'
        split = f'Speech: "{speech}" Background sound: none.'
    return {"asr": f'"{speech}"', "hint": hint, "split": split}


def _colour(name: str, light: bool = False) -> tuple[int, int, int]:
    digest = hashlib.sha256(name.encode("utf-8")).digest()
    base = 190 if light else 90
    spread = 55 if light else 130
    return (base + digest[0] % spread, base + digest[1] % spread, base + digest[2] % spread)


def _label(draw: Any, box: tuple[int, int, int, int], text: str, size: int) -> None:
    font = pil_font(size)
    left, top, right, bottom = box
    lines = wrap_text(draw, text.removeprefix("a ").removeprefix("an "), font, right - left - 6)
    line_height = size + 2
    y = (top + bottom) // 2 - line_height * len(lines) // 2
    for line in lines:
        draw.text(((left + right) // 2, y), line, font=font, fill=INK, anchor="ma")
        y += line_height


def _object(draw: Any, box: tuple[int, int, int, int], name: str, size: int) -> None:
    draw.rounded_rectangle(box, radius=8, fill=_colour(name), outline=INK, width=1)
    inner = (box[0] + 3, box[1] + 3, box[2] - 3, box[3] - 3)
    draw.rounded_rectangle(inner, radius=6, fill=_colour(name, light=True))
    _label(draw, box, name, size)


EDGE_SLOTS: tuple[tuple[int, int], ...] = (
    (4, 6),
    (WIDTH - 96, 6),
    (4, 104),
    (WIDTH - 96, 104),
    (4, HEIGHT - 56),
    (WIDTH - 96, HEIGHT - 56),
)


def render_scene(scene: Scene, path: Path, key: str) -> None:
    """Draw ``scene`` to ``path``; ``key`` (the image id) seeds where peripheral objects sit."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (WIDTH, HEIGHT), _colour(scene.place, light=True))
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, HEIGHT * 2 // 3, WIDTH, HEIGHT), fill=_colour(scene.place + "floor"))
    draw.text((WIDTH // 2, HEIGHT - 16), scene.place, font=pil_font(10), fill=INK, anchor="ma")
    for index, item in enumerate(scene.background[:2]):
        left = 112 + index * 92
        _object(draw, (left, 28, left + 84, 82), item, 10)
    _object(draw, (120, 96, 280, 196), scene.foreground, 13)
    slots = list(EDGE_SLOTS)
    random.Random(key).shuffle(slots)
    for (left, top), item in zip(slots, scene.peripheral, strict=False):
        _object(draw, (left, top, left + 92, top + 50), item, 9)
    save_pil_png(image, path)
