"""schemas.compat against the specification and against fastavro reading old data.

Every pair of the corpus (tests/unit/schemas/compat_corpus.py) is checked three ways:
- our verdict and first problem are what the specification says;
- fastavro writing data with the writer schema and reading it with
  ``schemaless_reader(buf, writer, reader)`` succeeds exactly when our verdict is "compatible",
  on data covering every union branch and enum symbol (where fastavro is laxer than the
  specification the case says so, and the test pins that it still is);
- for compatible pairs, any datum Hypothesis draws for the writer schema is read.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import schemas
from schemas.compat import SchemaSyntaxError, can_read, check_full_compatibility
from tests.unit.schemas import avro_values
from tests.unit.schemas.compat_corpus import CASES, RULES, Case, enum, fld, one, rec

pytestmark = pytest.mark.unit


def _ids(case: Case) -> str:
    return case.id


def test_the_corpus_covers_every_rule_both_ways():
    assert len(CASES) >= 30
    assert len({c.id for c in CASES}) == len(CASES)
    one_sided = {rule for rule in RULES if {c.compatible for c in CASES if c.rule == rule} != {True, False}}
    assert one_sided == set(), f"rules without both verdicts in the corpus: {one_sided}"


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_verdict_follows_the_specification(case: Case):
    problems = can_read(case.reader, case.writer)
    if case.compatible:
        assert problems == []
    else:
        assert problems, "incompatible by the specification, accepted"
        assert problems[0].startswith(case.problem), problems


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_fastavro_reading_old_data_agrees(case: Case):
    data = [avro_values.encode(case.writer, d) for d in avro_values.samples(case.writer)]
    results = [avro_values.fastavro_reads(case.writer, case.reader, d) for d in data]
    fastavro_ok = all(ok for ok, _ in results)
    ours = can_read(case.reader, case.writer) == []
    if case.fastavro is None:
        assert fastavro_ok == ours, [err for ok, err in results if not ok][:1]
    else:  # fastavro departs from the specification here; we follow the specification
        assert not ours and fastavro_ok, f"fastavro no longer differs ({case.fastavro})"


_COMPATIBLE = [c for c in CASES if c.compatible]


@pytest.mark.parametrize("case", _COMPATIBLE, ids=_ids)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_compatible_pairs_read_any_writer_datum(case: Case, data: st.DataObject):
    datum = data.draw(avro_values.values(case.writer), label="datum")
    encoded = avro_values.encode(case.writer, datum)
    ok, error = avro_values.fastavro_reads(case.writer, case.reader, encoded)
    assert ok, error


# -- what the reports say -----------------------------------------------------------------------
def test_full_compatibility_reports_both_directions_with_paths():
    old = one(enum("Colour", ["RED", "GREEN"]))
    new = one(enum("Color", ["RED", "GREEN", "BLUE"]))
    assert check_full_compatibility(old, new) == [
        "new reader: R.v: an enum Colour cannot be read as enum Color: the names differ and "
        "Colour is not among the reader's aliases []",
        "old reader: R.v: an enum Color cannot be read as enum Colour: the names differ and "
        "Color is not among the reader's aliases []",
    ]
    aliased = one(enum("Color", ["RED", "GREEN", "BLUE"], aliases=["Colour"]))
    assert check_full_compatibility(old, aliased) == [
        "old reader: R.v: an enum Color cannot be read as enum Colour: the names differ and "
        "Color is not among the reader's aliases []"
    ]
    both_ways = one(enum("Color", ["RED", "GREEN", "BLUE"], aliases=["Colour"], default="RED"))
    old_aliased = one(enum("Colour", ["RED", "GREEN"], aliases=["Color"], default="RED"))
    assert check_full_compatibility(old_aliased, both_ways) == []


def test_every_writer_union_branch_is_checked_and_reported_once():
    writer = one(["null", "string", "bytes", "boolean"])
    assert can_read(one(["null", "long"]), writer) == [
        "R.v: a string matches no branch of the reader's union (a null, a long)",
        "R.v: a bytes matches no branch of the reader's union (a null, a long)",
        "R.v: a boolean matches no branch of the reader's union (a null, a long)",
    ]


def test_nested_paths_follow_reader_field_names():
    writer = rec("Top", fld("old", rec("Mid", fld("m", {"type": "map", "values": "int"}))))
    reader = rec(
        "Top", fld("new", rec("Mid", fld("m", {"type": "map", "values": "string"})), aliases=["old"])
    )
    assert can_read(reader, writer) == ["Top.new.m{}: an int cannot be read as a string"]


def test_a_schema_it_cannot_interpret_is_a_clear_error():
    with pytest.raises(SchemaSyntaxError, match="unknown type name 'Nowhere'"):
        can_read(one("Nowhere"), one("int"))


# -- validate_all: every released version against the previous, both ways ---------------------
def _write(directory, name: str, version: int, schema: dict) -> None:
    (directory / f"{name}.v{version}.avsc").write_text(json.dumps(schema))


def test_released_contracts_are_checked_each_against_the_previous_in_both_directions(tmp_path):
    v1 = rec("Thing", fld("colour", enum("Colour", ["RED"])), namespace="org.obsingest")
    v2 = rec(
        "Thing",
        fld("colour", enum("Colour", ["RED"])),
        fld("note", "string", default=""),
        namespace="org.obsingest",
    )
    v3 = rec(
        "Thing",
        fld("colour", enum("Colour", ["RED", "BLUE"])),  # old readers cannot read BLUE
        fld("note", "string", default=""),
        namespace="org.obsingest",
    )
    for version, schema in enumerate((v1, v2, v3), start=1):
        _write(tmp_path, "Thing", version, schema)
    with pytest.raises(schemas.SchemaError) as raised:
        schemas.validate_all(tmp_path)
    assert str(raised.value) == (
        "Thing.v3 is not compatible with Thing.v2: old reader: Thing.colour: the writer's "
        "symbols ['BLUE'] are not in the reader's enum org.obsingest.Colour, which has no default"
    )
    # a default in v3 lets v3 readers map unknown symbols, but readers on v2 have none
    v3["fields"][0]["type"]["default"] = "RED"
    again = tmp_path / "again"
    again.mkdir()
    for version, schema in enumerate((v1, v2, v3), start=1):
        _write(again, "Thing", version, schema)
    with pytest.raises(schemas.SchemaError, match=r"^Thing\.v3 .*: old reader: Thing\.colour"):
        schemas.validate_all(again)


def test_validate_all_refuses_an_enum_renamed_without_alias(tmp_path):
    v1 = rec("Thing", fld("colour", enum("Colour", ["RED"])))
    v2 = rec("Thing", fld("colour", enum("Color", ["RED"])))
    _write(tmp_path, "Thing", 1, v1)
    _write(tmp_path, "Thing", 2, v2)
    with pytest.raises(schemas.SchemaError, match=r"new reader: Thing\.colour: an enum Colour"):
        schemas.validate_all(tmp_path)


def test_the_released_contracts_pass():
    assert {sv.label for sv in schemas.validate_all()} >= {f"{n}.v1" for n in schemas.CONTRACTS}
