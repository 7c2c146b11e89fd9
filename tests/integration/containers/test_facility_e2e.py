"""One end-to-end run of the facility as containers: the register function, the relay, the
facility service and the presence API from the ``obsingest`` image, on Pub/Sub, GCS and
PostgreSQL containers. An exposure's CCDs written to the bucket are registered once each,
announced, and reported complete by the presence API; the Docker API shows every component
running from the obsingest image, by its command, listening on 127.0.0.1 only."""

from __future__ import annotations

from datetime import UTC, datetime

import docker
import pytest

from infra.containers.names import image
from obsingest.dataid import DataId, make_exposure_id
from obsingest_testing import FacilityHandle
from producers.compress import compress_fits
from producers.daq.simulator import CcdSpec, generate_raw_ccd
from tests.integration.containers.procnet import listening_addresses

pytestmark = [pytest.mark.integration, pytest.mark.containers]

DAY_OBS = 20261125
DETECTORS = range(9)  # LSSTComCam: the whole focal plane


def test_an_exposure_through_the_containerised_facility(obsingest_facility: FacilityHandle) -> None:
    facility = obsingest_facility
    exposure = make_exposure_id(DAY_OBS, 42)
    arrivals = facility.subscribe_arrivals()
    readout = datetime(2026, 11, 25, 4, tzinfo=UTC)
    for detector in DETECTORS:
        ccd = DataId("LSSTComCam", exposure, detector)
        spec = CcdSpec(ccd.instrument, exposure, detector, DAY_OBS, readout, 15.0, "i", "small")
        facility.put_ccd(ccd.object_name(), compress_fits(generate_raw_ccd(spec)))

    events = facility.arrivals(arrivals, count=len(DETECTORS), timeout=90)
    assert sorted(e.detector for e in events) == list(DETECTORS), facility.logs("register")
    assert {e.exposure for e in events} == {exposure}

    summary = facility.presence(f"/v1/exposures/LSSTComCam/{exposure}")
    assert summary["registered"] == summary["expected"] == len(DETECTORS), summary
    assert summary["missing"] == []
    one = facility.presence(f"/v1/ccds/LSSTComCam/{exposure}/4")
    assert one["registered"] is True
    assert one["dataset_id"] == str(next(e.dataset_id for e in events if e.detector == 4))

    client = docker.from_env()
    try:
        for name, container_id in facility.endpoints.containers.items():
            if not name.endswith(facility.facility.run_id):
                continue
            container = client.containers.get(container_id)
            assert container.status == "running", name
            assert image("obsingest") in container.image.tags
            verb = name.removesuffix(f"-{facility.facility.run_id}")
            assert container.attrs["Config"]["Cmd"][0] == verb
            top = container.top()
            pids = {int(row[top["Titles"].index("PID")]) for row in top["Processes"]}
            addresses = {addr for addr, _ in listening_addresses(pids)}
            assert addresses == {"127.0.0.1"}, (name, listening_addresses(pids))
        components = {
            n.removesuffix(f"-{facility.facility.run_id}")
            for n in facility.endpoints.containers
            if facility.facility.run_id in n
        }
        assert components == {"register", "relay", "facility", "presence"}
    finally:
        client.close()
