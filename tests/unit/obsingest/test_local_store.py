import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from obsingest.checksums import crc32c_b64
from obsingest.errors import BadObjectName
from obsingest.store.base import ObjectConflict
from obsingest.store.local import DLQ_DIR, OUTBOX_DIR, TMP_DIR, LocalDirStore
from obsingest.store.notifications import STORAGE_FINALIZED
from tests.contracts.object_store import ObjectStoreContract

pytestmark = pytest.mark.unit

NAME = "raw/LSSTCam/20261122/2026112200001/LSSTCam_2026112200001_000.fits.fz"


def test_put_is_create_once_and_emits_one_finalize_event(tmp_path):
    store = LocalDirStore(tmp_path)
    first = store.put(NAME, b"abc", {"k": "v"})
    assert first.created and store.read(NAME) == b"abc"
    again = store.put(NAME, b"abc")
    assert not again.created and again.obj.generation == first.obj.generation
    events = store.outbox().pending()
    assert len(events) == 1
    event = events[0][1]
    assert event["type"] == STORAGE_FINALIZED
    assert event["subject"] == f"objects/{NAME}"
    data = event["data"]
    assert data["name"] == NAME and data["size"] == "3" and data["metadata"] == {"k": "v"}
    assert data["crc32c"] == crc32c_b64(b"abc")


class TestLocalDirStoreContract(ObjectStoreContract):
    """The ObjectStore contract on the embedded default store."""

    @pytest.fixture
    def store(self, tmp_path):
        return LocalDirStore(tmp_path)


def test_a_conflict_or_a_concurrent_duplicate_emits_no_second_event(tmp_path):
    store = LocalDirStore(tmp_path)
    store.put(NAME, b"abc")
    with pytest.raises(ObjectConflict):
        store.put(NAME, b"abd")
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: store.put(NAME, b"abc"), range(16)))
    assert not any(r.created for r in results)
    assert len(store.outbox().pending()) == 1


def test_names_that_escape_the_store_are_refused(tmp_path):
    store = LocalDirStore(tmp_path)
    with pytest.raises(BadObjectName):
        store.put("raw/../../etc/passwd", b"x")


def test_recovery_promotes_staged_events_of_stored_objects_and_drops_the_rest(tmp_path):
    store = LocalDirStore(tmp_path)
    store.put(NAME, b"abc")
    [(path, event)] = store.outbox().pending()
    # a crash after the link but before promotion leaves the event staged
    path.rename(path.with_suffix(".pending"))
    orphan = dict(event, data=dict(event["data"], name="raw/never/written.fits.fz"))
    (tmp_path / OUTBOX_DIR / "0-orphan.pending").write_text(json.dumps(orphan))
    reopened = LocalDirStore(tmp_path)
    pending = reopened.outbox().pending()
    assert [e["data"]["name"] for _, e in pending] == [NAME]
    assert not list((tmp_path / OUTBOX_DIR).glob("*.pending"))


def test_a_retry_after_a_failed_promotion_promotes_the_staged_event(tmp_path):
    """The object was linked but its event stayed staged (the rename failed): the retry's
    "exists" promotes it, once."""
    store = LocalDirStore(tmp_path)
    store.put(NAME, b"abc")
    [(path, _)] = store.outbox().pending()
    path.rename(path.with_suffix(".pending"))
    assert not store.put(NAME, b"abc").created
    assert [e["data"]["name"] for _, e in store.outbox().pending()] == [NAME]
    assert not list((tmp_path / OUTBOX_DIR).glob("*.pending"))


def test_an_unreadable_staged_event_neither_blocks_a_put_nor_a_start(tmp_path):
    """A corrupt ``.pending`` file is left where it is: a repeated put and a restart still work."""
    store = LocalDirStore(tmp_path)
    store.put(NAME, b"abc")
    corrupt = tmp_path / OUTBOX_DIR / "corrupt.pending"
    corrupt.write_text("{not json")
    assert not store.put(NAME, b"abc").created
    assert LocalDirStore(tmp_path).stat(NAME).size == 3
    assert corrupt.exists()


def test_ack_and_dead_letter(tmp_path):
    store = LocalDirStore(tmp_path)
    store.put(NAME, b"abc")
    store.put(NAME.replace("_000", "_001"), b"abc")
    outbox = store.outbox()
    (p1, _), (p2, _) = outbox.pending()
    outbox.ack(p1)
    target = outbox.dead_letter(p2, "boom", 5)
    assert outbox.pending() == []
    assert json.loads(target.read_text())["deadLetter"] == {"reason": "boom", "attempts": 5}


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b'{"data": {"name": "raw/', "not JSON (Unterminated string"),
        (b"\xff{", "not JSON text ('utf-8' codec can't decode byte 0xff in position 0"),
        (b"[1, 2]", "not a JSON object (a JSON array)"),
        (b"null", "not a JSON object (a JSON null)"),
        (b'"text"', "not a JSON object (a JSON string)"),
    ],
)
def test_an_event_file_holding_no_event_is_dead_lettered_with_its_text_and_the_rest_listed(
    tmp_path, raw, why
):
    """Event files appear whole (renamed into place), so one that is no JSON object is corrupt:
    listing the outbox raised for all of them (torn JSON) or listed it for the dispatcher to trip
    on (not an object); now it goes to the dead letters, named with its reason, its text kept."""
    store = LocalDirStore(tmp_path)
    outbox = store.outbox()
    bad = tmp_path / OUTBOX_DIR / "00000000000000000001-bad.json"  # first in name (= time) order
    bad.write_bytes(raw)
    store.put(NAME, b"abc")
    refused: list[tuple[str, str]] = []
    [(_, event)] = outbox.pending(lambda letter, reason: refused.append((letter.name, reason)))
    assert event["data"]["name"] == NAME
    [(name, reason)] = refused
    assert name == bad.name and reason.startswith(f"event file {bad.name}: {why}")
    assert not bad.exists()
    letter = json.loads((tmp_path / DLQ_DIR / bad.name).read_text())
    assert letter == {
        "raw": raw.decode("utf-8", "backslashreplace"),
        "deadLetter": {"reason": reason, "attempts": 0},
    }
    assert len(outbox.pending()) == 1 and len(refused) == 1  # moved once


def test_dead_letter_keeps_the_text_of_an_event_that_is_not_an_object(tmp_path):
    outbox = LocalDirStore(tmp_path).outbox()
    path = tmp_path / OUTBOX_DIR / "1-list.json"
    path.write_text("[1, 2]")
    target = outbox.dead_letter(path, "boom", 1)
    assert json.loads(target.read_text()) == {
        "raw": "[1, 2]",
        "deadLetter": {"reason": "boom", "attempts": 1},
    }
    assert not path.exists()


KILLED_BEFORE_THE_LINK = r"""
import os, signal, sys
from obsingest.store.local import LocalDirStore
store = LocalDirStore(sys.argv[1])
os.link = lambda *_a, **_k: os.kill(os.getpid(), signal.SIGKILL)  # the bytes written, not linked
store.put("raw/LSSTCam/x.fits.fz", b"x" * 100_000)
"""


def test_a_put_killed_before_its_link_leaves_no_temporary_file_after_the_next_start(tmp_path) -> None:
    """A SIGKILL between writing a put's bytes and linking them left the whole object in .tmp/
    for good; the next start deletes such files once no live put can own them."""
    root = tmp_path / "bucket"
    LocalDirStore(root)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.run([sys.executable, "-c", KILLED_BEFORE_THE_LINK, str(root)], env=env, timeout=120)
    assert child.returncode == -signal.SIGKILL
    old = list((root / TMP_DIR).iterdir())
    assert len(old) == 1
    os.utime(old[0], (time.time() - 7200, time.time() - 7200))
    young = root / TMP_DIR / "another-put-writing.part"
    young.write_bytes(b"y")  # a live put's: kept
    store = LocalDirStore(root)
    assert [p.name for p in (root / TMP_DIR).iterdir()] == [young.name]
    assert store.put("raw/LSSTCam/x.fits.fz", b"x" * 100_000).created
