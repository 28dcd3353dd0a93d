"""Fixtures for compaction tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog
from typer.testing import CliRunner


@pytest.fixture
def cli_runner() -> Iterator[CliRunner]:
    """A CliRunner that restores the structlog configuration afterwards: the ``mirage`` root
    callback configures structlog with the runner's temporary stderr, which is closed once
    ``invoke`` returns, so later log calls in the test process would fail."""
    saved = structlog.get_config()
    yield CliRunner()
    structlog.configure(**saved)
