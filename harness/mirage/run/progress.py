"""The run's progress bars over an optional rich ``Progress`` (None: no display): the workspace,
the trunk's EIT, the summary-format branches and each answerer's probes per state."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.kit.rundir import model_slug


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
