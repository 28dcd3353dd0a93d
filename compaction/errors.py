"""Errors raised by compaction, each with a message that says what to change."""

from __future__ import annotations


class CompactionError(Exception):
    """A compaction could not be carried out (nothing to compact, empty summary, a summarizer
    whose window cannot hold even a minimal prompt, …)."""


class NothingToCompact(CompactionError):
    """Every message already sits in the verbatim tail."""


class UnknownStrategyError(CompactionError, ValueError):
    """The requested summary format is not registered."""


class TemplateError(CompactionError, ValueError):
    """A ``template:FILE`` summary template is missing, unreadable or malformed."""
