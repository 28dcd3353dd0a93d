"""The chroma embedding function for mirage collections.

The index passes vectors to chroma itself (from the embedding cache), so chroma never embeds;
but chroma needs an explicit, registered function on every collection, otherwise it falls back
to downloading its default ONNX model. Importing this module registers the class.

Above: the index and CUE-Mem's naive RAG baseline, which hand ``chroma_embedding_function`` to
every collection they open. Below: chromadb's embedding-function registry and
``memory_server.embedding`` (the same model and process-wide cache the index embeds with).
"""

from __future__ import annotations

from typing import Any

from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
from chromadb.utils.embedding_functions import register_embedding_function

from memory_server.embedding import Embedder

EF_NAME = "mirage-sentence-transformer"


@register_embedding_function
class MirageSentenceTransformerEF(EmbeddingFunction[Documents]):
    """Embeds with the same sentence-transformers model (and process-wide cache) as the index."""

    def __init__(self, model_path: str | None = None) -> None:
        self.model_path = model_path

    def __call__(self, input: Documents) -> Embeddings:
        vectors = Embedder(self.model_path).embed(list(input))
        return [row for row in vectors]

    @staticmethod
    def name() -> str:
        return EF_NAME

    def get_config(self) -> dict[str, Any]:
        return {"model_path": self.model_path}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> MirageSentenceTransformerEF:
        return MirageSentenceTransformerEF(model_path=config.get("model_path"))

    def default_space(self) -> str:  # type: ignore[override]
        return "cosine"

    def supported_spaces(self) -> list[str]:  # type: ignore[override]
        return ["cosine", "l2", "ip"]


def chroma_embedding_function(model_path: str | None) -> Any:
    """A chroma embedding function for the same model, registered with chroma so a persisted
    collection can be reopened without chroma trying to download its default ONNX model."""
    return MirageSentenceTransformerEF(model_path=model_path)
