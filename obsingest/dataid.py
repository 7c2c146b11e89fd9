"""Data ids, object names and dataset ids: the identity of one CCD everywhere in the pipeline.

A CCD's identity is (instrument, exposure, detector), from the camera's file name or header by
obs_lsst's rules (exposure id ``day_obs * 100000 + seq_num``). Objects are stored in Rubin's
raw layout (prompt_processing's ``LSST_REGEXP``),
``{instrument}/{day_obs}/{obs_id}/{obs_id}_{raft}_{sensor}.fits``; the earlier layout
``{instrument}/{day_obs}/{exposure}/{instrument}_{exposure}_{detector:03d}.fits.fz`` stays readable;
any other name is a BadObjectName, never a guess.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from obsingest import camera, defaults
from obsingest.errors import BadObjectName, NoIdentity, UnknownInstrument

#: Detectors read out per exposure, per instrument, numbered as obs_lsst numbers them
#: (``obsingest.camera``): LSSTCam 205 (189 science + 8 wavefront + 8 guider, ids 0..204),
#: LSSTComCam 9, LATISS 1.
INSTRUMENTS: dict[str, int] = {name: len(i.detectors) for name, i in camera.INSTRUMENTS.items()}

#: Rubin-style exposure ids: day_obs * 100000 + sequence number.
EXPOSURE_SEQ_FACTOR = 100_000
#: The controller offset is added to the year part of the day: 1000 years per step.
_CONTROLLER_STEP = 10_000_000
#: obs_lsst's controllers, in the order of their exposure-id offset: O (OCS) none, C (CCS) one,
#: then the simulated ones (H, P, Q, S).
CONTROLLERS = "OCHPQS"
#: From these days on a controller shares the OCS's counter and gets no offset (obs_lsst).
_SHARED_COUNTER_FROM = {"C": 20231005, "P": 20250418, "Q": 20250418, "S": 20250418}

#: Namespace of Butler-like deterministic dataset ids (uuid5 of "key=value" pairs).
DATASET_ID_NAMESPACE = uuid.UUID("840b31d9-05cd-5161-b2c8-00d32b280d0f")

#: Butler instrument name per lower-cased ``INSTRUME``: its own, ComCam's ``comCam``, and LATISS's
#: before 2019 (obs_lsst's LATISS translator takes both)
HEADER_INSTRUMENTS = {"comcam": "LSSTComCam", "lsst_atiss": "LATISS"}
HEADER_INSTRUMENTS |= {name.lower(): name for name in camera.INSTRUMENTS}
#: INSTRUME as each camera writes it (real headers, HEADVER 2)
CAMERA_INSTRUME = {"LSSTCam": "lsstCam", "LSSTComCam": "ComCam", "LATISS": "LATISS"}
CAMERA_CODES = {i.obsid_prefix: name for name, i in camera.INSTRUMENTS.items()}

_OBS_ID = r"(?P<code>[A-Z]{2})_(?P<controller>[A-Z])_(?P<obs_day>[0-9]{8})_(?P<seq>[0-9]{6})"
_OBS_ID_RE = re.compile(f"^{_OBS_ID}$")
_RUBIN_RE = re.compile(
    r"^(?P<instrument>[A-Za-z][A-Za-z0-9]*)/(?P<day_obs>[0-9]{8})/"
    rf"(?P<obs_id>{_OBS_ID})/(?P=obs_id)_(?P<raft>R[0-9X]{{2}})_(?P<sensor>S(?:[0-9]{{2}}|[GW][0-9]))"
    r"\.fits(?:\.fz)?$"
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_LEGACY_RE = re.compile(
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
        validate_instrument(self.instrument)
        try:
            camera.detector(self.instrument, self.detector)
        except KeyError:
            ids = camera.INSTRUMENTS[self.instrument].detector_ids
            raise BadObjectName(
                f"detector {self.detector} out of range {min(ids)}..{max(ids)} for {self.instrument}"
            ) from None
        if self.exposure <= 0:
            raise BadObjectName(f"exposure id must be positive, got {self.exposure}")
        validate_day_obs(self.day_obs, f"exposure {self.exposure}")

    @property
    def day_obs(self) -> int:
        """The observing day: the exposure id's day, less any controller's year offset."""
        return exposure_day_obs(self.exposure)

    @property
    def seq_num(self) -> int:
        return self.exposure % EXPOSURE_SEQ_FACTOR

    @property
    def key(self) -> str:
        """Stable string form; the Kafka key of every chunk of this CCD."""
        return f"{self.instrument}/{self.exposure}/{self.detector:03d}"

    def object_name(self, prefix: str = defaults.RAW_PREFIX, controller: str | None = None) -> str:
        """The object's name in Rubin's layout. Pass the header's ``controller`` where known:
        the exposure id does not always imply it (O and C share one counter since 2023-10-05)."""
        return self.identity(controller).object_name(prefix)

    def identity(self, controller: str | None = None) -> Identity:
        """The camera's names for this CCD (observation id, raft, sensor)."""
        inst = camera.instrument(self.instrument)
        det = camera.detector(self.instrument, self.detector)
        offset = (self.exposure // EXPOSURE_SEQ_FACTOR - self.day_obs) // _CONTROLLER_STEP
        controller = controller or CONTROLLERS[offset]
        obs_id = f"{inst.obsid_prefix}_{controller}_{self.day_obs}_{self.seq_num:06d}"
        raft = "R00" if not inst.has_rafts else det.raft
        return Identity(self, obs_id, raft, det.name_in_raft)


@dataclass(frozen=True)
class Identity:
    """A CCD as the camera names it: its data id, observation id, and raft and sensor as the
    camera writes them into file names (LATISS: ``R00``, although its detector is ``RXX_S00``)."""

    data_id: DataId
    obs_id: str
    raft: str
    sensor: str
    group: str | None = None

    @property
    def file_name(self) -> str:
        """The camera's own file name, e.g. ``MC_O_20250415_000060_R01_S01.fits``."""
        return f"{self.obs_id}_{self.raft}_{self.sensor}.fits"

    def object_name(self, prefix: str = defaults.RAW_PREFIX) -> str:
        data_id = self.data_id
        return f"{prefix}{data_id.instrument}/{data_id.day_obs}/{self.obs_id}/{self.file_name}"


def validate_instrument(instrument: str) -> None:
    """UnknownInstrument if we do not ingest ``instrument``."""
    if instrument not in INSTRUMENTS:
        raise UnknownInstrument(
            f"unknown instrument {instrument!r} (known: {', '.join(sorted(INSTRUMENTS))})"
        )


def validate_day_obs(day_obs: int, what: str) -> None:
    year, month, day = day_obs // 10000, day_obs // 100 % 100, day_obs % 100
    if not (1990 <= year <= 2200 and 1 <= month <= 12 and 1 <= day <= 31):
        raise BadObjectName(f"{what}: day_obs {day_obs} is not a YYYYMMDD date")


def make_exposure_id(day_obs: int, seq_num: int, controller: str | None = None) -> int:
    """obs_lsst's exposure id: ``day_obs * 100000 + seq_num``, the year raised by 1000 per step
    of ``controller`` in CONTROLLERS while that controller kept a counter of its own."""
    validate_day_obs(day_obs, "exposure id")
    if not 0 <= seq_num < EXPOSURE_SEQ_FACTOR:
        raise ValueError(f"sequence number {seq_num} out of range 0..{EXPOSURE_SEQ_FACTOR - 1}")
    return packed_exposure_id(day_obs, seq_num, controller)


def packed_exposure_id(day_obs: int, seq_num: int, controller: str | None) -> int:
    """``make_exposure_id`` of values the caller has checked."""
    offset = 0
    if controller is not None and controller in CONTROLLERS:  # another letter: no offset
        shared_from = _SHARED_COUNTER_FROM.get(controller)
        if shared_from is None or day_obs < shared_from:
            offset = CONTROLLERS.index(controller)
    return (day_obs + offset * _CONTROLLER_STEP) * EXPOSURE_SEQ_FACTOR + seq_num


def exposure_day_obs(exposure: int) -> int:
    """The day_obs of an exposure id (the inverse of ``make_exposure_id``'s day part): an offset
    shows as a year of 3000 or later, since observing days lie in 2000-2999."""
    day = exposure // EXPOSURE_SEQ_FACTOR
    return day - max(0, day // _CONTROLLER_STEP - 2) * _CONTROLLER_STEP


def parse_obs_id(obs_id: str) -> tuple[str, str, int, int]:
    """(instrument, controller, day_obs, seq_num) of ``MC_O_20250415_000060``; ValueError if
    it is not one."""
    match = _OBS_ID_RE.match(obs_id)
    if not match or match["code"] not in CAMERA_CODES:
        raise ValueError(f"{obs_id!r} is not an observation id like MC_O_20250415_000060")
    return (CAMERA_CODES[match["code"]], match["controller"], int(match["obs_day"]), int(match["seq"]))


def identity_from_header(card: Callable[[str], object], where: str) -> Identity:
    """A CCD's identity from its primary header (``card(KEY)``: a card's value or None):
    INSTRUME, OBSID (else IMGNAME, or DAYOBS/SEQNUM/CONTRLLR), RAFTBAY and CCDSLOT. Missing or
    contradictory cards are a NoIdentity naming the card: nothing else can stand in for them."""

    def text(key: str) -> str | None:
        value = card(key)
        if value is None or isinstance(value, bool):
            return None
        value = str(value).strip()
        return value or None

    raw_instrument = text("INSTRUME")
    if raw_instrument is None:
        raise NoIdentity(f"{where}: header has no INSTRUME card: no instrument")
    instrument = HEADER_INSTRUMENTS.get(raw_instrument.lower())
    if raw_instrument.lower() == "lsst_camera" and text("TELCODE") == "CC":
        instrument = "LSSTComCam"  # ComCam's lab data of 2019 (as obs_lsst's translator reads it)
    if instrument is None:
        raise UnknownInstrument(
            f"{where}: header INSTRUME={raw_instrument!r} is not an instrument we ingest "
            f"(known: {', '.join(sorted(set(HEADER_INSTRUMENTS.values())))})"
        )
    obs_id = text("OBSID")
    if obs_id is None and instrument == "LATISS":
        obs_id = text("IMGNAME")  # LATISS's first data (2019) named the observation so
    try:
        controller, day_obs, seq_num = _observation(obs_id, text, instrument)
        if obs_id is None:
            code = camera.instrument(instrument).obsid_prefix
            obs_id = f"{code}_{controller}_{day_obs}_{seq_num:06d}"
        exposure = make_exposure_id(day_obs, seq_num, controller)
    except (ValueError, BadObjectName) as exc:
        raise NoIdentity(f"{where}: {exc}") from None
    raft, sensor = text("RAFTBAY"), text("CCDSLOT")
    if instrument == "LATISS":
        raft, sensor = raft or "R00", sensor or "S00"
    elif raft is None or sensor is None:
        missing = "RAFTBAY" if raft is None else "CCDSLOT"
        raise NoIdentity(f"{where}: header has no {missing} card: no detector")
    try:
        full_name = f"{'RXX' if instrument == 'LATISS' else raft}_{sensor}"
        detector = camera.detector_by_name(instrument, full_name).id
    except KeyError:
        raise NoIdentity(
            f"{where}: header RAFTBAY={raft!r} CCDSLOT={sensor!r}: no such detector of {instrument}"
        ) from None
    group = text("GROUPID") or str(exposure)  # obs_lsst's default group: the exposure id
    return Identity(DataId(instrument, exposure, detector), obs_id, raft, sensor, group)


def identity_cards(identity: Identity) -> dict[str, str | int]:
    """The primary-header cards that say which CCD a file is, as the camera writes them: the
    inverse of ``identity_from_header`` (the simulator, test files and benchmarks all write
    their headers' identity through this one function)."""
    data_id = identity.data_id
    code, controller, day_obs, seq_num = identity.obs_id.split("_")
    return {
        "INSTRUME": CAMERA_INSTRUME.get(data_id.instrument, data_id.instrument),
        "OBSID": identity.obs_id,
        "CAMCODE": code,
        "CONTRLLR": controller,
        "DAYOBS": day_obs,
        "SEQNUM": int(seq_num),
        "RAFTBAY": identity.raft,
        "CCDSLOT": identity.sensor,
        "FILENAME": identity.file_name,
    }


def _observation(
    obs_id: str | None, text: Callable[[str], str | None], instrument: str
) -> tuple[str, int, int]:
    """(controller, day_obs, seq_num) from OBSID, checked against DAYOBS/SEQNUM/CONTRLLR."""
    day, seq, controller = text("DAYOBS"), text("SEQNUM"), text("CONTRLLR")
    if obs_id is not None:
        found, controller, day_obs, seq_num = parse_obs_id(obs_id)
        if found != instrument:
            raise ValueError(f"header OBSID={obs_id!r} is of {found}, INSTRUME says {instrument}")
        for key, value, expected in (("DAYOBS", day, day_obs), ("SEQNUM", seq, seq_num)):
            if value is not None and value.isdigit() and int(value) != expected:
                raise ValueError(f"header {key}={value!r} but OBSID={obs_id!r}")
        return controller, day_obs, seq_num
    if day is None or seq is None:
        raise ValueError(f"header has no OBSID and no {'DAYOBS' if day is None else 'SEQNUM'}")
    day = day.replace("-", "")
    if not (day.isdigit() and len(day) == 8 and seq.isdigit()):
        raise ValueError(f"header DAYOBS={day!r} SEQNUM={seq!r} are not a day and a number")
    return controller or "O", int(day), int(seq)


def parse_object_name(name: str, prefix: str = defaults.RAW_PREFIX) -> DataId:
    """Data id of ``name`` in either layout (module doc); else BadObjectName naming the object
    and the reason."""
    claim = name_claim(name, prefix)
    if claim is None:
        raise BadObjectName(
            f"object {name!r}: does not match "
            "{instrument}/{day_obs}/{obs_id}/{obs_id}_{raft}_{sensor}.fits"
        )
    return claim[0]


def name_claim(name: str, prefix: str = defaults.RAW_PREFIX) -> tuple[DataId, str | None] | None:
    """What an object's name says about its CCD: (data id, observation id) in Rubin's layout,
    (data id, None) in the earlier one, None for any other name below the prefix (the header
    decides). BadObjectName outside or escaping the prefix, or for impossible values in either
    layout; UnknownInstrument for an instrument we do not ingest."""
    if not name.startswith(prefix):
        raise BadObjectName(f"object {name!r}: outside the ingest prefix {prefix!r}")
    rest = name[len(prefix) :]
    if rest.startswith("/") or "\\" in rest or "//" in rest:
        raise BadObjectName(f"object {name!r}: absolute or malformed path")
    if any(part in {"..", "."} for part in rest.split("/")):
        raise BadObjectName(f"object {name!r}: path escapes the prefix ('.' or '..')")
    if _CONTROL.search(rest):  # no file or object of ours is named so: never read it
        raise BadObjectName(f"object {name!r}: control character in the name")
    obs_id = None
    try:
        match = _RUBIN_RE.match(rest)
        if match:
            data_id, obs_id = _rubin_data_id(match), match["obs_id"]
        else:
            match = _LEGACY_RE.match(rest)
            if not match:
                return None
            data_id = _legacy_data_id(match)
    except BadObjectName as exc:
        raise type(exc)(f"object {name!r}: {exc}") from None
    if data_id.day_obs != int(match["day_obs"]):
        raise BadObjectName(
            f"object {name!r}: day_obs {match['day_obs']} does not match exposure {data_id.exposure}"
        )
    return data_id, obs_id


def _rubin_data_id(match: re.Match[str]) -> DataId:
    instrument = match["instrument"]
    validate_instrument(instrument)
    if CAMERA_CODES.get(match["code"]) != instrument:
        raise BadObjectName(f"observation id {match['obs_id']} is not of {instrument}")
    try:
        exposure = make_exposure_id(int(match["obs_day"]), int(match["seq"]), match["controller"])
    except ValueError as exc:
        raise BadObjectName(str(exc)) from None
    full_name = f"{'RXX' if instrument == 'LATISS' else match['raft']}_{match['sensor']}"
    try:
        detector = camera.detector_by_name(instrument, full_name).id
    except KeyError:
        raise BadObjectName(f"no detector {match['raft']}_{match['sensor']} in {instrument}") from None
    return DataId(instrument, exposure, detector)


def _legacy_data_id(match: re.Match[str]) -> DataId:
    if match["instrument2"] != match["instrument"] or match["exposure2"] != match["exposure"]:
        raise BadObjectName("directory and file name disagree")
    return DataId(match["instrument"], int(match["exposure"]), int(match["detector"]))


def dataset_id(data_id: DataId, dataset_type: str = defaults.RAW_DATASET_TYPE, run: str = "") -> uuid.UUID:
    """Deterministic dataset id, as a Butler registry makes it for (type, run, data id): the
    same on any machine, so re-registration and subscriber deduplication are safe."""
    keys = {"detector": data_id.detector, "exposure": data_id.exposure, "instrument": data_id.instrument}
    items = [("dataset_type", dataset_type), ("run", run), *sorted(keys.items())]
    return uuid.uuid5(DATASET_ID_NAMESPACE, ",".join(f"{k}={v}" for k, v in items))
