"""Reference agents with known grounding behaviour (docs/references.md).

Above: ``mirage run`` (``--model reference/<kind>``, and by default beside the model) and the
instrument check of the reports (``harness.mirage.report.instrument``). Below: the kit's agent
contract and transcript restore, the memory server over MCP, and the protocol's probe wording.
"""

from harness.mirage.references.agents import (
    REFERENCE_MODELS,
    REFERENCE_PREFIX,
    ReferenceAgent,
    is_reference,
    make_reference,
)

__all__ = [
    "REFERENCE_MODELS",
    "REFERENCE_PREFIX",
    "ReferenceAgent",
    "is_reference",
    "make_reference",
]
