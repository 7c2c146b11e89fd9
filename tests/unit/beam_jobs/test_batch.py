"""Batch job end to end on Avro files, the CLI, the report, and batch == streaming."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from beam_jobs.core import content, summarize_exposure
from beam_jobs.report import format_summary_table, plot_latency, write_report
from beam_jobs.sinks import read_summaries
from beam_jobs.summarize import run_batch
from obsingest import avro
from obsingest.messages import ArrivalEvent, ExposureManifest, ExposureSummary, SummaryStatus
from obsingest_cli.main import main
from tests.unit.beam_jobs.helpers import Step, arrival, exposure_id, manifest, run_stream

pytestmark = pytest.mark.unit


def night() -> tuple[list[ExposureManifest], list[ArrivalEvent]]:
    """Five exposures 17 s apart: complete, missing one, over budget, duplicates + detector 8 not
    in its manifest (0..7), and one without a manifest."""
    manifests = [manifest(seq, range(8 if seq == 4 else 9), start=17.0 * seq) for seq in range(1, 5)]
    arrivals: list[ArrivalEvent] = []
    for seq in range(1, 6):
        readout = 17.0 * seq + 15.0
        for det in range(9):
            if seq == 2 and det == 4:
                continue
            latency = 1.0 + 0.25 * det + (4.0 if seq == 3 and det in (2, 7) else 0.0)
            arrivals.append(arrival(seq, det, readout + 0.01 * det, latency))
    arrivals += [arrival(4, 1, 17.0 * 4 + 15.01, 3.0), arrival(4, 1, 17.0 * 4 + 15.01, 0.5, "r2")]
    return manifests, arrivals


def write_inputs(tmp_path: Path) -> tuple[str, str]:
    manifests, arrivals = night()
    avro.write_container(tmp_path / "manifests.avro", "ExposureManifest", [m.to_record() for m in manifests])
    half = len(arrivals) // 2
    avro.write_container(
        tmp_path / "arrivals-1.avro", "ArrivalEvent", [a.to_record() for a in arrivals[:half]]
    )
    avro.write_container(
        tmp_path / "arrivals-2.avro", "ArrivalEvent", [a.to_record() for a in arrivals[half:]]
    )
    return str(tmp_path / "arrivals-*.avro"), str(tmp_path / "manifests.avro")


def expected_by_hand() -> dict[int, tuple]:
    # seq -> (status, arrived, missing, over_budget)
    return {
        1: (SummaryStatus.OK, 9, [], []),
        2: (SummaryStatus.INCOMPLETE, 8, [4], []),
        3: (SummaryStatus.OVER_BUDGET, 9, [], [2, 7]),
        4: (SummaryStatus.OK, 8, [], []),
        5: (SummaryStatus.NO_MANIFEST, 9, [], []),
    }


def test_batch_jsonl_and_avro_outputs_and_equality_with_streaming(tmp_path: Path) -> None:
    arrivals_glob, manifests_path = write_inputs(tmp_path)
    out = tmp_path / "summaries.jsonl"
    alerts = tmp_path / "alerts.jsonl"
    batch = run_batch([arrivals_glob], [manifests_path], str(out), 5.0, alerts_output=str(alerts))

    got = {
        s.exposure - exposure_id(0): (s.status, s.arrived, s.missing_detectors, s.over_budget) for s in batch
    }
    assert got == expected_by_hand()
    assert all((s.revision, s.trigger) == (0, "batch") for s in batch)
    assert [s.exposure for s in batch] == sorted(s.exposure for s in batch)
    lines = out.read_text().splitlines()
    assert len(lines) == 5 and json.loads(lines[0])["exposure"] == exposure_id(1)
    assert {s.status for s in read_summaries(str(alerts))} == {
        SummaryStatus.INCOMPLETE,
        SummaryStatus.OVER_BUDGET,
    }
    four = next(s for s in batch if s.exposure == exposure_id(4))
    # det 1: the rerun published after 0.5 s wins; det 8 (latency 3 s) is not in the manifest
    assert four.latency_max == pytest.approx(2.75)

    manifests, arrivals = night()
    by_hand = {
        m.exposure: summarize_exposure(m, [a for a in arrivals if a.exposure == m.exposure])
        for m in manifests
    }
    for s in batch:
        if s.exposure in by_hand:
            assert content(s) == content(by_hand[s.exposure])

    # Streaming over the same events, shuffled, with the watermark moving through the night
    # (some arrivals land after their deadline and revise): the final revisions equal batch.
    rng = random.Random(7)
    events: list = [*manifests, *arrivals]
    rng.shuffle(events)
    steps = [Step(events[i : i + 7], watermark=10.0 + 12 * n) for n, i in enumerate(range(0, len(events), 7))]
    summaries, _ = run_stream(steps)
    final: dict[int, ExposureSummary] = {}
    for s in summaries:
        if s.exposure not in final or s.revision > final[s.exposure].revision:
            final[s.exposure] = s
    assert {k: content(v) for k, v in final.items()} == {s.exposure: content(s) for s in batch}

    avro_out = tmp_path / "summaries.avro"
    again = run_batch([arrivals_glob], [manifests_path], str(avro_out))
    assert [content(s) for s in again] == [content(s) for s in batch]
    assert [content(s) for s in read_summaries(str(avro_out))] == [content(s) for s in batch]


def test_bad_input_files_are_dead_letters_and_the_rest_is_summarised(tmp_path: Path) -> None:
    arrivals_glob, manifests_path = write_inputs(tmp_path)
    whole = (tmp_path / "arrivals-2.avro").read_bytes()
    truncated = tmp_path / "arrivals-3.avro"  # a copy cut short: its arrivals are duplicates
    truncated.write_bytes(whole[:-20])
    garbage = tmp_path / "arrivals-4.avro"
    garbage.write_bytes(b"not avro")
    out = tmp_path / "summaries.jsonl"

    batch = run_batch([arrivals_glob], [manifests_path], str(out), 5.0)

    got = {
        s.exposure - exposure_id(0): (s.status, s.arrived, s.missing_detectors, s.over_budget) for s in batch
    }
    assert got == expected_by_hand()
    dead = [json.loads(line) for line in Path(f"{out}.dead-letter.jsonl").read_text().splitlines()]
    assert [(d["file"], d["reason"]) for d in dead] == [
        (str(truncated), "bad-input-file"),
        (str(garbage), "bad-input-file"),
    ]
    assert dead[0]["error"].startswith(f"{truncated}: unreadable Avro block at byte ")
    assert dead[1]["error"].startswith(f"{garbage}: not an Avro container")
    # nothing bad: an empty dead-letter file
    garbage.unlink()
    truncated.unlink()
    run_batch([arrivals_glob], [manifests_path], str(out), 5.0)
    assert Path(f"{out}.dead-letter.jsonl").read_text() == ""


def test_cli_summarize_and_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    arrivals_glob, manifests_path = write_inputs(tmp_path)
    out = tmp_path / "s.jsonl"
    code = main(
        [
            "summarize",
            "--arrivals",
            arrivals_glob,
            "--manifests",
            manifests_path,
            "--output",
            str(out),
            "--budget",
            "5",
            "--",
            "--runner=BundleBasedDirectRunner",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "INCOMPLETE" in printed and "NO_MANIFEST" in printed and str(exposure_id(3)) in printed
    assert "bad inputs" not in printed
    (tmp_path / "arrivals-9.avro").write_bytes(b"not avro")
    dead = tmp_path / "dead.jsonl"
    args = ["summarize", "--arrivals", arrivals_glob, "--manifests", manifests_path, "--output", str(out)]
    assert main([*args, "--dead-letter-output", str(dead), "--", "--runner=BundleBasedDirectRunner"]) == 0
    assert f"1 bad inputs skipped -> {dead}" in capsys.readouterr().out
    assert json.loads(dead.read_text())["file"] == str(tmp_path / "arrivals-9.avro")
    (tmp_path / "arrivals-9.avro").unlink()
    report_dir = tmp_path / "report"
    code = main(
        [
            "report",
            "--summaries",
            str(out),
            "--arrivals",
            arrivals_glob,
            "--output-dir",
            str(report_dir),
            "--exposure",
            str(exposure_id(2)),
        ]
    )
    assert code == 0
    pngs = sorted(p.name for p in report_dir.glob("*.png"))
    assert pngs == [f"focal_plane_{exposure_id(2)}.png", "latency_histogram.png", "night_p95_max.png"]
    assert all((report_dir / n).read_bytes()[:4] == b"\x89PNG" for n in pngs)


def test_table_and_plots_for_lsstcam(tmp_path: Path) -> None:
    events = [arrival(1, d, 15, 1 + d / 30, instrument="LSSTCam") for d in range(189) if d != 50]
    summaries = [
        summarize_exposure(None, [], key=("LSSTCam", exposure_id(2))),
        summarize_exposure(manifest(1, range(189), instrument="LSSTCam"), events),
    ]
    table = format_summary_table(summaries)
    assert table.splitlines()[0].split()[:3] == ["exposure", "expected", "arrived"]
    assert "NO_MANIFEST" in table and "INCOMPLETE" in table and "50" in table
    assert plot_latency(events, 5.0, tmp_path / "latency.png").stat().st_size > 0
    written = write_report(summaries, events, tmp_path / "rep")
    assert set(written) == {"night", "histogram", "focal_plane"}
