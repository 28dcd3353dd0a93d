"""Study files: a ``mirage run`` written down as TOML (``study.toml``), so it can be read,
reviewed, versioned and rerun.

Every key is a ``RunConfig`` field (``models``, ``summary_formats``, ``limit``, …), as its
declaration says (``RUN_OPTIONS``): a secret (``agent_api_key``, ``memory_token``) is not a key
and stays in the environment, a field given as text is text in the file (``shard = "1/4"``,
paths), and docs/running.md's table of the keys is generated here (``keys_markdown``). A file
is read strictly, before any work: an unknown or misspelt key is refused naming it and the
nearest valid key, a value of the wrong type is refused (``limit = "12"`` is not 12), and a pack
that is not there is refused naming ``pack``. In a study file ``limit = 0`` means every
question, as ``--limit 0`` does.

Every run writes its *resolved* study (``resolved_study``) into its output folder as
``study.toml``: the options it ran with, the defaults that depend on other options made explicit
(whether the reference agents and the calibration arms run), so ``mirage run --study
OUT/study.toml`` plans and builds the same run (same probes, same checkpoint family).

Above: ``mirage run --study`` (``mirage.cli.run``) and ``harness.mirage.run.shards.write_study``,
which writes ``study.toml`` beside ``study.json``. Below: ``RunConfig`` (the fields, their
declarations and checks) and the kit's ``harness.kit.studyfile`` (TOML in and out); nothing
heavy is imported, so a bad file is refused in well under a second.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from harness.kit.options import DeclaredOption, Given
from harness.kit.studyfile import StudyFileError, check_keys, first_problem, read_toml, toml_text
from harness.mirage.config import RUN_OPTIONS, RunConfig

STUDY_TOML = "study.toml"
SECRETS = {
    name: " or ".join(filter(None, (option.flag, option.option.envvar)))
    for name, option in RUN_OPTIONS.items()
    if option.secret
}
"""Fields a study file may not hold (a file is meant to be shared; ``Field(exclude=True)``):
where to give them instead."""
NOT_WRITTEN = frozenset(name for name, option in RUN_OPTIONS.items() if not option.option.written)
"""Fields a file may set but a resolved study leaves out: what to do to a folder, not the study."""
_PATHS = frozenset(name for name, option in RUN_OPTIONS.items() if option.is_path)
"""Path fields (``out``, an agent's settings file): text in a file, absolute when resolved."""
_GIVEN_AS = {name: option.option.given for name, option in RUN_OPTIONS.items()}
_AS_TEXT = _PATHS | {name for name, given in _GIVEN_AS.items() if given is Given.TEXT}
"""Fields written as text in a file (``shard = "1/4"``, paths)."""
_ZERO_FOR_NONE = frozenset(n for n, given in _GIVEN_AS.items() if given is Given.ZERO_FOR_NONE)
"""Fields whose None is 0 in a file (``limit = 0``: every question, as ``--limit 0``)."""


StudyError = StudyFileError
"""A study file that cannot be used; the message is one line naming the file and the key."""


def study_keys(options: Mapping[str, DeclaredOption] = RUN_OPTIONS) -> list[str]:
    """The keys a study file may set (every option but the secrets), in ``RunConfig``'s
    order."""
    return [name for name, option in options.items() if not option.secret]


def _key_types() -> type[BaseModel]:
    """A model of every key's type (no defaults, no cross-field checks: ``RunConfig`` does those
    once the command-line flags are applied), strict: no value is coerced."""
    fields: dict[str, Any] = {}
    for name in study_keys():
        annotation: Any = str if name in _AS_TEXT else RunConfig.model_fields[name].annotation
        if name in _ZERO_FOR_NONE:
            annotation = int  # 0 for None: limit = 0 is every question, as --limit 0
        fields[name] = (annotation | None, None)
    config = ConfigDict(strict=True, extra="forbid")
    return create_model("StudyKeys", __config__=config, **fields)


_KEY_TYPES = _key_types()


def _checked_pack(path: Path, pack: str) -> None:
    from harness.kit.packfiles import PackFormatError
    from harness.mirage.packs.pack import resolve_pack_path

    try:
        resolve_pack_path(pack)
    except PackFormatError as exc:
        problems = "; ".join(exc.problems)
        raise StudyError(f"{path}: pack: {pack!r} is not a pack ({problems})") from exc


def read_study(path: Path) -> dict[str, Any]:
    """The run options the study file ``path`` sets, by ``RunConfig`` field (``limit = 0`` read
    as None, every question); raises ``StudyError`` (one line) for a file that is not TOML, an
    unknown key, a value of the wrong type or a missing pack."""
    data = read_toml(path)
    check_keys(path, data, study_keys(), "docs/running.md", SECRETS)
    try:
        typed = _KEY_TYPES.model_validate(data)
    except ValidationError as exc:
        raise first_problem(path, exc) from exc
    values = {key: getattr(typed, key) for key in data}
    for key in _ZERO_FOR_NONE & values.keys():
        values[key] = values[key] or None
    if "pack" in values:
        _checked_pack(path, values["pack"])
    return values


def _absolute(value: str) -> str:
    return str(Path(value).resolve())


def _pack_text(pack: str) -> str:
    """A bundled pack by its name; a pack folder by its absolute path."""
    from harness.mirage.packs.pack import BUNDLED_DIR, resolve_pack_path

    root = resolve_pack_path(pack)
    return pack if root.parent == BUNDLED_DIR and "/" not in pack else str(root.resolve())


def resolved_study(config: RunConfig) -> dict[str, Any]:
    """``config`` as the keys of a study file (None values are left out when written: TOML has
    no null, and a missing key is the default): every question as ``limit = 0``, the output
    folder, every other path (an agent's settings file) and a pack folder as absolute paths, and
    whether the reference agents and the calibration arms run said outright (their defaults
    depend on whether models were given)."""
    data = config.model_dump(mode="json", exclude={*SECRETS, *NOT_WRITTEN})
    wanted = config.references
    if wanted is None:  # RunConfig's default: on when no model was given
        wanted = "models" not in config.model_fields_set
    data["references"] = config.agent is None and wanted
    data["calibration"] = (
        bool(config.calibration_formats) if config.calibration is None else config.calibration
    )
    for name in _ZERO_FOR_NONE:
        data[name] = getattr(config, name) or 0
    for name in _AS_TEXT - _PATHS:
        data[name] = None if getattr(config, name) is None else str(getattr(config, name))
    for name in _PATHS:
        if data[name] is not None:
            data[name] = _absolute(data[name])
    data["pack"] = _pack_text(config.pack)
    return data


def study_text(config: RunConfig) -> str:
    """The resolved study of ``config`` as a TOML file, under a comment saying how to rerun it."""
    head = (
        'The resolved study of the run in this folder (docs/running.md, "Study files").\n'
        "Rerun or resume it: mirage run --study study.toml (command-line flags override it)."
    )
    return toml_text(resolved_study(config), head)


def _flag_text(option: DeclaredOption) -> str:
    if option.flag is None:
        return "—"
    flag = f"{option.flag}/--no-{option.flag[2:]}" if option.is_bool else option.flag
    text = f"`{option.option.short}/{flag}`" if option.option.short else f"`{flag}`"
    if option.option.envvar:
        text += f" or `{option.option.envvar}`"
    given = option.option.given
    listed = given in (Given.REPEATED, Given.REPEATED_OR_COMMAS, Given.COMMA_LIST)
    return f"{text} ({given.value})" if listed else text


def _meaning(option: DeclaredOption) -> str:
    text = option.field.description or ""
    if option.secret:
        return text + "; a secret, not a key: give the flag or the variable"
    return text if option.option.written else text + "; never written into `OUT/study.toml`"


def keys_markdown(options: Mapping[str, DeclaredOption] = RUN_OPTIONS) -> str:
    """The table of docs/running.md ("Study files"): every run option, its key, flag, meaning
    and what it is to a study, from ``RunConfig``'s declarations (a test keeps it in step)."""
    rows = ["| key | flag | meaning | study |", "| --- | --- | --- | --- |"]
    for name, option in options.items():
        role = option.option.study.value
        if option.option.resolved:
            role += f" (as `{option.option.resolved}`)"
        rows.append(f"| `{name}` | {_flag_text(option)} | {_meaning(option)} | {role} |")
    return "\n".join(rows)


def write_study_toml(config: RunConfig) -> Path:
    """Write ``study.toml`` into ``config.out``; returns its path."""
    path = config.out / STUDY_TOML
    path.write_text(study_text(config), encoding="utf-8")
    return path
