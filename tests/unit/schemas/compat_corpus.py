"""A corpus of evolved schema pairs (writer = old data, reader = new schema), each with what the
Avro specification says about it, covering every resolution rule with both verdicts.

``problem`` is the start of the first problem ``schemas.compat.can_read`` must report for an
incompatible pair (path and reason). ``fastavro`` is set where fastavro 1.13 reading the data
disagrees with the specification, and says how; the tests follow the specification there.

One cohesive concept: the corpus is one table of cases, one per resolution rule and verdict.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

import schemas

RULES = (
    "field-match",
    "field-default",
    "field-alias",
    "record-name",
    "record-alias",
    "namespace",
    "enum-name",
    "enum-symbols",
    "enum-default",
    "fixed-name",
    "fixed-size",
    "promotion",
    "union-reader",
    "union-writer",
    "union-both",
    "array",
    "map",
    "logical",
    "recursive",
    "reference",
)


@dataclass(frozen=True)
class Case:
    id: str
    rule: str
    writer: Any
    reader: Any
    compatible: bool
    problem: str = ""
    fastavro: str | None = None

    def __post_init__(self) -> None:
        assert self.rule in RULES, self.rule
        assert self.compatible == (not self.problem), f"{self.id}: problem iff incompatible"


def rec(name: str, *fields: dict[str, Any], **attrs: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields), **attrs}


def fld(name: str, type_: Any, **attrs: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, **attrs}


def enum(name: str, symbols: list[str], **attrs: Any) -> dict[str, Any]:
    return {"type": "enum", "name": name, "symbols": symbols, **attrs}


def fixed(name: str, size: int, **attrs: Any) -> dict[str, Any]:
    return {"type": "fixed", "name": name, "size": size, **attrs}


def one(type_: Any) -> dict[str, Any]:
    """A type as the only field ``v`` of record R: paths then read ``R.v``."""
    return rec("R", fld("v", type_))


def ts(unit: str) -> dict[str, Any]:
    return {"type": "long", "logicalType": f"timestamp-{unit}"}


def dec(precision: int, scale: int) -> dict[str, Any]:
    return {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale}


def long_list(name: str = "LongList", *extra: dict[str, Any], **attrs: Any) -> dict[str, Any]:
    return rec(name, fld("value", "long"), fld("next", ["null", name]), *extra, **attrs)


AB = [fld("a", "int"), fld("b", "string")]
INNER = [fld("x", "int")]


def _contract(name: str) -> dict[str, Any]:
    return copy.deepcopy(json.loads(schemas.latest(name).path.read_text()))


def _arrival_v2() -> dict[str, Any]:
    v2 = _contract("ArrivalEvent")
    v2["fields"].append(fld("site", ["null", "string"], default=None))
    return v2


def _arrival_readout_as_string() -> dict[str, Any]:
    v2 = _contract("ArrivalEvent")
    for f in v2["fields"]:
        if f["name"] == "readout_time":
            f["type"] = "string"
    return v2


def _summary_status_enum() -> dict[str, Any]:
    v2 = _contract("ExposureSummary")
    for f in v2["fields"]:
        if f["name"] == "status":
            f["type"] = enum("Status", ["OK", "OVER_BUDGET", "INCOMPLETE", "NO_MANIFEST"])
    return v2


_LAX_ALIAS = "fastavro also matches a reader alias by its unqualified name, ignoring namespaces"
_LAX_DECIMAL = "fastavro reads decimals with the writer's scale, ignoring the reader's"

CASES: tuple[Case, ...] = (
    # records and fields --------------------------------------------------------------------
    Case(
        "field-added-with-default",
        "field-default",
        rec("R", *AB),
        rec("R", *AB, fld("c", ["null", "long"], default=None)),
        True,
    ),
    Case(
        "field-added-without-default",
        "field-default",
        rec("R", *AB),
        rec("R", *AB, fld("c", "long")),
        False,
        "R.c: the writer has no field 'c' and the reader's field has no default",
    ),
    Case("field-removed", "field-match", rec("R", *AB), rec("R", AB[0]), True),
    Case("fields-reordered", "field-match", rec("R", *AB), rec("R", AB[1], AB[0]), True),
    Case(
        "field-type-changed",
        "field-match",
        _contract("ArrivalEvent"),
        _arrival_readout_as_string(),
        False,
        "ArrivalEvent.readout_time: a long cannot be read as a string",
    ),
    Case(
        "field-renamed-with-alias",
        "field-alias",
        rec("R", *AB),
        rec("R", fld("alpha", "int", aliases=["a"]), AB[1]),
        True,
    ),
    Case(
        "field-renamed-without-alias",
        "field-alias",
        rec("R", *AB),
        rec("R", fld("alpha", "int"), AB[1]),
        False,
        "R.alpha: the writer has no field 'alpha'",
    ),
    Case(
        "field-alias-only-on-the-writer",
        "field-alias",
        rec("R", fld("alpha", "int", aliases=["a"]), AB[1]),
        rec("R", *AB),
        False,
        "R.a: the writer has no field 'a'",
    ),
    Case("contract-gains-an-optional-field", "field-default", _contract("ArrivalEvent"), _arrival_v2(), True),
    # record names, aliases, namespaces ----------------------------------------------------
    Case(
        "record-renamed-without-alias",
        "record-name",
        rec("A", *AB),
        rec("B", *AB),
        False,
        "B: a record A cannot be read as record B: the names differ",
    ),
    Case("record-doc-changed", "record-name", rec("A", *AB, doc="old"), rec("A", *AB, doc="new"), True),
    Case(
        "record-alias-only-on-the-writer",
        "record-alias",
        rec("A", *AB, aliases=["B"]),
        rec("B", *AB),
        False,
        "B: a record A cannot be read as record B: the names differ",
    ),
    Case("record-renamed-with-alias", "record-alias", rec("A", *AB), rec("B", *AB, aliases=["A"]), True),
    Case(
        "nested-record-renamed-without-alias",
        "record-name",
        rec("Outer", fld("n", rec("Inner", *INNER))),
        rec("Outer", fld("n", rec("Inner2", *INNER))),
        False,
        "Outer.n: a record Inner cannot be read as record Inner2",
    ),
    Case(
        "nested-record-renamed-with-alias",
        "record-alias",
        rec("Outer", fld("n", rec("Inner", *INNER))),
        rec("Outer", fld("n", rec("Inner2", *INNER, aliases=["Inner"]))),
        True,
    ),
    Case(
        "nested-alias-in-inherited-namespace",
        "record-alias",
        rec("Outer", fld("n", rec("Old", *INNER)), namespace="org.o"),
        rec("Outer", fld("n", rec("New", *INNER, aliases=["Old"])), namespace="org.o"),
        True,
    ),
    Case(
        "namespace-changed-same-name",
        "namespace",
        rec("A", *AB, namespace="x"),
        rec("A", *AB, namespace="y"),
        True,
    ),
    Case(
        "alias-resolves-in-the-reader-namespace",
        "namespace",
        rec("A", *AB, namespace="x"),
        rec("B", *AB, namespace="y", aliases=["A"]),
        False,
        "B: a record x.A cannot be read as record y.B: the names differ and x.A is not among "
        "the reader's aliases ['y.A']",
        fastavro=_LAX_ALIAS,
    ),
    Case(
        "alias-fully-qualified-across-namespaces",
        "namespace",
        rec("A", *AB, namespace="x"),
        rec("B", *AB, namespace="y", aliases=["x.A"]),
        True,
    ),
    # enums --------------------------------------------------------------------------------
    Case(
        "enum-renamed-without-alias",
        "enum-name",
        one(enum("Colour", ["RED", "GREEN"])),
        one(enum("Color", ["RED", "GREEN"])),
        False,
        "R.v: an enum Colour cannot be read as enum Color: the names differ",
    ),
    Case(
        "enum-renamed-with-alias",
        "enum-name",
        one(enum("Colour", ["RED", "GREEN"])),
        one(enum("Color", ["RED", "GREEN"], aliases=["Colour"])),
        True,
    ),
    Case(
        "enum-alias-in-another-namespace",
        "enum-name",
        one(enum("Colour", ["RED"])),
        one(enum("Color", ["RED"], aliases=["paint.Colour"])),
        False,
        "R.v: an enum Colour cannot be read as enum Color",
    ),
    Case(
        "enum-renamed-inside-a-union",
        "enum-name",
        one(["null", enum("Colour", ["RED"])]),
        one(["null", enum("Color", ["RED"])]),
        False,
        "R.v: an enum Colour matches no branch of the reader's union",
    ),
    Case(
        "enum-symbol-added", "enum-symbols", one(enum("E", ["A", "B"])), one(enum("E", ["A", "B", "C"])), True
    ),
    Case(
        "enum-symbols-reordered", "enum-symbols", one(enum("E", ["A", "B"])), one(enum("E", ["B", "A"])), True
    ),
    Case(
        "enum-symbol-removed",
        "enum-symbols",
        one(enum("E", ["A", "B", "C"])),
        one(enum("E", ["A", "B"])),
        False,
        "R.v: the writer's symbols ['C'] are not in the reader's enum E, which has no default",
    ),
    Case(
        "enum-symbol-removed-reader-default",
        "enum-default",
        one(enum("E", ["A", "B", "C"])),
        one(enum("E", ["A", "B"], default="A")),
        True,
    ),
    Case(
        "enum-symbol-removed-writer-default-only",
        "enum-default",
        one(enum("E", ["A", "B", "C"], default="A")),
        one(enum("E", ["A", "B"])),
        False,
        "R.v: the writer's symbols ['C'] are not in the reader's enum E",
    ),
    # fixed --------------------------------------------------------------------------------
    Case(
        "fixed-renamed-without-alias",
        "fixed-name",
        one(fixed("Md5", 16)),
        one(fixed("Digest", 16)),
        False,
        "R.v: a fixed Md5 cannot be read as fixed Digest: the names differ",
    ),
    Case(
        "fixed-renamed-with-alias",
        "fixed-name",
        one(fixed("Md5", 16)),
        one(fixed("Digest", 16, aliases=["Md5"])),
        True,
    ),
    Case(
        "fixed-size-changed",
        "fixed-size",
        one(fixed("Md5", 16)),
        one(fixed("Md5", 20)),
        False,
        "R.v: fixed size 16 cannot be read as size 20",
    ),
    Case(
        "fixed-same-size-new-namespace",
        "fixed-size",
        one(fixed("Md5", 16)),
        one(fixed("Md5", 16, namespace="h")),
        True,
    ),
    # promotions ---------------------------------------------------------------------------
    *(
        Case(f"promote-{w}-to-{r}", "promotion", one(w), one(r), True)
        for w, r in [
            ("int", "long"),
            ("int", "float"),
            ("int", "double"),
            ("long", "float"),
            ("long", "double"),
            ("float", "double"),
            ("string", "bytes"),
            ("bytes", "string"),
        ]
    ),
    Case(
        "demote-long-to-int",
        "promotion",
        one("long"),
        one("int"),
        False,
        "R.v: a long cannot be read as an int",
    ),
    Case(
        "demote-double-to-float",
        "promotion",
        one("double"),
        one("float"),
        False,
        "R.v: a double cannot be read as a float",
    ),
    Case(
        "float-to-long",
        "promotion",
        one("float"),
        one("long"),
        False,
        "R.v: a float cannot be read as a long",
    ),
    Case(
        "int-to-string",
        "promotion",
        one("int"),
        one("string"),
        False,
        "R.v: an int cannot be read as a string",
    ),
    Case(
        "boolean-to-int",
        "promotion",
        one("boolean"),
        one("int"),
        False,
        "R.v: a boolean cannot be read as an int",
    ),
    Case(
        "enum-to-string",
        "promotion",
        one(enum("E", ["A"])),
        one("string"),
        False,
        "R.v: an enum E cannot be read as a string",
    ),
    # unions -------------------------------------------------------------------------------
    Case("value-into-optional", "union-reader", one("int"), one(["null", "int"]), True),
    Case("value-into-union-by-promotion", "union-reader", one("int"), one(["null", "string", "long"]), True),
    Case(
        "value-into-union-without-its-type",
        "union-reader",
        one("int"),
        one(["null", "string"]),
        False,
        "R.v: an int matches no branch of the reader's union (a null, a string)",
    ),
    Case(
        "optional-into-value",
        "union-writer",
        one(["null", "int"]),
        one("int"),
        False,
        "R.v: a null cannot be read as an int",
    ),
    Case("union-into-value-all-promotable", "union-writer", one(["int", "long"]), one("double"), True),
    Case("union-widened", "union-both", one(["null", "int"]), one(["null", "long", "string"]), True),
    Case(
        "union-narrowed",
        "union-both",
        one(["null", "int", "string"]),
        one(["null", "int"]),
        False,
        "R.v: a string matches no branch of the reader's union (a null, an int)",
    ),
    Case("union-reordered", "union-both", one(["null", "string"]), one(["string", "null"]), True),
    Case(
        "record-in-union-gains-required-field",
        "union-both",
        one(["null", rec("In", *INNER)]),
        one(["null", rec("In", *INNER, fld("y", "int"))]),
        False,
        "R.v.y: the writer has no field 'y'",
    ),
    # arrays and maps ----------------------------------------------------------------------
    Case(
        "array-items-promoted",
        "array",
        one({"type": "array", "items": "int"}),
        one({"type": "array", "items": "long"}),
        True,
    ),
    Case(
        "array-items-demoted",
        "array",
        one({"type": "array", "items": "long"}),
        one({"type": "array", "items": "int"}),
        False,
        "R.v[]: a long cannot be read as an int",
    ),
    Case(
        "array-of-records-gains-required-field",
        "array",
        one({"type": "array", "items": rec("In", *INNER)}),
        one({"type": "array", "items": rec("In", *INNER, fld("y", "int"))}),
        False,
        "R.v[].y: the writer has no field 'y'",
    ),
    Case(
        "array-to-map",
        "array",
        one({"type": "array", "items": "int"}),
        one({"type": "map", "values": "int"}),
        False,
        "R.v: an array cannot be read as a map",
    ),
    Case(
        "map-values-promoted",
        "map",
        one({"type": "map", "values": "float"}),
        one({"type": "map", "values": "double"}),
        True,
    ),
    Case(
        "map-values-changed",
        "map",
        one({"type": "map", "values": "string"}),
        one({"type": "map", "values": "int"}),
        False,
        "R.v{}: a string cannot be read as an int",
    ),
    # logical types ride on their underlying type -------------------------------------------
    Case("timestamp-millis-to-micros", "logical", one(ts("millis")), one(ts("micros")), True),
    Case("long-to-timestamp", "logical", one("long"), one(ts("micros")), True),
    Case("uuid-to-string", "logical", one({"type": "string", "logicalType": "uuid"}), one("string"), True),
    Case("date-to-long", "logical", one({"type": "int", "logicalType": "date"}), one("long"), True),
    Case("bytes-to-decimal", "logical", one("bytes"), one(dec(6, 2)), True),
    Case(
        "timestamp-to-int",
        "logical",
        one(ts("micros")),
        one("int"),
        False,
        "R.v: a long cannot be read as an int",
    ),
    Case(
        "decimal-scale-changed",
        "logical",
        one(dec(6, 2)),
        one(dec(6, 3)),
        False,
        "R.v: decimal precision/scale 6/2 cannot be read as 6/3",
        fastavro=_LAX_DECIMAL,
    ),
    # recursive and referenced named types --------------------------------------------------
    Case("recursive-identical", "recursive", long_list(), long_list(), True),
    Case(
        "recursive-gains-optional-field",
        "recursive",
        long_list(),
        long_list("LongList", fld("tag", "string", default="")),
        True,
    ),
    Case(
        "recursive-gains-required-field",
        "recursive",
        long_list(),
        long_list("LongList", fld("tag", "string")),
        False,
        "LongList.tag: the writer has no field 'tag'",
    ),
    Case(
        "recursive-renamed-with-alias",
        "recursive",
        long_list(),
        long_list("LinkedLongs", aliases=["LongList"]),
        True,
    ),
    Case(
        "recursive-renamed-without-alias",
        "recursive",
        long_list(),
        long_list("LinkedLongs"),
        False,
        "LinkedLongs: a record LongList cannot be read as record LinkedLongs",
    ),
    Case(
        "reference-reader-adds-symbol",
        "reference",
        rec("R", fld("a", enum("E", ["A", "B"])), fld("b", "E")),
        rec("R", fld("a", enum("E", ["A", "B", "C"])), fld("b", "E")),
        True,
    ),
    Case(
        "reference-reader-drops-symbol",
        "reference",
        rec("R", fld("a", enum("E", ["A", "B"])), fld("b", "E")),
        rec("R", fld("a", enum("E", ["A"])), fld("b", "E")),
        False,
        "R.a: the writer's symbols ['B'] are not in the reader's enum E",
    ),
    Case(
        "contract-string-becomes-enum",
        "reference",
        _contract("ExposureSummary"),
        _summary_status_enum(),
        False,
        "ExposureSummary.status: a string cannot be read as an enum org.obsingest.Status",
    ),
)
