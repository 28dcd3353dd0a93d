"""``SHA256SUMS``: the checksum list of a pack folder, so a damaged file is refused, not used.

A pack folder may hold ``SHA256SUMS`` in ``sha256sum``'s format (``<hex>  <relative path>``, one
file a line, sorted; ``sha256sum -c SHA256SUMS`` checks it too). ``mirage pack build`` and
``mirage pack import`` write it, ``mirage pack lock DIR`` writes it for an existing pack, and
loading a pack that has one checks every file against it (``mirage pack validate``, ``mirage
run``): a changed, missing or unlisted file is one line naming the file and the fix. The list
itself is no part of the pack's digest (``harness.kit.rundir.pack_digest``), so locking a pack
does not change the key of its checkpoint families and results.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from memory_server.store import sha256_file

SUMS_FILE = "SHA256SUMS"


class PackSumsError(ValueError):
    """A pack file does not match the pack's ``SHA256SUMS``; ``file`` is the first one."""

    def __init__(self, file: Path, problem: str) -> None:
        super().__init__(f"{file}: {problem}")
        self.file = file
        self.problem = problem


def pack_files(root: Path) -> Iterator[Path]:
    """Every file of the pack folder, sorted, the sums file left out (a symlink out of the
    folder is not followed)."""
    resolved = root.resolve()
    inside = (p for p in root.rglob("*") if p.resolve().is_relative_to(resolved))
    for path in sorted(p for p in inside if p.is_file()):
        if path.relative_to(root).as_posix() != SUMS_FILE:
            yield path


def sums_text(root: Path) -> str:
    """The ``SHA256SUMS`` text of the folder as it is now."""
    lines = (f"{sha256_file(p)}  {p.relative_to(root).as_posix()}\n" for p in pack_files(root))
    return "".join(lines)


def write_sums(root: Path) -> Path:
    """Write (or replace) ``root/SHA256SUMS`` for the files the folder holds now."""
    path = root / SUMS_FILE
    temp = path.with_name(path.name + ".tmp")
    temp.write_text(sums_text(root), encoding="utf-8")
    temp.replace(path)
    return path


def _listed(path: Path) -> dict[str, str]:
    listed: dict[str, str] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise PackSumsError(path, f"unreadable ({exc}); run `mirage pack lock` again") from exc
    for number, line in enumerate(lines, 1):
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64 or not name:
            raise PackSumsError(
                path, f"line {number} is not '<sha256>  <file>'; run `mirage pack lock` again"
            )
        listed[name.removeprefix("*")] = digest.lower()
    return listed


def check_sums(root: Path) -> bool:
    """Check every file of ``root`` against its ``SHA256SUMS``; False when the pack has none.
    Raises ``PackSumsError`` for the first changed, missing or unlisted file."""
    path = root / SUMS_FILE
    if not path.is_file():
        return False
    listed = _listed(path)
    fix = f"restore it from the pack's source, or run `mirage pack lock {root}` if you changed it"
    present = {p.relative_to(root).as_posix(): p for p in pack_files(root)}
    for name, digest in listed.items():
        if name not in present:
            raise PackSumsError(root / name, f"listed in {SUMS_FILE} but missing; {fix}")
        if sha256_file(present[name]) != digest:
            raise PackSumsError(root / name, f"does not match {SUMS_FILE}; {fix}")
    unlisted = sorted(set(present) - set(listed))
    if unlisted:
        raise PackSumsError(root / unlisted[0], f"is not listed in {SUMS_FILE}; {fix}")
    return True
