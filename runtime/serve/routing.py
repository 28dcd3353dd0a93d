"""Which backbone answers a request: the endpoint's one seam.

Above: the endpoint (``runtime.serve.app``), which hands every validated request to a
``Router`` and calls the ``Backbone`` it returns. Below: any backbone. ``SingleBackbone``
serves one backbone under one model name; ``ModelTable`` serves several backbones, each under
its own name (the client picks by the request's ``model``, e.g. an agent configured with one
model for its conversation and another for compaction); ``RuleRouter`` picks per request with
predicates over the request (its messages, tools, model name and headers), e.g. scripted
replies for replayed turns and the real model for everything else. The endpoint renders the
prompt with the chosen backbone's profile and parses its reply with that profile's parser, so
routes may differ in tool mode and parser family.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from runtime.backbones.base import Backbone
from runtime.messages import Message, ToolSpec


class UnknownModel(LookupError):
    """The request names a model this endpoint does not serve (HTTP 404)."""


@dataclass(frozen=True)
class ServedRequest:
    """One validated request as a router sees it."""

    model: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    headers: Mapping[str, str] = field(default_factory=dict)
    """Lower-cased HTTP request headers."""


@runtime_checkable
class Router(Protocol):
    def model_names(self) -> list[str]:
        """The names listed by ``GET /v1/models``."""
        ...

    def choose(self, request: ServedRequest) -> Backbone:
        """The backbone that answers ``request``; raises ``UnknownModel``."""
        ...


def _check_name(requested: str, served: Sequence[str]) -> None:
    if requested not in served:
        raise UnknownModel(
            f"The model `{requested}` does not exist on this server; it serves: {', '.join(served)}"
        )


class SingleBackbone:
    """One backbone under one model name (default: the backbone's model string)."""

    def __init__(self, backbone: Backbone, name: str | None = None) -> None:
        self.backbone = backbone
        self.name = name or backbone.model

    def model_names(self) -> list[str]:
        return [self.name]

    def choose(self, request: ServedRequest) -> Backbone:
        _check_name(request.model, [self.name])
        return self.backbone


class ModelTable:
    """Several backbones, each served under its own name."""

    def __init__(self, backbones: Mapping[str, Backbone]) -> None:
        if not backbones:
            raise ValueError("a model table needs at least one backbone")
        self.backbones = dict(backbones)

    def model_names(self) -> list[str]:
        return list(self.backbones)

    def choose(self, request: ServedRequest) -> Backbone:
        _check_name(request.model, self.model_names())
        return self.backbones[request.model]


RequestPredicate = Callable[[ServedRequest], bool]


class RuleRouter:
    """The backbone of the first rule whose predicate holds, else ``default``."""

    def __init__(
        self,
        default: Backbone,
        rules: Sequence[tuple[RequestPredicate, Backbone]] = (),
        *,
        name: str | None = None,
    ) -> None:
        self.default = default
        self.rules = list(rules)
        self.name = name or default.model

    def model_names(self) -> list[str]:
        return [self.name]

    def choose(self, request: ServedRequest) -> Backbone:
        _check_name(request.model, [self.name])
        return next(
            (backbone for matches, backbone in self.rules if matches(request)), self.default
        )


def as_router(target: Backbone | Router, name: str | None = None) -> Router:
    if isinstance(target, Router):
        return target
    return SingleBackbone(target, name)


def with_output_budget(backbone: Backbone, max_output_tokens: int | None) -> Backbone:
    """``backbone`` answering with at most ``max_output_tokens`` (``Backbone.with_output_budget``),
    or as it is when the request sets no budget."""
    if max_output_tokens is None:
        return backbone
    return backbone.with_output_budget(max_output_tokens)
