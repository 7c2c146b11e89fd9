"""observation(): the per-exposure cache, identities per CCD, warnings kept, refusals named."""

from __future__ import annotations

import threading

import pytest

from obsingest.translate import NoIdentity, ObservationCache, observe
from obsingest.translate.cards import HduHeader
from tests.unit.obsingest.translate.real_headers import fits_primary, read

pytestmark = pytest.mark.unit

SCIENCE = "lsstCam-MC_O_20250415_000060_R01_S01.yaml"


def _ccd(header: dict, raft: str, slot: str) -> dict:
    return {**header, "RAFTBAY": raft, "CCDSLOT": slot, "LSST_NUM": f"ITL-{raft}{slot}"}


def test_the_exposure_is_translated_once_and_each_ccd_keeps_its_own_detector():
    cache = ObservationCache()
    header = read(SCIENCE)
    first = cache.observation(_ccd(header, "R01", "S01"))
    second = cache.observation(_ccd(header, "R22", "S11"))
    corner = cache.observation(_ccd(header, "R44", "SW0"))
    assert (first.cached, second.cached, corner.cached) == (False, True, True)
    assert (cache.hits, cache.misses) == (2, 1)
    assert [t.identity.detector_num for t in (first, second, corner)] == [1, 94, 203]
    assert corner.identity.detector_group == "R44" and corner.identity.detector_name == "SW0"
    assert second.info is first.info
    assert {t.identity.exposure_id for t in (first, second, corner)} == {2025041500060}


def test_a_ccd_whose_exposure_cards_differ_is_translated_again_not_given_its_neighbours():
    cache = ObservationCache()
    header = read(SCIENCE)
    cache.observation(header)
    other = cache.observation({**header, "ROTPA": 10.0})
    assert not other.cached
    assert other.info.boresight_rotation_angle.deg == pytest.approx(10.0 - 90.0)


def test_the_cache_is_bounded():
    cache = ObservationCache(size=2)
    header = read(SCIENCE)
    for seq in (1, 2, 3):
        cache.observation({**header, "SEQNUM": seq, "OBSID": f"MC_O_20250415_{seq:06d}"})
    assert cache.observation({**header, "SEQNUM": 3, "OBSID": "MC_O_20250415_000003"}).cached
    assert not cache.observation({**header, "SEQNUM": 1, "OBSID": "MC_O_20250415_000001"}).cached


def test_a_cached_fits_header_gives_the_same_translation_as_a_dict():
    cache = ObservationCache()
    header = read(SCIENCE)
    from_dict = cache.observation(header)
    from_fits = cache.observation(HduHeader(fits_primary(header)))
    assert not from_fits.cached  # a FITS header is keyed on its cards as written
    assert from_fits.identity == from_dict.identity
    assert from_fits.info.datetime_begin == from_dict.info.datetime_begin
    other_ccd = cache.observation(HduHeader(fits_primary(_ccd(header, "R22", "S11"))))
    assert other_ccd.cached and other_ccd.identity.detector_num == 94


@pytest.mark.parametrize(
    ("card", "value", "field", "default", "warns"),
    [
        ("ELSTART", "", "altaz_begin", None, "altaz_begin"),
        ("EXPTIME", None, "exposure_time_requested", None, "exposure_time_requested"),
        ("DARKTIME", None, "dark_time", 15.000998497009277, "no DARKTIME"),
        # LSSTCam's filter and program default silently, as Rubin's translator does
        ("FILTER", None, "physical_filter", "unknown", None),
        ("PROGRAM", None, "science_program", "unknown", None),
    ],
)
def test_an_empty_card_takes_the_default_never_a_refusal(card, value, field, default, warns):
    header = {**read(SCIENCE), card: value}
    result = ObservationCache().observation(header)
    found = getattr(result.info, field)
    assert (found.value if hasattr(found, "unit") else found) == default
    assert result.identity.exposure_id == 2025041500060
    if warns:
        assert any(warns in w for w in result.warnings), result.warnings
    else:
        assert result.warnings == ()


@pytest.mark.parametrize(
    ("card", "value", "words"),
    [
        ("INSTRUME", "hsc", "INSTRUME='hsc' gives no identity: no translator"),
        ("DAYOBS", None, "DAYOBS=None SEQNUM=60 gives no identity"),
        (
            "SEQNUM",
            "x",
            "DAYOBS='20250415' SEQNUM='x' gives no identity: Ignoring Error calculating "
            "property 'exposure_id'",
        ),
        (
            "RAFTBAY",
            "R99",
            "RAFTBAY='R99' CCDSLOT='S01' gives no identity: MC_O_20250415_000060: no detector named R99_S01",
        ),
        ("CCDSLOT", None, "RAFTBAY='R01' CCDSLOT=None gives no identity"),
        ("OBSID", None, "OBSID=None gives no identity"),
        # a translator's own test of another card raised TypeError: an HTTP 500 at every delivery
        ("FILTER", 5, "INSTRUME='lsstCam' gives no identity: the translators cannot read this header"),
    ],
)
def test_a_header_without_an_identity_is_refused_naming_the_card(card, value, words):
    header = {**read(SCIENCE), card: value}
    with pytest.raises(NoIdentity) as info:
        ObservationCache().observation(header)
    assert words in str(info.value)
    assert info.value.reason == "bad-header" and not info.value.retriable


def test_warnings_are_kept_per_thread():
    """Two threads translating at once each keep only their own header's warnings."""
    header = read(SCIENCE)
    results: dict[str, list[str]] = {}

    def run(name: str, bad: dict) -> None:
        cache = ObservationCache()
        for _ in range(5):
            results[name] = list(cache.observation({**header, **bad}).warnings)
            cache = ObservationCache()

    threads = [
        threading.Thread(target=run, args=("clean", {})),
        threading.Thread(target=run, args=("darkless", {"DARKTIME": None})),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results["clean"] == []
    assert results["darkless"] and all("DARKTIME" in w for w in results["darkless"])


def test_ccds_of_one_exposure_missing_the_cache_together_translate_it_once(monkeypatch):
    cache = ObservationCache()
    header = read(SCIENCE)
    translate = cache._translate_exposure
    entered, release = threading.Event(), threading.Event()
    calls: list[int] = []

    def slow(h, filename):
        calls.append(1)
        entered.set()
        release.wait(10)
        return translate(h, filename)

    monkeypatch.setattr(cache, "_translate_exposure", slow)
    waiting = threading.Semaphore(0)

    class Counted(threading.Event):
        def wait(self, timeout=None):
            waiting.release()
            return super().wait(timeout)

    monkeypatch.setattr(observe, "_Event", Counted)
    results: dict[str, object] = {}

    def one(slot: str) -> None:
        results[slot] = cache.observation(_ccd(header, "R22", slot))

    first = threading.Thread(target=one, args=("S00",))
    first.start()
    assert entered.wait(10)
    others = [threading.Thread(target=one, args=(s,)) for s in ("S01", "S02", "S10")]
    for t in others:
        t.start()
    for _ in others:  # each of them waits for the first one's translation
        assert waiting.acquire(timeout=10)
    release.set()
    for t in (first, *others):
        t.join(10)
    assert len(calls) == 1 and (cache.hits, cache.misses) == (3, 1)
    assert {results[s].identity.detector_name for s in results} == {"S00", "S01", "S02", "S10"}
    assert len({id(results[s].info) for s in results}) == 1


def test_a_failed_translation_lets_the_waiting_ccds_try_again(monkeypatch):
    cache = ObservationCache()
    header = read(SCIENCE)
    translate = cache._translate_exposure
    failures = iter([RuntimeError("database gone")])

    def flaky(h, filename):
        for exc in failures:
            raise exc
        return translate(h, filename)

    monkeypatch.setattr(cache, "_translate_exposure", flaky)
    with pytest.raises(RuntimeError):
        cache.observation(header)
    assert cache.observation(header).identity.detector_num == 1
    assert not cache._translating


def test_the_detector_part_is_cached_by_raft_and_slot_and_equals_a_fresh_translation():
    header = read(SCIENCE)
    warm = ObservationCache()
    for seq in (60, 61):  # the second exposure's CCDs take their detector from the cache
        exposure = {**header, "SEQNUM": seq, "OBSID": f"MC_O_20250415_{seq:06d}"}
        for raft, slot in (("R01", "S01"), ("R22", "S11"), ("R44", "SW0"), ("R00", "SG1")):
            ccd = _ccd(exposure, raft, slot)
            cached = warm.observation(HduHeader(fits_primary(ccd)))
            fresh = ObservationCache().observation(ccd)
            assert cached.identity == fresh.identity
            assert cached.warnings == fresh.warnings
    assert len(warm._detectors) == 4


def test_a_detector_that_warns_is_not_cached_and_warns_for_every_ccd():
    cache = ObservationCache()
    header = read(SCIENCE)
    for _ in range(2):
        with pytest.raises(NoIdentity, match="RAFTBAY"):
            cache.observation(_ccd(header, "R99", "S11"))
    assert not cache._detectors
