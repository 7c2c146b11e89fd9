"""A testing kit for downstream teams: the whole obsingest facility in containers, from pytest.

    pytest_plugins = ["obsingest_testing.plugin"]

    def test_my_consumer(obsingest_facility):
        arrivals = obsingest_facility.subscribe_arrivals()
        obsingest_facility.put_ccd(name, fits_fz_bytes)
        [event] = obsingest_facility.arrivals(arrivals, count=1)

Needs a Docker engine and the images (``make docker images`` in an obsingest checkout).
"""

from obsingest_testing.handle import FacilityHandle

__all__ = ["FacilityHandle"]
