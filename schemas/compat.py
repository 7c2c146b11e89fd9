"""Avro schema-resolution compatibility, following the specification's resolution rules.

A change is allowed only if it is *fully* compatible: new readers can read data written with the
previous schema (backward) and readers still on the previous schema can read new data (forward).
That is what lets producers and subscribers upgrade in any order.
"""

from __future__ import annotations

from typing import Any

_PROMOTIONS = {
    "int": {"int", "long", "float", "double"},
    "long": {"long", "float", "double"},
    "float": {"float", "double"},
    "string": {"string", "bytes"},
    "bytes": {"bytes", "string"},
}
_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


def _kind(schema: Any) -> str:
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, str):
        return schema if schema in _PRIMITIVES else "named"
    return (
        schema["type"]
        if schema["type"] in _PRIMITIVES | {"record", "enum", "array", "map", "fixed"}
        else _kind(schema["type"])
    )


def _primitive_name(schema: Any) -> str:
    return schema if isinstance(schema, str) else schema["type"]


def can_read(reader: Any, writer: Any, path: str = "") -> list[str]:
    """Problems a reader with schema ``reader`` has decoding data written with ``writer``."""
    rk, wk = _kind(reader), _kind(writer)
    where = path or "<root>"
    if wk == "union":
        problems = []
        for branch in writer:
            problems += can_read(reader, branch, path)
        return problems
    if rk == "union":
        for branch in reader:
            if not can_read(branch, writer, path):
                return []
        return [f"{where}: writer type {_describe(writer)} matches no branch of reader union"]
    if rk in _PRIMITIVES and wk in _PRIMITIVES:
        if rk in _PROMOTIONS.get(wk, {wk}):
            return []
        return [f"{where}: cannot read {wk} as {rk}"]
    if rk != wk:
        return [f"{where}: cannot read {wk} as {rk}"]
    if rk == "record":
        if reader.get("name") != writer.get("name"):
            return [f"{where}: record name {writer.get('name')} != {reader.get('name')}"]
        problems = []
        writer_fields = {f["name"]: f for f in writer["fields"]}
        for field in reader["fields"]:
            sub = f"{path}.{field['name']}" if path else field["name"]
            match = writer_fields.get(field["name"])
            if match is None:
                for alias in field.get("aliases", []):
                    match = writer_fields.get(alias)
                    if match:
                        break
            if match is None:
                if "default" not in field:
                    problems.append(f"{sub}: new field without a default")
                continue
            problems += can_read(field["type"], match["type"], sub)
        return problems
    if rk == "enum":
        extra = set(writer["symbols"]) - set(reader["symbols"])
        if extra and "default" not in reader:
            return [f"{where}: enum symbols {sorted(extra)} unknown to reader (and no default)"]
        return []
    if rk == "array":
        return can_read(reader["items"], writer["items"], f"{path}[]")
    if rk == "map":
        return can_read(reader["values"], writer["values"], f"{path}{{}}")
    if rk == "fixed":
        if reader.get("size") != writer.get("size"):
            return [f"{where}: fixed size {writer.get('size')} != {reader.get('size')}"]
        return []
    return []


def _describe(schema: Any) -> str:
    return schema if isinstance(schema, str) else str(schema.get("type"))


def check_full_compatibility(previous: Any, current: Any) -> list[str]:
    """Problems in either direction; empty means the change is safe to release."""
    backward = [f"new reader: {p}" for p in can_read(current, previous)]
    forward = [f"old reader: {p}" for p in can_read(previous, current)]
    return backward + forward
