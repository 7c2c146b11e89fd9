"""Data for an Avro writer schema, to check schema verdicts against fastavro actually reading it.

``samples(schema)`` is deterministic and covers every union branch and every enum symbol (sample
``k`` takes branch ``k mod n`` of each union and symbol ``k mod n`` of each enum), which is what
an incompatibility needs to show up: a reader that lacks one enum symbol fails only on data that
holds it. ``values(schema)`` is a Hypothesis strategy for random data of the same schema.

Union values use fastavro's tuple notation ``(branch name, value)`` so the branch written is the
one chosen, not the first that fits. Numbers stay inside what every logical type the corpus uses
can hold (int: days of a ``date``; long: ``timestamp-millis``), and ``bytes`` are UTF-8 text so
the bytes -> string promotion (which decodes UTF-8) can read them: both are properties of data,
not of schemas, and the corpus is about schemas.
"""

from __future__ import annotations

import copy
import io
import uuid
from typing import Any

import fastavro
from hypothesis import strategies as st

PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
INT_RANGE = (-(2**19), 2**21)  # days from 1970: years 535..7711
LONG_RANGE = (-(2**40), 2**40)  # ms from 1970: +-34 years
MAX_DEPTH = 3  # past this, unions take a branch that does not nest further


def parse(schema: Any) -> tuple[Any, dict[str, Any]]:
    """fastavro's parsed form (full names everywhere) and its named types by full name."""
    named: dict[str, Any] = {}
    parsed = fastavro.parse_schema(copy.deepcopy(schema), named_schemas=named, _write_hint=False)
    return parsed, named


def encode(schema: Any, datum: Any) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, copy.deepcopy(schema), datum)
    return buf.getvalue()


def fastavro_reads(writer: Any, reader: Any, data: bytes) -> tuple[bool, str]:
    """Whether fastavro reads ``data`` (written with ``writer``) with ``reader``, consuming
    exactly the datum; and the error if not."""
    buf = io.BytesIO(data)
    try:
        fastavro.schemaless_reader(buf, copy.deepcopy(writer), copy.deepcopy(reader))
    except Exception as exc:  # any failure to read is the answer, whatever its class
        return False, f"{type(exc).__name__}: {exc}"
    if buf.tell() != len(data):
        return False, f"read {buf.tell()} of {len(data)} bytes"
    return True, ""


def _branch_name(schema: Any) -> str:
    """The name fastavro's tuple notation uses for a union branch."""
    if isinstance(schema, str):
        return schema
    if schema["type"] in ("record", "enum", "fixed", "error"):
        return schema["name"]
    return _branch_name(schema["type"])


def _resolve(schema: Any, named: dict[str, Any]) -> Any:
    return named[schema] if isinstance(schema, str) and schema not in PRIMITIVES else schema


def _flat(schema: Any) -> bool:
    """Whether a union branch is a leaf (nothing nested), safe to take at depth."""
    return (isinstance(schema, str) and schema in PRIMITIVES) or (
        isinstance(schema, dict) and schema.get("type") in PRIMITIVES | {"enum", "fixed"}
    )


def _logical(schema: Any) -> str | None:
    return schema.get("logicalType") if isinstance(schema, dict) else None


# -- deterministic coverage --------------------------------------------------------------------
def samples(schema: Any, count: int = 12) -> list[Any]:
    """``count`` data of ``schema``; with ``count`` >= the widest union or enum, every branch and
    symbol occurs."""
    parsed, named = parse(schema)
    return [_sample(parsed, named, k, 0) for k in range(count)]


def _sample(schema: Any, named: dict[str, Any], k: int, depth: int) -> Any:
    schema = _resolve(schema, named)
    if isinstance(schema, list):
        options = schema
        if depth >= MAX_DEPTH:
            options = [b for b in schema if _flat(_resolve(b, named))] or schema
        branch = options[k % len(options)]
        return (_branch_name(branch), _sample(branch, named, k, depth + 1))
    kind = schema if isinstance(schema, str) else schema["type"]
    if isinstance(kind, (dict, list)) or (kind not in PRIMITIVES and kind in named):
        return _sample(kind, named, k, depth)
    logical = _logical(schema)
    if kind == "null":
        return None
    if kind == "boolean":
        return k % 2 == 1
    if kind == "int":
        return k * 7 - 3
    if kind == "long":
        return k * 1_000_003 - 5
    if kind in ("float", "double"):
        return k + 0.5
    if kind == "string":
        return str(uuid.UUID(int=k)) if logical == "uuid" else f"s{k}-é"
    if kind == "bytes":
        return f"b{k}".encode() * (k % 3)
    if kind == "fixed":
        return bytes((k + i) % 256 for i in range(schema["size"]))
    if kind == "enum":
        return schema["symbols"][k % len(schema["symbols"])]
    if kind == "array":
        n = 0 if depth >= MAX_DEPTH else 1 + k % 2
        return [_sample(schema["items"], named, k + i, depth + 1) for i in range(n)]
    if kind == "map":
        n = 0 if depth >= MAX_DEPTH else 1 + k % 2
        return {f"k{i}": _sample(schema["values"], named, k + i, depth + 1) for i in range(n)}
    if kind in ("record", "error"):
        return {f["name"]: _sample(f["type"], named, k, depth + 1) for f in schema["fields"]}
    raise ValueError(f"no sample for {schema!r}")


# -- random data (Hypothesis) ------------------------------------------------------------------
def values(schema: Any) -> st.SearchStrategy[Any]:
    parsed, named = parse(schema)
    return _strategy(parsed, named, 0)


def _tagged(name: str, strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return strategy.map(lambda value: (name, value))


def _strategy(schema: Any, named: dict[str, Any], depth: int) -> st.SearchStrategy[Any]:
    schema = _resolve(schema, named)
    if isinstance(schema, list):
        options = schema
        if depth >= MAX_DEPTH:
            options = [b for b in schema if _flat(_resolve(b, named))] or schema
        branches = [_tagged(_branch_name(b), _strategy(b, named, depth + 1)) for b in options]
        return st.one_of(branches)
    kind = schema if isinstance(schema, str) else schema["type"]
    if isinstance(kind, (dict, list)) or (kind not in PRIMITIVES and kind in named):
        return _strategy(kind, named, depth)
    logical = _logical(schema)
    simple: dict[str, st.SearchStrategy[Any]] = {
        "null": st.none(),
        "boolean": st.booleans(),
        "int": st.integers(*INT_RANGE),
        "long": st.integers(*LONG_RANGE),
        "float": st.floats(width=32, allow_nan=False, allow_infinity=False),
        "double": st.floats(allow_nan=False),
        "string": st.uuids().map(str) if logical == "uuid" else st.text(max_size=12),
        "bytes": st.text(max_size=12).map(str.encode),
    }
    if kind in simple:
        return simple[kind]
    if kind == "fixed":
        return st.binary(min_size=schema["size"], max_size=schema["size"])
    if kind == "enum":
        return st.sampled_from(schema["symbols"])
    if kind == "array":
        size = 0 if depth >= MAX_DEPTH else 3
        return st.lists(_strategy(schema["items"], named, depth + 1), max_size=size)
    if kind == "map":
        size = 0 if depth >= MAX_DEPTH else 3
        items = _strategy(schema["values"], named, depth + 1)
        return st.dictionaries(st.text(max_size=6), items, max_size=size)
    if kind in ("record", "error"):
        return st.fixed_dictionaries(
            {f["name"]: _strategy(f["type"], named, depth + 1) for f in schema["fields"]}
        )
    raise ValueError(f"no strategy for {schema!r}")
