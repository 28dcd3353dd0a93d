"""Seeded sampling of filler turns from a ``FillerLibrary``.

Filler deepens the trunk conversation after planting (``T = C_plant ⊕ F``). The sampler walks
the library in episodes: a seeded shuffle of the tasks, and for each task one pass through its
stages with one template per stage and one value per slot, fixed for the episode so a task
reads as one coherent thread of requests; each turn may be framed by an opener and a closer.
When every task has had an episode the walk starts a new round with a fresh shuffle, so the
stream is unbounded and fully determined by the seed.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from harness.mirage.packs.schema import SLOT_PATTERN, FillerLibrary, FillerTask
from runtime.tokens import count_tokens

MAX_TURNS = 100_000


def fill_template(template: str, values: dict[str, str]) -> str:
    return SLOT_PATTERN.sub(lambda match: values[match.group(1)], template)


@dataclass(frozen=True)
class FillerTurn:
    task_id: str
    round: int
    stage: int
    text: str
    tokens: int


def _frame(options: list[str], rng: random.Random) -> str:
    return rng.choice(options).strip() if options else ""


def _episode(
    library: FillerLibrary, task: FillerTask, rng: random.Random, round_index: int
) -> Iterator[FillerTurn]:
    values = {name: rng.choice(options) for name, options in sorted(task.slots.items())}
    for stage_index, templates in enumerate(task.stages):
        body = fill_template(rng.choice(templates), values).strip()
        body = body[:1].upper() + body[1:]
        opener, closer = _frame(library.openers, rng), _frame(library.closers, rng)
        text = "\n\n".join(part for part in (opener, body, closer) if part)
        yield FillerTurn(task.id, round_index, stage_index, text, count_tokens(text))


def iter_filler(library: FillerLibrary, seed: int) -> Iterator[FillerTurn]:
    """An endless, seed-determined stream of filler turns."""
    rng = random.Random(seed)
    round_index = 0
    while True:
        order = list(library.tasks)
        rng.shuffle(order)
        for task in order:
            yield from _episode(library, task, rng, round_index)
        round_index += 1


def sample_filler(
    library: FillerLibrary,
    seed: int,
    n_turns: int | None = None,
    until_tokens: int | None = None,
) -> list[FillerTurn]:
    """The first ``n_turns`` turns, or the shortest prefix whose user text reaches
    ``until_tokens`` tokens (cl100k), of the stream for ``seed``."""
    if (n_turns is None) == (until_tokens is None):
        raise ValueError("give exactly one of n_turns or until_tokens")
    limit = n_turns if n_turns is not None else MAX_TURNS
    if limit < 0 or (until_tokens is not None and until_tokens < 0):
        raise ValueError("n_turns and until_tokens must be non-negative")
    turns: list[FillerTurn] = []
    total = 0
    stream = iter_filler(library, seed)
    while len(turns) < limit and (until_tokens is None or total < until_tokens):
        turn = next(stream)
        turns.append(turn)
        total += turn.tokens
    if until_tokens is not None and total < until_tokens:
        raise ValueError(f"filler stopped at {MAX_TURNS} turns before {until_tokens} tokens")
    return turns


def library_texts(library: FillerLibrary) -> Iterator[tuple[str, str]]:
    """Every piece a filler turn can be made of, with where it sits in the library: persona,
    openers and closers, each template (slots blanked) and each slot value."""
    yield "filler persona", library.persona
    for index, text in enumerate([*library.openers, *library.closers]):
        yield f"filler opener/closer {index}", text
    for task in library.tasks:
        for stage_index, stage in enumerate(task.stages):
            for variant, template in enumerate(stage):
                where = f"filler task {task.id} stage {stage_index} variant {variant}"
                yield where, SLOT_PATTERN.sub(" ", template)
        for slot, values in task.slots.items():
            for value in values:
                yield f"filler task {task.id} slot {slot} value {value!r}", value
