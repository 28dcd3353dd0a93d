"""Reading and writing the files of a pack, shared by MIRAGE's evidence packs and CUE packs.

Above: the protocols' pack schemas, loaders, importers and builders. Below: YAML/JSON on disk,
Pillow and the fonts matplotlib ships. Reading: every problem becomes a ``PackFormatError``
naming the file, the dotted field path and the id of the record it sits in. Writing: UTF-8 text
with ``\n`` line ends, and palette PNGs without timestamps, so a rebuild is byte-identical.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

YAML_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
PALETTE_COLOURS = 96
PACK_ROOT = "pack_root"
"""Validation-context key: the pack folder that path fields are checked against."""
Model = TypeVar("Model", bound=BaseModel)


class PackFormatError(ValueError):
    """A pack file that cannot be read or does not match the schema."""

    def __init__(self, file: Path | str, problems: list[str]) -> None:
        self.file = str(file)
        self.problems = problems
        listed = "\n".join(f"  - {problem}" for problem in problems)
        super().__init__(f"{self.file}: invalid pack file\n{listed}")

    def lines(self) -> list[str]:
        """One line per problem, each starting with the file."""
        return [f"{self.file}: {problem}" for problem in self.problems]

    def summary(self) -> str:
        """The first problem on one line, with a pointer to the rest."""
        more = len(self.problems) - 1
        rest = f" (and {more} more problem(s): mirage pack validate lists them)" if more else ""
        return self.lines()[0] + rest


def format_validation_error(error: ValidationError, raw: Any = None) -> list[str]:
    """One line per problem: the dotted field path, the id of the record it sits in, the
    message."""
    problems = []
    for item in error.errors():
        location = ".".join(str(part) for part in item["loc"]) or "(top level)"
        record_id = _enclosing_id(raw, item["loc"])
        where = f"{location} (id {record_id})" if record_id else location
        message = " ".join(str(item["msg"]).split())
        problems.append(f"{where}: {message}")
    return problems


def _enclosing_id(raw: Any, location: tuple[int | str, ...]) -> str | None:
    found = None
    node = raw
    for part in location:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            break
        if isinstance(node, dict) and isinstance(node.get("id"), str):
            found = node["id"]
    return found


def read_text(path: Path) -> str:
    """A pack file's UTF-8 text; unreadable or non-UTF-8 files raise ``PackFormatError``."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PackFormatError(path, [f"cannot read file: {exc.strerror or exc}"]) from exc
    except UnicodeDecodeError as exc:
        raise PackFormatError(
            path, [f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})"]
        ) from exc


def read_yaml(path: Path) -> Any:
    text = read_text(path)
    try:
        return yaml.load(text, Loader=YAML_LOADER)
    except yaml.YAMLError as exc:
        reason = " ".join(str(exc).split())
        raise PackFormatError(path, [f"not valid YAML: {reason}"]) from exc


def load_model(path: Path, model: type[Model], pack_root: Path | None = None) -> Model:
    """Read a YAML/JSON file into ``model``; every problem names the file and the field.

    With ``pack_root``, every ``PackPath`` field is also checked against the folder on disk
    (symlinks that resolve outside it are refused)."""
    raw = read_yaml(path)
    if not isinstance(raw, dict):
        raise PackFormatError(
            path, [f"expected a mapping at the top level, got {type(raw).__name__}"]
        )
    context = None if pack_root is None else {PACK_ROOT: pack_root}
    try:
        return model.model_validate(raw, context=context)
    except ValidationError as exc:
        raise PackFormatError(path, format_validation_error(exc, raw)) from exc


def font_path(bold: bool = False) -> Path:
    import matplotlib

    name = "DejaVuSans-Bold.ttf" if bold else "DejaVuSans.ttf"
    return Path(matplotlib.get_data_path()) / "fonts" / "ttf" / name


def pil_font(size: int, bold: bool = False) -> Any:
    from PIL import ImageFont

    return ImageFont.truetype(str(font_path(bold)), size)


def save_pil_png(image: Any, path: Path) -> None:
    """A palette PNG (adaptive, no dithering): same pixels to the eye, a third of the bytes."""
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    palette = image.convert("RGB").quantize(
        colors=PALETTE_COLOURS, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE
    )
    palette.save(path, format="PNG", optimize=True)


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8", newline="\n")


def wrap_text(draw: Any, text: str, font: Any, width: int) -> list[str]:
    """``text`` broken into lines of at most ``width`` pixels in ``font`` (a longer word
    stands alone on its line)."""
    lines: list[str] = []
    current = ""
    for word in text.split():
        candidate = f"{current} {word}".strip()
        if draw.textlength(candidate, font=font) <= width or not current:
            current = candidate
        else:
            lines.append(current)
            current = word
    return [*lines, current] if current else lines
