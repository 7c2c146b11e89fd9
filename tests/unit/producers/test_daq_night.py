"""``daq night``: manifest first, then every CCD under the camera's name (temp + rename), on the
cadence, with headers whose identity and times agree with the manifest."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from obsingest.dataid import DataId, identity_from_header
from obsingest.fits import parse_primary
from obsingest.messages import ExposureManifest
from obsingest.timescales import header_instant
from producers.daq.header import load_template
from producers.daq.night import NightPlan, play_night

REAL = Path(__file__).parents[2] / "fixtures" / "real_headers"

pytestmark = pytest.mark.unit


def test_a_short_night_follows_the_hand_off_convention(tmp_path: Path) -> None:
    seen: list[Any] = []
    started = time.monotonic()
    played = play_night(
        NightPlan(
            tmp_path, "LSSTComCam", exposures=3, detectors=2, interval=0.3, day_obs=20261122, first_seq=5
        ),
        on_exposure=seen.append,
    )
    assert time.monotonic() - started >= 0.6  # the cadence held
    assert [p.exposure for p in played] == [2026112200005, 2026112200006, 2026112200007]
    assert seen == played
    files = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert len(files) == 3 * 3  # manifest + 2 CCDs per exposure, no temp files left
    first = [str(f) for f in files if "000005" in str(f)]
    assert first == [
        "20261122/CC_O_20261122_000005/CC_O_20261122_000005_R22_S00.fits",
        "20261122/CC_O_20261122_000005/CC_O_20261122_000005_R22_S01.fits",
        "20261122/CC_O_20261122_000005/LSSTComCam_2026112200005.manifest.json",
    ]
    manifest = json.loads(next(tmp_path.rglob("*.manifest.json")).read_text())
    assert manifest["detectors"] == [0, 1] and manifest["instrument"] == "LSSTComCam"
    # each file's header names the CCD its name does
    for item in played:
        for det, path in enumerate(item.files):
            header = parse_primary(path.read_bytes()[: 2880 * 8])
            identity = identity_from_header(header.str_value, str(path))
            assert identity.data_id == DataId("LSSTComCam", item.exposure, det)
            assert identity.file_name == path.name


def test_bad_plans_are_refused() -> None:
    with pytest.raises(ValueError, match="detectors"):
        play_night(NightPlan(Path("/nonexistent"), "LSSTComCam", detectors=10))
    with pytest.raises(ValueError, match="instrument"):
        play_night(NightPlan(Path("/nonexistent"), "HSC"))


def test_each_manifest_is_handed_over_at_its_readout_before_its_ccds(tmp_path: Path) -> None:
    events: list[tuple[str, int, int]] = []  # (what, exposure, CCD files on disk then)

    def ccds_of(exposure: int) -> int:
        return len(list(tmp_path.rglob(f"CC_O_*_{exposure % 100_000:06d}_R*.fits")))

    def on_manifest(manifest: ExposureManifest) -> None:
        name = f"LSSTComCam_{manifest.exposure}.manifest.json"
        assert next(tmp_path.rglob(name)).exists()  # its file is written first
        events.append(("manifest", manifest.exposure, ccds_of(manifest.exposure)))
        manifests.append(manifest)

    manifests: list[ExposureManifest] = []
    played = play_night(
        NightPlan(
            tmp_path, "LSSTComCam", exposures=2, detectors=3, interval=0.2, day_obs=20261122, first_seq=1
        ),
        on_exposure=lambda e: events.append(("ccds", e.exposure, ccds_of(e.exposure))),
        on_manifest=on_manifest,
    )
    first, second = (p.exposure for p in played)
    assert events == [
        ("manifest", first, 0),
        ("ccds", first, 3),
        ("manifest", second, 0),
        ("ccds", second, 3),
    ]
    manifest = manifests[0]
    assert manifest.detectors == [0, 1, 2] and manifest.day_obs == 20261122
    assert manifest.published == played[0].readout  # published at its readout moment
    assert manifest.obs_start < manifest.published
    assert manifest.filter == "u_02"  # the physical filter, as the headers and the Butler say
    # the manifest's UTC start is the instant the headers' DATE-BEG names in TAI
    header = parse_primary(played[0].files[0].read_bytes()[: 2880 * 8])
    date_beg = header.str_value("DATE-BEG")
    assert date_beg is not None
    begin = header_instant(date_beg, header.str_value("TIMESYS"))
    assert abs(begin - manifest.obs_start).total_seconds() <= 0.001
    assert header.str_value("DATE-BEG") != manifest.obs_start.strftime("%Y-%m-%dT%H:%M:%S.%f")[:23]
    written = json.loads(next(tmp_path.rglob(f"*_{first}.manifest.json")).read_text())
    assert written["exposure"] == first and written["detectors"] == manifest.detectors
    # the Avro contract round-trips what the DAQ hands over
    assert ExposureManifest.decode(manifest.encode()) == manifest


def test_sidecars_and_a_template(tmp_path: Path) -> None:
    """Each CCD's ``{stem}.json`` sidecar (astro_metadata_translator's form) is written before it,
    and a real header as template gives every CCD its cards with this CCD's identity."""
    template = load_template(REAL / "lsstCam-MC_O_20250415_000060_R01_S01.yaml")
    plan = NightPlan(
        tmp_path,
        "LSSTCam",
        exposures=1,
        detectors=2,
        interval=0.0,
        day_obs=20261122,
        first_seq=7,
        sidecars=True,
        template=template,
    )
    played = play_night(plan)
    for det, path in enumerate(played[0].files):
        sidecar = json.loads(path.with_suffix(".json").read_text())
        assert sidecar["__CONTENT__"] == "metadata"
        assert sidecar["FILENAME"] == path.name
        assert sidecar["OBJECT"] == "Vela_SNR" and sidecar["SEEING"] is None  # the template's
        header = parse_primary(path.read_bytes()[: 2880 * 8])
        assert header.str_value("OBSID") == sidecar["OBSID"] == "MC_O_20261122_000007"
        data_id = identity_from_header(sidecar.get, path.name).data_id
        assert data_id == DataId("LSSTCam", 2026112200007, det)
    with pytest.raises(ValueError, match="LSSTCam header, not LATISS"):
        play_night(NightPlan(tmp_path, "LATISS", detectors=1, template=template))


def test_the_next_exposure_is_generated_in_the_intervals_second_half_or_as_early_as_it_needs():
    from producers.daq.night import generation_lead

    assert generation_lead(17.0, 2.0) == 8.5  # quick: after the burst had half the interval
    assert generation_lead(17.0, 6.0) == 13.0  # slower: twice its last time and a second
    assert generation_lead(17.0, 60.0) == 17.0  # full-size: right after the readout, as before
    assert generation_lead(6.0, 0.5) == 3.0


def test_the_first_exposures_ccds_exist_by_the_readout_their_headers_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every CCD is generated before its readout moment, the first exposure's too: it has no
    earlier exposure to be generated behind, so the night's first readout waits for it."""
    import producers.daq.night as night

    generated: list[datetime] = []
    real = night.generate_raw_ccd

    def generate(spec: Any) -> bytes:
        out = real(spec)
        generated.append(datetime.now(UTC))
        return out

    monkeypatch.setattr(night, "generate_raw_ccd", generate)
    plan = NightPlan(tmp_path, "LSSTComCam", exposures=1, detectors=9, interval=5.0, day_obs=20261122)
    (played,) = play_night(plan)
    header = parse_primary(played.files[-1].read_bytes()[: 2880 * 8])
    date_end = header.str_value("DATE-END")
    assert date_end is not None
    readout = header_instant(date_end, header.str_value("TIMESYS"))
    assert readout >= generated[-1], (readout, generated[-1])
    assert played.readout >= generated[-1]
    assert len(generated) == 1 + 9  # the estimate's CCD, then the exposure's
