"""An OpenAI-compatible endpoint over any mirage backbone (``mirage serve-model``).

``create_app(backbone_or_router)`` builds the ASGI app; ``BackgroundServer`` runs it on a
loopback port in a thread; ``ModelTable`` serves several backbones by model name and ``RuleRouter``
picks one per request (the seams for serving scripted replies to some requests and a real
model to the rest); ``RequestLog`` writes one
JSON line per call. Depends only on the runtime (backbones, profiles, parsers, messages).
"""

from runtime.serve.app import RequestRewrite, create_app
from runtime.serve.requestlog import RequestLog, RequestRecord, read_request_log
from runtime.serve.routing import (
    ModelTable,
    Router,
    RuleRouter,
    ServedRequest,
    SingleBackbone,
    UnknownModel,
    with_output_budget,
)
from runtime.serve.server import BackgroundServer

__all__ = [
    "BackgroundServer",
    "ModelTable",
    "RequestLog",
    "RequestRecord",
    "RequestRewrite",
    "Router",
    "RuleRouter",
    "ServedRequest",
    "SingleBackbone",
    "UnknownModel",
    "create_app",
    "read_request_log",
    "with_output_budget",
]
