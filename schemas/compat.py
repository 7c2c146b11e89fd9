"""Avro schema compatibility by the specification's "Schema Resolution" rules, applied statically.

A contract version is released only if fully compatible (backward and forward) with the one
before, so producers and subscribers upgrade in any order. fastavro's ``parse_schema`` qualifies
the names; the resolution is our own because avro 1.12's avro.compatibility ignores decimal
precision/scale and matches reader aliases unqualified (rejecting one in the inherited namespace,
accepting a bare one across namespaces), and fastavro is laxer on both
(tests/unit/schemas/compat_corpus.py pins them). Problems read "<path>: <reason>", the path
of reader field names from the root, ``[]`` for array items and ``{}`` for map values.
"""

from __future__ import annotations

from typing import Any

from fastavro.schema import SchemaParseException, UnknownType, parse_schema

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
#: writer type -> reader types it may be read as (the specification's promotions)
PROMOTIONS: dict[str, frozenset[str]] = {
    "int": frozenset({"int", "long", "float", "double"}),
    "long": frozenset({"long", "float", "double"}),
    "float": frozenset({"float", "double"}),
    "string": frozenset({"string", "bytes"}),
    "bytes": frozenset({"bytes", "string"}),
}
_NAMED = ("record", "enum", "fixed")


class SchemaSyntaxError(ValueError):
    """A schema the check cannot interpret: an unknown name, a missing attribute, or anything else
    fastavro's parser refuses (a decimal its size cannot hold, an enum default not among its
    symbols), as the contracts' release refuses it."""


def _parse(schema: Any) -> tuple[Any, dict[str, Any]]:
    """fastavro's parse of ``schema`` (every name qualified by the specification's "Names" rules,
    later uses of a named type left as its full name) and its named types by full name."""
    named: dict[str, Any] = {}
    try:
        # _write_hint=False (a documented parameter): an unmarked parse, so parsing the same dict
        # again resolves its names again instead of returning it as already parsed
        return parse_schema(schema, named_schemas=named, _write_hint=False), named
    except UnknownType as exc:
        raise SchemaSyntaxError(f"unknown type name {exc.name!r}") from None
    except (SchemaParseException, KeyError, TypeError) as exc:
        raise SchemaSyntaxError(f"not an Avro schema ({exc}): {schema!r}") from None


def _kind(node: Any) -> str:
    """``union``, a primitive's name, or a complex type's (an ``error`` is a record)."""
    if isinstance(node, list):
        return "union"
    kind = node if isinstance(node, str) else node["type"]
    return "record" if kind == "error" else str(kind)


def _decimal(node: Any) -> tuple[int, int] | None:
    """(precision, scale) of a bytes or fixed type's valid decimal logical type, else None (the
    type is ignored; fastavro refuses a negative scale or a precision the fixed size cannot hold)."""
    if (
        not isinstance(node, dict)
        or node["type"] not in ("bytes", "fixed")
        or node.get("logicalType") != "decimal"
    ):
        return None
    precision, scale = node.get("precision"), node.get("scale", 0)
    if type(precision) is not int or type(scale) is not int or not 0 <= scale <= precision or precision < 1:
        return None
    return precision, scale


def _aliases(node: dict[str, Any]) -> list[str]:
    """A named type's aliases, qualified by its namespace (fastavro leaves them as written)."""
    space = node["name"].rpartition(".")[0]
    return sorted({a if "." in a or not space else f"{space}.{a}" for a in node.get("aliases", [])})


# -- matching and resolution ------------------------------------------------------------------
def _describe(node: Any) -> str:
    kind = _kind(node)
    if kind in PRIMITIVES:
        article = "an" if kind[0] in "aeiou" else "a"
        decimal = _decimal(node)
        return f"{article} {kind} decimal({decimal[0]},{decimal[1]})" if decimal else f"{article} {kind}"
    if kind in _NAMED:
        return f"{'an' if kind == 'enum' else 'a'} {kind} {node['name']}"
    return {"array": "an array", "map": "a map"}.get(kind, "a union")


def _decimal_mismatch(reader: Any, writer: Any) -> str | None:
    r, w = _decimal(reader), _decimal(writer)
    if r is not None and w is not None and r != w:
        return f"decimal precision/scale {w[0]}/{w[1]} cannot be read as {r[0]}/{r[1]}"
    return None


def _mismatch(reader: Any, writer: Any) -> str | None:
    """Why ``writer`` does not *match* ``reader`` (the specification's first step), or None.
    Arrays and maps match here whatever their items: resolution reports those precisely."""
    rkind, wkind = _kind(reader), _kind(writer)
    if "union" in (rkind, wkind) or rkind == wkind in ("array", "map"):
        return None
    if rkind in PRIMITIVES and wkind in PRIMITIVES:
        if rkind not in PROMOTIONS.get(wkind, frozenset({wkind})):
            return f"{_describe(writer)} cannot be read as {_describe(reader)}"
        return _decimal_mismatch(reader, writer)
    if rkind == wkind in _NAMED:
        rname, wname = reader["name"], writer["name"]
        aliases = _aliases(reader)
        if rname.rpartition(".")[2] != wname.rpartition(".")[2] and wname not in aliases:
            return (
                f"{_describe(writer)} cannot be read as {rkind} {rname}: "
                f"the names differ and {wname} is not among the reader's aliases {aliases}"
            )
        if rkind == "fixed" and reader["size"] != writer["size"]:
            return f"fixed size {writer['size']} cannot be read as size {reader['size']}"
        return _decimal_mismatch(reader, writer)
    return f"{_describe(writer)} cannot be read as {_describe(reader)}"


class _Resolver:
    def __init__(self, reader_named: dict[str, Any], writer_named: dict[str, Any]) -> None:
        self._reader_named, self._writer_named = reader_named, writer_named
        #: record pairs being resolved: a recursive type is resolved once (coinductively)
        self._active: set[tuple[int, int]] = set()

    def _reader(self, node: Any) -> Any:
        return self._reader_named.get(node, node) if isinstance(node, str) else node

    def resolve(self, reader: Any, writer: Any, path: str) -> list[str]:
        reader = self._reader(reader)
        writer = self._writer_named.get(writer, writer) if isinstance(writer, str) else writer
        if isinstance(writer, list):
            problems: list[str] = []
            for branch in writer:
                for problem in self.resolve(reader, branch, path):
                    if problem not in problems:
                        problems.append(problem)
            return problems
        if isinstance(reader, list):
            branches = [self._reader(b) for b in reader]
            for branch in branches:
                if _mismatch(branch, writer) is None:
                    return self.resolve(branch, writer, path)
            options = ", ".join(_describe(b) for b in branches)
            return [f"{path}: {_describe(writer)} matches no branch of the reader's union ({options})"]
        why = _mismatch(reader, writer)
        if why is not None:
            return [f"{path}: {why}"]
        kind = _kind(reader)
        if kind == "array":
            return self.resolve(reader["items"], writer["items"], f"{path}[]")
        if kind == "map":
            return self.resolve(reader["values"], writer["values"], f"{path}{{}}")
        if kind == "record":
            return self._record(reader, writer, path)
        if kind == "enum":
            unknown = [s for s in writer["symbols"] if s not in reader["symbols"]]
            if unknown and reader.get("default") is None:
                return [
                    f"{path}: the writer's symbols {unknown} are not in the reader's enum "
                    f"{reader['name']}, which has no default"
                ]
        return []

    def _record(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
        key = (id(reader), id(writer))
        if key in self._active:
            return []
        self._active.add(key)
        try:
            written = {f["name"]: f for f in writer["fields"]}
            problems: list[str] = []
            for rf in reader["fields"]:
                sub = f"{path}.{rf['name']}"
                aliases = rf.get("aliases", [])
                wf = written.get(rf["name"]) or next((written[a] for a in aliases if a in written), None)
                if wf is not None:
                    problems += self.resolve(rf["type"], wf["type"], sub)
                elif "default" not in rf:
                    also = f" (nor any of its aliases {aliases})" if aliases else ""
                    problems.append(
                        f"{sub}: the writer has no field {rf['name']!r}{also} and the reader's field "
                        "has no default"
                    )
            return problems
        finally:
            self._active.discard(key)


def can_read(reader: Any, writer: Any) -> list[str]:
    """Problems a reader with schema ``reader`` has with any data written with ``writer``
    (both as JSON: dict, list or str); empty means every such datum resolves."""
    (reader_root, reader_named), (writer_root, writer_named) = _parse(reader), _parse(writer)
    root = reader_root["name"].rpartition(".")[2] if _kind(reader_root) in _NAMED else "<root>"
    return _Resolver(reader_named, writer_named).resolve(reader_root, writer_root, root)


def check_full_compatibility(previous: Any, current: Any) -> list[str]:
    """Problems in either direction; empty means the change is safe to release."""
    backward = [f"new reader: {p}" for p in can_read(current, previous)]
    forward = [f"old reader: {p}" for p in can_read(previous, current)]
    return backward + forward
