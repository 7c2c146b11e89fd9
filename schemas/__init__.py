"""The Avro data contracts and a small loader/validator.

Files are named ``avro/<Name>.v<N>.avsc``. Every version ever released stays here: decoders need
old writer schemas to read old messages, and the compatibility check compares each version with
the one before it.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import fastavro
from fastavro.schema import to_parsing_canonical_form

SCHEMA_DIR = Path(__file__).parent / "avro"
_FILE_RE = re.compile(r"^(?P<name>[A-Za-z][A-Za-z0-9]*)\.v(?P<version>[0-9]+)\.avsc$")

CONTRACTS: tuple[str, ...] = (
    "ExposureManifest",
    "CcdChunk",
    "ArrivalEvent",
    "ExposureSummary",
    "ExposureIngested",
)


class SchemaError(Exception):
    """A schema file is invalid, missing, or incompatible with its previous version."""


@dataclass(frozen=True)
class SchemaVersion:
    name: str
    version: int
    path: Path
    raw: dict[str, Any]
    parsed: Any
    canonical: str
    fingerprint: bytes  # CRC-64-AVRO, 8 bytes little-endian, as in single-object encoding

    @property
    def label(self) -> str:
        return f"{self.name}.v{self.version}"


def crc64_avro(data: bytes) -> int:
    """CRC-64-AVRO (the Rabin fingerprint from the Avro specification), as fastavro computes it."""
    return int.from_bytes(bytes.fromhex(fastavro.schema.fingerprint(data.decode(), "CRC-64-AVRO")), "little")


def _load_file(path: Path) -> SchemaVersion:
    match = _FILE_RE.match(path.name)
    if not match:
        raise SchemaError(f"{path.name}: schema files must be named <Name>.v<N>.avsc")
    try:
        raw = json.loads(path.read_text())
        parsed = fastavro.parse_schema(raw, _write_hint=False)
    except (ValueError, fastavro.schema.SchemaParseException) as exc:
        raise SchemaError(f"{path.name}: invalid Avro schema: {exc}") from exc
    name = match["name"]
    if raw.get("name") != name:
        raise SchemaError(f"{path.name}: record name {raw.get('name')!r} does not match file name")
    canonical = to_parsing_canonical_form(raw)
    fingerprint = crc64_avro(canonical.encode()).to_bytes(8, "little")
    return SchemaVersion(name, int(match["version"]), path, raw, parsed, canonical, fingerprint)


@cache
def all_versions(directory: Path = SCHEMA_DIR) -> dict[str, list[SchemaVersion]]:
    """Every schema version in ``directory``, grouped by record name, oldest first."""
    versions: dict[str, list[SchemaVersion]] = {}
    for path in sorted(directory.glob("*.avsc")):
        sv = _load_file(path)
        versions.setdefault(sv.name, []).append(sv)
    for name, items in versions.items():
        items.sort(key=lambda s: s.version)
        numbers = [s.version for s in items]
        if numbers != list(range(1, len(items) + 1)):
            raise SchemaError(f"{name}: versions must be 1..N without gaps, found {numbers}")
    return versions


def latest(name: str) -> SchemaVersion:
    """The current (newest) version of a contract: what writers use and readers resolve to."""
    try:
        return all_versions()[name][-1]
    except KeyError:
        raise SchemaError(f"no schema named {name!r} in {SCHEMA_DIR}") from None


def by_fingerprint() -> dict[bytes, SchemaVersion]:
    return {sv.fingerprint: sv for items in all_versions().values() for sv in items}


def validate_all(directory: Path = SCHEMA_DIR) -> list[SchemaVersion]:
    """Parse every schema, require every contract, and check each version against the previous;
    SchemaError naming the first problem found."""
    from schemas.compat import check_full_compatibility

    versions = all_versions(directory)
    missing = [c for c in CONTRACTS if c not in versions]
    if directory == SCHEMA_DIR and missing:
        raise SchemaError(f"missing contracts: {', '.join(missing)}")
    checked = []
    for items in versions.values():
        for previous, current in itertools.pairwise(items):
            problems = check_full_compatibility(previous.raw, current.raw)
            if problems:
                raise SchemaError(
                    f"{current.label} is not compatible with {previous.label}: " + "; ".join(problems)
                )
        checked.extend(items)
    return checked
