"""One CCD in a worker: exact reads, sidecar merge, journal states, spill to the spool on a
transient failure and resend from it."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from obsingest.dataid import DataId
from obsingest.errors import CorruptFile, HeaderMismatch, RetriableError
from obsingest.fits import parse_fits
from producers.compress import decompress_fits
from producers.daq.simulator import CcdSpec, generate_raw_ccd
from producers.edge.ccd import CcdWorker, SendFailed, read_exact
from producers.edge.errors import SourceVanished
from producers.edge.journal import Entry, Journal
from producers.edge.sidecar import merge_sidecar

pytestmark = pytest.mark.unit

EXPOSURE = 2026112200007
DATA_ID = DataId("LSSTCam", EXPOSURE, 4)


def raw_ccd() -> bytes:
    spec = CcdSpec(
        "LSSTCam", EXPOSURE, 4, 20261122, datetime(2026, 11, 22, 3, tzinfo=UTC), 15.0, "r", "small"
    )
    return generate_raw_ccd(spec)


def test_read_exact_names_a_file_that_shrank_while_read(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "x.fits"
    path.write_bytes(b"a" * 1000)
    real_fstat = os.fstat

    class Bigger:
        def __init__(self, st: os.stat_result) -> None:
            self.st_size = st.st_size + 2880

    monkeypatch.setattr(os, "fstat", lambda fd: Bigger(real_fstat(fd)))
    with pytest.raises(CorruptFile, match=r"truncated while being read: got 1000 of 3880"):
        read_exact(str(path))


def test_read_exact_vanished_and_reused_buffer(tmp_path: Path) -> None:
    with pytest.raises(SourceVanished, match="vanished before it was read"):
        read_exact(str(tmp_path / "gone.fits"))
    path = tmp_path / "x.fits"
    path.write_bytes(b"12345")
    buf = read_exact(str(path))
    assert read_exact(str(path), buf) is buf and bytes(buf) == b"12345"


def test_sidecar_cards_land_in_the_primary_header(tmp_path: Path) -> None:
    raw = bytearray(raw_ccd())
    size = len(raw)
    sidecar = tmp_path / "s.json"
    sidecar.write_text('{"PRIMARY": {"FILTER": "g", "HSVERSN": 3, "bad key": 1, "NESTED": {}}}')
    merged = merge_sidecar(raw, sidecar, DATA_ID)
    assert len(merged) == size  # blank cards took the new one: no data moved
    primary = parse_fits(bytes(merged))[0]
    assert primary.value("FILTER") == "'g       '"
    assert primary.value("HSVERSN") == "3"


def test_a_sidecar_that_names_another_ccd_is_a_header_mismatch(tmp_path: Path) -> None:
    sidecar = tmp_path / "s.json"
    sidecar.write_text('{"CCDSLOT": "S00"}')  # RAFTBAY R01 of the file: detector 0, not 4
    with pytest.raises(HeaderMismatch, match="sidecar says LSSTCam/2026112200007/000"):
        merge_sidecar(bytearray(raw_ccd()), sidecar, DATA_ID)
    sidecar.write_text('{"CCDSLOT": "S11", "DETECTOR": 5}')  # the file's own: agrees
    merge_sidecar(bytearray(raw_ccd()), sidecar, DATA_ID)


def test_a_long_sidecar_adds_header_blocks(tmp_path: Path) -> None:
    raw = bytearray(raw_ccd())
    sidecar = tmp_path / "s.json"
    sidecar.write_text("{" + ", ".join(f'"K{i:05d}": {i}' for i in range(200)) + "}")
    merged = merge_sidecar(raw, sidecar, DATA_ID)
    assert len(merged) > len(raw)
    hdus = parse_fits(bytes(merged))
    assert hdus[0].value("K00199") == "199" and len(hdus) == len(parse_fits(bytes(raw)))


class FlakySender:
    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.sent: list[bytes] = []

    def send(self, data_id, data, readout, compressed=None):
        if self.failures:
            self.failures -= 1
            raise RetriableError("destination unreachable")
        self.sent.append(data)

        class Result:
            status = "stored"
            object_name = data_id.object_name()

        return Result()


def test_a_failed_send_spills_to_the_spool_and_the_retry_sends_from_it(tmp_path: Path) -> None:
    source = tmp_path / "LSSTCam_2026112200007_004.fits"
    source.write_bytes(raw_ccd())
    spool = tmp_path / "spool"
    journal = Journal(spool)
    journal.add(Entry(key=DATA_ID.key, source=str(source), priority=EXPOSURE))
    worker = CcdWorker(f"file://{tmp_path / 'store'}", "raw/", "quarantine/", str(spool), warm=False)
    worker.sender = FlakySender(failures=1)
    job = Entry(DATA_ID.key, str(source), readout=1.8e9)
    with pytest.raises(SendFailed) as failed:
        worker(job)
    outcome = failed.value.outcome
    assert outcome.spooled and Path(outcome.spooled).exists()
    row = journal.get(DATA_ID.key)
    assert row is not None and (row.state, row.attempts) == ("compressed", 1)
    assert row.spooled == outcome.spooled and row.checksum == outcome.checksum
    source.unlink()  # the retry must not need the raw file any more
    retry = Entry(
        DATA_ID.key,
        str(source),
        readout=1.8e9,
        attempts=row.attempts,
        spooled=row.spooled,
        checksum=row.checksum,
        compressed_at=row.compressed_at,
    )
    done = worker(retry)
    assert done.ok and done.attempts == 2
    assert decompress_fits(worker.sender.sent[0]) == raw_ccd()
    row = journal.get(DATA_ID.key)
    assert row is not None and row.state == "acked" and row.status == "stored"
    assert not Path(outcome.spooled).exists()
    worker.close()


def test_a_damaged_spool_copy_is_discarded_and_the_ccd_compressed_again(tmp_path: Path) -> None:
    source = tmp_path / "r.fits"
    source.write_bytes(raw_ccd())
    spool = tmp_path / "spool"
    Journal(spool).add(Entry(key=DATA_ID.key, source=str(source)))
    bad = spool / "ccd" / "bad.fits.fz"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"torn")
    worker = CcdWorker(f"file://{tmp_path / 'store'}", "raw/", "quarantine/", str(spool), warm=False)
    worker.sender = FlakySender(failures=0)
    job = Entry(DATA_ID.key, str(source), readout=1.8e9, spooled=str(bad), checksum="crc32c:12345678")
    assert worker(job).ok
    assert decompress_fits(worker.sender.sent[0]) == raw_ccd()
    worker.close()


def test_a_ccd_costs_two_journal_commits_sent_then_acked(tmp_path: Path) -> None:
    """What was compressed and that it is being sent go in one commit before the send."""
    source = tmp_path / "r.fits"
    source.write_bytes(raw_ccd())
    spool = tmp_path / "spool"
    Journal(spool).add(Entry(key=DATA_ID.key, source=str(source)))
    worker = CcdWorker(f"file://{tmp_path / 'store'}", "raw/", "quarantine/", str(spool), warm=False)
    commits: list[list[str | None]] = []
    mark_many = worker.journal.mark_many

    def counted(updates, *, durable=False):  # type: ignore[no-untyped-def]
        updates = list(updates)
        commits.append([state for _key, state, _values in updates])
        mark_many(updates, durable=durable)

    worker.journal.mark_many = counted  # type: ignore[method-assign]
    assert worker(Entry(DATA_ID.key, str(source), readout=1.8e9)).ok
    assert commits == [["sent"], ["acked"]]
    worker.close()


def _killed_worker(source: Path, spool: Path, store: Path, when: str) -> None:
    """A worker process SIGKILLed in its send: before the bytes left, or after the store took
    them but before the ack was journalled."""
    import signal

    worker = CcdWorker(f"file://{store}", "raw/", "quarantine/", str(spool), warm=False)
    send = worker.sender.send

    def dying(*args, **kwargs):  # type: ignore[no-untyped-def]
        if when == "after-store":
            send(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)

    worker.sender.send = dying
    worker(Entry(DATA_ID.key, str(source), readout=1.8e9))


@pytest.mark.parametrize(("when", "status"), [("before-send", "stored"), ("after-store", "exists")])
def test_a_worker_sigkilled_after_its_sent_commit_is_redone_once_from_the_raw_file(
    tmp_path: Path, when: str, status: str
) -> None:
    """Crash safety of the single pre-send commit: a worker killed after it leaves the row
    ``sent`` with no spooled copy; that row, handed to a worker again, is compressed
    again from the raw file and sent, and the create-once store keeps one object: nothing lost,
    nothing doubled."""
    import multiprocessing

    source = tmp_path / "r.fits"
    source.write_bytes(raw_ccd())
    spool, store = tmp_path / "spool", tmp_path / "store"
    journal = Journal(spool)
    journal.add(Entry(key=DATA_ID.key, source=str(source)))
    child = multiprocessing.get_context("fork").Process(
        target=_killed_worker, args=(source, spool, store, when)
    )
    child.start()
    child.join(60)
    assert child.exitcode == -9
    row = journal.get(DATA_ID.key)
    assert row is not None and (row.state, row.attempts, row.spooled) == ("sent", 1, None)
    assert row.checksum and row.size
    worker = CcdWorker(f"file://{store}", "raw/", "quarantine/", str(spool), warm=False)
    outcome = worker(row)  # the journal's row, as the service's dispatch hands it over at resume
    assert outcome.ok and outcome.status == status and outcome.attempts == 2
    assert outcome.checksum == row.checksum  # the same bytes, compressed again
    stored = [p for p in (store / "raw").rglob("*") if p.is_file()]
    assert len(stored) == 1 and decompress_fits(stored[0].read_bytes()) == raw_ccd()
    final = journal.get(DATA_ID.key)
    assert final is not None and final.state == "acked"
    worker.close()


def test_a_gcs_destination_is_sent_through_the_lean_store(monkeypatch) -> None:
    """gs:// uploads go through ``GcsStore`` (one JSON-API request per put)."""
    from obsingest.store.gcs import GcsStore
    from producers.edge.ccd import open_edge_sender
    from producers.uploader import DirectUploader

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:9")
    sender = open_edge_sender("gs://bucket/any", "raw/", "quarantine/", "edge-1")
    assert isinstance(sender, DirectUploader) and isinstance(sender.store, GcsStore)
    assert sender.store.bucket == "bucket" and sender.prefix == "raw/"
    local = open_edge_sender("file:///tmp/x", "raw/", "quarantine/", "edge-1")
    assert not isinstance(getattr(local, "store", None), GcsStore)
