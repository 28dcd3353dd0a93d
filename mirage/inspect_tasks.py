"""The Inspect tasks mirage offers (``inspect eval mirage/probe -T run=DIR``; docs/inspect.md).

Above: Inspect, which loads this module through the ``inspect_ai`` entry point named ``mirage``
(pyproject.toml) when a task name starts with ``mirage/``. Below: ``harness.mirage.inspect.task``
(the samples, the restoring setup solver, mirage's scorer). Needs the ``inspect`` extra.
"""

from __future__ import annotations

from pathlib import Path

from inspect_ai import Task, task
from inspect_ai._util.package import get_installed_package_name
from inspect_ai.solver import generate

from harness.mirage.inspect.task import ProbeSession, mirage_scorer, restore_checkpoint

PACKAGE = "mirage"


def _name(short: str) -> str:
    """``mirage/<short>`` as Inspect's registry will hold it: Inspect prefixes the package name
    itself when it finds the package installed under that name, not for an editable install
    of the ``mirage-eval`` distribution."""
    return short if get_installed_package_name(_name) == PACKAGE else f"{PACKAGE}/{short}"


@task(name=_name("probe"))
def probe(run: str, name: str = "inspect", out: str | None = None) -> Task:
    """The probes of the checkpoint family a ``mirage run`` built in ``run`` (its states,
    conditions, questions and repeats); the solver (``--solver``, default ``generate()`` on
    ``--model``) answers each after a fresh restore of its checkpoint, with the memory server
    as MCP tools; mirage's scorer writes each probe's record to ``out`` (default
    ``run/<name>``) under the answerer name ``name``."""
    session = ProbeSession(Path(run), name, Path(out) if out else None)
    return Task(
        dataset=session.samples(),
        setup=restore_checkpoint(session),
        solver=generate(),
        scorer=mirage_scorer(session),
        metadata={"mirage_run": str(Path(run).resolve()), "results": str(session.out)},
    )
