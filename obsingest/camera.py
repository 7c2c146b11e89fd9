"""Instruments and detectors as the observatory numbers them (obs_lsst's camera descriptions).

A table here because ``lsst.obs.lsst`` is not on PyPI and pulls in the whole stack. Values are
transcribed from lsst/obs_lsst (``policy/rafts.yaml``, ``policy/cameraHeader.yaml``,
``policy/lsstCam/R*.yaml``, ``_instrument.py``, ``filters.py``) and checked by
``tests/unit/obsingest/test_camera.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

#: Purposes as the Butler's detector records name them (afw ``DetectorType`` names).
SCIENCE, WAVEFRONT, GUIDER = "SCIENCE", "WAVEFRONT", "GUIDER"


@dataclass(frozen=True)
class AmpGeometry:
    """One amplifier segment of a raw file: ``raw_cols`` x ``raw_rows`` pixels, of which the
    imaging section starts after ``prescan`` columns and spans ``data_cols`` x ``data_rows``."""

    raw_cols: int
    raw_rows: int
    prescan: int
    data_cols: int
    data_rows: int


@dataclass(frozen=True)
class SensorType:
    """A kind of sensor: obs_lsst's ``physicalType`` with its geometry."""

    name: str
    manufacturer: str
    width: int  #: assembled pixels, serial direction
    height: int  #: assembled pixels, parallel direction
    amplifiers: int
    amp: AmpGeometry
    pixel_mm: float = 0.010


_AMP_ITL = AmpGeometry(raw_cols=576, raw_rows=2048, prescan=3, data_cols=509, data_rows=2000)
_AMP_E2V = AmpGeometry(raw_cols=576, raw_rows=2048, prescan=10, data_cols=512, data_rows=2002)

SENSOR_TYPES: dict[str, SensorType] = {
    "ITL": SensorType("ITL", "ITL", 4072, 4000, 16, _AMP_ITL),
    "E2V": SensorType("E2V", "E2V", 4096, 4004, 16, _AMP_E2V),
    # Guide sensors are ITL-3800C devices identical to CCD_ITL (cameraHeader.yaml).
    "ITL_G": SensorType("ITL_G", "ITL", 4072, 4000, 16, _AMP_ITL),
    # Wavefront sensors: the lower or upper half of an ITL sensor, 8 amplifiers C10..C17.
    "ITL_WF": SensorType("ITL_WF", "ITL", 4072, 2000, 8, _AMP_ITL),
}


@dataclass(frozen=True)
class Detector:
    """One detector: its obs_lsst id, names, purpose, sensor type and place on the focal plane."""

    id: int
    raft: str
    name_in_raft: str
    purpose: str
    sensor: SensorType
    #: centre on the focal plane [mm] and rotation in the focal plane [degrees]
    x_mm: float
    y_mm: float
    yaw: float

    @property
    def full_name(self) -> str:
        return f"{self.raft}_{self.name_in_raft}"

    @property
    def footprint_mm(self) -> tuple[float, float]:
        """(width, height) on the focal plane, after the sensor's rotation."""
        turned = round(self.yaw / 90.0) % 2 == 1
        w, h = self.sensor.width * self.sensor.pixel_mm, self.sensor.height * self.sensor.pixel_mm
        return (h, w) if turned else (w, h)


#: obs_lsst LsstBaseTranslator.max_exposure_id(): day_obs up to 2050-12-31, 6 controllers.
_EXPOSURE_MAX = 7050123199999
#: lsst.obs.base.VisitSystem.BY_SEQ_START_END, LSSTCam's (and its subclasses') visit system
_BY_SEQ_START_END = 2


@dataclass(frozen=True)
class Instrument:
    """An instrument as the Butler's ``instrument`` dimension record describes it."""

    name: str
    class_name: str
    obsid_prefix: str
    detector_max: int
    detectors: tuple[Detector, ...]
    #: band -> physical filter name
    filters: dict[str, str]
    #: obs_lsst's raw formatter, used when ``lsst.obs.lsst`` is importable
    raw_formatter: str
    exposure_max: int = _EXPOSURE_MAX
    visit_max: int = _EXPOSURE_MAX
    visit_system: int = _BY_SEQ_START_END
    #: LATISS's detector record has no raft (obs_lsst ``Latiss.extractDetectorRecord``)
    has_rafts: bool = True

    @property
    def detector_ids(self) -> tuple[int, ...]:
        return tuple(d.id for d in self.detectors)

    def detector_record(self, detector_id: int) -> dict[str, object]:
        """The Butler ``detector`` dimension record, as obs_lsst's instrument registers it."""
        det = _by_id(self.name)[detector_id]
        return {
            "instrument": self.name,
            "id": det.id,
            "full_name": det.full_name,
            "name_in_raft": det.name_in_raft if self.has_rafts else det.full_name,
            "raft": det.raft if self.has_rafts else None,
            "purpose": det.purpose,
        }

    def record(self) -> dict[str, object]:
        """The Butler ``instrument`` dimension record."""
        return {
            "name": self.name,
            "visit_max": self.visit_max,
            "visit_system": self.visit_system,
            "exposure_max": self.exposure_max,
            "detector_max": self.detector_max,
            "class_name": self.class_name,
        }


# --- LSSTCam --------------------------------------------------------------------------------------
RAFT_SLOTS = ("S00", "S01", "S02", "S10", "S11", "S12", "S20", "S21", "S22")
_SLOT_OFFSET = 42.25  # mm between sensor centres in a raft (cameraHeader.yaml RAFT_*)

#: science rafts in id order, 9 ids each from 0
_SCIENCE_RAFTS = tuple(f"R{r}{c}" for r in range(5) for c in range(5) if not {r, c} <= {0, 4})
_E2V_RAFTS = frozenset(
    {"R11", "R12", "R13", "R14", "R21", "R22", "R23", "R24", "R30", "R31", "R32", "R33", "R34"}
)
_RAFT_OFFSET = 127.0

#: corner rafts and their yaw; their ids follow the science rafts', 4 each (in slot order)
_CORNER_RAFTS = {"R00": 180.0, "R04": 270.0, "R40": 90.0, "R44": 0.0}
#: corner sensors, 2 guiders (G) and 2 wavefront sensors (W, named as their raft): slot, layout
#: offset, geometryWithinRaft offset, sensor yaw in the raft
_CORNER_SLOTS: tuple[tuple[str, tuple[float, float], tuple[float, float], float], ...] = (
    ("SG0", (-42.25, 0.0), (0.49, 4.74), 270.0),
    ("SG1", (0.0, -42.25), (4.74, 0.49), 0.0),
    ("SW0", (-42.25, -52.8125), (2.5, 1.4375), 0.0),
    ("SW1", (-42.25, -31.6875), (2.5, 3.5625), 180.0),
)


def _rotate(x: float, y: float, degrees: float) -> tuple[float, float]:
    """generateCamera.applyRaftYaw: a raft's yaw turns the sensor offsets inside it."""
    if not degrees:
        return x, y
    c, s = math.cos(math.radians(degrees)), math.sin(math.radians(degrees))
    return c * x - s * y, s * x + c * y


def _science_raft(raft: str, x0: float, y0: float, id0: int, kind: str) -> list[Detector]:
    out = []
    for i, slot in enumerate(RAFT_SLOTS):
        x, y = x0 + (i % 3 - 1) * _SLOT_OFFSET, y0 + (i // 3 - 1) * _SLOT_OFFSET
        out.append(Detector(id0 + i, raft, slot, SCIENCE, SENSOR_TYPES[kind], x, y, 0.0))
    return out


def _lsstcam_detectors() -> tuple[Detector, ...]:
    """Every detector, appended in id order."""
    dets = []
    for n, raft in enumerate(_SCIENCE_RAFTS):
        dets += _science_raft(raft, *_raft_centre(raft), 9 * n, "E2V" if raft in _E2V_RAFTS else "ITL")
    for raft, raft_yaw in _CORNER_RAFTS.items():
        x0, y0 = _raft_centre(raft)
        for slot, (lx, ly), (dx, dy), yaw in _CORNER_SLOTS:
            x, y = _rotate(lx + dx, ly + dy, raft_yaw)
            purpose, sensor = (GUIDER, "ITL_G") if slot[1] == "G" else (WAVEFRONT, "ITL_WF")
            x, y, yaw = round(x0 + x, 4), round(y0 + y, 4), (yaw + raft_yaw) % 360.0
            dets.append(Detector(len(dets), raft, slot, purpose, SENSOR_TYPES[sensor], x, y, yaw))
    return tuple(dets)


def _raft_centre(raft: str) -> tuple[float, float]:
    """Raft ``Rrc`` (row r, column c) on the focal plane [mm]: 127 mm apart around R22."""
    return (int(raft[2]) - 2) * _RAFT_OFFSET, (int(raft[1]) - 2) * _RAFT_OFFSET


INSTRUMENTS: dict[str, Instrument] = {
    "LSSTCam": Instrument(
        name="LSSTCam",
        class_name="lsst.obs.lsst.LsstCam",
        obsid_prefix="MC",
        detector_max=1000,
        detectors=_lsstcam_detectors(),
        filters={"u": "u_24", "g": "g_6", "r": "r_57", "i": "i_39", "z": "z_20", "y": "y_10"},
        raw_formatter="lsst.obs.lsst.rawFormatter.LsstCamRawFormatter",
    ),
    "LSSTComCam": Instrument(
        name="LSSTComCam",
        class_name="lsst.obs.lsst.LsstComCam",
        obsid_prefix="CC",
        detector_max=1000,
        detectors=tuple(_science_raft("R22", 0.0, 0.0, 0, "ITL")),
        filters={"u": "u_02", "g": "g_01", "r": "r_03", "i": "i_06", "z": "z_03", "y": "y_04"},
        raw_formatter="lsst.obs.lsst.rawFormatter.LsstComCamRawFormatter",
    ),
    "LATISS": Instrument(
        name="LATISS",
        class_name="lsst.obs.lsst.Latiss",
        obsid_prefix="AT",
        detector_max=1,
        detectors=(Detector(0, "RXX", "S00", SCIENCE, SENSOR_TYPES["ITL"], 41.735, 42.195, 0.0),),
        filters={b: f"SDSS{b}_65mm~empty" for b in "ugrizy"},
        raw_formatter="lsst.obs.lsst.rawFormatter.LatissRawFormatter",
        has_rafts=False,
    ),
}


def instrument(name: str) -> Instrument:
    """The instrument called ``name``; KeyError naming the known ones otherwise."""
    try:
        return INSTRUMENTS[name]
    except KeyError:
        raise KeyError(f"unknown instrument {name!r} (known: {', '.join(INSTRUMENTS)})") from None


@cache
def _by_id(name: str) -> dict[int, Detector]:
    return {d.id: d for d in INSTRUMENTS[name].detectors}


@cache
def _by_name(name: str) -> dict[str, Detector]:
    return {d.full_name: d for d in INSTRUMENTS[name].detectors}


def detector(instrument_name: str, detector_id: int) -> Detector:
    """Detector ``detector_id`` of an instrument; KeyError saying which ids exist otherwise."""
    ids = _by_id(instrument(instrument_name).name)
    try:
        return ids[detector_id]
    except KeyError:
        raise KeyError(
            f"{instrument_name} has no detector {detector_id} (ids {min(ids)}..{max(ids)})"
        ) from None


def detector_by_name(instrument_name: str, full_name: str) -> Detector:
    """Detector by its full name, e.g. ``R22_S11`` or ``R00_SW0``."""
    names = _by_name(instrument(instrument_name).name)
    try:
        return names[full_name]
    except KeyError:
        raise KeyError(f"{instrument_name} has no detector named {full_name!r}") from None
