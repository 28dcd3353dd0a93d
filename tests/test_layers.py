"""The import rules (docs/architecture.md):

- imports run one way, harness → compaction / memory_server → runtime, and only the composition
  root ``mirage`` imports every package;
- inside ``harness``, the kit (``harness.kit``) imports no protocol, and a protocol
  (``harness.mirage``, ``harness.cue``) imports the kit, never the other protocol;
- no import circles among the modules of one package;
- inside ``harness.mirage``, the stages of Algorithm 1 and what serves them import downwards only,
  in the order of ``MIRAGE_STAGES``.

Every module of every package is read with ``ast``, including imports inside functions and under
``TYPE_CHECKING``, relative imports, and ``importlib.import_module("…")`` with a literal name.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("runtime", "compaction", "memory_server", "harness", "mirage")
MAY_IMPORT: dict[str, frozenset[str]] = {
    "runtime": frozenset(),
    "compaction": frozenset({"runtime"}),
    "memory_server": frozenset({"runtime"}),
    "harness": frozenset({"runtime", "compaction", "memory_server"}),
    "mirage": frozenset({"runtime", "compaction", "memory_server", "harness"}),
}


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imported_names(path: Path, root: Path) -> Iterator[tuple[int, str]]:
    """(line, module) of every import in the file at ``path``."""
    yield from ((line, names[0]) for line, names in _imports(path, root))


def _imports(path: Path, root: Path) -> Iterator[tuple[int, list[str]]]:
    """(line, what one import names): ``[X]`` for ``import X`` (and a dynamic import),
    ``[X, X.a, X.b]`` for ``from X import a, b`` (``a`` may be a submodule or a name)."""
    module = _module_name(path, root)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, [alias.name]) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, module, path.name == "__init__.py")
            yield node.lineno, [base, *(f"{base}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Call) and (target := _dynamic_import(node)) is not None:
            yield node.lineno, [target]


def _dynamic_import(node: ast.Call) -> str | None:
    """The module of ``importlib.import_module("…")`` or ``__import__("…")``."""
    function = node.func
    name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
    if name not in {"import_module", "__import__"} or not node.args:
        return None
    first = node.args[0]
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def upward_imports(root: Path) -> list[str]:
    """One line per import that goes against the rule, naming the file, line and target."""
    problems = []
    for package in PACKAGES:
        allowed = MAY_IMPORT[package] | {package}
        for path in sorted((root / package).rglob("*.py")):
            for line, target in imported_names(path, root):
                top = target.split(".")[0]
                if top in PACKAGES and top not in allowed:
                    may = ", ".join(sorted(MAY_IMPORT[package])) or "no other mirage package"
                    problems.append(
                        f"{path.relative_to(root)}:{line} imports {target} "
                        f"({package} may import {may})"
                    )
    return problems


KIT = "harness.kit"
PROTOCOLS = ("harness.mirage", "harness.cue")
KNOWN_CIRCLES: list[frozenset[str]] = []
"""Circles that exist and are being removed; delete an entry once its circle is gone."""


def _part(module: str) -> str | None:
    """The kit or protocol ``module`` belongs to (None: not inside one)."""
    return next((p for p in (KIT, *PROTOCOLS) if module == p or module.startswith(p + ".")), None)


def harness_layer_problems(root: Path) -> list[str]:
    """One line per import inside ``harness`` that crosses the kit/protocol rule, and per
    module that sits outside the kit and the protocols."""
    problems = []
    for path in sorted((root / "harness").rglob("*.py")):
        module, where = _module_name(path, root), path.relative_to(root)
        own = _part(module)
        if own is None:
            if module != "harness":
                problems.append(
                    f"{where} is in neither {KIT} nor a protocol ({', '.join(PROTOCOLS)})"
                )
            continue
        for line, names in _imports(path, root):
            target = next((name for name in names if _part(name) is not None), names[0])
            theirs = _part(target)
            if theirs is None or theirs in (own, KIT):
                continue
            rule = "the kit imports no protocol" if own == KIT else f"{own} never imports {theirs}"
            problems.append(f"{where}:{line} imports {target} ({rule})")
    return problems


def import_graph(root: Path, package: str) -> dict[str, dict[str, int]]:
    """module -> {module it imports: line} among the modules of ``package``: ``from X import a``
    imports ``X.a`` when that is a module, else ``X``; any other name, the longest module it
    names."""
    paths = {_module_name(p, root): p for p in sorted((root / package).rglob("*.py"))}
    graph: dict[str, dict[str, int]] = {}
    for module, path in paths.items():
        edges = graph.setdefault(module, {})
        for line, (base, *members) in _imports(path, root):
            targets = [name for name in members if name in paths]
            if len(targets) < len(members) or not members:
                targets.append(base)  # a name defined in ``base`` itself, or ``import base``
            for found in filter(None, (_longest_module(t, paths) for t in targets)):
                if found != module:
                    edges.setdefault(found, line)
    return graph


def _longest_module(name: str, modules: Mapping[str, object]) -> str | None:
    parts = name.split(".")
    prefixes = (".".join(parts[:n]) for n in range(len(parts), 0, -1))
    return next((prefix for prefix in prefixes if prefix in modules), None)


def _reachable(graph: dict[str, dict[str, int]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Each group of modules that import each other, directly or not (sorted)."""
    reach = {module: _reachable(graph, module) for module in graph}
    groups = {
        frozenset(m for m in reach[module] if module in reach[m]) | {module}
        for module in graph
        if module in reach[module]
    }
    return sorted(sorted(group) for group in groups)


def circle_problems(root: Path) -> list[str]:
    """One line per import circle inside a package, naming each module and the import line."""
    problems = []
    for package in PACKAGES:
        graph = import_graph(root, package)
        for group in circles(graph):
            if frozenset(group) in KNOWN_CIRCLES:
                continue
            links = [
                f"{a} -> {b} (line {graph[a][b]})" for a in group for b in group if b in graph[a]
            ]
            problems.append(f"import circle in {package}: " + "; ".join(links))
    return problems


def test_imports_run_one_way() -> None:
    problems = upward_imports(ROOT)
    assert not problems, "upward imports:\n" + "\n".join(problems)


def test_every_package_is_checked() -> None:
    on_disk = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests", "benchmarks"}
    assert on_disk == set(PACKAGES)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import harness.mirage.run\n", "runtime/x.py:1 imports harness.mirage.run"),
        (
            "def f():\n    from memory_server import server\n",
            "runtime/x.py:2 imports memory_server",
        ),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import mirage\n",
            ":3 imports mirage",
        ),
        (
            "import importlib\nimportlib.import_module('compaction.cli')\n",
            ":2 imports compaction.cli",
        ),
        ("from ..harness import run\n", "runtime/x.py:1 imports harness"),
    ],
)
def test_an_upward_import_is_named_with_its_line(
    tmp_path: Path, source: str, expected: str
) -> None:
    for package in PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "runtime" / "x.py").write_text(source)
    (tmp_path / "harness" / "ok.py").write_text("import runtime\nfrom compaction import x\n")
    (problem,) = upward_imports(tmp_path)
    assert expected in problem and "runtime may import no other mirage package" in problem


def test_the_kit_imports_no_protocol_and_protocols_not_each_other() -> None:
    problems = harness_layer_problems(ROOT)
    assert not problems, "kit/protocol imports:\n" + "\n".join(problems)


def test_no_import_circles_inside_a_package() -> None:
    problems = circle_problems(ROOT)
    assert not problems, "\n".join(problems)


def test_every_known_circle_still_exists() -> None:
    found = {frozenset(g) for package in PACKAGES for g in circles(import_graph(ROOT, package))}
    gone = [sorted(known) for known in KNOWN_CIRCLES if known not in found]
    assert not gone, f"circles {gone} are gone: delete them from KNOWN_CIRCLES"


def _harness_tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for package in ("harness", "harness/kit", "harness/mirage", "harness/cue"):
        (tmp_path / package).mkdir(parents=True, exist_ok=True)
        (tmp_path / package / "__init__.py").write_text("")
    for name, source in files.items():
        (tmp_path / name).write_text(source)
    return tmp_path


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (
            {"harness/kit/x.py": "def f():\n    from harness.mirage import run\n"},
            "harness/kit/x.py:2 imports harness.mirage (the kit imports no protocol)",
        ),
        (
            {"harness/cue/x.py": "from harness.mirage.probing.records import ProbeRecord\n"},
            "harness/cue/x.py:1 imports harness.mirage.probing.records (harness.cue never imports "
            "harness.mirage)",
        ),
        (
            {"harness/mirage/x.py": "from harness import cue\n"},
            "harness/mirage/x.py:1 imports harness.cue (harness.mirage never imports harness.cue)",
        ),
        (
            {"harness/shared.py": "import harness.kit\n"},
            "harness/shared.py is in neither harness.kit nor a protocol",
        ),
    ],
)
def test_a_kit_or_protocol_violation_is_named(
    tmp_path: Path, files: dict[str, str], expected: str
) -> None:
    root = _harness_tree(tmp_path, {**files, "harness/cue/ok.py": "from harness.kit import x\n"})
    problems = harness_layer_problems(root)
    assert len(problems) == 1 and expected in problems[0], problems


MIRAGE = "harness.mirage"
MIRAGE_STAGES = (
    "protocol",  # the paper's definitions: states, conditions, profiles
    "scoring",  # ANSWERABLE / SOURCE / ANSWER and the metrics
    "packs",  # the evidence and its filler
    "trunk",  # T = plant ⊕ filler and its checkpoints
    "probing",  # one restore, one probe, one record
    "references",  # the reference agents that calibrate both axes
    "costs",
    "report",  # summary.json, report.md, figures, comparisons
    "openclaw",  # the real OpenClaw's trunk, probes and options
    "config",  # RunConfig: every option of mirage run
    "study",  # study files
    "strategies",  # what differs per kind of agent
    "run",  # MirageRun: the stages in order
    "inspect",  # Inspect's task and logs over finished runs
)
"""``harness.mirage``'s sub-packages and root modules, lowest first: each imports only those
before it (and the kit, and the packages below ``harness``)."""
KNOWN_UPWARD: set[tuple[str, str]] = set()
"""Upward imports that exist and are being removed (issue 46, item 2: one direction between the
run and its strategies); delete an entry once it is gone."""


def _stage(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != MIRAGE.split(".") or len(parts) < 3:
        return None
    return parts[2]


def stage_problems(root: Path) -> list[str]:
    """One line per import inside ``harness.mirage`` that goes up the stage order, and per
    sub-package or root module the order does not place."""
    graph = import_graph(root, "harness")
    rank = {stage: n for n, stage in enumerate(MIRAGE_STAGES)}
    problems = []
    for module, targets in sorted(graph.items()):
        stage = _stage(module)
        if stage is None:
            continue
        if stage not in rank:
            problems.append(f"{module}: {stage} has no place in MIRAGE_STAGES")
            continue
        for target, line in targets.items():
            theirs = _stage(target)
            upward = theirs in rank and rank[theirs] > rank[stage]
            if upward and (module, target) not in KNOWN_UPWARD:
                problems.append(f"{module}:{line} imports {target} ({stage} is below {theirs})")
    return problems


def test_the_stages_of_the_protocol_import_downwards_only() -> None:
    problems = stage_problems(ROOT)
    assert not problems, "\n".join(problems)


def test_every_known_upward_import_still_exists() -> None:
    graph = import_graph(ROOT, "harness")
    gone = sorted(edge for edge in KNOWN_UPWARD if edge[1] not in graph.get(edge[0], {}))
    assert not gone, f"{gone} are gone: delete them from KNOWN_UPWARD"


def test_the_root_of_the_protocol_holds_at_most_four_modules() -> None:
    root_modules = sorted(p.name for p in (ROOT / "harness" / "mirage").glob("*.py"))
    assert len(root_modules) <= 4, root_modules


def test_an_upward_stage_import_is_named(tmp_path: Path) -> None:
    root = _harness_tree(
        tmp_path,
        {
            "harness/mirage/trunk.py": "from harness.mirage import protocol\n",
            "harness/mirage/protocol.py": "\ndef f():\n    from harness.mirage.trunk import x\n",
            "harness/mirage/elsewhere.py": "",
        },
    )
    assert stage_problems(root) == [
        "harness.mirage.elsewhere: elsewhere has no place in MIRAGE_STAGES",
        "harness.mirage.protocol:3 imports harness.mirage.trunk (protocol is below trunk)",
    ]


def test_an_import_circle_is_named_even_through_a_function(tmp_path: Path) -> None:
    for package in PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "compaction" / "a.py").write_text("from compaction import b\n")
    (tmp_path / "compaction" / "b.py").write_text(
        "import os\n\ndef f():\n    import compaction.c\n"
    )
    (tmp_path / "compaction" / "c.py").write_text("from compaction.a import thing\n")
    (tmp_path / "compaction" / "d.py").write_text("from compaction import a\n")  # no circle
    (problem,) = circle_problems(tmp_path)
    assert problem == (
        "import circle in compaction: compaction.a -> compaction.b (line 1); "
        "compaction.b -> compaction.c (line 4); compaction.c -> compaction.a (line 1)"
    )
