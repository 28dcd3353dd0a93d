"""Study files of either protocol (TOML): reading one strictly, naming an unknown key and the
nearest valid one, a validation problem as one line naming the key, and writing a resolved
study back (``tomli_w``; TOML has no null, so None values are left out).

Above: ``harness.mirage.study`` (``mirage run --study``) and ``harness.cue.config``
(``mirage cue run --study``), which know their keys. Below: ``tomllib``, ``tomli_w``, pydantic.
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError


class StudyFileError(ValueError):
    """A study file that cannot be used; the message is one line naming the file and the key."""


def read_toml(path: Path) -> dict[str, Any]:
    """The table of the TOML file ``path``; ``StudyFileError`` when unreadable or not TOML."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise StudyFileError(f"{path}: cannot read it ({exc.strerror or exc})") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise StudyFileError(f"{path}: not a TOML file ({exc})") from exc


def check_keys(
    path: Path, data: Mapping[str, Any], keys: Iterable[str], docs: str, secrets: Mapping[str, str]
) -> None:
    """Refuse the first key of ``data`` not in ``keys``, naming the nearest valid key (or
    ``docs``, where the keys are listed); a key of ``secrets`` says where to give it instead."""
    known = list(keys)
    for key in data:
        if key in secrets:
            raise StudyFileError(
                f"{path}: {key}: keep secrets out of study files; give {secrets[key]}"
            )
        if key not in known:
            nearest = difflib.get_close_matches(key, known, n=1, cutoff=0.5)
            hint = f"did you mean {nearest[0]!r}?" if nearest else f"see {docs} for the keys"
            raise StudyFileError(f"{path}: unknown key {key!r}; {hint}")


def first_problem(path: Path, error: ValidationError) -> StudyFileError:
    """A file's validation error as one line: the key (dotted into tables and lists), what is
    wrong and the value given (a check across keys: what is wrong)."""
    first = error.errors()[0]
    message = str(first["msg"]).removeprefix("Value error, ")
    more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
    if not first["loc"]:  # a check across keys: the input is the whole file
        return StudyFileError(f"{path}: {message}{more}")
    key = ".".join(str(part) for part in first["loc"])
    return StudyFileError(f"{path}: {key}: {message}, got {first['input']!r}{more}")


def _without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_without_none(item) for item in value]
    return value


def toml_text(data: Mapping[str, Any], head: str) -> str:
    """``data`` as a TOML file under the comment lines ``head``, None values left out."""
    import tomli_w

    comment = "".join(f"# {line}\n" for line in head.splitlines())
    return comment + tomli_w.dumps(_without_none(dict(data)))
