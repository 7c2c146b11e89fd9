"""`obsingest registry export --format butler` round-trips through the real `butler import` into an
empty repository (SQLite and PostgreSQL registries on both sides)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from functions.register.service import RegisterService
from obsingest.bus.memory import InMemoryBus
from obsingest.dataid import DataId, dataset_id
from obsingest.registry import open_registry
from obsingest.settings import RegistrySettings
from obsingest.store.local import LocalDirStore
from obsingest.store.notifications import from_storage_cloudevent
from producers.uploader import DirectUploader
from tests.integration.fixtures.butler import butler_cli, query_datasets, small_raw

pytestmark = pytest.mark.integration

RUN = "LSSTCam/raw/all"
DETECTORS = (0, 94, 188, 189, 190, 191, 192, 204)


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_export_loads_into_an_empty_butler_with_the_same_ids_and_uris(kind, tmp_path, request):
    if kind == "postgresql":
        server = request.getfixturevalue("postgres_server")
        registry_url = server.create_database("obsingest")
        target_db = server.create_database("target")
        request.addfinalizer(lambda: [server.drop_database(u) for u in (registry_url, target_db)])
        import psycopg
        from sqlalchemy.engine import make_url

        conninfo = make_url(target_db).set(drivername="postgresql")
        with psycopg.connect(conninfo.render_as_string(hide_password=False), autocommit=True) as c:
            c.execute("CREATE EXTENSION IF NOT EXISTS btree_gist")
    else:
        registry_url, target_db = f"sqlite:///{tmp_path / 'registry.sqlite3'}", None

    # obsingest's own registry, filled by the register service
    store = LocalDirStore(tmp_path / "store")
    registry = open_registry(RegistrySettings(url=registry_url))
    service = RegisterService(store, registry, InMemoryBus())
    exposures = (2026112200001, 2026112200002)
    for exposure in exposures:
        for det in DETECTORS:
            DirectUploader(store).send(
                DataId("LSSTCam", exposure, det),
                small_raw(exposure, det),
                datetime(2026, 11, 22, 3, 1, tzinfo=UTC),
            )
    outbox = store.outbox()
    for path, event in outbox.pending():
        assert service.handle(from_storage_cloudevent(event, event["data"])).status == "registered"
        outbox.ack(path)
    registry.close()

    # for Rubin: obs_lsst's raw formatter and Rubin's storage class, nothing of obsingest's
    rubin = tmp_path / "rubin.yaml"
    _export(registry_url, rubin, "rubin")
    text = rubin.read_text()
    assert "formatter: lsst.obs.lsst.rawFormatter.LsstCamRawFormatter" in text
    assert "storage_class: Exposure" in text and "obsingest." not in text
    # a plain daf_butler installation cannot import it: it names what is missing, obs_lsst
    plain = daf_butler_only_venv(tmp_path / "venv")
    bare = tmp_path / "bare"
    subprocess.run([plain("butler"), "create", str(bare)], check=True, timeout=300, cwd=tmp_path)
    refused = subprocess.run(
        [
            plain("butler"),
            "import",
            str(bare),
            str(tmp_path),
            "--export-file",
            str(rubin),
            "--transfer",
            "direct",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert refused.returncode != 0 and "lsst.obs.lsst" in refused.stderr, refused.stderr[-2000:]

    # for a plain daf_butler installation (no obsingest, no obs_lsst on its path)
    export = tmp_path / "export.yaml"
    _export(registry_url, export, "daf_butler")
    text = export.read_text()  # daf_butler's YAML tags (!butler_time/...) need its own loader
    for part in ("element: exposure", "type: collection", "collection_type: RUN", "type: dataset"):
        assert part in text
    assert "formatter: lsst.daf.butler.FormatterV2" in text and "obsingest." not in text
    read = subprocess.run(
        [plain("python"), "-c", _READ_IN_PLAIN_DAF_BUTLER, str(tmp_path / "plain"), str(export)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert read.returncode == 0, read.stderr[-3000:]
    found = json.loads(read.stdout.splitlines()[-1])
    expected = {str(dataset_id(DataId("LSSTCam", e, d), "raw", RUN)) for e in exposures for d in DETECTORS}
    assert found["obsingest_importable"] is False
    assert set(found["ids"]) == expected
    assert found["detname"] == "R00_SW1"  # RAFTBAY_CCDSLOT, read through the Butler's URI
    assert found["bytes_equal"] is True

    # the same file into a repository with a SQLite or PostgreSQL registry (this environment)
    target = tmp_path / "target"
    create = [butler_cli(), "create", str(target)]
    if target_db:
        seed = tmp_path / "seed.yaml"
        seed.write_text(yaml.safe_dump({"registry": {"db": target_db}}))
        create += ["--seed-config", str(seed)]
    subprocess.run(create, check=True, timeout=300)
    subprocess.run(
        [
            butler_cli(),
            "import",
            str(target),
            str(tmp_path),
            "--export-file",
            str(export),
            "--transfer",
            "direct",
        ],
        check=True,
        timeout=300,
    )

    rows = query_datasets(str(target), RUN)
    assert {r["id"] for r in rows} == expected
    from lsst.daf.butler import Butler

    butler = Butler.from_config(str(target))
    try:
        for ref in butler.query_datasets("raw", collections=RUN, limit=None):
            did = DataId("LSSTCam", ref.dataId["exposure"], ref.dataId["detector"])
            assert str(butler.getURI(ref)) == store.uri(did.object_name())
        [exposure] = butler.query_dimension_records("exposure", instrument="LSSTCam", exposure=exposures[1])
        assert (exposure.obs_id, exposure.physical_filter, exposure.seq_num) == (
            "MC_O_20261122_000002",
            "r_57",
            2,
        )
        assert exposure.timespan.end.utc.isot.startswith("2026-11-22T03:00:15")
        [guider] = butler.query_dimension_records("detector", instrument="LSSTCam", detector=190)
        assert (guider.full_name, guider.purpose) == ("R00_SG1", "GUIDER")
        [instrument] = butler.query_dimension_records("instrument")
        assert (instrument.class_name, instrument.detector_max) == ("lsst.obs.lsst.LsstCam", 1000)
    finally:
        butler.close()


def _export(registry_url: str, path, target: str) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "obsingest_cli",
            "registry",
            "export",
            "--format",
            "butler",
            "--target",
            target,
            "--registry",
            registry_url,
            str(path),
        ],
        check=True,
        timeout=300,
    )


#: run by the throwaway venv's python: create a repository, import, read back; one JSON line
_READ_IN_PLAIN_DAF_BUTLER = """
import importlib.util, io, json, sys
from pathlib import Path
from astropy.io import fits
from lsst.daf.butler import Butler

repo, export = sys.argv[1], sys.argv[2]
Butler.makeRepo(repo)
butler = Butler.from_config(repo, writeable=True)
butler.import_(filename=export, transfer="direct")
refs = butler.query_datasets("raw", collections="LSSTCam/raw/all", limit=None)
ref = next(r for r in refs if r.dataId["detector"] == 192)
data = butler.getURI(ref).read()
header = fits.open(io.BytesIO(data))[0].header
local = Path(str(butler.getURI(ref)).removeprefix("file://")).read_bytes()
print(json.dumps({
    "obsingest_importable": importlib.util.find_spec("obsingest") is not None,
    "ids": [str(r.id) for r in refs],
    "detname": f"{header['RAFTBAY']}_{header['CCDSLOT']}",
    "bytes_equal": data == local,
}))
"""


def daf_butler_only_venv(path):
    """A throwaway virtualenv with lsst-daf-butler of this environment's version and its
    dependencies only (uv, from the local cache when it has them); ``name -> its executable``."""
    from importlib.metadata import version

    uv = str(Path(sys.executable).with_name("uv"))
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(path)], check=True)
    subprocess.run(
        [
            uv,
            "pip",
            "install",
            "-q",
            "--python",
            str(path / "bin" / "python"),
            f"lsst-daf-butler=={version('lsst-daf-butler')}",
        ],
        check=True,
        timeout=600,
    )
    return lambda name: str(path / "bin" / name)
