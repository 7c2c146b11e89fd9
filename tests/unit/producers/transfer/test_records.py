"""An edge Outcome as a transfer record, and the DAQ's staged files with their own header."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from obsingest.fits import parse_fits
from producers.edge.ccd import Outcome
from producers.transfer import cpu
from producers.transfer.staging import remove_staged, stage_run, staged_name
from producers.transfer.stats import record_of
from tests.unit.producers.transfer.test_fitsheader import SPEC

pytestmark = pytest.mark.unit

T0 = datetime(2026, 11, 23, 3, tzinfo=UTC)


def test_an_acked_outcome_keeps_the_workers_own_timings() -> None:
    start = T0 + timedelta(seconds=0.4)
    outcome = Outcome(
        key="LSSTCam/2026112300001/003",
        state="acked",
        status="stored",
        raw_size=75_582_720,
        size=15_000_000,
        read_seconds=0.03,
        compress_seconds=0.1,
        send_seconds=0.2,
        readout_time=T0,
        compressed_time=start + timedelta(seconds=0.13),
        acked_time=start + timedelta(seconds=0.33),
        started_time=start,
        read_compress_cpu_seconds=0.12,
        send_cpu_seconds=0.02,
        worker_pid=4242,
    )
    r = record_of(outcome, 3, 2026112300001, 0, T0, {4242: 1})
    assert r.ok and r.worker == 1 and r.worker_pid == 4242
    assert r.queued_seconds == pytest.approx(0.4)
    assert r.seconds == pytest.approx(0.33)
    assert r.send_seconds == pytest.approx(0.2)
    assert (r.read_end - r.start).total_seconds() == pytest.approx(0.03)
    assert (r.cpu_seconds, r.compress_cpu_seconds, r.send_cpu_seconds) == (0.14, 0.12, 0.02)
    assert (r.bytes, r.raw_bytes) == (15_000_000, 75_582_720)


def test_a_quarantined_outcome_is_a_failed_record_with_its_reason() -> None:
    outcome = Outcome(
        key="LSSTCam/2026112300001/003", state="quarantined", reason="corrupt-file", error="x.fits: truncated"
    )
    r = record_of(outcome, 3, 2026112300001, 0, T0, {})
    assert not r.ok and r.status == "failed"
    assert r.error == "quarantined: corrupt-file: x.fits: truncated"


def test_each_exposure_gets_its_own_files_named_and_headed_for_it(tmp_path: Path) -> None:
    from producers.daq.simulator import generate_raw_ccd

    source = tmp_path / "cache.fits"
    source.write_bytes(generate_raw_ccd(SPEC))
    exposures = [2026112300001, 2026112300002]
    seen = []
    staged = stage_run(
        {5: source},
        tmp_path / "handoff",
        "LSSTCam",
        exposures,
        False,
        progress=lambda done, total: seen.append((done, total)),
    )
    assert seen == [(1, 2), (2, 2)]
    for files, exposure in zip(staged, exposures, strict=True):
        path = files[5]
        assert path.name == staged_name("LSSTCam", exposure, 5, False)
        assert path.name == f"MC_O_20261123_{exposure % 100_000:06d}_R01_S12.fits"
        data = path.read_bytes()
        assert len(data) == source.stat().st_size
        assert parse_fits(data)[0].str_value("FILENAME") == path.name
        assert parse_fits(data)[0].int_value("SEQNUM") == exposure % 100_000
    assert not list((tmp_path / "handoff").rglob("*.tmp"))
    assert staged_name("LSSTCam", 2026112300001, 7, True) == "MC_O_20261123_000001_R01_S21.fits.fz"
    remove_staged(tmp_path / "handoff")
    assert not (tmp_path / "handoff").exists()


def test_thread_seconds_of_this_thread_and_of_none(tmp_path: Path) -> None:
    import threading

    tid = threading.get_native_id()
    end = __import__("time").process_time() + 0.05
    while __import__("time").process_time() < end:
        pass
    assert cpu.thread_seconds(os.getpid(), [tid]) > 0
    assert cpu.thread_seconds(os.getpid(), [2**30]) == 0
