"""The import rule (docs/architecture.md): imports run one way, harness → compaction /
memory_server → runtime, and only the composition root ``mirage`` imports every package.

Every module of every package is read with ``ast``, including imports inside functions and under
``TYPE_CHECKING``, relative imports, and ``importlib.import_module("…")`` with a literal name.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
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
    module = _module_name(path, root)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield node.lineno, _absolute(node, module, path.name == "__init__.py")
        elif isinstance(node, ast.Call) and (target := _dynamic_import(node)) is not None:
            yield node.lineno, target


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
