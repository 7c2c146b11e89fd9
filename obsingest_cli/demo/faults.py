"""Bad inputs the demo can inject (``--inject-bad``), to show each is quarantined with a reason
while every good CCD is still registered exactly once."""

from __future__ import annotations

from typing import TYPE_CHECKING

from obsingest.dataid import DataId, make_exposure_id
from obsingest.messages import utcnow
from obsingest.store.base import StoredObject
from producers.uploader import DirectUploader

if TYPE_CHECKING:
    from obsingest_cli.demo.environment import DemoEnvironment

#: reason each injected input must be quarantined with (or "duplicate" for a no-op)
EXPECTED_REASONS: dict[str, str] = {
    "escaping-name": "bad-object-name",
    "outside-prefix": "bad-object-name",
    "unknown-instrument": "unknown-instrument",
    "no-identity": "no-identity",
    "garbage-fits": "corrupt-file",
    "truncated-fits": "corrupt-file",
    "header-mismatch": "header-mismatch",
    "missing-object": "object-missing",
    "different-bytes": "checksum-conflict",
}


def _fake_object(env: DemoEnvironment, name: str) -> StoredObject:
    """A notification as a buggy or hostile notifier would send it, for an object never stored."""
    return StoredObject(
        bucket=env.store.bucket,
        name=name,
        size=1,
        crc32c="",
        md5_hash="",
        generation=1,
        time_created=utcnow(),
        metadata={},
    )


def inject_bad_inputs(env: DemoEnvironment, good: DataId) -> dict[str, str]:
    """Inject every bad input next to the good CCD ``good`` (already stored)."""
    store = env.store
    uploader = DirectUploader(store, producer="fault-injector")
    day_obs = good.day_obs
    good_name = good.object_name()
    good_bytes = store.read(good_name)
    now = utcnow()

    env.inject_notification(_fake_object(env, f"raw/{good.instrument}/{day_obs}/../../../etc/passwd.fits.fz"))
    store.put("misc/README.txt", b"not a CCD")
    unknown = f"raw/Nonesuch/{day_obs}/{good.exposure}/Nonesuch_{good.exposure}_000.fits.fz"
    store.put(unknown, good_bytes)
    # any name below the prefix is taken, but this header's detector card is gone
    no_detector = good_bytes.replace(b"RAFTBAY = ", b"RAFTBAX = ", 1)
    store.put(f"raw/{good.instrument}/{day_obs}/incoming/ccd-0x1.fits", no_detector)
    # garbage and truncated bytes written straight into the bucket by a client that is not an
    # obsingest sender (a sender refuses them: producers/ccd_bytes.py): without a sender's
    # checksum claim the function reads them whole and refuses them
    garbage = DataId(good.instrument, make_exposure_id(day_obs, 901), 0)
    store.put(garbage.object_name(), b"SIMPLE  = garbage" + bytes(5000))
    truncated = DataId(good.instrument, make_exposure_id(day_obs, 902), 0)
    store.put(truncated.object_name(), good_bytes[: len(good_bytes) // 2])
    mismatch = DataId(good.instrument, make_exposure_id(day_obs, 903), 0)
    store.put(mismatch.object_name(), good_bytes)  # a sender would refuse it (header-mismatch)
    gone = DataId(good.instrument, make_exposure_id(day_obs, 904), 0)
    env.inject_notification(_fake_object(env, gone.object_name()))
    # a re-delivered notification for the good CCD: must be a no-op
    env.inject_notification(store.stat(good_name))
    # different bytes under the good CCD's data id: refused, parked, quarantined
    uploader.send(good, good_bytes[:-2880] + bytes(2880), now)
    return EXPECTED_REASONS
