"""A llama.cpp grammar (GBNF) for a constrained reply, built in the worker process.

Above: ``LlamaRunner`` (``runtime/backbones/llama/child.py``), which passes the grammar of a
``GenerateRequest``'s segments to llama.cpp's sampler. Below: llama-cpp-python's JSON-schema
converter (``llama_cpp.llama_grammar.SchemaConverter``, the Python port of llama.cpp's
``json-schema-to-grammar``, which llama.cpp's server uses for its tool-call grammars).

The root is one of the segments (``runtime.profiles.structured.JsonSegment``): the segment's
fixed text as literals around the rule of its JSON schema, repeated when the segment allows
several calls. Built here rather than in the parent because importing llama_cpp loads the
native library, which only the worker process does.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence

from runtime.profiles.structured import JsonSegment


class GrammarError(ValueError):
    """A segment's schema cannot be turned into a grammar; ``source`` names its request field."""

    def __init__(self, source: str, message: str) -> None:
        super().__init__(message)
        self.source = source


def _literal(text: str) -> str:
    """A GBNF string literal (its escapes are JSON's: ``\\n``, ``\\"``, ``\\uXXXX``)."""
    return json.dumps(text)


def gbnf(segments: Sequence[JsonSegment]) -> str:
    """The grammar whose root is any one of ``segments``."""
    from llama_cpp.llama_grammar import SchemaConverter

    converter = SchemaConverter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    alternatives = []
    for index, segment in enumerate(segments):
        try:
            schema = converter.resolve_refs(copy.deepcopy(dict(segment.schema)), f"s{index}")
            value = converter.visit(schema, f"value{index}")
        except Exception as exc:  # the converter raises bare Exception, KeyError, ValueError
            raise GrammarError(segment.source, f"{type(exc).__name__}: {exc}") from exc
        parts = (_literal(segment.prefix), value, _literal(segment.suffix))
        one = " ".join(part for part in parts if part != '""')
        separator = f"{_literal(segment.separator)} " if segment.separator else ""
        body = f"{one} ({separator}{one})*" if segment.repeat else one
        alternatives.append(f"segment{index} ::= {body}")
    root = " | ".join(f"segment{index}" for index in range(len(segments)))
    return "\n".join([converter.format_grammar(), *alternatives, f"root ::= {root}"])
