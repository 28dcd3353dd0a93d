"""The run's progress bars over an optional rich ``Progress`` (None: no display): the workspace,
the trunk's EIT, a compaction summary written in several chunks, the summary-format branches and
each answerer's probes per state; and the lines the run says above them (``say``; with no
display, in the log).

Above: the run's stages. Below: the display ``mirage run`` gives it (rich's live bars on a
terminal, ``mirage.cli.run.PlainProgress`` lines in a log), through the calls both have.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog

from compaction.strategies.base import ChunkProgress
from harness.kit.rundir import model_slug

log = structlog.get_logger(__name__)


class RunProgress:
    """One bar per stage; every method returns None (or does nothing) without a display."""

    def __init__(self, display: Any | None) -> None:
        self.display = display
        self._trunk_task: Any = None

    def counter(self, description: str, total: int) -> Callable[[Any], None] | None:
        """A callback that advances a new bar by one per call."""
        display = self.display
        if display is None:
            return None
        task = display.add_task(description, total=total)
        return lambda _item: display.advance(task)

    def workspace(self) -> Callable[[], None]:
        """Opens the workspace bar; the callback completes it."""
        display = self.display
        if display is None:
            return lambda: None
        task = display.add_task("workspace + index", total=1)
        return lambda: display.update(task, completed=1)

    def say(self, line: str) -> None:
        """``line`` above the bars (a line of its own in a log); with no display, in the log."""
        if self.display is None:
            log.info("run_note", note=line)
        else:
            self.display.console.print(line, markup=False, highlight=False)

    def summary_chunks(self) -> ChunkProgress | None:
        """A bar for each compaction summary written in more than one chunk, filled by chunks
        done (the display's ETA comes from them): ``compaction summary: chunk 3/14`` while the
        third is written."""
        display = self.display
        if display is None:
            return None
        task: list[Any] = []  # the bar of the summary under way

        def update(done: int, total: int) -> None:
            if done == 0:
                task.clear()  # a new summary
            text = _chunk_text(done, total)
            if not task and total > 1:
                task.append(display.add_task(text, total=total))
                if done == 0:
                    return
            if task:
                display.update(task[0], completed=done, total=total, description=text)

        return update

    def branches(self, total: int) -> Callable[[Any], None] | None:
        return self.counter("summary formats (S2 branches)", total)

    def probes(self, model: str, state: str, total: int) -> Callable[[Any], None] | None:
        return self.counter(f"{model_slug(model)} · {state}", total)

    def trunk(self, window: int) -> Callable[[int, int], None] | None:
        """The trunk's bar, filled by EIT up to ``window``: a ``(turn, eit)`` callback."""
        display = self.display
        if display is None:
            return None
        task = self._trunk_task = display.add_task("trunk (EIT)", total=window)

        def update(position: int, eit: int) -> None:
            display.update(
                task, completed=min(eit, window), description=f"trunk turn {position} · EIT {eit}"
            )

        return update

    def finish_trunk(self, window: int, turns: int) -> None:
        """The trunk's bar ends when every state is reached, short of the window."""
        if self.display is not None and self._trunk_task is not None:
            self.display.update(
                self._trunk_task,
                completed=window,
                description=f"trunk: {turns} turns, every state reached",
            )


def _chunk_text(done: int, total: int) -> str:
    if done >= total:
        return f"compaction summary: {total} chunks written"
    return f"compaction summary: chunk {done + 1}/{total}"
