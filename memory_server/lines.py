"""What a line is, for every line number the memory server gives out or accepts.

Above: chunking (chunk line ranges), ``artifact_get`` (line slices), note appends (the
``#Lstart-Lend`` they return), the call log reader and the note text handed to reference
resolution. Below: plain strings.

A line ends at ``"\\n"`` and nowhere else, as in POSIX tools, git and GitHub's ``#L`` anchors; a
``"\\r"`` before the ``"\\n"`` stays part of its line. ``str.splitlines`` also breaks at ``\\r``,
``\\x0b``, ``\\x0c``, ``\\x1c``–``\\x1e``, ``\\x85``, U+2028 and U+2029: using it anywhere would
make a citation point at other text than ``artifact_get`` returns for it. With one definition a
cited line range is an exact slice of the file's text.
"""

from __future__ import annotations


def split_lines(text: str) -> list[str]:
    """The lines of ``text``: split at ``"\\n"`` only; a final ``"\\n"`` ends the last line
    rather than starting an empty one."""
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines
