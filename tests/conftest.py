"""Suite-wide guard: a test that starts the embedded model (its llama.cpp worker process) must
be marked ``slow``, so the fast suite (``pytest``, the README's test command) stays fast."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from runtime.backbones.llama import worker as llama_worker
from runtime.backbones.llama.wire import ModelSpec

_current: list[pytest.Item] = []


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _current[:] = [item]


@pytest.fixture(autouse=True, scope="session")
def _embedded_model_only_in_slow_tests() -> Iterator[None]:
    start_worker = llama_worker._spawn

    def guarded(spec: ModelSpec) -> Any:
        test = _current[0] if _current else None
        if test is not None and test.get_closest_marker("slow") is None:
            pytest.fail(
                f"{test.nodeid} loads the embedded model: mark it @pytest.mark.slow",
                pytrace=False,
            )
        return start_worker(spec)

    llama_worker._spawn = guarded
    yield
    llama_worker._spawn = start_worker
