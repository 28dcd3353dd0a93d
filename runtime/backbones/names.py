"""Whether litellm can tell a model string's provider, answered without importing litellm.

``import litellm`` takes ~6.5 s here, so asking ``litellm.get_llm_provider`` made every usage
error of ``mirage run`` (an unknown ``--model`` or ``--summarizer``) take 8-11 s. litellm
decides a provider from data it ships: the ``LlmProviders`` enum (``litellm/types/utils.py``),
its JSON-configured OpenAI-compatible providers (``llms/openai_like/providers.json``) and its
local model map (``model_prices_and_context_window_backup.json``). This module reads the same
files (the enum through ``ast``, never executed) and answers in milliseconds:

- ``provider/name`` with a provider litellm knows: known (a provider's own model-name format,
  such as ``ragflow/chat/{id}/{model}``, is checked by litellm when the backbone is made);
- a name litellm's model map holds (litellm resolves some of them, by rules of its own), an
  ``api_base`` that may name an endpoint litellm knows, or data files not where this litellm
  keeps them: ``None``, ask litellm itself;
- anything else: unknown.

Above: ``runtime.backbones.check_model``. Below: the installed litellm's data files.
``tests/backbones/test_model_names.py`` holds its answers against ``get_llm_provider``'s.
"""

from __future__ import annotations

import ast
import json
from functools import cache
from importlib.util import find_spec
from pathlib import Path

_ENUM_FILE = ("types", "utils.py")
_ENUM_CLASS = "LlmProviders"
_JSON_PROVIDERS = ("llms", "openai_like", "providers.json")
_MODEL_MAP = ("model_prices_and_context_window_backup.json",)


def litellm_root() -> Path | None:
    """The installed litellm package's folder (found, never imported)."""
    spec = find_spec("litellm")
    locations = spec.submodule_search_locations if spec is not None else None
    return Path(next(iter(locations))) if locations else None


def _enum_values(source: str, class_name: str) -> set[str]:
    """The string values assigned in ``class_name``'s body in ``source``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            return {
                statement.value.value
                for statement in node.body
                if isinstance(statement, ast.Assign)
                and isinstance(statement.value, ast.Constant)
                and isinstance(statement.value.value, str)
            }
    return set()


@cache
def model_map() -> dict[str, object] | None:
    """litellm's local model map (model name → its entry), read as a file; None when this
    litellm keeps it elsewhere."""
    root = litellm_root()
    try:
        models = json.loads(root.joinpath(*_MODEL_MAP).read_text("utf-8")) if root else None
    except (OSError, ValueError):
        return None
    return models if isinstance(models, dict) else None


@cache
def litellm_names() -> tuple[frozenset[str], frozenset[str]] | None:
    """(providers, bare model names) litellm knows, read from its files; None when this
    litellm keeps them elsewhere."""
    root = litellm_root()
    models = model_map()
    if root is None or models is None:
        return None
    try:
        providers = _enum_values(root.joinpath(*_ENUM_FILE).read_text("utf-8"), _ENUM_CLASS)
        json_file = root.joinpath(*_JSON_PROVIDERS)
        if json_file.is_file():
            providers |= set(json.loads(json_file.read_text("utf-8")))
    except (OSError, ValueError, SyntaxError):
        return None
    if not providers:
        return None
    return frozenset(providers), frozenset(models)


def provider_known(model: str, api_base: str | None = None) -> bool | None:
    """True when litellm can tell ``model``'s provider, False when it cannot, None when only
    litellm itself can say (an ``api_base`` it may recognise, or its files not found)."""
    names = litellm_names()
    if names is None:
        return None
    providers, models = names
    prefix, slash, rest = model.partition("/")
    if slash and rest and prefix in providers:
        return True
    if model in models or api_base:  # litellm resolves only some of its map's bare names
        return None
    return False
