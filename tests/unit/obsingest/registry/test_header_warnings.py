"""What a header's translation warned about is kept with the exposure record and counted."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import select

from obsingest.dataid import DataId
from obsingest.registry import ExposureRecord, Registry, tables
from obsingest.registry.butler_export import _read
from obsingest.registry.headers import exposure_from_header
from tests.unit.obsingest.translate.real_headers import fits_primary, read

pytestmark = pytest.mark.unit

SCIENCE = "lsstCam-MC_O_20250415_000060_R01_S01.yaml"
DID = DataId("LSSTCam", 2025041500060, 1)


def _column(registry: Registry) -> list[str | None]:
    with registry.engine.connect() as conn:
        return list(conn.execute(select(tables.exposure.c.header_warnings)).scalars())


def test_warnings_are_stored_as_a_json_list_and_read_back(registry):
    record = ExposureRecord("LSSTCam", DID.exposure, 20250415, header_warnings=("a 'b'", "c"))
    registry.upsert_exposure(record)
    assert _column(registry) == ['["a \'b\'", "c"]']


def test_no_warnings_is_null(registry):
    registry.upsert_exposure(ExposureRecord("LSSTCam", DID.exposure, 20250415))
    assert _column(registry) == [None]


def test_the_export_reads_the_warnings_back(registry):
    from obsingest.registry import FileRecord

    record = ExposureRecord("LSSTCam", DID.exposure, 20250415, header_warnings=("w",))
    registry.register(FileRecord(DID, "file:///x", 1, "crc32c:00000000"), record)
    _, exposures = _read(registry)
    assert [e.header_warnings for e in exposures] == [("w",)]


def test_an_empty_card_is_kept_in_the_record_and_counted():
    def count() -> float:
        value = REGISTRY.get_sample_value("obsingest_header_warnings_total", {"instrument": "LSSTCam"})
        return value or 0.0

    before = count()
    header = {**read(SCIENCE), "DARKTIME": None, "OBSID": "MC_O_20250415_000060"}
    record = exposure_from_header(fits_primary(header), DID, "x")
    assert record.dark_time == record.exposure_time
    assert any("DARKTIME" in w for w in record.header_warnings)
    assert count() - before == len(record.header_warnings) >= 1
