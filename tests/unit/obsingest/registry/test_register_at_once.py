"""The PostgreSQL one-statement registration is built from the tables and the row builders: every
column a row must have is in it, and every value is cast to its column's type without a length.
(Its behaviour on PostgreSQL: tests/integration/test_registry_postgres.py.)"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime

import pytest

from obsingest.dataid import DataId
from obsingest.registry import tables
from obsingest.registry.facility_tables import arrival_outbox
from obsingest.registry.outbox import OutboxMessage, outbox_values
from obsingest.registry.prepared import register_at_once_sql
from obsingest.registry.registry import FileRecord, Registration, _dataset_values, _datastore_values

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 26, tzinfo=UTC)
DATA_ID = DataId("LSSTCam", 2026112600001, 94)
DS_ID = uuid.uuid4()


def _rows() -> tuple[dict[str, object], ...]:
    record = FileRecord(DATA_ID, "gs://b/raw/x.fits", 10, "crc32c:AAAAAA==", "md5", NOW, NOW, NOW)
    registration = Registration(DS_ID, "raw", "LSSTCam/raw/all", True, NOW, record.uri)
    message = OutboxMessage(topic="arrivals", key="k", payload=b"{}", attributes={"a": "b"})
    return (
        _dataset_values(registration, DATA_ID),
        _datastore_values(DS_ID, record),
        outbox_values(DS_ID, message, NOW, 30.0),
    )


def _required(table) -> set[str]:
    """Columns an insert must name: NOT NULL, no default, not an autoincrementing key."""
    return {
        c.name
        for c in table.columns
        if not c.nullable and c.default is None and c.server_default is None and c.autoincrement is not True
    }


@pytest.mark.parametrize(
    ("index", "table"), [(0, tables.dataset), (1, tables.datastore_record), (2, arrival_outbox)]
)
def test_each_row_builder_names_every_required_column_of_its_table(index, table):
    keys = set(_rows()[index])
    assert _required(table) <= keys, _required(table) - keys
    assert keys <= set(table.c.keys()), keys - set(table.c.keys())


def test_the_statement_inserts_exactly_the_builders_columns_with_unsized_casts():
    rows = _rows()
    sql = register_at_once_sql(*(tuple(row) for row in rows))
    inserted = re.findall(r"INSERT INTO (\w+) \(([^)]*)\)", sql)
    assert [(name, cols.split(", ")) for name, cols in inserted] == [
        ("dataset", list(rows[0])),
        ("datastore_record", list(rows[1])),
        ("arrival_outbox", list(rows[2])),
    ]
    # every parameter is one of the builders' keys, and no cast carries a length (a cast to
    # varchar(n) would truncate a too-long value instead of refusing it)
    params = set(re.findall(r"%\((\w+)\)s", sql))
    assert params == {k for row in rows for k in row} - {"dataset_id"}
    assert not re.search(r"::\w+\(\d+\)", sql)
    assert "%(ingest_time)s::TIMESTAMP WITH TIME ZONE" in sql
    assert sql.count("FROM ds") == 3  # dr and ob take ds's id; the final select reads it
