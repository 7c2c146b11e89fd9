"""Butler set-up per batch on a real SQLite Butler: one insert per element for a batch's
exposures, nothing asked again for what this process set up, conflicts still found."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from obsingest.registry import ExposureRecord
from obsingest.registry.butler_repo import make_repo, repo_of
from obsingest.registry.butler_setup import ButlerConflict, ButlerSetup

pytestmark = pytest.mark.integration

START = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)


def _exposure(seq: int, **fields: Any) -> ExposureRecord:
    values: dict[str, Any] = {
        "obs_start": START + timedelta(seconds=40 * seq),
        "obs_end": START + timedelta(seconds=40 * seq + 30),
        "exposure_time": 30.0,
        "dark_time": 30.5,
        "physical_filter": "r_57",
        "band": "r",
        "obs_id": f"MC_O_20261122_{seq:06d}",
        "group_name": f"group-{seq}",
        "seq_num": seq,
        "observation_type": "science",
        **fields,
    }
    return ExposureRecord("LSSTCam", 2026112200000 + seq, 20261122, **values)


@pytest.fixture
def setup(tmp_path):
    from lsst.daf.butler import Butler

    butler = Butler.from_config(repo_of(make_repo(tmp_path / "repo")), writeable=True)
    s = ButlerSetup(butler, "raw", "ObsingestRawFits")
    s.instrument("LSSTCam")
    yield s
    butler.close()


def _count_calls(setup: ButlerSetup, monkeypatch) -> Counter:
    calls: Counter = Counter()
    registry_class = type(setup.butler.registry)  # a new shim per access: count on its class
    for name in ("insertDimensionData", "syncDimensionData"):
        real = getattr(registry_class, name)

        def spy(self, element, *records, _real=real, _name=name, **kw):
            calls[(_name, element)] += 1
            return _real(self, element, *records, **kw)

        monkeypatch.setattr(registry_class, name, spy)
    return calls


def test_a_batch_of_exposures_is_set_up_in_one_insert_per_element(setup, monkeypatch):
    calls = _count_calls(setup, monkeypatch)
    setup.exposures([_exposure(1), _exposure(2), _exposure(1)])
    assert calls == {
        ("insertDimensionData", "physical_filter"): 1,
        ("insertDimensionData", "group"): 1,
        ("insertDimensionData", "day_obs"): 1,
        ("syncDimensionData", "exposure"): 2,
    }
    got = {r.id: r for r in setup.butler.registry.queryDimensionRecords("exposure")}
    assert set(got) == {2026112200001, 2026112200002}
    assert got[2026112200002].obs_id == "MC_O_20261122_000002"
    begin = got[2026112200001].timespan.begin.utc.to_datetime(timezone=UTC)
    assert begin == START + timedelta(seconds=40)  # stored in TAI, the same instant

    calls.clear()
    setup.exposure(_exposure(2))  # set up already: no round trip
    setup.exposures([_exposure(3)])  # same filter and day: only its group and itself
    assert calls == {("insertDimensionData", "group"): 1, ("syncDimensionData", "exposure"): 1}
    records = setup.exposure_records[("LSSTCam", 2026112200003)]
    assert records["physical_filter"] is setup.exposure_records[("LSSTCam", 2026112200001)]["physical_filter"]


def test_an_exposure_record_that_differs_from_the_butlers_is_still_a_conflict(setup, tmp_path):
    setup.exposures([_exposure(4)])
    other = ButlerSetup(setup.butler, "raw", "ObsingestRawFits")  # another process
    with pytest.raises(ButlerConflict, match="exposure"):
        other.exposures([_exposure(4, exposure_time=15.0)])
    assert ("LSSTCam", 2026112200004) not in other.exposure_records
