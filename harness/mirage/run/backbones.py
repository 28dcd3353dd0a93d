"""The run's backbones by model string: a ready one the caller gave, a reference summarizer, or
``make_backbone`` (checked first, so an unknown model is one line, not a provider's trace).

Before any work, ``check`` asks of every model the run still needs what it can without calling
one: that its name is known, that its provider's key is in the environment, and that the
``--api-base`` a served model is reached at answers (``runtime.backbones.access``) — each problem
one line naming the model, instead of a trunk built and every probe failing after its retries.

Above: the run's layout and stages, the strategies. Below: ``runtime.backbones``,
``compaction.references``.
"""

from __future__ import annotations

from typing import Any

from harness.mirage.references import is_reference
from harness.mirage.run.errors import RunInputError
from runtime.backbones import DEFAULT_TIMEOUT_S, LOCAL_PREFIX
from runtime.backbones.base import Backbone


class RunBackbones:
    def __init__(
        self,
        api_base: str | None,
        given: dict[str, Any] | None = None,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.api_base = api_base
        self.given = dict(given or {})
        self.timeout_s = timeout_s

    def _api_base(self, model: str) -> str | None:
        return None if model.startswith(LOCAL_PREFIX) else self.api_base

    def check(self, models: list[str]) -> None:
        """Every model in ``models`` exists and, for a litellm model, has its provider's key
        and (with ``--api-base``) an endpoint that answers; ready backbones, reference agents
        and summarizers and embedded models call no provider and need no key."""
        from runtime.backbones.access import check_access

        needed = [m for m in dict.fromkeys(models) if m not in self.given and not is_reference(m)]
        try:
            check_access(needed, self.api_base)
        except ValueError as exc:
            raise RunInputError(str(exc)) from exc

    def backbone(
        self, model: str, max_output_tokens: int, *, context_window: int | None = None
    ) -> Backbone:
        """``model``'s backbone (``context_window``: a local model loaded with that many
        positions instead of its own)."""
        from compaction.references import REFERENCE_SUMMARIZER_PREFIX, ReferenceSummarizer
        from runtime.backbones import check_model, make_backbone

        if model in self.given:
            given: Backbone = self.given[model]
            return given
        if model.startswith(REFERENCE_SUMMARIZER_PREFIX):
            try:
                return ReferenceSummarizer(model)
            except ValueError as exc:
                raise RunInputError(str(exc)) from exc
        options: dict[str, Any] = {
            "max_output_tokens": max_output_tokens,
            "timeout_s": self.timeout_s,
        }
        if context_window is not None:
            options["context_window"] = context_window
        api_base = self._api_base(model)
        if api_base:
            options["api_base"] = api_base
        try:
            check_model(model, api_base)
        except ValueError as exc:
            raise RunInputError(str(exc)) from exc
        return make_backbone(model, **options)
