"""Avro schema compatibility by the specification's "Schema Resolution" rules, applied statically.

A contract version is released only if fully compatible (backward and forward) with the one
before, so producers and subscribers upgrade in any order. Our own code because avro 1.12's
avro.compatibility ignores decimal precision/scale and matches reader aliases unqualified (rejecting
one in the inherited namespace, accepting a bare one across namespaces); fastavro is laxer on both
(tests/unit/schemas/compat_corpus.py pins them). Problems read "<path>: <reason>", the path
of reader field names from the root, ``[]`` for array items and ``{}`` for map values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
#: writer type -> reader types it may be read as (the specification's promotions)
PROMOTIONS: dict[str, frozenset[str]] = {
    "int": frozenset({"int", "long", "float", "double"}),
    "long": frozenset({"long", "float", "double"}),
    "float": frozenset({"float", "double"}),
    "string": frozenset({"string", "bytes"}),
    "bytes": frozenset({"bytes", "string"}),
}
_NAMED = frozenset({"record", "error", "enum", "fixed"})


class SchemaSyntaxError(ValueError):
    """A schema the compatibility check cannot interpret (unknown name, missing attribute)."""


# -- a resolved model of a schema: named references become the same object --------------------
@dataclass(eq=False)
class _Primitive:
    type: str
    decimal: tuple[int, int] | None = None  # (precision, scale) of a valid decimal


@dataclass(eq=False)
class _Field:
    name: str
    aliases: tuple[str, ...]
    type: _Node
    has_default: bool


@dataclass(eq=False)
class _Named:
    kind: str  # record | enum | fixed
    fullname: str
    aliases: frozenset[str]
    fields: list[_Field] = field(default_factory=list)
    symbols: tuple[str, ...] = ()
    default: str | None = None
    size: int = 0
    decimal: tuple[int, int] | None = None

    @property
    def name(self) -> str:
        return self.fullname.rpartition(".")[2]


@dataclass(eq=False)
class _Array:
    items: _Node


@dataclass(eq=False)
class _Map:
    values: _Node


@dataclass(eq=False)
class _Union:
    branches: list[_Node]


_Node = _Primitive | _Named | _Array | _Map | _Union


def _fullname(name: str, namespace: str | None) -> str:
    if "." in name or not namespace:
        return name
    return f"{namespace}.{name}"


def _decimal(schema: dict[str, Any], size: int | None = None) -> tuple[int, int] | None:
    """(precision, scale) of a valid decimal logical type, else None (the type is ignored)."""
    if schema.get("logicalType") != "decimal":
        return None
    precision, scale = schema.get("precision"), schema.get("scale", 0)
    if type(precision) is not int or type(scale) is not int or not 0 <= scale <= precision or precision < 1:
        return None
    if size is not None and precision > math.floor(math.log10(2 ** (8 * size - 1) - 1)):
        return None
    return precision, scale


class _Parser:
    """Turns one schema's JSON into nodes, resolving names as the specification's "Names"
    section says (a simple name takes the namespace of the most tightly enclosing named type)."""

    def __init__(self) -> None:
        self.named: dict[str, _Named] = {}

    def parse(self, schema: Any, namespace: str | None) -> _Node:
        if isinstance(schema, list):
            return _Union([self.parse(branch, namespace) for branch in schema])
        if isinstance(schema, str):
            return self._reference(schema, namespace)
        if not isinstance(schema, dict) or "type" not in schema:
            raise SchemaSyntaxError(f"not an Avro schema: {schema!r}")
        kind = schema["type"]
        if kind in PRIMITIVES:
            return _Primitive(kind, _decimal(schema) if kind == "bytes" else None)
        if kind in _NAMED:
            return self._named(schema, namespace)
        if kind == "array":
            return _Array(self.parse(schema["items"], namespace))
        if kind == "map":
            return _Map(self.parse(schema["values"], namespace))
        # {"type": "SomeName"} or {"type": {...}}: a wrapped schema
        return self.parse(kind, namespace)

    def _reference(self, name: str, namespace: str | None) -> _Node:
        if name in PRIMITIVES:
            return _Primitive(name)
        for candidate in (_fullname(name, namespace), name):
            if candidate in self.named:
                return self.named[candidate]
        raise SchemaSyntaxError(f"unknown type name {name!r}")

    def _named(self, schema: dict[str, Any], namespace: str | None) -> _Named:
        name = schema.get("name")
        if not isinstance(name, str) or not name:
            raise SchemaSyntaxError(f"a {schema['type']} without a name: {schema!r}")
        own = schema.get("namespace", namespace) if "." not in name else None
        fullname = _fullname(name, own)
        space = fullname.rpartition(".")[0] or None
        aliases = frozenset(_fullname(a, space) for a in schema.get("aliases", []))
        kind = "record" if schema["type"] == "error" else schema["type"]
        node = _Named(kind, fullname, aliases)
        self.named[fullname] = node  # before the fields: a record may refer to itself
        if kind == "record":
            node.fields = [
                _Field(f["name"], tuple(f.get("aliases", [])), self.parse(f["type"], space), "default" in f)
                for f in schema["fields"]
            ]
        elif kind == "enum":
            node.symbols = tuple(schema["symbols"])
            node.default = schema.get("default")
        else:
            node.size = int(schema["size"])
            node.decimal = _decimal(schema, node.size)
        return node


def _parse(schema: Any) -> _Node:
    return _Parser().parse(schema, None)


# -- matching and resolution ------------------------------------------------------------------
def _describe(node: _Node) -> str:
    if isinstance(node, _Primitive):
        article = "an" if node.type[0] in "aeiou" else "a"
        if node.decimal:
            return f"{article} {node.type} decimal({node.decimal[0]},{node.decimal[1]})"
        return f"{article} {node.type}"
    if isinstance(node, _Named):
        return f"{'an' if node.kind == 'enum' else 'a'} {node.kind} {node.fullname}"
    if isinstance(node, _Array):
        return "an array"
    if isinstance(node, _Map):
        return "a map"
    return "a union"


def _decimal_mismatch(reader: tuple[int, int] | None, writer: tuple[int, int] | None) -> str | None:
    if reader is not None and writer is not None and reader != writer:
        return f"decimal precision/scale {writer[0]}/{writer[1]} cannot be read as {reader[0]}/{reader[1]}"
    return None


def _mismatch(reader: _Node, writer: _Node) -> str | None:
    """Why ``writer`` does not *match* ``reader`` (the specification's first step), or None.
    Arrays and maps match here whatever their items: resolution reports those precisely."""
    if isinstance(reader, _Union) or isinstance(writer, _Union):
        return None
    if isinstance(reader, _Primitive) and isinstance(writer, _Primitive):
        if reader.type not in PROMOTIONS.get(writer.type, frozenset({writer.type})):
            return f"{_describe(writer)} cannot be read as {_describe(reader)}"
        return _decimal_mismatch(reader.decimal, writer.decimal)
    if isinstance(reader, _Array) and isinstance(writer, _Array):
        return None
    if isinstance(reader, _Map) and isinstance(writer, _Map):
        return None
    if isinstance(reader, _Named) and isinstance(writer, _Named) and reader.kind == writer.kind:
        if reader.name != writer.name and writer.fullname not in reader.aliases:
            aliases = sorted(reader.aliases)
            return (
                f"{_describe(writer)} cannot be read as {reader.kind} {reader.fullname}: "
                f"the names differ and {writer.fullname} is not among the reader's aliases "
                f"{aliases}"
            )
        if reader.kind == "fixed":
            if reader.size != writer.size:
                return f"fixed size {writer.size} cannot be read as size {reader.size}"
            return _decimal_mismatch(reader.decimal, writer.decimal)
        return None
    return f"{_describe(writer)} cannot be read as {_describe(reader)}"


class _Resolver:
    def __init__(self) -> None:
        #: record pairs being resolved: a recursive type is resolved once (coinductively)
        self._active: set[tuple[int, int]] = set()

    def resolve(self, reader: _Node, writer: _Node, path: str) -> list[str]:
        if isinstance(writer, _Union):
            problems: list[str] = []
            for branch in writer.branches:
                for problem in self.resolve(reader, branch, path):
                    if problem not in problems:
                        problems.append(problem)
            return problems
        if isinstance(reader, _Union):
            for branch in reader.branches:
                if _mismatch(branch, writer) is None:
                    return self.resolve(branch, writer, path)
            options = ", ".join(_describe(b) for b in reader.branches)
            return [f"{path}: {_describe(writer)} matches no branch of the reader's union ({options})"]
        why = _mismatch(reader, writer)
        if why is not None:
            return [f"{path}: {why}"]
        if isinstance(reader, _Array):
            assert isinstance(writer, _Array)
            return self.resolve(reader.items, writer.items, f"{path}[]")
        if isinstance(reader, _Map):
            assert isinstance(writer, _Map)
            return self.resolve(reader.values, writer.values, f"{path}{{}}")
        if isinstance(reader, _Named) and isinstance(writer, _Named):
            if reader.kind == "record":
                return self._record(reader, writer, path)
            if reader.kind == "enum":
                return self._enum(reader, writer, path)
        return []

    def _record(self, reader: _Named, writer: _Named, path: str) -> list[str]:
        key = (id(reader), id(writer))
        if key in self._active:
            return []
        self._active.add(key)
        try:
            written = {f.name: f for f in writer.fields}
            problems: list[str] = []
            for rf in reader.fields:
                sub = f"{path}.{rf.name}"
                wf = written.get(rf.name)
                if wf is None:
                    wf = next((written[a] for a in rf.aliases if a in written), None)
                if wf is None:
                    if not rf.has_default:
                        also = f" (nor any of its aliases {list(rf.aliases)})" if rf.aliases else ""
                        problems.append(
                            f"{sub}: the writer has no field {rf.name!r}{also} and the "
                            "reader's field has no default"
                        )
                    continue
                problems += self.resolve(rf.type, wf.type, sub)
            return problems
        finally:
            self._active.discard(key)

    @staticmethod
    def _enum(reader: _Named, writer: _Named, path: str) -> list[str]:
        unknown = [s for s in writer.symbols if s not in reader.symbols]
        if unknown and reader.default is None:
            return [
                f"{path}: the writer's symbols {unknown} are not in the reader's enum "
                f"{reader.fullname}, which has no default"
            ]
        return []


def _root_path(node: _Node) -> str:
    return node.name if isinstance(node, _Named) else "<root>"


def can_read(reader: Any, writer: Any) -> list[str]:
    """Problems a reader with schema ``reader`` has with any data written with ``writer``
    (both as JSON: dict, list or str); empty means every such datum resolves."""
    reader_node, writer_node = _parse(reader), _parse(writer)
    return _Resolver().resolve(reader_node, writer_node, _root_path(reader_node))


def check_full_compatibility(previous: Any, current: Any) -> list[str]:
    """Problems in either direction; empty means the change is safe to release."""
    backward = [f"new reader: {p}" for p in can_read(current, previous)]
    forward = [f"old reader: {p}" for p in can_read(previous, current)]
    return backward + forward
