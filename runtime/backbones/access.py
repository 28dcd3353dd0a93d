"""Whether a litellm model can be called at all, asked before any work: its provider's key in
the environment, and a served model's endpoint answering.

The key: litellm says which environment variables a provider needs in
``litellm.validate_environment``, but importing litellm takes 6-12 s here, longer than a whole
refusal may. The function is one ``if``/``elif`` chain over providers, each branch a test of
``"NAME" in os.environ`` (joined by ``and``/``or``) and the names it reports missing; this module
reads that chain from litellm's installed source through ``ast`` (never executed, as
``runtime.backbones.names`` reads litellm's provider list) and evaluates the tests on this
process's environment. What it cannot read (a branch written otherwise, litellm's source moved)
is not checked: a model is never refused on a guess. Only credentials count (names with ``KEY`` or
``TOKEN``: an ``OLLAMA_API_BASE`` or ``VERTEXAI_PROJECT`` has a default or another source), and
providers that also authenticate from files or a cloud identity (``AMBIENT_CREDENTIALS``) are
not checked. An ``openai/`` model with an ``api_base`` needs no key: the backbone sends a
placeholder (``litellm_backbone._placeholder_key``). ``tests/backbones/test_model_access.py``
holds these answers against ``validate_environment``'s.

The endpoint: one TCP connect to the ``api_base``'s host and port (or to the proxy the HTTP
client would use for it) within ``ENDPOINT_TIMEOUT_S``; no request is sent.

``check_access`` asks all of it for a list of models: each one known (``check_model``), each
litellm model's key, and the ``api_base`` they are served at.

Above: ``harness.mirage.run.backbones.RunBackbones.check`` (``mirage run``) and ``mirage
compliance``. Below: litellm's ``utils.py`` and model map (read as files), sockets.
"""

from __future__ import annotations

import ast
import os
import re
import socket
import urllib.request
from collections.abc import Mapping, Sequence
from functools import cache
from typing import NamedTuple
from urllib.parse import urlsplit

from runtime.backbones.names import litellm_names, litellm_root, model_map

ENDPOINT_TIMEOUT_S = 2.0
"""A TCP handshake, with one lost SYN retransmitted after 1 s, fits."""
AMBIENT_CREDENTIALS = frozenset({"azure", "bedrock", "sagemaker", "vertex_ai"})
"""Providers that also authenticate without an environment variable (a credentials file, an
instance role, Entra ID): a missing variable does not mean a missing credential."""
_VALIDATOR = ("utils.py", "validate_environment")
_PROVIDER_VARIABLE = "custom_llm_provider"


class KeyRule(NamedTuple):
    """One provider branch of ``validate_environment``: the test that finds its credentials in
    the environment, and the names it reports missing otherwise."""

    test: ast.expr
    missing: tuple[str, ...]


def _providers_of(test: ast.expr) -> list[str]:
    """The providers a branch's test names: ``p == "x"``, ``p in ["x", "y"]``, joined by ``or``."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        return [name for value in test.values for name in _providers_of(value)]
    if not (isinstance(test, ast.Compare) and len(test.comparators) == 1):
        return []
    subject, (compared,) = test.left, test.comparators
    if not (isinstance(subject, ast.Name) and subject.id == _PROVIDER_VARIABLE):
        return []
    if isinstance(test.ops[0], ast.Eq):
        return [text] if (text := _text(compared)) is not None else []
    if isinstance(test.ops[0], ast.In) and isinstance(compared, ast.List | ast.Tuple):
        return [text for e in compared.elts if (text := _text(e)) is not None]
    return []


def _text(node: ast.expr) -> str | None:
    """A string literal's value (None for any other expression)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _reported(statements: list[ast.stmt]) -> tuple[str, ...] | None:
    """The names ``missing_keys.append(…)``/``.extend([…])`` report (None: one is not a plain
    string)."""
    names: list[str] = []
    for statement in statements:
        call = statement.value if isinstance(statement, ast.Expr) else None
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
            return None
        first = call.args[0] if call.args else None
        arguments = first.elts if isinstance(first, ast.List) else call.args
        values = [text for a in arguments if (text := _text(a)) is not None]
        if len(values) != len(arguments):
            return None
        names += values
    return tuple(names)


def _rule(body: list[ast.stmt]) -> KeyRule | None:
    if len(body) != 1 or not isinstance(body[0], ast.If):
        return None
    missing = _reported(body[0].orelse)
    return KeyRule(test=body[0].test, missing=missing) if missing else None


def _provider_chain(function: ast.FunctionDef) -> ast.If | None:
    """The ``if custom_llm_provider:`` chain's first branch."""
    for statement in function.body:
        if not (isinstance(statement, ast.If) and isinstance(statement.test, ast.Name)):
            continue
        if statement.test.id == _PROVIDER_VARIABLE and isinstance(statement.body[0], ast.If):
            return statement.body[0]
    return None


def _validator() -> ast.FunctionDef | None:
    """``validate_environment`` as litellm's installed source defines it: its text alone, from
    its ``def`` to the next top-level statement, is parsed (the whole module takes a second)."""
    root = litellm_root()
    try:
        source = root.joinpath(_VALIDATOR[0]).read_text("utf-8") if root else ""
    except OSError:
        return None
    start = source.find(f"\ndef {_VALIDATOR[1]}(")
    if start < 0:
        return None
    following = re.search(r"\n(?=[^\s#)])", source[start + 1 :])
    end = start + 1 + following.start() if following else len(source)
    try:
        tree = ast.parse(source[start + 1 : end])
    except SyntaxError:
        return None
    function = tree.body[0] if tree.body else None
    return function if isinstance(function, ast.FunctionDef) else None


@cache
def key_rules() -> Mapping[str, KeyRule] | None:
    """Provider → its rule, read from the installed litellm; None when its source is not where
    or what this module expects."""
    function = _validator()
    branch = _provider_chain(function) if function is not None else None
    rules: dict[str, KeyRule] = {}
    while branch is not None:
        rule = _rule(branch.body)
        for provider in _providers_of(branch.test):
            if rule is not None:
                rules.setdefault(provider, rule)  # the first branch wins, as in the chain
        following = branch.orelse
        branch = following[0] if len(following) == 1 and isinstance(following[0], ast.If) else None
    return rules or None


def _holds(test: ast.expr, environ: Mapping[str, str]) -> bool | None:
    """``test`` on ``environ`` (None: a form this module does not read)."""
    if isinstance(test, ast.BoolOp):
        values = [_holds(value, environ) for value in test.values]
        if None in values:
            return None
        return all(values) if isinstance(test.op, ast.And) else any(values)
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.In)
        and isinstance(test.left, ast.Constant)
        and isinstance(test.left.value, str)
        and ast.unparse(test.comparators[0]) == "os.environ"
    ):
        return test.left.value in environ
    return None


def provider_of(model: str) -> str | None:
    """``model``'s litellm provider when it can be told from the name alone: ``provider/name``
    with a provider litellm knows, or a bare name of its model map (its ``litellm_provider``)."""
    names = litellm_names()
    prefix, slash, rest = model.partition("/")
    if names is not None and slash and rest and prefix in names[0]:
        return prefix
    entry = (model_map() or {}).get(model)
    provider = entry.get("litellm_provider") if isinstance(entry, dict) else None
    return provider if isinstance(provider, str) else None


def missing_key(model: str, api_base: str | None) -> str | None:
    """The credential litellm needs for ``model`` and does not find in the environment, as
    ``OPENAI_API_KEY`` (or ``GOOGLE_API_KEY or GEMINI_API_KEY`` when either would do); None when
    nothing is missing, or when it cannot tell."""
    from runtime.backbones.litellm_backbone import _placeholder_key

    if _placeholder_key(model, api_base) is not None:
        return None  # a served model: the backbone sends a placeholder key
    provider = provider_of(model)
    rules = key_rules()
    if provider is None or rules is None or provider in AMBIENT_CREDENTIALS:
        return None
    rule = rules.get(provider)
    if rule is None or _holds(rule.test, os.environ) is not False:
        return None
    credentials = [name for name in rule.missing if _credential(name) and name not in os.environ]
    return " or ".join(credentials) or None


def _credential(name: str) -> bool:
    return "KEY" in name or "TOKEN" in name


def _connect_target(api_base: str) -> tuple[str, int, str | None]:
    """(host, port, proxy URL or None) a request to ``api_base`` connects to first."""
    parts = urlsplit(api_base)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("not an http(s) URL")
    proxy = urllib.request.getproxies().get(parts.scheme)
    if proxy and not urllib.request.proxy_bypass(parts.hostname):
        proxied = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        if proxied.hostname:
            return proxied.hostname, proxied.port or 80, proxy
    default = 443 if parts.scheme == "https" else 80
    return parts.hostname, parts.port or default, None


def endpoint_problem(api_base: str, timeout_s: float = ENDPOINT_TIMEOUT_S) -> str | None:
    """Why nothing answers a TCP connect to ``api_base`` (or its proxy) within ``timeout_s``,
    in a few words (``connection refused``); None when something does."""
    try:
        host, port, proxy = _connect_target(api_base)
    except ValueError as exc:
        return str(exc)
    via = f" at the proxy {proxy}" if proxy else ""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except ConnectionRefusedError:
        return f"connection refused{via}"
    except TimeoutError:
        return f"no answer within {timeout_s:g} s{via}"
    except socket.gaierror:
        return f"host {host} not found{via}"
    except OSError as exc:
        return f"{exc.strerror or exc}{via}"


def check_access(models: Sequence[str], api_base: str | None) -> None:
    """Raise ``ValueError`` (one line) when one of ``models`` cannot be called, before any
    call: an unknown model, a litellm model whose provider's key is not set, or an ``api_base``
    (where the litellm models are served) that does not answer. Embedded models need neither."""
    from runtime.backbones import LOCAL_PREFIX, check_model

    served = [model for model in models if not model.startswith(LOCAL_PREFIX)]
    for model in models:
        check_model(model, api_base if model in served else None)
    for model in served:
        missing = missing_key(model, api_base)
        if missing is not None:
            raise ValueError(f"{model} needs {missing} (not set)")
    problem = endpoint_problem(api_base) if served and api_base else None
    if problem is not None:
        raise ValueError(
            f"--api-base {api_base} does not answer ({problem}) for {', '.join(served)}"
        )
