"""Logging set-up for the command line: structlog to stderr, quiet by default.

Library code only calls ``structlog.get_logger``; prompts and replies are never logged.
"""

from __future__ import annotations

import logging
import sys

import structlog


class _StderrLoggerFactory:
    """Looks ``sys.stderr`` up per logger, so a replaced or closed stream (tests) is not kept."""

    def __call__(self, *args: object) -> structlog.PrintLogger:
        return structlog.PrintLogger(sys.stderr)


def configure_logging(verbose: bool = False) -> None:
    level = logging.INFO if verbose else logging.WARNING
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="%H:%M:%S"),
            structlog.dev.ConsoleRenderer(colors=False),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=_StderrLoggerFactory(),
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(level=level, stream=sys.stderr)
