"""Evidence packs: planted artifacts, the planting script, the question bank and the filler
library (``docs/packs.md``). ``load_pack("mirage-core")`` gives the bundled pack."""

from harness.mirage.packs.filler import FillerTurn, sample_filler
from harness.mirage.packs.pack import Pack, PlantedAttachment, PlantedTurn, load_pack
from harness.mirage.packs.schema import Question

__all__ = [
    "FillerTurn",
    "Pack",
    "PlantedAttachment",
    "PlantedTurn",
    "Question",
    "load_pack",
    "sample_filler",
]
