"""Derivations: small structured queries that compute a gold answer from an artifact's data.

A question may carry ``derivation: {op: ..., ...}``; evaluating it against the artifact's
generating data (a JSON document) either yields the gold answer or raises ``NoSupport`` when
the data does not contain what the question asks about. The pack builder computes every gold
this way, and the validator and tests re-derive them, so no gold is ever typed by hand.

Paths are lists of keys/indices into the JSON document. Operations:

- ``get`` ``path``: the value at ``path``.
- ``diff`` ``a``, ``b``: value(a) - value(b).  ``sum`` ``paths``: the total.
- ``pct_change`` ``from``, ``to``: percentage change, one decimal.
- ``argmax`` / ``argmin`` ``path`` [``by``, ``key``]: the key (of a mapping) or the ``key``
  field (of a list of records, compared on ``by``) holding the largest / smallest value.
- ``count`` ``path`` [``where``] [``above``, ``by``]: how many entries match.
- ``find`` ``path``, ``where``, ``field``: a field of the single record matching ``where``.
- ``larger`` ``a``, ``b``, ``labels``: the label of the larger of two values.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from harness.mirage.packs.schema import AnswerType


class NoSupport(LookupError):
    """The data holds nothing that answers the derivation."""


class DerivationError(ValueError):
    """The derivation itself is malformed (unknown op, missing argument, wrong types)."""


@dataclass(frozen=True)
class Derived:
    value: Any
    decimals: int = 0


def load_data(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def lookup(data: Any, path: Sequence[Any]) -> Any:
    node = data
    for step in path:
        if isinstance(node, Mapping) and str(step) in node:
            node = node[str(step)]
        elif isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node):
            node = node[step]
        else:
            raise NoSupport(f"no {step!r} under {list(path)!r}")
    return node


def decimals_of(number: Any) -> int:
    if isinstance(number, bool) or not isinstance(number, int | float):
        raise DerivationError(f"expected a number, got {number!r}")
    exponent = Decimal(repr(number)).as_tuple().exponent
    return max(0, -int(exponent)) if isinstance(number, float) else 0


def _number(data: Any, path: Sequence[Any]) -> tuple[float, int]:
    value = lookup(data, path)
    return float(value), decimals_of(value)


def _arg(spec: Mapping[str, Any], name: str) -> Any:
    if name not in spec:
        raise DerivationError(f"derivation op {spec.get('op')!r} needs argument {name!r}")
    return spec[name]


def _get(data: Any, spec: Mapping[str, Any]) -> Derived:
    value = lookup(data, _arg(spec, "path"))
    if isinstance(value, Mapping | list):
        raise DerivationError(f"path {spec['path']!r} leads to a container, not a value")
    return Derived(value, decimals_of(value) if isinstance(value, int | float) else 0)


def _diff(data: Any, spec: Mapping[str, Any]) -> Derived:
    a, a_dec = _number(data, _arg(spec, "a"))
    b, b_dec = _number(data, _arg(spec, "b"))
    return Derived(a - b, max(a_dec, b_dec))


def _sum(data: Any, spec: Mapping[str, Any]) -> Derived:
    numbers = [_number(data, path) for path in _arg(spec, "paths")]
    return Derived(sum(value for value, _ in numbers), max(dec for _, dec in numbers))


def _pct_change(data: Any, spec: Mapping[str, Any]) -> Derived:
    start, _ = _number(data, _arg(spec, "from"))
    end, _ = _number(data, _arg(spec, "to"))
    if start == 0:
        raise NoSupport("percentage change from zero is undefined")
    return Derived((end - start) / start * 100, 1)


def _scored_entries(data: Any, spec: Mapping[str, Any]) -> list[tuple[str, float]]:
    container = lookup(data, _arg(spec, "path"))
    if isinstance(container, Mapping):
        return [(str(key), float(value)) for key, value in container.items()]
    if isinstance(container, list):
        by, key = _arg(spec, "by"), _arg(spec, "key")
        return [(str(lookup(item, [key])), float(lookup(item, [by]))) for item in container]
    raise DerivationError(f"path {spec['path']!r} is not a mapping or list")


def _extreme(pick: Callable[[list[float]], float]) -> Callable[[Any, Mapping[str, Any]], Derived]:
    def evaluate(data: Any, spec: Mapping[str, Any]) -> Derived:
        entries = _scored_entries(data, spec)
        if not entries:
            raise NoSupport(f"nothing under {spec['path']!r}")
        best = pick([value for _, value in entries])
        winners = [key for key, value in entries if value == best]
        if len(winners) > 1:
            raise DerivationError(f"tie between {winners}: the question has no single answer")
        return Derived(winners[0])

    return evaluate


def _matches(item: Any, where: Mapping[str, Any]) -> bool:
    return isinstance(item, Mapping) and all(item.get(k) == v for k, v in where.items())


def _count(data: Any, spec: Mapping[str, Any]) -> Derived:
    if "above" in spec:
        threshold = float(spec["above"])
        return Derived(sum(1 for _, value in _scored_entries(data, spec) if value > threshold))
    container = lookup(data, _arg(spec, "path"))
    if not isinstance(container, list | Mapping):
        raise DerivationError(f"path {spec['path']!r} is not countable")
    items = list(container.values()) if isinstance(container, Mapping) else container
    where = spec.get("where", {})
    count = sum(1 for item in items if _matches(item, where)) if where else len(items)
    if where and count == 0 and spec.get("zero_is_no_support", True):
        raise NoSupport(f"no entry under {spec['path']!r} matches {dict(where)!r}")
    return Derived(count)


def _find(data: Any, spec: Mapping[str, Any]) -> Derived:
    container = lookup(data, _arg(spec, "path"))
    where = _arg(spec, "where")
    matches = [item for item in container if _matches(item, where)]
    if not matches:
        raise NoSupport(f"no entry under {spec['path']!r} matches {dict(where)!r}")
    if len(matches) > 1:
        raise DerivationError(f"{len(matches)} entries match {dict(where)!r}")
    field = _arg(spec, "field")
    return _get(matches[0], {"path": field if isinstance(field, list) else [field]})


def _larger(data: Any, spec: Mapping[str, Any]) -> Derived:
    a, _ = _number(data, _arg(spec, "a"))
    b, _ = _number(data, _arg(spec, "b"))
    labels = _arg(spec, "labels")
    if a == b:
        raise DerivationError("the two values are equal: no larger one")
    return Derived(labels[0] if a > b else labels[1])


OPERATIONS: dict[str, Callable[[Any, Mapping[str, Any]], Derived]] = {
    "get": _get,
    "diff": _diff,
    "sum": _sum,
    "pct_change": _pct_change,
    "argmax": _extreme(max),
    "argmin": _extreme(min),
    "count": _count,
    "find": _find,
    "larger": _larger,
}


def derive(data: Any, spec: Mapping[str, Any]) -> Derived:
    op = spec.get("op")
    if op not in OPERATIONS:
        raise DerivationError(f"unknown derivation op {op!r}; known: {sorted(OPERATIONS)}")
    return OPERATIONS[op](data, spec)


def format_answer(result: Derived, answer_type: AnswerType, decimals: int | None = None) -> str:
    """The canonical gold string for a derived value."""
    value = result.value
    if answer_type is AnswerType.numeric:
        places = result.decimals if decimals is None else decimals
        rounded = round(float(value), places)
        return f"{rounded:.{places}f}" if places > 0 else str(round(rounded))
    return str(value)
