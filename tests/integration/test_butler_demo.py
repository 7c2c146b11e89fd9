"""`obsingest demo --registry butler:<repo>`: the whole pipeline registering straight into a real
daf_butler repository (SQLite and PostgreSQL registries), every LSSTCam detector."""

from __future__ import annotations

import pytest

from obsingest.dataid import DataId, dataset_id
from obsingest.registry import open_registry
from obsingest.registry.butler_repo import repo_of
from obsingest.settings import RegistrySettings
from obsingest_cli.demo.record_check import discrepancy
from obsingest_cli.demo.run import DemoConfig, DemoPipeline, Progress
from tests.integration.fixtures.butler import new_repo, query_datasets

pytestmark = pytest.mark.integration


class _Quiet(Progress):
    def update(self, text: str, final: bool = False) -> None:
        pass


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_demo_registers_205_ccds_per_exposure_into_the_butler(kind, tmp_path, request, monkeypatch):
    server = request.getfixturevalue("postgres_server") if kind == "postgresql" else None
    url, databases, companion = new_repo(kind, tmp_path / "repo", server)
    if companion:
        monkeypatch.setenv("OBSINGEST_BUTLER_COMPANION_URL", companion)
    else:
        monkeypatch.delenv("OBSINGEST_BUTLER_COMPANION_URL", raising=False)
    if server is not None:
        request.addfinalizer(lambda: [server.drop_database(db) for db in databases])
    config = DemoConfig(
        exposures=1,
        detectors=205,
        ccd_size="small",
        workdir=tmp_path / "demo",
        instrument="LSSTCam",
        workers=2,
        registry=url,
        day_obs=20261122,
    )
    result = DemoPipeline(config, _Quiet()).run()
    assert result.complete and not result.dead_lettered and result.registered == 205
    assert (result.announced, result.discrepancy) == (205, "")
    [summary] = result.summaries
    assert (summary.expected, summary.arrived, summary.missing_detectors) == (205, 205, [])
    rows = query_datasets(repo_of(url), "LSSTCam/raw/all")
    ids = {str(a.dataset_id) for a in result.arrivals}
    assert ids == {
        str(dataset_id(DataId("LSSTCam", 2026112200001, d), "raw", "LSSTCam/raw/all")) for d in range(205)
    }
    assert {r["id"] for r in rows} == ids
    assert (tmp_path / "demo" / "focal_plane.png").stat().st_size > 20_000

    # what the demo reports is checked against the Butler itself: one raw pruned from the Butler
    # behind obsingest's back is a discrepancy the demo would exit non-zero for, and name
    from lsst.daf.butler import Butler

    butler = Butler.from_config(repo_of(url), writeable=True)
    try:
        ref = butler.find_dataset(
            "raw", instrument="LSSTCam", exposure=2026112200001, detector=7, collections="LSSTCam/raw/all"
        )
        butler.pruneDatasets([ref], disassociate=True, unstore=True, purge=True)
    finally:
        butler.close()
    registry = open_registry(RegistrySettings(url=url))
    try:
        why = discrepancy(registry, [("LSSTCam", 2026112200001)], result.arrivals)
    finally:
        registry.close()
    assert why == (
        "the Butler holds 204 CCD(s), 205 were announced: 1 announced CCD(s) that the Butler does not hold"
    )
