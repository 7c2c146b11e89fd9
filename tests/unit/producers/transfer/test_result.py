"""A harness run's JSON: warm-up apart, budget over the later exposures, CPU per exposure."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from producers.transfer.harness import HarnessConfig, HarnessResult
from producers.transfer.stats import Arrival
from tests.unit.producers.transfer.test_stats import T0, rec

pytestmark = pytest.mark.unit

EXPOSURES = [2026010200001, 2026010200002, 2026010200003]


def arrival(index: int, detector: int, latency: float) -> Arrival:
    readout = T0 + timedelta(seconds=17 * index)
    published = readout + timedelta(seconds=latency)
    return Arrival(
        EXPOSURES[index],
        detector,
        readout,
        readout + timedelta(seconds=1),
        readout + timedelta(seconds=2),
        published,
        published,
        published,
    )


def result(e2e: bool) -> HarnessResult:
    config = HarnessConfig("file:///x", ccds=2, numexp=3, interval=17.0, run_dir=Path("/x"))
    records = [rec(i, d, 17.0 * i, 3.0 if i == 0 else 1.0 + d) for i in range(3) for d in range(2)]
    arrivals = [arrival(i, d, 9.0 if i == 0 else 2.0 + d) for i in range(3) for d in range(2)]
    return HarnessResult(
        config=config,
        run_id="r",
        sender_url="file:///x",
        start=T0,
        exposures=EXPOSURES,
        records=records,
        arrivals=arrivals if e2e else [],
        end_to_end=e2e,
        cpu_seconds={"edge_workers": 3.0, "others": 6.0},
        window_seconds=60.0,
    )


def test_warmup_exposure_is_reported_apart():
    out = result(e2e=False).to_json()
    assert out["warmup"]["transfers"] == 2
    assert out["warmup"]["max"] == pytest.approx(3.0)
    assert out["steady"]["transfers"] == 4
    assert (out["steady"]["min"], out["steady"]["max"]) == pytest.approx((1.0, 2.0))
    assert "latency" not in out
    assert len(out["records"]) == 6


def test_budget_is_judged_without_the_warmup_exposure():
    out = result(e2e=True).to_json()
    steady, everything = out["latency"]["steady"], out["latency"]["all"]
    assert (steady["expected"], steady["announced"], steady["over_budget"]) == (4, 4, 0)
    assert steady["max"] == pytest.approx(3.0)
    assert (everything["expected"], everything["over_budget"]) == (6, 2)
    total = next(s for s in out["stages"] if s["stage"] == "readout->announced")
    assert total["count"] == 4
    assert out["stages_warmup"][-1]["max"] == pytest.approx(9.0)


def test_cpu_is_given_per_exposure():
    cpu = result(e2e=False).to_json()["cpu"]
    assert cpu["per_exposure"] == {"edge_workers": 1.0, "others": 2.0}
    assert cpu["window_seconds"] == 60.0
