"""``template:FILE``: a user-written summary prompt.

The file is a ``str.format`` template for the summarizer's user message. Placeholders (see
``compaction.strategies.base.PLACEHOLDERS``): ``{transcript}`` (required), ``{focus}``,
``{previous_summary}``, ``{first_index}``, ``{last_index}``, ``{message_count}``; optional
ones render as an empty string when absent. Literal braces are written ``{{`` and ``}}``.
The system message is ``TEMPLATE_SYSTEM``. The file is read and validated once, when the
strategy is created, so a bad template fails before any model is called.
"""

from __future__ import annotations

from pathlib import Path

from compaction.errors import TemplateError
from compaction.strategies.base import PromptStrategy

TEMPLATE_PREFIX = "template:"
TEMPLATE_SYSTEM = (
    "You write compaction summaries of an AI agent's conversation. Follow the user's "
    "instructions exactly and output only the summary."
)
MAX_TEMPLATE_BYTES = 200_000


def read_template(path: Path) -> str:
    if path.is_dir():
        raise TemplateError(f"summary template {str(path)!r} is a folder; give a text file")
    if not path.is_file():
        raise TemplateError(f"summary template file {str(path)!r} does not exist")
    if path.stat().st_size > MAX_TEMPLATE_BYTES:
        raise TemplateError(f"summary template {str(path)!r} exceeds {MAX_TEMPLATE_BYTES} bytes")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TemplateError(f"cannot read summary template {str(path)!r}: {exc}") from exc
    if not text.strip():
        raise TemplateError(f"summary template {str(path)!r} is empty")
    return text


class TemplateStrategy(PromptStrategy):
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        text = read_template(self.path)
        try:
            super().__init__(f"{TEMPLATE_PREFIX}{path}", TEMPLATE_SYSTEM, text)
        except TemplateError as exc:
            raise TemplateError(f"summary template {str(self.path)!r}: {exc}") from exc
