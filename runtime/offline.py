"""Offline defaults for the whole project, applied before any heavy import.

Every package of mirage imports this module first (through ``runtime/__init__``), so a fresh
machine with no internet never tries a model hub, a price map, a telemetry endpoint or a
tokenizer download. Values a user already set in the environment are left alone.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def litellm_tokenizer_dir() -> Path | None:
    """Folder holding the cl100k/o200k BPE files that litellm ships."""
    root = _package_dir("litellm")
    if root is None:
        return None
    folder = root / "litellm_core_utils" / "tokenizers"
    return folder if folder.is_dir() else None


def apply() -> None:
    """Set the environment variables that keep every dependency offline."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    tokenizers = litellm_tokenizer_dir()
    if tokenizers is not None:
        # litellm overwrites TIKTOKEN_CACHE_DIR on import unless CUSTOM_TIKTOKEN_CACHE_DIR is set.
        os.environ.setdefault("CUSTOM_TIKTOKEN_CACHE_DIR", str(tokenizers))
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", os.environ["CUSTOM_TIKTOKEN_CACHE_DIR"])


def offline_env() -> dict[str, str]:
    """The variables to pass explicitly to child processes (the MCP stdio client forwards only
    a whitelist of the parent's environment)."""
    apply()
    keys = (
        "HF_HUB_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "HF_DATASETS_OFFLINE",
        "LITELLM_LOCAL_MODEL_COST_MAP",
        "ANONYMIZED_TELEMETRY",
        "TOKENIZERS_PARALLELISM",
        "CUSTOM_TIKTOKEN_CACHE_DIR",
        "TIKTOKEN_CACHE_DIR",
        "PATH",
        "HOME",
        "PYTHONPATH",
        "OPENBLAS_CORETYPE",
        "OPENBLAS_L2_SIZE",
    )
    return {key: os.environ[key] for key in keys if key in os.environ}


def quiet_litellm() -> ModuleType:
    """litellm, with its help banners off: it prints them to stdout (e.g. "Provider List: …" for
    a model it does not know), which would corrupt a command's output."""
    import litellm

    litellm.suppress_debug_info = True
    return litellm
