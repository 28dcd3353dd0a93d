"""Summary formats, one ``CompactionStrategy`` each, looked up by name with ``get_strategy``.

Names: ``verbatim`` (default), ``free-form``, ``per-fact-citations`` and ``template:FILE``.
"""

from __future__ import annotations

from collections.abc import Callable

from compaction.errors import TemplateError, UnknownStrategyError
from compaction.strategies.base import (
    PLACEHOLDERS,
    CompactionStrategy,
    PromptStrategy,
    SummaryRequest,
    SummaryResult,
)
from compaction.strategies.builtin import BuiltinStrategy, free_form, per_fact_citations, verbatim
from compaction.strategies.template import TEMPLATE_PREFIX, TemplateStrategy

BUILTIN: dict[str, Callable[[], BuiltinStrategy]] = {
    "verbatim": verbatim,
    "free-form": free_form,
    "per-fact-citations": per_fact_citations,
}
FORMAT_NAMES: tuple[str, ...] = (*BUILTIN, f"{TEMPLATE_PREFIX}FILE")


def get_strategy(name: str) -> CompactionStrategy:
    """The strategy for a format name; ``template:FILE`` reads and validates FILE now."""
    if name.startswith(TEMPLATE_PREFIX):
        path = name[len(TEMPLATE_PREFIX) :]
        if not path:
            raise TemplateError("give the template file after 'template:', e.g. template:my.txt")
        return TemplateStrategy(path)
    factory = BUILTIN.get(name)
    if factory is None:
        raise UnknownStrategyError(
            f"unknown summary format {name!r}; choose one of: {', '.join(FORMAT_NAMES)}"
        )
    return factory()


__all__ = [
    "FORMAT_NAMES",
    "PLACEHOLDERS",
    "CompactionStrategy",
    "PromptStrategy",
    "SummaryRequest",
    "SummaryResult",
    "TemplateStrategy",
    "get_strategy",
]
