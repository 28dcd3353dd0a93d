"""The ``--agent`` names a run strategy of its own drives, and the check of the options that
belong to one of them; ``RunConfig`` calls both while it validates (this module imports no
config, so the options and the strategies stay one way round).

Above: ``harness.mirage.config``, the study file. Below: each named agent's options module.
"""

from __future__ import annotations

from typing import Any

from harness.mirage.openclaw.options import AGENT as OPENCLAW_AGENT
from harness.mirage.openclaw.options import check_options as check_openclaw_options

NAMED_AGENTS = (OPENCLAW_AGENT,)
"""``--agent`` values that name an agent mirage installs and drives with a strategy of its own
(the others are ``openai:URL`` and ``cmd:COMMAND``)."""


def check_agent_options(options: Any) -> None:
    """The options that belong to one named agent agree with ``--agent`` (a ``ValueError``
    naming the option otherwise; a bad settings file fails here, before any work)."""
    check_openclaw_options(options)
