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

import re

# Characters str.splitlines breaks at besides "\n" (a "\r" only when no "\n" follows it).
_EXTRA_BREAKS = re.compile("\r(?!\n)|[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def split_lines(text: str) -> list[str]:
    """The lines of ``text``: split at ``"\\n"`` only; a final ``"\\n"`` ends the last line
    rather than starting an empty one."""
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def splitlines_compatible(text: str) -> str:
    """``text`` with every break ``str.splitlines`` knows besides ``"\\n"`` (and ``"\\r\\n"``)
    replaced by a space, so that code built on ``str.splitlines`` numbers lines exactly as
    ``split_lines`` does."""
    return _EXTRA_BREAKS.sub(" ", text)
