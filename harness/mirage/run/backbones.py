"""The run's backbones by model string: a ready one the caller gave, a reference summarizer, or
``make_backbone`` (checked first, so an unknown model is one line, not a provider's trace).

Above: the run's layout and stages, the strategies. Below: ``runtime.backbones``,
``compaction.references``.
"""

from __future__ import annotations

from typing import Any

from harness.mirage.references import is_reference
from harness.mirage.run.errors import RunInputError
from runtime.backbones import LOCAL_PREFIX


class RunBackbones:
    def __init__(self, api_base: str | None, given: dict[str, Any] | None = None) -> None:
        self.api_base = api_base
        self.given = dict(given or {})

    def _api_base(self, model: str) -> str | None:
        return None if model.startswith(LOCAL_PREFIX) else self.api_base

    def check(self, models: list[str]) -> None:
        """Every model in ``models`` exists (ready ones and reference agents need no check)."""
        from runtime.backbones import check_model

        for model in dict.fromkeys(models):
            if model in self.given or is_reference(model):
                continue
            try:
                check_model(model, self._api_base(model))
            except ValueError as exc:
                raise RunInputError(str(exc)) from exc

    def backbone(self, model: str, max_output_tokens: int, **extra: Any) -> Any:
        from compaction.references import REFERENCE_SUMMARIZER_PREFIX, ReferenceSummarizer
        from runtime.backbones import check_model, make_backbone

        if model in self.given:
            return self.given[model]
        if model.startswith(REFERENCE_SUMMARIZER_PREFIX):
            try:
                return ReferenceSummarizer(model)
            except ValueError as exc:
                raise RunInputError(str(exc)) from exc
        options: dict[str, Any] = {"max_output_tokens": max_output_tokens, **extra}
        api_base = self._api_base(model)
        if api_base:
            options["api_base"] = api_base
        try:
            check_model(model, api_base)
        except ValueError as exc:
            raise RunInputError(str(exc)) from exc
        return make_backbone(model, **options)
