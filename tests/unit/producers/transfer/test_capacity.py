"""The capacity model: calibration arithmetic from a harness result's CPU phases, the
bottleneck law on this machine, and sizing a camera's edge, facility and network."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from producers.transfer import capacity
from producers.transfer.capacity import Calibration, predict_here, servers_for, size_for

pytestmark = pytest.mark.unit

T0 = datetime(2026, 11, 23, 3, tzinfo=UTC)


def cal(**overrides: object) -> Calibration:
    values: dict[str, object] = dict(
        path="direct",
        cores=2,
        ccds=8,
        compress_cpu=0.10,
        send_cpu=0.02,
        roles={"gcs": 0.10, "pubsub": 0.05, "facility_process": 0.08, "postgres": 0.01},
        idle_rates={"pubsub": 0.05},
        background=0.0,
        latency_one=0.5,
        raw_bytes=75_582_720,
        compressed_bytes=15_000_000,
        edge_workers=2,
    )
    values.update(overrides)
    return Calibration(**values)  # type: ignore[arg-type]


def phase(
    index: int,
    busy_s: float,
    busy: dict[str, float],
    idle_s: float = 0.0,
    idle: dict[str, float] | None = None,
) -> dict[str, object]:
    out: dict[str, object] = {"index": index, "busy_seconds": busy_s, "busy": busy}
    if idle is not None:
        out.update(idle_seconds=idle_s, idle=idle)
    return out


def test_idle_rates_and_busy_work_per_ccd_take_polling_off() -> None:
    phases = [
        phase(0, 4.0, {"gcs": 9.0, "pubsub": 9.0}, 10.0, {"gcs": 0.0, "pubsub": 1.0}),
        phase(1, 2.0, {"gcs": 0.8, "pubsub": 0.6, "others": 1.0}, 10.0, {"gcs": 0.0, "pubsub": 1.0}),
        phase(2, 2.0, {"gcs": 1.2, "pubsub": 0.6, "others": 1.0}),
    ]
    rates = capacity.idle_rates(phases)
    assert rates == {"gcs": 0.0, "pubsub": pytest.approx(0.1)}
    per_ccd = capacity.busy_per_ccd(phases, 4, rates)  # the warm-up exposure is left out
    assert per_ccd["gcs"] == pytest.approx((0.2 + 0.3) / 2)
    assert per_ccd["pubsub"] == pytest.approx((0.6 - 0.1 * 2.0) / 4)
    assert capacity.background_cores(phases) == pytest.approx(0.5)


def test_prediction_is_one_ccd_plus_the_rest_of_the_work_at_the_bottleneck() -> None:
    c = cal()
    one = predict_here(c, 1)
    assert one.max_latency == pytest.approx(0.5)
    total = 0.12 + 0.24
    cores = 2 - 0.05  # the idle polling of our own services takes its share
    p = predict_here(c, 16)
    assert p.bottleneck == "shared cores"
    # 16 CCDs' CPU over the cores, less what the CCD alone already spent inside L1
    assert p.max_latency == pytest.approx(0.5 + 16 * total / cores - total)
    busier = predict_here(c, 16, background=1.0)
    assert busier.max_latency == pytest.approx(0.5 + 16 * total / (cores - 1.0) - total)


def test_as_many_ccds_as_cores_run_side_by_side() -> None:
    """Two CCDs on two idle cores are announced about when one alone is, not one CCD's CPU
    over the cores later."""
    c = cal(idle_rates={}, roles={"gcs": 0.10, "pubsub": 0.05, "postgres": 0.01})  # no single interpreter
    assert predict_here(c, 2).max_latency == pytest.approx(0.5)
    assert predict_here(c, 3).max_latency == pytest.approx(0.5 + (3 / 2 - 1) * (0.12 + 0.16))


def test_a_single_interpreter_becomes_the_bottleneck() -> None:
    c = cal(roles={"facility_process": 0.5, "gcs": 0.01})
    p = predict_here(c, 8)
    assert p.bottleneck.startswith("register function process")
    assert p.max_latency == pytest.approx(0.5 + 7 * 0.5)


def test_servers_for_fits_the_queue_into_the_slack() -> None:
    assert servers_for(1, 10.0, 0.1) == 1
    assert servers_for(205, 0.12, 4.0) == math.ceil(205 / (math.floor(4.0 / 0.12) + 1))
    for count, demand, slack in ((205, 0.12, 4.0), (9, 0.3, 1.0), (189, 0.05, 0.2)):
        c = servers_for(count, demand, slack)
        assert (math.ceil(count / c) - 1) * demand <= slack
        assert c == 1 or (math.ceil(count / (c - 1)) - 1) * demand > slack


def test_camera_sizing_holds_the_limit_or_says_impossible() -> None:
    c = cal()
    s = size_for(c, 205, 5.0, cores_per_node=16)
    assert s.feasible and s.predicted_max <= 5.0 + 1e-9
    assert s.edge_nodes == math.ceil(s.edge_cores / 16)
    assert s.bandwidth_gbit_s == pytest.approx(205 * 15e6 * 8 / 4.5 / 1e9, abs=0.01)
    loose = size_for(c, 205, 7.0, cores_per_node=16)
    assert loose.edge_cores <= s.edge_cores and loose.bandwidth_gbit_s < s.bandwidth_gbit_s
    slow = size_for(c, 205, 5.0, cores_per_node=16, extra_latency=6.0)
    assert not slow.feasible and slow.edge_cores == 0
    report = capacity.camera_report(c, 205, 17.0, 5.0, 7.0, 16)
    assert report["sustained_gbit_s"] == pytest.approx(205 * 15e6 * 8 / 17 / 1e9, abs=1e-3)
    text = capacity.format_camera(report, "LSSTCam")
    assert "205 detectors" in text and "register function instances" in text


def test_camera_names_and_numbers() -> None:
    assert capacity.camera_detectors("LSSTCam") == 205
    assert capacity.camera_detectors("LSSTComCam") == 9
    assert capacity.camera_detectors("24") == 24
    with pytest.raises(ValueError, match="one of LSSTCam"):
        capacity.camera_detectors("HSC")
    with pytest.raises(ValueError, match="at least one"):
        capacity.camera_detectors("0")


def harness_result(ccds: int, latencies: list[float]) -> dict[str, object]:
    exposures = [2026112300001, 2026112300002, 2026112300003]
    arrivals = []
    for i, exposure in enumerate(exposures):
        readout = T0 + timedelta(seconds=17 * i)
        for d, lat in enumerate(latencies[:ccds]):
            arrivals.append(
                {
                    "exposure": exposure,
                    "detector": d,
                    "readout": readout.isoformat(),
                    "published": (readout + timedelta(seconds=lat + (i == 0))).isoformat(),
                }
            )
    records = [
        {
            "exposure_index": i,
            "error": "",
            "compress_cpu_seconds": 0.1,
            "send_cpu_seconds": 0.02,
            "raw_bytes": 75_582_720,
            "bytes": 15_000_000,
        }
        for i in range(3)
        for _ in range(ccds)
    ]
    busy = {
        "edge_workers": 0.12 * ccds,
        "edge_service": 0.01 * ccds,
        "gcs": 0.1 * ccds,
        "facility_process": 0.08 * ccds,
        "others": 0.5,
        "machine": 9.9,
    }
    phases = [phase(i, 1.0, busy, 16.0, {"gcs": 0.0, "facility_process": 0.16}) for i in range(3)]
    return {
        "ccds": ccds,
        "workers": 2,
        "exposures": exposures,
        "arrivals": arrivals,
        "records": records,
        "cpu": {"cores": 2, "phases": phases},
    }


def test_calibrate_from_two_harness_results() -> None:
    c = capacity.calibrate("direct", harness_result(1, [0.7]), harness_result(8, [0.0] * 8))
    assert c.latency_one == pytest.approx(0.7)  # the warm-up exposure's 1.7 s is left out
    assert c.compress_cpu == pytest.approx(0.1)
    assert c.send_cpu == pytest.approx(0.02 + 0.01)  # the edge service's threads count as send
    assert c.roles["gcs"] == pytest.approx(0.1)
    assert c.roles["facility_process"] == pytest.approx(0.08 - 0.01 / 8)
    assert "others" not in c.roles and "edge_workers" not in c.roles
    assert c.background == pytest.approx(0.5)
    assert c.compressed_bytes == 15_000_000
    assert c.stages()["register+publish"] == pytest.approx(c.roles["facility_process"])
    with pytest.raises(ValueError, match="announced nothing"):
        capacity.calibrate("direct", harness_result(0, []), harness_result(8, [0.0] * 8))


def test_an_exposure_that_overlapped_the_next_is_left_out() -> None:
    phases = [
        phase(0, 4.0, {"gcs": 9.0}),  # warm-up, overlapped: no idle window
        phase(1, 20.0, {"gcs": 9.0, "others": 10.0}),  # ran into exposure 2: not its own CPU
        phase(2, 2.0, {"gcs": 0.4, "others": 1.0}),  # the last: nothing after it
    ]
    assert [p["index"] for p in capacity.clean_phases(phases)] == [2]
    assert capacity.busy_per_ccd(phases, 4, {}) == {"gcs": pytest.approx(0.1), "others": pytest.approx(0.25)}
    assert capacity.background_cores(phases) == pytest.approx(0.5)
