"""A testing kit for downstream teams: the whole obsingest facility in containers, from pytest.

    # conftest.py of, say, an alert-processing service
    pytest_plugins = ["obsingest_testing.plugin"]

    def test_my_consumer(obsingest_facility):
        arrivals = obsingest_facility.subscribe_arrivals()
        obsingest_facility.put_ccd(name, fits_fz_bytes)
        [event] = obsingest_facility.arrivals(arrivals, count=1)

The fixture starts Pub/Sub, GCS and PostgreSQL containers and the pipeline's own (register
function, relay, facility service, presence API) once per session and hands over a
``FacilityHandle``: the endpoints, the environment variables a client reads, and a few helpers.
Needs a Docker engine and the images (``make docker images`` in an obsingest checkout).
"""

from obsingest_testing.handle import FacilityHandle

__all__ = ["FacilityHandle"]
