"""What header translation costs: ObservationInfo's own cost, and exposure_from_header per CCD.

    python -m tests.world.translate_cost [--repeat N]

Translates the real LSSTCam science header (tests/fixtures/real_headers) and prints medians:
``ObservationInfo`` alone (fix_header and every property), ``observation()`` on a cache miss
and hit, and ``exposure_from_header`` on a FITS primary header for the first CCD of an exposure
(translation + the record's time and coordinate conversions) and for each further CCD (the cache),
with the per-CCD cost amortised over LSSTCam's 205 CCDs. Not collected by pytest.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from collections.abc import Callable


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=100)
    n = parser.parse_args(argv).repeat
    from astro_metadata_translator import ObservationInfo

    from obsingest import translate
    from obsingest.dataid import DataId
    from obsingest.registry import headers
    from obsingest.translate import HduHeader, ObservationCache
    from obsingest.translate.lsstcam import LsstCamTranslator
    from tests.unit.obsingest.translate.real_headers import fits_primary, read

    header = read("lsstCam-MC_O_20250415_000060_R01_S01.yaml")
    primary = fits_primary(header)
    data_id = DataId("LSSTCam", 2025041500060, 1)

    def info() -> object:
        return ObservationInfo(copy.copy(header), translator_class=LsstCamTranslator)

    def first_ccd() -> object:
        translate._cache = ObservationCache()
        headers._RECORDS.clear()
        return headers.exposure_from_header(primary, data_id, "bench")

    warm = ObservationCache()
    warm.observation(HduHeader(primary))
    rows = {
        "ObservationInfo alone": median_ms(info, n),
        "observation(), cache miss": median_ms(lambda: ObservationCache().observation(header), n),
        "observation(), cache hit (FITS)": median_ms(lambda: warm.observation(HduHeader(primary)), n * 10),
        "exposure_from_header, first CCD": median_ms(first_ccd, n),
    }
    first_ccd()
    rows["exposure_from_header, next CCDs"] = median_ms(
        lambda: headers.exposure_from_header(primary, data_id, "bench"), n * 10
    )
    first, then = rows["exposure_from_header, first CCD"], rows["exposure_from_header, next CCDs"]
    rows["per CCD over a 205-CCD exposure"] = (first + 204 * then) / 205
    for name, ms in rows.items():
        print(f"{name:40} {ms:8.3f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
