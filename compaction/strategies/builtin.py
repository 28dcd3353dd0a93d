"""The built-in summary formats of the MIRAGE compaction ablation (papers/mirage.txt, A.2).

``verbatim`` (the default) writes structured sections and preserves every identifier exactly;
``free-form`` carries the same content as prose; ``per-fact-citations`` attaches to every value
the workspace path or artifact id it came from. All three share one user prompt: the previous
summary to fold in (if any), the numbered transcript, the focus instructions (if any) and a
one-line reminder of the format.
"""

from __future__ import annotations

from compaction.strategies.base import PromptStrategy, SummaryRequest
from runtime.messages import Message, SystemMessage, UserMessage

ROLE = (
    "You write the compaction summary of an AI agent's conversation with its user. The summary "
    "replaces the conversation messages given to you in the agent's context, so it must carry "
    "everything the agent needs to continue the work without them."
)
EXACTNESS = (
    "Preserve every opaque identifier, artifact id, file path, URL, number, date, amount with "
    "its unit, and name exactly as written in the conversation, character for character; "
    "never round, convert, translate, abbreviate or invent them."
)

SECTIONS = (
    "Goal",
    "Constraints and preferences",
    "Progress",
    "Key decisions",
    "Next steps",
    "Critical context",
)

VERBATIM_SYSTEM = "\n\n".join(
    [
        ROLE,
        "Write the summary in Markdown with exactly these sections, in this order:\n"
        + "\n".join(f"## {section}" for section in SECTIONS)
        + "\nWrite 'None.' under a section that has nothing to say.",
        EXACTNESS,
        "Output only the summary.",
    ]
)
FREE_FORM_SYSTEM = "\n\n".join(
    [
        ROLE,
        "Write the summary as plain prose paragraphs, without headings or lists. Cover the "
        "user's goal, their constraints and preferences, the progress so far, the key "
        "decisions, the next steps and any critical context.",
        EXACTNESS,
        "Output only the summary.",
    ]
)
CITATIONS_SYSTEM = "\n\n".join(
    [
        ROLE,
        "Write the summary as a Markdown list, one fact per line, in the form\n"
        "- <fact> [source: <source>]\n"
        "Every value (number, date, amount, name, identifier) must be stated together with "
        "the source it came from: the workspace file path or artifact id as written in the "
        "conversation (for example in a tool call or tool result). When a fact has no file "
        "behind it (the user said it, or the assistant decided it), cite the message number "
        "instead, as [source: message N]. Start with the user's goal and end with the next "
        "steps, each cited the same way.",
        EXACTNESS,
        "Output only the summary.",
    ]
)

REMINDERS = {
    "verbatim": "Write the summary now, with the six sections, copying identifiers exactly.",
    "free-form": "Write the summary now, as prose, copying identifiers exactly.",
    "per-fact-citations": "Write the summary now, one cited fact per line "
    "([source: <path or artifact id>]), copying identifiers exactly.",
}


class BuiltinStrategy(PromptStrategy):
    def __init__(self, name: str, system_prompt: str) -> None:
        super().__init__(name, system_prompt, "{transcript}")
        self.reminder = REMINDERS[name]

    def build_prompt(self, request: SummaryRequest) -> list[Message]:
        parts = []
        if request.previous_summary:
            parts.append(
                "Summary of the conversation before these messages (fold all of it into your "
                "summary, dropping nothing):\n<previous_summary>\n"
                f"{request.previous_summary}\n</previous_summary>"
            )
        parts.append(
            f"Conversation messages {request.first_index} to {request.last_index}:\n"
            f"<conversation>\n{request.transcript}\n</conversation>"
        )
        if request.focus:
            parts.append(
                "Focus instructions from the user (give these topics priority, but keep every "
                f"critical fact): {request.focus}"
            )
        parts.append(self.reminder)
        return [SystemMessage(content=self.system_prompt), UserMessage.text("\n\n".join(parts))]


def verbatim() -> BuiltinStrategy:
    return BuiltinStrategy("verbatim", VERBATIM_SYSTEM)


def free_form() -> BuiltinStrategy:
    return BuiltinStrategy("free-form", FREE_FORM_SYSTEM)


def per_fact_citations() -> BuiltinStrategy:
    return BuiltinStrategy("per-fact-citations", CITATIONS_SYSTEM)
