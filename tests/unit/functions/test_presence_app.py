"""The presence API's HTTP contract, in process (FastAPI's test client) on a small SQLite
registry: the answers, the OpenAPI description, JSON 4xx naming the offending input for every
kind of bad input, 503 when the registry cannot answer, and the request counts on /metrics."""

import pytest
from sqlalchemy.exc import OperationalError

from functions.presence.app import create_app
from functions.presence.settings import PresenceSettings
from obsingest.registry.presence import PresenceReader
from obsingest.settings import RegistrySettings
from tests.unit.obsingest.registry.conftest import DAY_OBS, E1, E2, E3, night  # noqa: F401

pytestmark = [
    pytest.mark.unit,
    # starlette's test client still runs on httpx, and says so on import
    pytest.mark.filterwarnings("ignore:Using .httpx. with .starlette.testclient"),
]


@pytest.fixture
def client(night):  # noqa: F811
    from fastapi.testclient import TestClient

    url, _ = night
    reader = PresenceReader.open(RegistrySettings(url=url), 5.0)
    app = create_app(reader, PresenceSettings(page_size=2, max_page_size=10))
    with TestClient(app, raise_server_exceptions=False) as c:
        c.reader = reader
        yield c
    reader.close()


def test_ccd_by_data_id_and_by_dataset_id(client):
    ccd = client.get(f"/v1/ccds/LSSTComCam/{E1}/4")
    assert ccd.status_code == 200 and ccd.headers["content-type"] == "application/json"
    body = ccd.json()
    assert body["registered"] and body["detector"] == 4 and body["over_budget"] is False
    same = client.get(f"/v1/datasets/{body['dataset_id']}").json()
    assert same == body
    assert client.get(f"/v1/ccds/LSSTComCam/{E2}/8").json()["registered"] is False


def test_exposure_and_night(client):
    e2 = client.get(f"/v1/exposures/LSSTComCam/{E2}").json()
    assert (e2["status"], e2["missing"], e2["over_budget"]) == ("incomplete", [7, 8], [3])
    assert e2["expected_source"] == "manifest" and e2["budget_seconds"] == 5.0
    page = client.get(f"/v1/nights/LSSTComCam/{DAY_OBS}").json()  # page_size 2
    assert [e["exposure"] for e in page["exposures"]] == [E1, E2] and page["limit"] == 2
    assert page["exposures"][1] == {
        "exposure": E2,
        "expected": 9,
        "expected_source": "manifest",
        "registered": 7,
        "missing": 2,
        "over_budget": 1,
        "latency_p95": e2["latency_p95"],
        "latency_max": e2["latency_max"],
        "status": "incomplete",
    }
    rest = client.get(f"/v1/nights/LSSTComCam/{DAY_OBS}?after={page['next_after']}").json()
    assert [e["exposure"] for e in rest["exposures"]] == [E3] and rest["next_after"] is None


@pytest.mark.parametrize(
    ("path", "status", "error", "words"),
    [
        ("/v1/ccds/HSC/2026112200001/1", 422, "invalid-request", "path instrument"),
        ("/v1/ccds/LSST%E2%98%83Cam/2026112200001/1", 422, "invalid-request", "path instrument"),
        ("/v1/ccds/LSSTComCam/2026112200001/9", 404, "unknown-detector", "no detector 9"),
        ("/v1/ccds/LSSTComCam/2026112200001/205", 422, "invalid-request", "path detector"),
        ("/v1/ccds/LSSTComCam/2026112200001/-1", 422, "invalid-request", "path detector"),
        ("/v1/ccds/LSSTComCam/12/1", 404, "bad-exposure-id", "day_obs 0 is not"),
        ("/v1/ccds/LSSTComCam/" + "9" * 40 + "/1", 422, "invalid-request", "path exposure"),
        ("/v1/ccds/LSSTComCam/1e5/1", 422, "invalid-request", "path exposure"),
        ("/v1/datasets/not-a-uuid", 422, "invalid-request", "path dataset_id"),
        ("/v1/datasets/00000000-0000-0000-0000-000000000000", 404, "unknown-dataset", "no dataset"),
        (f"/v1/exposures/LSSTComCam/{E3 + 1}", 404, "unknown-exposure", "no manifest and no"),
        ("/v1/nights/LSSTComCam/20261399", 404, "bad-day-obs", "not a YYYYMMDD date"),
        ("/v1/nights/LSSTComCam/2026", 422, "invalid-request", "path day_obs"),
        (f"/v1/nights/LSSTComCam/{DAY_OBS}?limit=11", 422, "invalid-request", "query limit"),
        (f"/v1/nights/LSSTComCam/{DAY_OBS}?after=-1", 422, "invalid-request", "query after"),
        ("/v1/nope", 404, "no-such-route", "Not Found"),
    ],
)
def test_bad_input_is_a_json_4xx_naming_the_problem(client, path, status, error, words):
    reply = client.get(path)
    assert reply.status_code == status, reply.text
    body = reply.json()
    assert body["error"] == error and words in body["message"], body


def test_other_methods_are_405_with_allow(client):
    reply = client.post(f"/v1/ccds/LSSTComCam/{E1}/1")
    assert reply.status_code == 405 and reply.headers["allow"] == "GET"
    assert reply.json()["error"] == "method-not-allowed"


def test_a_registry_that_cannot_answer_is_503_with_retry_after(client, monkeypatch):
    def down(*_args):
        raise OperationalError("SELECT", {}, Exception("server closed the connection"))

    monkeypatch.setattr(client.reader, "ccd", down)
    reply = client.get(f"/v1/ccds/LSSTComCam/{E1}/1")
    assert reply.status_code == 503 and reply.headers["retry-after"] == "5"
    assert reply.json()["error"] == "registry-unavailable"


def test_openapi_describes_every_route_and_its_errors(client):
    spec = client.get("/openapi.json").json()
    paths = spec["paths"]
    assert set(paths) >= {
        "/v1/ccds/{instrument}/{exposure}/{detector}",
        "/v1/datasets/{dataset_id}",
        "/v1/exposures/{instrument}/{exposure}",
        "/v1/nights/{instrument}/{day_obs}",
        "/healthz",
        "/metrics",
    }
    ccd = paths["/v1/ccds/{instrument}/{exposure}/{detector}"]["get"]
    assert {"200", "404", "422", "503"} <= set(ccd["responses"])
    assert spec["components"]["schemas"]["Instrument"]["enum"] == ["LSSTCam", "LSSTComCam", "LATISS"]


def test_metrics_count_requests_by_route_and_status_class(client):
    client.get(f"/v1/ccds/LSSTComCam/{E1}/1")
    client.get(f"/v1/ccds/LSSTComCam/{E1}/99")
    text = client.get("/metrics").text
    assert 'obsingest_presence_requests_total{code="2xx",route="ccd"} 1.0' in text
    assert 'obsingest_presence_requests_total{code="4xx",route="ccd"} 1.0' in text
    assert 'obsingest_build_info{component="presence"' in text
    assert str(E1) not in text  # no id as a label
    assert client.get("/healthz").json()["status"] == "ok"
