"""``observation(header)``: a raw's header, translated once per exposure, with its identity.

``ObservationInfo`` costs milliseconds, so the exposure part is cached, keyed on OBSID and every
exposure-level card (``EXPOSURE_CARDS``): a CCD whose exposure cards differ misses, so the cache
never changes an answer. Warnings are kept with the result; only a header yielding no identity
is refused.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import Any

from astro_metadata_translator import MetadataTranslator, ObservationInfo
from astro_metadata_translator.headers import FIXUP_SENTINEL

from obsingest.errors import HeaderMismatch
from obsingest.translate import latiss, legacy_sim, lsstcam
from obsingest.translate.cards import HduHeader

#: every card an exposure-level property or header fix of Rubin's cameras reads: two CCDs of one
#: exposure with equal values here translate to the same exposure record
EXPOSURE_CARDS = (
    "INSTRUME",
    "TELESCOP",
    "TELCODE",
    "ORIGIN",
    "TSTAND",
    "CONTRLLR",
    "CALIB_ID",
    "OBSID",
    "IMGNAME",
    "DAYOBS",
    "OBS-NITE",
    "SEQNUM",
    "CURINDEX",
    "MAXINDEX",
    "GROUPID",
    "IMGTYPE",
    "OBSTYPE",
    "REASON",
    "TESTTYPE",
    "PROGRAM",
    "RUNNUM",
    "OBJECT",
    "TIMESYS",
    "DATE",
    "DATE-OBS",
    "DATE-BEG",
    "DATE-END",
    "DATE-AVG",
    "MJD",
    "MJD-OBS",
    "MJD-BEG",
    "MJD-END",
    "MJD-AVG",
    "EXPTIME",
    "SHUTTIME",
    "DARKTIME",
    "FILTER",
    "FILTER1",
    "FILTER2",
    "FILTBAND",
    "FILTPOS",
    "FILTSLOT",
    "GRATING",
    "TRACKSYS",
    "RADESYS",
    "RA",
    "DEC",
    "RASTART",
    "DECSTART",
    "RAEND",
    "DECEND",
    "AZSTART",
    "ELSTART",
    "AZEND",
    "ELEND",
    "AELEND",
    "AMSTART",
    "ROTPA",
    "ROTANGLE",
    "ROTCOORD",
    "FOCUSZ",
    "VIGN_MIN",
    "HUMIDITY",
    "PRESSURE",
    "AIRTEMP",
    "OBSGEO-X",
    "OBSGEO-Y",
    "OBSGEO-Z",
    "OBS-LONG",
    "OBS-LAT",
    "OBS-ELEV",
)
#: the per-CCD cards, translated for every CCD
DETECTOR_CARDS = ("RAFTBAY", "CCDSLOT", "DETNAME", "LSST_NUM", "DETSER")
#: identity properties and the cards they come from (named in refusals)
IDENTITY_CARDS = {
    "instrument": "INSTRUME",
    "exposure_id": "DAYOBS+SEQNUM",
    "observing_day": "DAYOBS",
    "observation_counter": "SEQNUM",
    "observation_id": "OBSID",
    "exposure_group": "GROUPID",
    "detector_num": "RAFTBAY+CCDSLOT",
    "detector_group": "RAFTBAY",
    "detector_name": "CCDSLOT",
}


class NoIdentity(HeaderMismatch, reason="bad-header"):
    """A header yields no identity (instrument, exposure, detector, day, ...): permanent. ``card``
    names the card(s) it comes from (``DAYOBS+SEQNUM``), ``value`` what the header holds there (a
    tuple for several cards; ``KeyError``: absent), ``why`` the reason."""

    def __init__(self, card: str, value: Any = KeyError, why: str = "not in the header") -> None:
        cards = card.split("+")
        values = value if isinstance(value, tuple) and len(value) == len(cards) else (value,)
        shown = " ".join(
            f"{c}={'(absent)' if v is KeyError else repr(v)}" for c, v in zip(cards, values, strict=False)
        )
        super().__init__(f"header {shown} gives no identity: {why}")
        self.card = card
        self.why = why


@dataclass(frozen=True)
class Identity:
    """Who a CCD is: the data id and the names Rubin gives it."""

    instrument: str
    exposure_id: int
    detector_num: int
    detector_group: str
    detector_name: str
    observing_day: int
    observation_counter: int
    observation_id: str
    exposure_group: str


@dataclass(frozen=True)
class Translation:
    """One CCD's header translated. ``info`` is shared by the exposure's CCDs (its detector
    fields are another CCD's; this one's are in ``identity``); ``warnings`` in order."""

    identity: Identity
    info: ObservationInfo
    warnings: tuple[str, ...]
    translator: str
    #: a header fix (correction file or translator rule) changed a card
    corrected: bool
    #: whether the exposure part came from the per-exposure cache
    cached: bool = False


@dataclass(frozen=True)
class _Exposure:
    translator_class: type[MetadataTranslator]
    info: ObservationInfo
    warnings: tuple[str, ...]
    corrected: bool


def _typed(value: Any) -> Any:
    """A hashable stand-in for a header value (they are str, int, float, bool or None)."""
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value


_PADDED = tuple(card.encode("ascii").ljust(8) for card in EXPOSURE_CARDS)


def exposure_key(header: Mapping[str, Any]) -> tuple[Any, ...]:
    """The cache key of a header's exposure part (see the module doc)."""
    if isinstance(header, HduHeader):  # a FITS header: its cards' text, unparsed
        return ("fits", *header.raw_key(_PADDED))
    values = tuple(_typed(header.get(card)) if card in header else KeyError for card in EXPOSURE_CARDS)
    simulated = tuple((k, _typed(header[k])) for k in header if "SIMULATE" in k)
    return (header.get("OBSID"), values, simulated)


def choose_translator(header: Mapping[str, Any], filename: str | None) -> type[MetadataTranslator]:
    """The translator for ``header``: the legacy simulator's, else the library's registry's."""
    if legacy_sim.LegacySimTranslator.can_translate(header):  # UTC times Rubin's would misread
        return legacy_sim.LegacySimTranslator
    try:
        return MetadataTranslator.determine_translator(header, filename=filename)
    except ValueError:
        raise NoIdentity(
            "INSTRUME", header.get("INSTRUME", KeyError), "no translator knows this instrument"
        ) from None
    except TypeError as exc:  # a card of a type a translator's test cannot read (FILTER = 5)
        why = f"the translators cannot read this header ({exc})"
        raise NoIdentity("INSTRUME", header.get("INSTRUME", KeyError), why) from None


class ObservationCache:
    """Translates headers, the exposure part once per exposure (bounded LRU, thread-safe): an
    exposure's CCDs arrive at once, those missing together wait for the first translation. For our
    own translators (detector properties read only RAFTBAY and CCDSLOT) the detector part is cached
    too, by those cards' text, when it translated without warnings."""

    def __init__(self, search_path: Sequence[str] = (), size: int = 32) -> None:
        self.search_path = list(search_path)
        self.size = size
        self._exposures: OrderedDict[tuple[Any, ...], _Exposure] = OrderedDict()
        self._detectors: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._translating: dict[tuple[Any, ...], threading.Event] = {}
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def observation(self, header: Mapping[str, Any], filename: str | None = None) -> Translation:
        """``header`` translated (see the module doc); NoIdentity if it names no CCD."""
        key = exposure_key(header)
        exposure, cached = self._exposure(key, header, filename)
        detector, detector_warnings = self._detector(exposure.translator_class, header, filename)
        info = exposure.info
        values = {p: getattr(info, p) for p in _EXPOSURE_IDENTITY}
        values.update({p: v for p, (v, _) in detector.items()})
        warned = exposure.warnings + detector_warnings
        if any(v is None for v in values.values()):
            failures = {p: why for p, (_, why) in detector.items() if why}
            if detector_warnings:  # a detector property that warned and gave None says why
                failures.setdefault("detector_num", detector_warnings[-1])
            for prop, card in IDENTITY_CARDS.items():
                if values[prop] is None:
                    why = failures.get(prop) or _reason(prop, warned) or "not in the header"
                    found = tuple(header.get(c, KeyError) for c in card.split("+"))
                    raise NoIdentity(card, found if len(found) > 1 else found[0], why)
        return Translation(
            identity=Identity(**values),
            info=info,
            warnings=warned,
            translator=exposure.translator_class.__name__,
            corrected=exposure.corrected,
            cached=cached,
        )

    def _exposure(
        self, key: tuple[Any, ...], header: Mapping[str, Any], filename: str | None
    ) -> tuple[_Exposure, bool]:
        """(the exposure part, whether it came from the cache), translated once per key."""
        while True:
            with self._lock:
                exposure = self._exposures.get(key)
                if exposure is not None:
                    self._exposures.move_to_end(key)
                    self.hits += 1
                    return exposure, True
                running = self._translating.get(key)
                if running is None:
                    running = self._translating[key] = _Event()
                    break
            running.wait()  # another thread translates it; if that failed, try ourselves
        try:
            exposure = self._translate_exposure(header, filename)
            with self._lock:
                self.misses += 1
                self._exposures[key] = exposure
                while len(self._exposures) > self.size:
                    self._exposures.popitem(last=False)
            return exposure, False
        finally:
            with self._lock:
                del self._translating[key]
            running.set()

    def _detector(
        self, translator_class: type[MetadataTranslator], header: Mapping[str, Any], filename: str | None
    ) -> tuple[dict[str, tuple[Any, str]], tuple[str, ...]]:
        """(property -> (value, why it failed), warnings) of the detector part."""
        key = _detector_key(translator_class, header)
        if key is not None:
            found = self._detectors.get(key)
            if found is not None:
                return found, ()
        with captured_warnings() as warned:
            translator = translator_class(header, filename=filename)
            detector = {p: _property(translator, p) for p in _DETECTOR_IDENTITY}
        if key is not None and not warned and all(v is not None for v, _ in detector.values()):
            with self._lock:
                if len(self._detectors) > 4096:
                    self._detectors.clear()
                self._detectors[key] = detector
        return detector, tuple(warned)

    def _translate_exposure(self, header: Mapping[str, Any], filename: str | None) -> _Exposure:
        fixed = dict(header)  # fix_header writes into the header it is given
        with captured_warnings() as warned:
            translator_class = choose_translator(fixed, filename)
            info = ObservationInfo(
                fixed, filename=filename, translator_class=translator_class, search_path=self.search_path
            )
        return _Exposure(translator_class, info, tuple(warned), bool(fixed.get(FIXUP_SENTINEL)))


#: what CCDs waiting for another thread's translation of their exposure wait on
_Event = threading.Event
_DETECTOR_IDENTITY = ("detector_group", "detector_name", "detector_num")
_EXPOSURE_IDENTITY = tuple(p for p in IDENTITY_CARDS if p not in _DETECTOR_IDENTITY)
_DETECTOR_KEY_CARDS = ("RAFTBAY", "CCDSLOT")
_DETECTOR_KEY_PADDED = tuple(card.encode("ascii").ljust(8) for card in _DETECTOR_KEY_CARDS)


def _detector_key(
    translator_class: type[MetadataTranslator], header: Mapping[str, Any]
) -> tuple[Any, ...] | None:
    """The detector cache's key; None for a translator not in ``_OWN_TRANSLATORS`` (Rubin's own)."""
    if translator_class not in _OWN_TRANSLATORS:
        return None
    if isinstance(header, HduHeader):
        return (translator_class, "fits", *header.raw_key(_DETECTOR_KEY_PADDED, simulated=False))
    return (translator_class, *(_typed(header.get(c, KeyError)) for c in _DETECTOR_KEY_CARDS))


#: obsingest's translators: their detector properties read RAFTBAY and CCDSLOT only
_OWN_TRANSLATORS = frozenset(
    {
        lsstcam.LsstCamTranslator,
        lsstcam.LsstComCamTranslator,
        latiss.LatissTranslator,
        legacy_sim.LegacySimTranslator,
    }
)


def _property(translator: MetadataTranslator, prop: str) -> tuple[Any, str]:
    """(value, why it failed) of one translator property."""
    try:
        return getattr(translator, f"to_{prop}")(), ""
    except Exception as exc:
        return None, f"{type(exc).__name__}: {exc}"


def _reason(prop: str, warned: tuple[str, ...]) -> str:
    """The warning ObservationInfo logged when ``prop`` failed, if any."""
    return next((w for w in warned if f"property '{prop}'" in w), "")


#: the loggers whose warnings (defaulted cards, uncomputable properties) are a translation's: one
#: handler hands each record to the capture open in the logging thread, so concurrent translations
#: keep their warnings apart (silencing those loggers silences the capture)
WARNING_LOGGERS = ("astro_metadata_translator", "obsingest.translate", "lsst.obs.lsst")
_local = threading.local()


class _Capture(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        sink = getattr(_local, "sink", None)
        if sink is not None:
            try:
                sink.append(record.getMessage())
            except Exception:  # a broken format string must not break the translation
                sink.append(str(record.msg))


_handler = _Capture(level=logging.WARNING)


@cache
def _attach() -> None:
    for name in WARNING_LOGGERS:  # addHandler adds a handler once: two first calls are harmless
        logging.getLogger(name).addHandler(_handler)


@contextmanager
def captured_warnings() -> Iterator[list[str]]:
    """Collect, in a list, the WARNING-or-worse messages this thread's translation logs."""
    _attach()
    outer = getattr(_local, "sink", None)
    sink: list[str] = []
    _local.sink = sink
    try:
        yield sink
    finally:
        _local.sink = outer
        if outer is not None:
            outer.extend(sink)
