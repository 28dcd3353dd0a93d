"""The code's shape, as issue 35 measures it: what a reader of ``mirage run`` has to hold.

- the longest classes and functions in ``harness/`` and ``mirage/cli/`` (lines, ``def`` to end,
  decorators left out) and how many are over 250 / 60 lines;
- the ``run --model`` walk: a short real run (scripted trunk, reference summarizer, the
  retriever reference agent, 2 questions) traced in-process; every project function counts at
  its first call, and the files of those first calls, in call order with repeats collapsed, are
  the walk: how many files it visits and how often it returns to a file it had left (over every
  package, and over ``harness/mirage/`` and ``mirage/cli/`` alone);
- OpenClaw mentions outside its packages (``harness/kit/agents/openclaw/``,
  ``harness/mirage/openclaw/``, ``harness/mirage/strategies/openclaw.py``), in the shipped
  packages (not tests, benchmarks or the ``mirage agents`` command that installs it), split into
  code (names, imports, string literals) and prose (docstrings, comments).

    python benchmarks/bench_code_shape.py [--root DIR] [--no-walk]

``--root`` measures another checkout (e.g. a worktree of an older commit). Prints the numbers
and writes benchmarks/results/code_shape.json.
"""

from __future__ import annotations

import argparse
import ast
import io
import os
import subprocess
import sys
import tempfile
import tokenize
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from _common import write_results

SHAPE_ROOTS = ("harness", "mirage/cli")
PACKAGES = ("harness", "mirage", "runtime", "compaction", "memory_server")
OPENCLAW_HOMES = (
    "harness/kit/agents/openclaw/",
    "harness/mirage/openclaw/",
    "harness/mirage/strategies/openclaw.py",
    "mirage/cli/agents.py",
)
WALK_ARGS = [
    "run",
    "--model",
    "reference/retriever",
    "--trunk-model",
    "scripted",
    "--summarizer",
    "reference/keep-charts",
    "--limit",
    "2",
    "--no-calibration",
]


def _sources(root: Path, folders: tuple[str, ...]) -> list[Path]:
    return sorted(p for folder in folders for p in (root / folder).rglob("*.py"))


def longest(root: Path) -> dict[str, Any]:
    classes: list[tuple[int, str]] = []
    functions: list[tuple[int, str]] = []
    for path in _sources(root, SHAPE_ROOTS):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                where = f"{path.relative_to(root)}:{node.lineno} {node.name}"
                (classes if isinstance(node, ast.ClassDef) else functions).append((size, where))
    classes.sort(reverse=True)
    functions.sort(reverse=True)
    return {
        "classes_over_250": [f"{n} {w}" for n, w in classes if n > 250],
        "functions_over_60": [f"{n} {w}" for n, w in functions if n > 60],
        "longest_classes": [f"{n} {w}" for n, w in classes[:5]],
        "longest_functions": [f"{n} {w}" for n, w in functions[:5]],
    }


def _docstring_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for statement in body:  # a string statement anywhere in a body is prose
            value = statement.value if isinstance(statement, ast.Expr) else None
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                end = statement.end_lineno or statement.lineno
                lines.update(range(statement.lineno, end + 1))
    return lines


def openclaw_mentions(root: Path) -> dict[str, Any]:
    code: dict[str, list[int]] = {}
    prose: dict[str, list[int]] = {}
    for path in _sources(root, PACKAGES):
        name = str(path.relative_to(root))
        if name.startswith(OPENCLAW_HOMES):
            continue
        text = path.read_text(encoding="utf-8")
        if "openclaw" not in text.lower():
            continue
        docstrings = _docstring_lines(ast.parse(text))
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if "openclaw" not in token.string.lower():
                continue
            rows = range(token.start[0], token.end[0] + 1)
            is_prose = token.type == tokenize.COMMENT or token.start[0] in docstrings
            for row in rows:
                line = text.splitlines()[row - 1].lower()
                if "openclaw" in line:
                    bucket = prose if is_prose else code
                    bucket.setdefault(name, [])
                    if row not in bucket[name]:
                        bucket[name].append(row)
    return {
        "code_lines": sum(len(v) for v in code.values()),
        "code_files": len(code),
        "code": {k: sorted(v) for k, v in sorted(code.items())},
        "prose_lines": sum(len(v) for v in prose.values()),
        "prose_files": len(prose),
    }


WALK_SCRIPT = """
import json, sys
from pathlib import Path
root = Path(sys.argv[1]).resolve()
packages = ("harness", "mirage", "runtime", "compaction", "memory_server")
homes = tuple(str(root / p) for p in packages)
seen, files = set(), []
def profile(frame, event, arg):
    if event != "call":
        return
    code = frame.f_code
    if code in seen or not code.co_filename.startswith(homes):
        return
    seen.add(code)
    name = str(Path(code.co_filename).relative_to(root))
    if not files or files[-1] != name:
        files.append(name)
sys.setprofile(profile)
from mirage.cli import main
trace_file = sys.argv[2]
sys.argv = ["mirage", *sys.argv[3:]]
try:
    main()
except SystemExit:
    pass
sys.setprofile(None)
Path(trace_file).write_text(json.dumps(files))
"""


def walk(root: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out, trace = Path(tmp) / "run", Path(tmp) / "walk.json"
        env = {**os.environ, "PYTHONPATH": str(root)}
        command = [sys.executable, "-c", WALK_SCRIPT, str(root), str(trace)]
        subprocess.run([*command, *WALK_ARGS, "--out", str(out)], env=env, check=True, cwd=tmp)
        import json

        files = json.loads(trace.read_text())
    run_files = [f for f in files if f.startswith(("harness/mirage/", "mirage/cli/"))]
    run_walk = [f for i, f in enumerate(run_files) if i == 0 or run_files[i - 1] != f]
    return {
        "args": WALK_ARGS,
        "files_visited": len(set(files)),
        "returns_to_a_file_left": len(files) - len(set(files)),
        "mirage_files_visited": len(set(run_walk)),
        "mirage_returns_to_a_file_left": len(run_walk) - len(set(run_walk)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--no-walk", action="store_true", help="Skip the traced run")
    args = parser.parse_args()
    root = args.root.resolve()
    result: dict[str, Any] = {"root": str(root), **longest(root)}
    result["openclaw_outside_its_packages"] = openclaw_mentions(root)
    if not args.no_walk:
        result["run_walk"] = walk(root)
    for key in ("classes_over_250", "functions_over_60", "longest_classes", "longest_functions"):
        print(f"{key}:")
        for line in result[key]:
            print(f"  {line}")
    claw = result["openclaw_outside_its_packages"]
    print(
        f"OpenClaw outside its packages: code {claw['code_lines']} lines in "
        f"{claw['code_files']} files, prose {claw['prose_lines']} lines in "
        f"{claw['prose_files']} files"
    )
    for name, rows in claw["code"].items():
        print(f"  {name}: {rows}")
    if "run_walk" in result:
        w = result["run_walk"]
        print(
            f"run --model walk: {w['files_visited']} files visited, "
            f"{w['returns_to_a_file_left']} returns to a file already left; in harness/mirage/ "
            f"and mirage/cli/: {w['mirage_files_visited']} files, "
            f"{w['mirage_returns_to_a_file_left']} returns"
        )
    print(f"results: {write_results('code_shape', result)}")


if __name__ == "__main__":
    main()
