"""Data ids, object names and dataset ids: the identity of one CCD everywhere in the pipeline.

An object name is the only thing a storage notification is guaranteed to carry, so it encodes the
whole data id and is parsed strictly: anything that does not match exactly is a BadObjectName,
never a guess.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

from obsingest import camera, defaults
from obsingest.errors import BadObjectName, UnknownInstrument

#: Detectors read out per exposure, per instrument, numbered as obs_lsst numbers them
#: (``obsingest.camera``): LSSTCam 205 (189 science + 8 wavefront + 8 guider, ids 0..204),
#: LSSTComCam 9, LATISS 1.
INSTRUMENTS: dict[str, int] = {name: len(i.detectors) for name, i in camera.INSTRUMENTS.items()}

#: Rubin-style exposure ids: day_obs * 100000 + sequence number.
EXPOSURE_SEQ_FACTOR = 100_000

RAW_DATASET_TYPE = defaults.RAW_DATASET_TYPE
DEFAULT_PREFIX = defaults.RAW_PREFIX

#: Namespace of Butler-like deterministic dataset ids (uuid5 of "key=value" pairs).
DATASET_ID_NAMESPACE = uuid.UUID("840b31d9-05cd-5161-b2c8-00d32b280d0f")

_NAME_RE = re.compile(
    r"^(?P<instrument>[A-Za-z][A-Za-z0-9]*)/(?P<day_obs>[0-9]{8})/(?P<exposure>[0-9]{1,18})/"
    r"(?P<instrument2>[A-Za-z][A-Za-z0-9]*)_(?P<exposure2>[0-9]{1,18})_(?P<detector>[0-9]{3})"
    r"\.fits\.fz$"
)


@dataclass(frozen=True, order=True)
class DataId:
    """(instrument, exposure, detector): unique for one raw CCD."""

    instrument: str
    exposure: int
    detector: int

    def __post_init__(self) -> None:
        validate_detector(self.instrument, self.detector)
        if self.exposure <= 0:
            raise BadObjectName(f"exposure id must be positive, got {self.exposure}")
        validate_day_obs(self.day_obs, f"exposure {self.exposure}")

    @property
    def day_obs(self) -> int:
        return self.exposure // EXPOSURE_SEQ_FACTOR

    @property
    def key(self) -> str:
        """Stable string form; the Kafka key of every chunk of this CCD."""
        return f"{self.instrument}/{self.exposure}/{self.detector:03d}"

    def object_name(self, prefix: str = DEFAULT_PREFIX) -> str:
        return (
            f"{prefix}{self.instrument}/{self.day_obs}/{self.exposure}/"
            f"{self.instrument}_{self.exposure}_{self.detector:03d}.fits.fz"
        )

    def as_fields(self) -> dict[str, int | str]:
        return {
            "instrument": self.instrument,
            "exposure": self.exposure,
            "detector": self.detector,
            "day_obs": self.day_obs,
        }


def validate_instrument(instrument: str) -> int:
    """Number of detectors of ``instrument``; UnknownInstrument if we do not ingest it."""
    try:
        return INSTRUMENTS[instrument]
    except KeyError:
        raise UnknownInstrument(
            f"unknown instrument {instrument!r} (known: {', '.join(sorted(INSTRUMENTS))})"
        ) from None


def validate_detector(instrument: str, detector: int) -> None:
    validate_instrument(instrument)
    try:
        camera.detector(instrument, detector)
    except KeyError:
        ids = camera.INSTRUMENTS[instrument].detector_ids
        raise BadObjectName(
            f"detector {detector} out of range {min(ids)}..{max(ids)} for {instrument}"
        ) from None


def validate_day_obs(day_obs: int, what: str) -> None:
    year, month, day = day_obs // 10000, day_obs // 100 % 100, day_obs % 100
    if not (1990 <= year <= 2200 and 1 <= month <= 12 and 1 <= day <= 31):
        raise BadObjectName(f"{what}: day_obs {day_obs} is not a YYYYMMDD date")


def make_exposure_id(day_obs: int, seq_num: int) -> int:
    validate_day_obs(day_obs, "exposure id")
    if not 0 < seq_num < EXPOSURE_SEQ_FACTOR:
        raise ValueError(f"sequence number {seq_num} out of range 1..{EXPOSURE_SEQ_FACTOR - 1}")
    return day_obs * EXPOSURE_SEQ_FACTOR + seq_num


def parse_object_name(name: str, prefix: str = DEFAULT_PREFIX) -> DataId:
    """Data id of ``name``; else BadObjectName naming the object and the reason."""
    if not name.startswith(prefix):
        raise BadObjectName(f"object {name!r}: outside the ingest prefix {prefix!r}")
    rest = name[len(prefix) :]
    if rest.startswith("/") or "\\" in rest or "//" in rest:
        raise BadObjectName(f"object {name!r}: absolute or malformed path")
    if any(part in {"..", "."} for part in rest.split("/")):
        raise BadObjectName(f"object {name!r}: path escapes the prefix ('.' or '..')")
    match = _NAME_RE.match(rest)
    if not match:
        raise BadObjectName(
            f"object {name!r}: does not match "
            "{instrument}/{day_obs}/{exposure}/{instrument}_{exposure}_{detector:03d}.fits.fz"
        )
    instrument = match["instrument"]
    if match["instrument2"] != instrument or match["exposure2"] != match["exposure"]:
        raise BadObjectName(f"object {name!r}: directory and file name disagree")
    try:
        data_id = DataId(instrument, int(match["exposure"]), int(match["detector"]))
    except BadObjectName as exc:
        raise type(exc)(f"object {name!r}: {exc}") from None
    if data_id.day_obs != int(match["day_obs"]):
        raise BadObjectName(
            f"object {name!r}: day_obs {match['day_obs']} does not match "
            f"exposure {data_id.exposure}"
        )
    return data_id


def dataset_id(data_id: DataId, dataset_type: str = RAW_DATASET_TYPE, run: str = "") -> uuid.UUID:
    """Deterministic dataset id, made as a Butler registry makes it for (type, run, data id).

    The same CCD ingested into the same run always gets the same id, on any machine, which is
    what makes re-registration and subscriber deduplication safe.
    """
    items = [("dataset_type", dataset_type), ("run", run)]
    items += sorted(
        [
            ("detector", str(data_id.detector)),
            ("exposure", str(data_id.exposure)),
            ("instrument", data_id.instrument),
        ]
    )
    return uuid.uuid5(DATASET_ID_NAMESPACE, ",".join(f"{k}={v}" for k, v in items))
