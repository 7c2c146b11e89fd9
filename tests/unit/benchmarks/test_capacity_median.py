"""benchmarks/capacity.py: the figure is each stage's median over the calibrations, and the
model uses the calibration of median total CPU, so one noisy run decides neither."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from benchmarks.capacity import median_calibration

pytestmark = pytest.mark.unit


@dataclass
class Cal:
    register: float
    store: float

    def stages(self) -> dict[str, float]:
        return {"register+publish": self.register, "store": self.store}

    @property
    def total_cpu(self) -> float:
        return self.register + self.store


def test_one_noisy_calibration_decides_nothing():
    quiet_a, noisy, quiet_b = Cal(0.022, 0.17), Cal(0.060, 0.30), Cal(0.023, 0.16)
    chosen, stages = median_calibration([quiet_a, noisy, quiet_b])
    assert chosen is quiet_a  # total CPU 0.192: between 0.183 and 0.36
    assert stages == {"register+publish": 0.023, "store": 0.17}


def test_a_single_calibration_is_its_own_median():
    only = Cal(0.025, 0.17)
    assert median_calibration([only]) == (only, {"register+publish": 0.025, "store": 0.17})
