"""What an alert-processing team writes to test its consumer against the real facility (the
register function, relay, Pub/Sub, GCS and PostgreSQL in containers): a CCD lands in the
bucket, its ArrivalEvent comes out. In their conftest: ``pytest_plugins =
["obsingest_testing.plugin"]``."""

from datetime import UTC, datetime

import pytest

from obsingest.dataid import DataId, make_exposure_id
from producers.compress import compress_fits
from producers.daq.simulator import CcdSpec, generate_raw_ccd

pytestmark = [pytest.mark.integration, pytest.mark.containers]


def test_the_consumer_receives_the_arrival_of_a_ccd_written_to_the_bucket(obsingest_facility):
    ccd = DataId("LSSTComCam", make_exposure_id(20261125, 7), 4)
    readout = datetime(2026, 11, 25, 3, tzinfo=UTC)
    spec = CcdSpec(ccd.instrument, ccd.exposure, ccd.detector, ccd.day_obs, readout, 15.0, "r", "small")
    arrivals = obsingest_facility.subscribe_arrivals()

    obsingest_facility.put_ccd(ccd.object_name(), compress_fits(generate_raw_ccd(spec)))

    [event] = obsingest_facility.arrivals(arrivals, count=1, timeout=60)
    assert event.data_id == ccd
    assert event.uri == f"gs://{obsingest_facility.bucket}/{ccd.object_name()}"
    assert event.transport == "direct"
