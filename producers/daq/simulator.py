"""DAQ simulator: realistic raw CCD readouts as multi-extension FITS, deterministic by seed.

A raw CCD is a header-only primary HDU and 16 amplifier ("segment") int32 image HDUs laid out
like an LSST raw (serial prescan, imaging section, serial overscan, parallel overscan rows). The
full layout (75,582,720 pixel bytes) is the observatory transfer reports' reference CCD, so the
compression and transfer figures compare. Detectors and their sensors' geometry are
``obsingest.camera``'s; the primary header and file name the camera's (``header``, README.md).

Pixel model, in ADU (gain 1):

* bias: one level per amplifier in 1,000-20,000 ADU, fixed by (seed, instrument, detector, amp),
  not by the exposure; read noise: Gaussian, 4.5-5.5 ADU per amplifier;
* sky: ``rate(filter) * exposure_time`` e- per pixel, Poisson; from a mean of 50 e- on, sky +
  read noise is one Gaussian of variance ``sky + rn**2`` (below what compression can see);
* stars: Gaussian PSFs with log-uniform fluxes, exact Poisson counts on their stamps;
* cosmic rays: short straight tracks of a few hundred to a few thousand ADU per pixel;
* everything clipped to an 18-bit full well above bias.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Literal

import numpy as np

from obsingest import camera
from obsingest.dataid import EXPOSURE_SEQ_FACTOR, DataId, Identity, exposure_day_obs, make_exposure_id
from obsingest.errors import BadObjectName
from obsingest.fileio import write_atomic
from obsingest.fits import BLANK_CARD, BLOCK, CARD, header_bytes, make_card
from producers.daq import header
from producers.daq.header import BIAS_DARK_TIME, DARK_OVERHEAD, SHUTTER_EXCESS, Cards, Value, physical_filter

#: LSST amplifier segment names, in the order they are stored in a raw file (16-amplifier
#: sensors). Wavefront sensors have the first 8 only (C10..C17, obs_lsst ``CCD_ITL_WF``).
AMP_NAMES: tuple[str, ...] = tuple(f"Segment1{i}" for i in range(8)) + tuple(
    f"Segment0{i}" for i in range(7, -1, -1)
)


@dataclass(frozen=True)
class AmpLayout:
    """Geometry of one amplifier segment: columns = prescan + data + overscan, rows = data + par."""

    rows: int
    cols: int
    prescan: int
    data_cols: int
    data_rows: int

    @property
    def pixel_bytes(self) -> int:
        """Bytes of int32 pixels in one amplifier HDU (before FITS block padding)."""
        return self.rows * self.cols * 4


#: ``small`` keeps a raw's structure for fast tests, e2v amplifiers their proportions (wider
#: prescan, taller imaging section); ``full`` is the sensor's amplifier as obs_lsst describes it
_SMALL = {"ITL": AmpLayout(64, 32, 3, 21, 56), "E2V": AmpLayout(64, 32, 5, 22, 57)}


def amp_layout(sensor: camera.SensorType, size: str) -> AmpLayout:
    """Amplifier layout of a sensor type at a simulator size (e2v and ITL amplifiers differ)."""
    if size == "full":
        amp = sensor.amp
        return AmpLayout(amp.raw_rows, amp.raw_cols, amp.prescan, amp.data_cols, amp.data_rows)
    return _SMALL["E2V" if sensor.manufacturer == "E2V" else "ITL"]


#: Supported cameras, as the observatory numbers their detectors (``obsingest.camera``).
INSTRUMENTS: dict[str, camera.Instrument] = camera.INSTRUMENTS

#: Sky brightness per filter, e- per pixel per second: a 30 s r-band full CCD fpacks to ~15.2 MB,
#: within 0.5% of the reference CCD's 15,137,280 bytes, so our figures compare with the observatory's.
_SKY_RATE = {"u": 1.0, "g": 2.5, "r": 3.5, "i": 5.0, "z": 7.0, "y": 9.0}
_DEFAULT_SKY_RATE = 3.5
_FULL_WELL = 2**18
_GAUSSIAN_SKY_MIN = 50.0
_PRIMARY_HEADER_BLOCKS = 4


def exposure_id(day_obs: int, seq_num: int, controller: str | None = None) -> int:
    """Rubin's exposure id (``obsingest.dataid.make_exposure_id``): ``day_obs * 100000 +
    seq_num`` (e.g. 2026112200012), offset for the controllers obs_lsst offsets."""
    try:
        return make_exposure_id(day_obs, seq_num, controller)
    except BadObjectName as exc:
        raise ValueError(str(exc)) from None


def detector_name(instrument: str, detector: int) -> str:
    """obs_lsst's name of a detector, e.g. LSSTCam 94 -> ``R22_S11``, 191 -> ``R00_SW0``."""
    return _detector(instrument, detector).full_name


def _detector(instrument: str, detector: int) -> camera.Detector:
    try:
        return camera.detector(instrument, detector)
    except KeyError as exc:
        raise ValueError(str(exc.args[0])) from None


@dataclass(frozen=True)
class CcdSpec:
    """Everything that determines one simulated raw CCD (same spec -> same bytes). ``obs_start``:
    the UTC instant integration starts (README.md, "Times"). ``controller``: the observation id's
    letter (default ``O``; the exposure id carries its offset). ``template``: a real header's
    primary cards (``header.load_template``), written with this CCD's identity."""

    instrument: str
    exposure: int
    detector: int
    day_obs: int
    obs_start: datetime
    exposure_time: float
    filter: str
    size: Literal["full", "small"] = "full"
    seed: int = 0
    controller: str | None = None
    template: Cards | None = None

    def __post_init__(self) -> None:
        detector_name(self.instrument, self.detector)  # ValueError naming the valid ones
        if self.size not in ("full", "small"):
            raise ValueError(f"size must be one of ['full', 'small'], not {self.size!r}")
        if self.obs_start.tzinfo is None or self.obs_start.utcoffset() is None:
            raise ValueError("obs_start must be timezone-aware (UTC)")
        if self.exposure_time < 0:
            raise ValueError("exposure_time must be >= 0")
        if exposure_day_obs(self.exposure) != self.day_obs:
            raise ValueError(
                f"exposure {self.exposure} is not day_obs * 100000 + seq_num for day_obs {self.day_obs}"
            )
        if self.controller is not None and (
            exposure_id(self.day_obs, self.seq_num, self.controller) != self.exposure
        ):
            raise ValueError(f"exposure {self.exposure} is not of controller {self.controller}")

    @property
    def seq_num(self) -> int:
        return self.exposure % EXPOSURE_SEQ_FACTOR

    @property
    def identity(self) -> Identity:
        """The camera's names for this CCD: observation id, raft, sensor, file name."""
        return DataId(self.instrument, self.exposure, self.detector).identity(self.controller)

    @property
    def file_name(self) -> str:
        """The camera's file name, e.g. ``MC_O_20261122_000012_R22_S11.fits``."""
        return self.identity.file_name

    @property
    def dark_time(self) -> float:
        """Seconds from the start of integration to the readout (DARKTIME)."""
        if self.exposure_time <= 0:
            return BIAS_DARK_TIME
        return round(self.exposure_time + DARK_OVERHEAD[self.instrument], 4)

    @property
    def shutter_time(self) -> float:
        """The measured shutter time (SHUTTIME): what Rubin registers as the exposure time."""
        if self.exposure_time <= 0:
            return 0.0
        return round(self.exposure_time + SHUTTER_EXCESS.get(self.instrument, 0.0), 6)

    @property
    def readout_time(self) -> datetime:
        """The UTC instant the CCD is read out (the header's DATE-END)."""
        return self.obs_start.astimezone(UTC) + timedelta(seconds=self.dark_time)

    @property
    def detector_info(self) -> camera.Detector:
        return _detector(self.instrument, self.detector)

    @property
    def layout(self) -> AmpLayout:
        return amp_layout(self.detector_info.sensor, self.size)

    @property
    def amp_names(self) -> tuple[str, ...]:
        return AMP_NAMES[: self.detector_info.sensor.amplifiers]


def header_cards(spec: CcdSpec) -> list[tuple[str, Value]]:
    """The primary header's cards (FITS structure aside) of the CCD ``spec`` describes: the
    template's with this CCD's identity and times, or the simulator's own."""
    if spec.template is not None:
        return header.templated_cards(spec, spec.template)
    seed, instrument_word, _ = _seed_words(spec)
    return header.default_cards(spec, *_exposure_cards(seed, instrument_word, spec.exposure, spec.dark_time))


def _primary_header(spec: CcdSpec) -> bytes:
    cards = header_cards(spec)
    records = [
        make_card("SIMPLE", True, "conforms to FITS standard"),
        make_card("BITPIX", 8, "header-only primary HDU"),
        make_card("NAXIS", 0),
        make_card("EXTEND", True, "amplifier segments follow"),
        *header.header_records(cards),
    ]
    # Real raws carry ~4 blocks of primary header; pad with blank records before END to at least
    # that size, so a full CCD file is exactly the reference 75,582,720 bytes.
    records += [BLANK_CARD] * (_PRIMARY_HEADER_BLOCKS * BLOCK // CARD - 1 - len(records))
    return header_bytes(records)


@lru_cache(maxsize=16)
def _exposure_cards(
    seed: int, instrument_word: int, exposure: int, dark_time: float
) -> tuple[dict[str, Value], dict[str, Value]]:
    """(pointing, weather) of an exposure: plausible values, the same on every CCD of it (the
    Butler's exposure record comes from any of them); cached, so read only."""
    rng = np.random.default_rng([seed, instrument_word, exposure & 0xFFFFFFFF, 0x0B5])
    alt = rng.uniform(35.0, 85.0)
    ra, dec = float(round(rng.uniform(0.0, 360.0), 6)), float(round(rng.uniform(-80.0, 10.0), 6))
    rotpa, az = float(round(rng.uniform(-90.0, 90.0), 4)), float(round(rng.uniform(0.0, 360.0), 4))
    airmass = float(round(1.0 / np.sin(np.radians(alt)), 4))
    drift = dark_time / 240.0  # the sky turns 1/240 degree per second
    start = {"RA": ra, "DEC": dec, "RASTART": ra, "DECSTART": dec, "RAEND": ra, "DECEND": dec}
    pointing: dict[str, Value] = {**start, "ROTPA": rotpa, "ROTCOORD": "sky"}
    pointing |= {"ELSTART": float(round(alt, 4)), "AZSTART": az, "AMSTART": airmass}
    pointing |= {"ELEND": float(round(alt - drift, 4)), "AZEND": float(round(az + drift, 4))}
    pointing |= {"AMEND": airmass, "TRACKSYS": "RADEC", "RADESYS": "ICRS"}
    weather: dict[str, Value] = {
        "AIRTEMP": float(round(rng.uniform(5.0, 15.0), 2)),
        "PRESSURE": float(round(rng.uniform(73800.0, 74500.0), 0)),
        "HUMIDITY": float(round(rng.uniform(10.0, 40.0), 1)),
        "WINDSPD": float(round(rng.uniform(0.0, 12.0), 2)),
        "WINDDIR": float(round(rng.uniform(0.0, 360.0), 2)),
    }
    return pointing, weather


@lru_cache(maxsize=4096)
def _amp_header_bytes(lay: AmpLayout, index: int, name: str, bias: float, read_noise: float) -> bytes:
    """An amplifier's header: the same for every exposure of a detector (its bias and read
    noise are the detector's), so built once per amplifier of a night, not per CCD."""
    x0, x1 = lay.prescan + 1, lay.prescan + lay.data_cols
    col_block, row_block = index % 8, index // 8  # 8 amplifiers per row of the sensor
    dx0 = col_block * lay.data_cols + 1
    dy0 = row_block * lay.data_rows + 1
    cards = [
        make_card("XTENSION", "IMAGE", "image extension"),
        make_card("BITPIX", 32, "int32 pixels"),
        make_card("NAXIS", 2),
        make_card("NAXIS1", lay.cols),
        make_card("NAXIS2", lay.rows),
        make_card("PCOUNT", 0),
        make_card("GCOUNT", 1),
        make_card("EXTNAME", name, "amplifier segment"),
        make_card("CHANNEL", index + 1),
        make_card("DATASEC", f"[{x0}:{x1},1:{lay.data_rows}]", "imaging section"),
        make_card("BIASSEC", f"[{x1 + 1}:{lay.cols},1:{lay.data_rows}]", "serial overscan"),
        make_card("PRESCAN", f"[1:{lay.prescan},1:{lay.data_rows}]", "serial prescan"),
        make_card("DETSEC", f"[{dx0}:{dx0 + lay.data_cols - 1},{dy0}:{dy0 + lay.data_rows - 1}]"),
        make_card("BIASLVL", round(bias, 3), "simulated bias level [ADU]"),
        make_card("RDNOISE", round(read_noise, 3), "simulated read noise [ADU]"),
        make_card("GAIN", 1.0, "[e-/ADU]"),
        make_card("BUNIT", "adu"),
    ]
    return header_bytes(cards)


def _seed_words(spec: CcdSpec) -> list[int]:
    return [spec.seed & 0xFFFFFFFF, zlib.crc32(spec.instrument.encode()), spec.detector]


def _amp_pixels(spec: CcdSpec, rng: np.random.Generator, bias: float, read_noise: float) -> np.ndarray:
    """One amplifier's pixels as big-endian int32 (FITS order), ready to write."""
    lay = spec.layout
    rate = _SKY_RATE.get(physical_filter(spec.instrument, spec.filter)[1], _DEFAULT_SKY_RATE)
    sky = rate * spec.exposure_time
    img = rng.standard_normal((lay.rows, lay.cols), dtype=np.float32)
    img *= np.float32(read_noise)
    data = img[: lay.data_rows, lay.prescan : lay.prescan + lay.data_cols]
    if sky >= _GAUSSIAN_SKY_MIN:
        data *= np.float32(np.sqrt(sky + read_noise**2) / read_noise)
        data += np.float32(sky)
    elif sky > 0:
        data += _poisson_small(rng, sky, data.shape)
    if spec.exposure_time > 0:
        _add_stars(data, rng, spec.exposure_time)
    _add_cosmic_rays(data, rng, spec.exposure_time)
    img += np.float32(bias)
    np.clip(img, 0, bias + _FULL_WELL, out=img)
    np.rint(img, out=img)
    return img.astype(">i4")


def _poisson_small(rng: np.random.Generator, mean: float, shape: tuple[int, ...]) -> np.ndarray:
    """Exact Poisson draws by inverting the CDF (table lookup), faster than ``Generator.poisson``
    for a scalar mean below 50 (the normal approximation's limit)."""
    k = np.arange(int(mean + 12 * np.sqrt(mean) + 12))
    log_pmf = k * np.log(mean) - mean - np.cumsum(np.log(np.maximum(k, 1)))
    cdf = np.cumsum(np.exp(log_pmf))
    return np.searchsorted(cdf, rng.random(shape), side="right").astype(np.float32)


#: a star's stamp: half-width and pixel offsets (read-only; built once, not per amplifier)
_STAMP_HALF = 7
_STAMP_YY, _STAMP_XX = np.mgrid[-_STAMP_HALF : _STAMP_HALF + 1, -_STAMP_HALF : _STAMP_HALF + 1].astype(
    np.float32
)
_STAMP_YY.flags.writeable = False
_STAMP_XX.flags.writeable = False


def _add_stars(data: np.ndarray, rng: np.random.Generator, exposure_time: float) -> None:
    rows, cols = data.shape
    n = int(rng.poisson(max(1.0, rows * cols / 40_000)))
    half, yy, xx = _STAMP_HALF, _STAMP_YY, _STAMP_XX
    for _ in range(n):
        cy, cx = rng.uniform(0, rows), rng.uniform(0, cols)
        flux = float(10 ** rng.uniform(2.5, 6.0)) * exposure_time / 30.0
        sigma = rng.uniform(1.4, 2.4)
        iy, ix = int(cy), int(cx)
        psf = np.exp(-((yy - (cy - iy)) ** 2 + (xx - (cx - ix)) ** 2) / (2 * sigma**2))
        stamp = rng.poisson(psf * (flux / psf.sum())).astype(np.float32)
        y0, x0 = iy - half, ix - half
        sy0, sx0 = max(0, -y0), max(0, -x0)
        y0c, x0c = max(0, y0), max(0, x0)
        y1c, x1c = min(rows, iy + half + 1), min(cols, ix + half + 1)
        if y1c > y0c and x1c > x0c:
            data[y0c:y1c, x0c:x1c] += stamp[sy0 : sy0 + y1c - y0c, sx0 : sx0 + x1c - x0c]


def _add_cosmic_rays(data: np.ndarray, rng: np.random.Generator, exposure_time: float) -> None:
    rows, cols = data.shape
    n = int(rng.poisson(rows * cols * (exposure_time + 1.0) / 2_000_000))
    for _ in range(n):
        y0, x0 = rng.uniform(0, rows), rng.uniform(0, cols)
        length = rng.uniform(1, 40)
        angle = rng.uniform(0, np.pi)
        steps = max(2, int(length * 2))
        ys = np.clip((y0 + np.linspace(0, length, steps) * np.sin(angle)).astype(int), 0, rows - 1)
        xs = np.clip((x0 + np.linspace(0, length, steps) * np.cos(angle)).astype(int), 0, cols - 1)
        deposit = rng.uniform(300, 3000)
        data[ys, xs] += np.float32(deposit)


def generate_raw_ccd(spec: CcdSpec) -> bytes:
    """Return the whole raw FITS file for ``spec`` (deterministic: same spec -> same bytes)."""
    words = _seed_words(spec)
    amp_rng = np.random.default_rng(np.random.SeedSequence([*words, 0xB1A5]))
    names = spec.amp_names
    biases = amp_rng.uniform(1_000, 20_000, size=len(AMP_NAMES))[: len(names)]
    noises = amp_rng.uniform(4.5, 5.5, size=len(AMP_NAMES))[: len(names)]
    pixel_seed = np.random.SeedSequence([*words, spec.exposure & 0xFFFFFFFF, spec.exposure >> 32])
    rngs = [np.random.default_rng(s) for s in pixel_seed.spawn(len(names))]
    parts = [_primary_header(spec)]
    pad = b"\0" * (-spec.layout.pixel_bytes % BLOCK)
    for i, name in enumerate(names):
        bias, rn = float(biases[i]), float(noises[i])
        parts.append(_amp_header_bytes(spec.layout, i, name, bias, rn))
        parts.append(_amp_pixels(spec, rngs[i], bias, rn).tobytes())
        parts.append(pad)
    return b"".join(parts)


def write_raw_ccd(spec: CcdSpec, path: Path) -> Path:
    """Write the raw CCD to ``path`` atomically (temp file in the same folder, then rename)."""
    return write_atomic(Path(path), generate_raw_ccd(spec))
