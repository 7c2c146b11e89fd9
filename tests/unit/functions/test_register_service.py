from datetime import UTC, datetime, timedelta

import pytest

from functions.register.verify import HEAD_BYTES, MAX_OBJECT_BYTES
from obsingest.checksums import checksum_from_crc32c_b64
from obsingest.errors import CorruptFile, HeaderMismatch, RetriableError
from obsingest.store.notifications import MetadataKeys, from_storage_cloudevent, storage_cloudevent
from producers.uploader import DirectUploader

from .conftest import small_ccd

pytestmark = pytest.mark.unit

READOUT = datetime(2026, 11, 22, 3, 0, 30, tzinfo=UTC)


def _upload(env, did, data=None):
    uploader = DirectUploader(env.store)
    return uploader.send(
        did, data or small_ccd(did.exposure, did.detector), READOUT, READOUT + timedelta(seconds=0.3)
    )


def test_good_ccd_is_registered_and_announced_with_every_stage_time(env, did):
    _upload(env, did)
    [outcome] = env.deliver_all()
    assert outcome.status == "registered"
    [arrival] = env.arrivals()
    assert arrival.data_id == did and arrival.transport == "direct"
    assert arrival.readout_time == READOUT
    assert arrival.compressed_time == READOUT + timedelta(seconds=0.3)
    assert arrival.readout_time <= arrival.compressed_time <= arrival.stored_time
    assert arrival.stored_time <= arrival.registered_time <= arrival.published_time
    assert arrival.uri.startswith("file://") and arrival.uri.endswith(did.object_name())
    [row] = env.registry.datasets()
    assert row["id"] == str(arrival.dataset_id) and row["checksum"] == arrival.checksum
    msg = env.bus.topics["ccd-arrivals"][0]
    assert msg.attributes["detector"] == "3" and msg.key == f"LSSTComCam/{did.exposure}"


def test_redelivered_event_is_a_noop_that_republishes_the_same_dataset(env, did):
    _upload(env, did)
    env.deliver_all()
    event = storage_cloudevent(env.store.stat(did.object_name()))
    outcome = env.service.handle(from_storage_cloudevent(event, event["data"]))
    assert outcome.status == "duplicate"
    first, second = env.arrivals()
    assert first.dataset_id == second.dataset_id
    assert first.registered_time == second.registered_time
    assert env.registry.count_datasets() == 1


def test_publish_failure_leaves_the_announcement_in_the_outbox_and_redelivery_publishes_it(
    env, did, monkeypatch
):
    _upload(env, did)
    [(_path, event)] = env.store.outbox().pending()
    original = env.bus.publish

    def broken(*args, **kwargs):
        raise RetriableError("Pub/Sub unavailable")

    monkeypatch.setattr(env.bus, "publish", broken)
    outcome = env.service.handle(from_storage_cloudevent(event, event["data"]))
    # registered and acked: the outbox owns the announcement now
    assert outcome.status == "registered" and "outbox" in outcome.message
    status = env.registry.outbox.status()
    assert (status.pending, status.published) == (1, 0)
    row = env.registry.outbox.row(outcome.arrival.dataset_id)
    assert row["attempts"] == 1 and "Pub/Sub unavailable" in row["last_error"]
    monkeypatch.setattr(env.bus, "publish", original)
    assert env.service.handle(from_storage_cloudevent(event, event["data"])).status == "duplicate"
    assert len(env.arrivals()) == 1 and env.registry.count_datasets() == 1
    assert env.registry.outbox.status().pending == 0
    assert env.service.announcer.drain().published == 0  # nothing published twice


def _quarantined(env):
    return {(row["reason"], row["object_uri"].rsplit("/", 1)[-1]) for row in env.registry.quarantined()}


def test_garbage_and_truncated_files_from_a_foreign_writer_are_quarantined(env, did):
    """Bytes nobody vouched for (no obsingest-checksum) are read whole and parsed HDU by HDU."""
    good = small_ccd(did.exposure, did.detector)
    env.store.put(did.object_name(), good[: len(good) // 2])
    other = type(did)(did.instrument, did.exposure, 4)
    env.store.put(other.object_name(), b"SIMPLE  = no" + bytes(100))
    outcomes = env.deliver_all()
    assert [o.status for o in outcomes] == ["quarantined", "quarantined"]
    assert {o.reason for o in outcomes} == {"corrupt-file"}
    assert "truncated" in outcomes[0].message and did.object_name() in outcomes[0].message
    assert env.registry.count_datasets() == 0 and env.arrivals() == []


def test_the_edge_never_sends_a_truncated_ccd(env, did):
    """The sender vouches for structure too: it refuses, and the edge quarantines the file."""
    good = small_ccd(did.exposure, did.detector)
    with pytest.raises(CorruptFile, match=rf"CCD {did.key}: not sent: truncated"):
        DirectUploader(env.store).send(did, good[: len(good) // 2], READOUT)
    assert env.deliver_all() == []


def test_a_vouched_ccd_is_verified_by_checksums_reading_only_its_header(env, did, monkeypatch):
    DirectUploader(env.store).send(did, small_ccd(did.exposure, did.detector), READOUT)
    heads = []
    read_head = env.store.read_head
    monkeypatch.setattr(env.store, "read", lambda name: pytest.fail(f"read whole: {name}"))
    monkeypatch.setattr(env.store, "read_head", lambda name, n: heads.append(n) or read_head(name, n))
    [outcome] = env.deliver_all()
    assert outcome.status == "registered" and heads == [HEAD_BYTES]
    stored = env.store.stat(did.object_name())
    [row] = env.registry.datasets()
    assert row["checksum"] == checksum_from_crc32c_b64(stored.crc32c)
    assert row["size"] == stored.size


def test_an_object_larger_than_any_ccd_is_quarantined_unread(env, did, monkeypatch):
    """Read whole into memory, a multi-GB file under raw/ was a MemoryError (503, redelivered
    for ever) or the function's OOM kill: refused on the size its event gives, never read."""
    env.store.put(did.object_name(), b"not a CCD at all")
    [(_path, event)] = env.store.outbox().pending()
    event["data"]["size"] = str(MAX_OBJECT_BYTES + 1)

    def too_much(name):
        raise MemoryError(f"read whole: {name}")

    monkeypatch.setattr(env.store, "read", too_much)
    outcome = env.service.handle(from_storage_cloudevent(event, event["data"]))
    assert (outcome.status, outcome.reason) == ("quarantined", "corrupt-file")
    assert f"{MAX_OBJECT_BYTES + 1} bytes" in outcome.message and did.object_name() in outcome.message
    assert env.registry.count_datasets() == 0


@pytest.mark.parametrize("when", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"])
def test_a_readout_time_with_no_utc_instant_is_unreadable_not_a_crash(env, did, when):
    """Metadata whose time has no UTC datetime raised OverflowError from the registry (an HTTP
    500, redelivered until dead-lettered): it is unreadable, so the store's time stands in."""
    _upload(env, did)
    [(_path, event)] = env.store.outbox().pending()
    event["data"]["metadata"][MetadataKeys.READOUT_TIME] = when
    outcome = env.service.handle(from_storage_cloudevent(event, event["data"]))
    assert outcome.status == "registered"
    assert outcome.arrival.readout_time == outcome.arrival.stored_time


def test_a_claim_the_stored_bytes_do_not_match_is_read_whole_and_refused(env, did):
    ccd = small_ccd(did.exposure, did.detector)
    env.store.put(did.object_name(), ccd, {MetadataKeys.CHECKSUM: "crc32c:00000000"})
    [outcome] = env.deliver_all()
    assert outcome.reason == "checksum-mismatch"
    assert "producer checksum crc32c:00000000 != stored" in outcome.message


def test_a_vouched_ccd_replaced_since_its_event_is_refused(env, did):
    DirectUploader(env.store).send(did, small_ccd(did.exposure, did.detector), READOUT)
    outbox = env.store.outbox()
    [(_path, event)] = outbox.pending()
    event["data"]["generation"] = str(int(event["data"]["generation"]) + 1)
    outcome = env.service.handle(from_storage_cloudevent(event, event["data"]))
    assert outcome.reason == "checksum-mismatch" and "replaced since" in outcome.message
    assert env.registry.count_datasets() == 0


def test_header_naming_another_ccd_is_quarantined(env, did):
    other = type(did)(did.instrument, did.exposure, 5)
    with pytest.raises(HeaderMismatch, match="its header says LSSTComCam/2026112200001/003"):
        DirectUploader(env.store).send(other, small_ccd(did.exposure, did.detector), READOUT)
    # a producer that does not check: the name says detector 5, the header detector 3
    env.store.put(other.object_name(), small_ccd(did.exposure, did.detector))
    [outcome] = env.deliver_all()
    assert outcome.reason == "header-mismatch"
    assert "header says LSSTComCam/2026112200001/003 (CC_O_20261122_000001 R22_S10)" in (outcome.message)
    assert "name says LSSTComCam/2026112200001/005 (CC_O_20261122_000001)" in outcome.message
    [row] = env.registry.quarantined()
    assert row["reason"] == "header-mismatch"


def test_objects_under_any_name_register_under_their_headers_data_id(env, did):
    data = small_ccd(did.exposure, did.detector)
    env.store.put("raw/incoming/night 1/some-ccd.fits", data)
    [outcome] = env.deliver_all()
    assert outcome.status == "registered" and outcome.data_id == did
    [arrival] = env.arrivals()
    assert arrival.data_id == did and arrival.uri.endswith("raw/incoming/night 1/some-ccd.fits")


def test_a_header_without_identity_is_quarantined_naming_the_card(env):
    from obsingest.fits import header_bytes, make_card

    cards = [
        make_card("SIMPLE", True),
        make_card("BITPIX", 8),
        make_card("NAXIS", 0),
        make_card("INSTRUME", "comCam"),
        make_card("OBSID", "CC_O_20261122_000001"),
        make_card("CCDSLOT", "S11"),
    ]
    env.store.put("raw/MC_elsewhere.fits", header_bytes(cards))
    [outcome] = env.deliver_all()
    assert outcome.reason == "no-identity" and "no RAFTBAY card" in outcome.message


def test_bad_names_are_quarantined_not_raised(env):
    env.store.put("raw/Nonesuch/20261122/2026112200001/Nonesuch_2026112200001_000.fits.fz", b"x")
    env.store.put("elsewhere/file.txt", b"x")
    outcomes = env.deliver_all()
    assert sorted(o.reason for o in outcomes) == ["bad-object-name", "unknown-instrument"]
    assert len(env.registry.quarantined()) == 2


def test_event_for_a_missing_object_is_quarantined(env, did):
    _upload(env, did)
    [(_path, event)] = env.store.outbox().pending()
    env.store.delete(did.object_name())
    outcome = env.service.handle(from_storage_cloudevent(event, event["data"]))
    assert outcome.reason == "object-missing"


def test_different_bytes_for_a_registered_ccd_are_parked_and_quarantined(env, did):
    _upload(env, did)
    env.deliver_all()
    good = small_ccd(did.exposure, did.detector)
    result = _upload(env, did, good[:-2880] + bytes(2880))
    assert result.status == "conflict" and result.obj.name.startswith("quarantine/")
    [outcome] = env.deliver_all()
    assert outcome.status == "quarantined" and outcome.reason == "checksum-conflict"
    assert outcome.data_id == did
    [row] = env.registry.quarantined()
    assert row["detector"] == did.detector
    assert env.registry.count_datasets() == 1
    assert env.store.read(did.object_name()) == good


def test_registry_level_conflict_is_quarantined(env, did):
    """Defence in depth: a file deleted and re-uploaded with other bytes never overwrites."""
    _upload(env, did)
    env.deliver_all()
    env.store.delete(did.object_name())
    good = small_ccd(did.exposure, did.detector)
    _upload(env, did, good[:-2880] + bytes(2880))
    [outcome] = env.deliver_all()
    assert outcome.reason == "checksum-conflict" and "refusing" in outcome.message


def test_producer_checksum_mismatch_is_quarantined(env, did):
    data = small_ccd(did.exposure, did.detector)
    env.store.put(did.object_name(), data, {MetadataKeys.CHECKSUM: "crc32c:deadbeef"})
    [outcome] = env.deliver_all()
    assert outcome.reason == "checksum-mismatch"


def test_retriable_registry_failure_propagates(env, did, monkeypatch):
    from obsingest.registry import RegistryUnavailable

    _upload(env, did)
    [(_path, event)] = env.store.outbox().pending()

    def down(*a, **k):
        raise RegistryUnavailable("too many connections")

    monkeypatch.setattr(env.registry, "register", down)
    with pytest.raises(RegistryUnavailable):
        env.service.handle(from_storage_cloudevent(event, event["data"]))
    assert env.registry.quarantined() == []


def test_event_for_another_bucket_is_quarantined_not_registered(env, did):
    import dataclasses

    _upload(env, did)
    [(_, event)] = env.store.outbox().pending()
    foreign = from_storage_cloudevent(event, event["data"])
    foreign = dataclasses.replace(foreign, obj=dataclasses.replace(foreign.obj, bucket="elsewhere"))
    outcome = env.service.handle(foreign)
    assert outcome.status == "quarantined" and outcome.reason == "foreign-bucket"
    assert env.registry.count_datasets() == 0
    [row] = env.registry.quarantined()
    assert row["object_uri"] == f"elsewhere/{did.object_name()}"


def test_the_exposure_record_is_kept_from_the_header_and_another_detector_is_refused(env, did):
    from sqlalchemy import select

    from obsingest.fits import make_card
    from obsingest.registry import tables
    from producers.compress import compress_fits, decompress_fits

    DirectUploader(env.store).send(did, small_ccd(did.exposure, did.detector), READOUT)
    raw = decompress_fits(small_ccd(did.exposure, 4))
    start = raw.index(b"CCDSLOT = ")  # the camera's detector: RAFTBAY + CCDSLOT
    raw = raw[:start] + make_card("CCDSLOT", "S22") + raw[start + 80 :]
    other = type(did)(did.instrument, did.exposure, 4)
    env.store.put(other.object_name(), compress_fits(raw, threads=1))  # past a sender
    outcomes = env.deliver_all()
    assert [o.status for o in outcomes] == ["registered", "quarantined"]
    assert outcomes[1].reason == "header-mismatch"
    assert "R22_S22" in outcomes[1].message
    with env.registry.engine.connect() as conn:
        row = conn.execute(select(tables.exposure)).mappings().one()
    assert (row["obs_id"], row["physical_filter"], row["band"]) == ("CC_O_20261122_000001", "r_03", "r")
    assert (row["observation_type"], row["seq_num"], row["dark_time"]) == ("science", 1, 15.4306)


def test_a_database_hiccup_looking_up_an_announced_row_is_retried_not_a_500(env, did, monkeypatch):
    """A redelivery whose publish fails asks the outbox whether the dataset was announced: a
    transient database error there is retried like every registry call (it was an HTTP 500)."""
    import sqlite3

    from sqlalchemy.exc import OperationalError

    _upload(env, did)
    [(_path, event)] = env.store.outbox().pending()
    env.service.handle(from_storage_cloudevent(event, event["data"]))
    engine, connect = env.registry.engine, env.registry.engine.connect
    hiccups = []

    def hiccup_once():
        if not hiccups:
            hiccups.append(1)
            raise OperationalError("SELECT", {}, sqlite3.OperationalError("disk I/O error"))
        return connect()

    def broken(*args, **kwargs):
        monkeypatch.setattr(engine, "connect", hiccup_once)  # the next database call hiccups
        raise RetriableError("Pub/Sub unavailable")

    monkeypatch.setattr(env.bus, "publish", broken)
    outcome = env.service.handle(from_storage_cloudevent(event, event["data"]))
    assert outcome.status == "duplicate" and hiccups == [1]
