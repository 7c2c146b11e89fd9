"""A DAQ that compresses itself hands over ``.fits.fz``: verified, sent as it is, never
recompressed; the outcome carries the worker's own timings and CPU seconds."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from obsingest.dataid import DataId
from obsingest.errors import CorruptFile, HeaderMismatch
from producers.compress import compress_fits
from producers.daq.simulator import CcdSpec, generate_raw_ccd
from producers.edge.ccd import CcdWorker, verify_precompressed
from producers.edge.handoff import classify, sidecar_of
from producers.edge.journal import Entry, Journal

pytestmark = pytest.mark.unit

EXPOSURE = 2026112200007
DATA_ID = DataId("LSSTCam", EXPOSURE, 4)


def raw_ccd() -> bytes:
    spec = CcdSpec(
        "LSSTCam", EXPOSURE, 4, 20261122, datetime(2026, 11, 22, 3, tzinfo=UTC), 15.0, "r", "small"
    )
    return generate_raw_ccd(spec)


class Recorder:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def send(self, data_id, data, readout_time, compressed_time=None):
        self.sent.append(bytes(data))

        class Result:
            status = "stored"
            object_name = data_id.object_name()
            checksum = ""

        return Result()


def worker_for(tmp_path: Path, source: Path, sidecar: Path | None = None) -> CcdWorker:
    spool = tmp_path / "spool"
    Journal(spool).add(Entry(key=DATA_ID.key, source=str(source), priority=EXPOSURE))
    worker = CcdWorker(f"file://{tmp_path / 'store'}", "raw/", "quarantine/", str(spool), warm=False)
    worker.sender = Recorder()
    return worker


def job(source: Path, sidecar: Path | None = None) -> Entry:
    return Entry(DATA_ID.key, str(source), readout=1.8e9, sidecar=str(sidecar) if sidecar else None)


def test_a_precompressed_handoff_is_sent_byte_for_byte(tmp_path: Path) -> None:
    fz = compress_fits(raw_ccd(), threads=1)
    source = tmp_path / "LSSTCam_2026112200007_004.fits.fz"
    source.write_bytes(fz)
    worker = worker_for(tmp_path, source)
    outcome = worker(job(source))
    assert outcome.ok and outcome.precompressed
    assert worker.sender.sent == [fz]  # type: ignore[attr-defined]
    assert outcome.size == outcome.raw_size == len(fz)
    assert outcome.compress_seconds < 0.5 and outcome.worker_pid == os.getpid()
    assert outcome.started_time is not None and outcome.acked_time is not None
    assert outcome.compressed_time is not None
    assert outcome.started_time <= outcome.compressed_time <= outcome.acked_time
    assert outcome.read_compress_cpu_seconds >= 0 and outcome.send_cpu_seconds >= 0
    worker.close()


def test_a_raw_ccd_is_compressed_and_timed(tmp_path: Path) -> None:
    source = tmp_path / "LSSTCam_2026112200007_004.fits"
    source.write_bytes(raw_ccd())
    worker = worker_for(tmp_path, source)
    outcome = worker(job(source))
    assert outcome.ok and not outcome.precompressed
    assert outcome.size < outcome.raw_size == len(raw_ccd())
    assert outcome.cpu_seconds == pytest.approx(outcome.read_compress_cpu_seconds + outcome.send_cpu_seconds)
    worker.close()


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"SIMPLE  = garbage" + bytes(5000), "not valid FITS"),
        (None, "uncompressed images"),  # raw FITS named .fits.fz
    ],
)
def test_a_bad_precompressed_handoff_is_corrupt_with_its_name(
    tmp_path: Path, content: bytes | None, match: str
) -> None:
    source = tmp_path / "LSSTCam_2026112200007_004.fits.fz"
    source.write_bytes(raw_ccd() if content is None else content)
    worker = worker_for(tmp_path, source)
    with pytest.raises(CorruptFile, match=match) as info:
        worker(job(source))
    assert str(source) in str(info.value)
    assert not worker.sender.sent  # type: ignore[attr-defined]
    worker.close()


def test_verify_wants_tile_compressed_images() -> None:
    verify_precompressed(compress_fits(raw_ccd(), threads=1), "x.fits.fz")
    from obsingest.fits import parse_fits

    raw = raw_ccd()
    header_only = raw[: parse_fits(raw)[0].data_offset]  # the primary HDU alone
    with pytest.raises(CorruptFile, match="it has none"):
        verify_precompressed(header_only, "x.fits.fz")


def test_a_sidecar_naming_another_ccd_still_refuses_a_precompressed_ccd(tmp_path: Path) -> None:
    source = tmp_path / "LSSTCam_2026112200007_004.fits.fz"
    source.write_bytes(compress_fits(raw_ccd(), threads=1))
    sidecar = tmp_path / "LSSTCam_2026112200007_004.json"
    sidecar.write_text('{"RAFTBAY": "R02"}')
    worker = worker_for(tmp_path, source)
    with pytest.raises(HeaderMismatch, match="sidecar says LSSTCam/2026112200007/013"):
        worker(job(source, sidecar))
    worker.close()


def test_the_handoff_takes_fits_fz_names_and_finds_their_sidecar(tmp_path: Path) -> None:
    assert classify(Path("/h/MC_O_20261122_000012_R22_S11.fits.fz")) == "ccd"
    assert classify(Path("/h/LSSTCam_2026112200012_094.fits.fz")) == "ccd"
    assert classify(Path("/h/LSSTCam_2026112200012_094.fz")) is None
    fz = tmp_path / "LSSTCam_2026112200012_094.fits.fz"
    assert sidecar_of(fz) is None
    (tmp_path / "LSSTCam_2026112200012_094.json").write_text("{}")
    assert sidecar_of(fz) == tmp_path / "LSSTCam_2026112200012_094.json"
    assert sidecar_of(tmp_path / "LSSTCam_2026112200012_094.fits") == sidecar_of(fz)
