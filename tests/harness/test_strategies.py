"""The run and its strategies talk one way (issue 46, item 2): the run asks, a strategy answers
with values and never calls back. Checked here: every strategy is a declared ``RunStrategy``
(an ABC of few members, no ``Any`` in the contract), no module of the strategies imports the run,
the contract's values name no run type, a strategy answers from the values it is handed, and the
run turns each kind's answers into the models it checks first."""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import typing
from pathlib import Path

import pytest

from harness.kit.attribution import AttributedAgent
from harness.mirage.config import RunConfig
from harness.mirage.run import MirageRun
from harness.mirage.strategies import (
    AgentKind,
    Answering,
    Probes,
    RunContext,
    RunStrategy,
    strategy_for,
)
from harness.mirage.strategies.builtin import BuiltinStrategy
from harness.mirage.strategies.external import ExternalStrategy
from harness.mirage.strategies.openclaw import OpenClawStrategy
from harness.mirage.trunk.checkpoints import SCRIPTED_TRUNK_MODEL
from tests.test_layers import ROOT, import_graph

STRATEGIES = ROOT / "harness" / "mirage" / "strategies"
SUMMARIZER = "reference/keep-charts"


def test_every_strategy_declares_the_contract_of_few_members() -> None:
    assert RunStrategy.__abstractmethods__ == {"kind", "answerers", "trunk_window", "probes"}
    for strategy in (BuiltinStrategy, ExternalStrategy, OpenClawStrategy):
        assert issubclass(strategy, RunStrategy) and not strategy.__abstractmethods__
    public = {name for name in vars(RunStrategy) if not name.startswith("_")}
    assert public == {"kind", "answerers", "trunk_window", "probes", "agent_software"}


def test_the_contract_names_no_any_and_no_run_type() -> None:
    tree = ast.parse((STRATEGIES / "base.py").read_text(encoding="utf-8"))
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    assert "Any" not in names
    import harness.mirage.strategies.base as base

    namespace = dict(vars(base))
    for node in tree.body:  # the names imported for the type checker only
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            exec(compile(ast.Module(node.body, []), "base.py", "exec"), namespace)
    for value in (AgentKind, RunContext, Answering, Probes):
        hints = typing.get_type_hints(value, namespace)
        named = {str(hint) for hint in hints.values()}
        assert not [hint for hint in named if "harness.mirage.run" in hint], (value, named)


def test_no_strategy_imports_the_run() -> None:
    graph = import_graph(ROOT, "harness")
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if module.startswith("harness.mirage.strategies")
        for target in targets
        if target.startswith("harness.mirage.run")
    )
    assert not upward, upward


def _config(tmp_path: Path, **options: object) -> RunConfig:
    base: dict[str, object] = {
        "trunk_model": SCRIPTED_TRUNK_MODEL,
        "summarizer_model": SUMMARIZER,
        "out": tmp_path / "run",
    }
    return RunConfig(**{**base, **options})  # type: ignore[arg-type]


def test_a_strategy_answers_from_the_values_it_is_handed(tmp_path: Path) -> None:
    """A strategy on mirage's trunk gets the family in the context and gives the agent per
    answerer, on a memory server the run opens (no memory of its own, a readable context)."""
    run = MirageRun(_config(tmp_path, models=["reference/retriever"], references=False))
    folder = run.answerers()["reference/retriever"]
    context = run.context(index=None, family={})  # type: ignore[arg-type]  # not used by it
    assert all(
        not isinstance(getattr(context, f.name), MirageRun) for f in dataclasses.fields(context)
    )

    async def answered() -> tuple[Probes, Answering | None]:
        async with run.strategy.probes(context) as probes:
            return probes, probes.answering("reference/retriever", folder)

    probes, answering = asyncio.run(answered())
    assert probes.checkpoints == {}
    assert answering is not None and answering.memory is None and answering.own_context is None
    assert isinstance(answering.agent, AttributedAgent)
    assert answering.agent.attributor.call_log == folder / "calls.jsonl"


@pytest.mark.parametrize(
    ("options", "kind", "checked"),
    [
        (
            {"models": ["hosted/a", "reference/retriever"], "references": False},
            BuiltinStrategy,
            ["hosted/a", "reference/retriever", SUMMARIZER],
        ),
        ({"agent": "cmd:true", "agent_model": "hosted/a"}, ExternalStrategy, [SUMMARIZER]),
        (
            {"agent": "openclaw", "models": ["hosted/a"], "window": 16_384},
            OpenClawStrategy,
            ["hosted/a"],
        ),
    ],
    ids=["builtin", "external", "openclaw"],
)
def test_the_models_checked_first_follow_each_kinds_answers(
    tmp_path: Path, options: dict[str, object], kind: type[RunStrategy], checked: list[str]
) -> None:
    """Before anything is built: the answerers that are models, and mirage's trunk models when
    its family is not built (an agent that builds its own trunk: its answering model only)."""
    config = _config(tmp_path, **options)
    assert type(strategy_for(config)) is kind
    run = MirageRun(config)
    assert run.models_to_check() == checked
    assert run.family_id() == (
        None if run.strategy.kind.builds_trunk else run.family.directory.name
    )
