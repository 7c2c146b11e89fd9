"""Harness planning: destinations, readout schedule, fresh exposure ids, thread shares."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from obsingest import defaults
from producers.transfer.plan import (
    compress_threads,
    exposure_ids,
    parse_destination,
    parse_starttime,
    readout_times,
)

pytestmark = pytest.mark.unit


def test_file_destination_is_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    dest = parse_destination("file://out/store")
    assert dest.scheme == "file"
    assert dest.sender_url == f"file://{tmp_path}/out/store"
    assert dest.prefix == "raw/"


@pytest.mark.parametrize(
    ("url", "bucket", "prefix"),
    [
        ("gs://bench", "bench", "raw/"),
        ("gs://bench/", "bench", "raw/"),
        ("gs://bench/runs/a", "bench", "runs/a/"),
        ("gs://bench/runs/a/", "bench", "runs/a/"),
    ],
)
def test_gs_destination_splits_bucket_and_prefix(url, bucket, prefix):
    dest = parse_destination(url)
    assert (dest.sender_url, dest.prefix, dest.target) == (f"gs://{bucket}", prefix, bucket)


def test_kafka_topic_takes_broker_from_environment():
    dest = parse_destination("kafka://ccd-chunks", {"KAFKA_BOOTSTRAP_SERVERS": "h:1"})
    assert dest.sender_url == "kafka://h:1/ccd-chunks"
    assert dest.target == "ccd-chunks"


def test_kafka_topic_defaults_to_stack_broker():
    assert parse_destination("kafka://t", {}).sender_url == f"kafka://{defaults.KAFKA_BOOTSTRAP}/t"


def test_kafka_url_with_broker_is_kept():
    assert parse_destination("kafka://b:9/t", {}).sender_url == "kafka://b:9/t"


@pytest.mark.parametrize("url", ["s3://b", "file://", "gs://", "kafka://", "kafka://h:1/", "x"])
def test_bad_destinations_are_refused(url):
    with pytest.raises(ValueError):
        parse_destination(url, {})


def test_starttime_without_zone_is_utc():
    assert parse_starttime("2026-01-02T03:04:05") == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert parse_starttime("2026-01-02T00:04:05-03:00") == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_readout_times_are_one_interval_apart():
    start = datetime(2026, 1, 2, tzinfo=UTC)
    times = readout_times(start, 17.0, 3)
    assert times == [start, start + timedelta(seconds=17), start + timedelta(seconds=34)]
    with pytest.raises(ValueError):
        readout_times(start, 1.0, 0)
    with pytest.raises(ValueError):
        readout_times(start, -1.0, 2)


def test_exposure_ids_are_consecutive_and_follow_the_clock():
    start = datetime(2026, 1, 2, 1, 0, 0, tzinfo=UTC)
    ids = exposure_ids(start, 3)
    assert ids == [2026010203601, 2026010203602, 2026010203603]
    later = exposure_ids(start + timedelta(seconds=3), 3)
    assert not set(ids) & set(later)


def test_exposure_ids_must_fit_in_the_day():
    with pytest.raises(ValueError):
        exposure_ids(datetime(2026, 1, 2, 23, 59, 59, tzinfo=UTC), 20_000)


@pytest.mark.parametrize(("ccds", "cpus", "threads"), [(1, 2, 2), (2, 2, 1), (16, 2, 1), (1, 8, 8)])
def test_compress_threads_share_the_cores(ccds, cpus, threads):
    assert compress_threads(ccds, cpus) == threads


def test_edge_workers_one_per_core_at_most_one_per_ccd():
    from producers.transfer.plan import edge_workers

    assert edge_workers(24, 2) == 2
    assert edge_workers(1, 8) == 1
    assert edge_workers(16, 32) == 16
    assert edge_workers(4, 0) == 1
