"""The Kafka chunk assembler: CcdChunk records -> verified files in the object store.

``reassembly`` is the pure state machine (testable without Kafka); ``service`` is the consumer
group member that drives it; ``obsingest assembler`` runs one instance.
"""

from functions.assembler.reassembly import (
    ChunkPoison,
    Completed,
    Ignored,
    Incomplete,
    Poison,
    PoisonReason,
    Reassembler,
    Recover,
    Verdict,
    decode_chunk,
    validate_chunk,
)
from functions.assembler.settings import AssemblerSettings

__all__ = [
    "AssemblerSettings",
    "ChunkPoison",
    "Completed",
    "Ignored",
    "Incomplete",
    "Poison",
    "PoisonReason",
    "Reassembler",
    "Recover",
    "Verdict",
    "decode_chunk",
    "validate_chunk",
]
