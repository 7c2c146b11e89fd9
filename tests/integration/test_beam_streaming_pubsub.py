"""The streaming Beam job on the real Pub/Sub emulator: manifests and arrivals in, summaries out.

Events are stamped "now" (the DirectRunner's Pub/Sub watermark is the wall clock), so the
deadline (first readout + 5 s budget + 1 s grace) passes during the run.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from apache_beam.runners.portability import prism_runner

from beam_jobs.streaming import StreamingSettings, run_streaming
from obsingest.dataid import DataId, dataset_id
from obsingest.messages import ArrivalEvent, ExposureManifest, ExposureSummary, SummaryStatus, utcnow
from tests.integration.fixtures.handles import PubSubService

pytestmark = pytest.mark.integration

DAY = 20250301
INSTRUMENT = "LSSTComCam"


def _events(now):  # exposure seq -> detectors that arrive; 2 misses detector 2, 3 has no manifest
    manifests, arrivals = [], []
    for seq, arriving, with_manifest in ((1, [0, 1, 2], True), (2, [0, 1], True), (3, [5], False)):
        exposure = DAY * 100_000 + seq
        readout = now - timedelta(seconds=1)
        if with_manifest:
            manifests.append(
                ExposureManifest(
                    INSTRUMENT,
                    exposure,
                    DAY,
                    [0, 1, 2],
                    readout - timedelta(seconds=15),
                    15.0,
                    "r",
                    readout - timedelta(seconds=16),
                )
            )
        for det in arriving:
            published = readout + timedelta(seconds=0.5 + det)
            event = ArrivalEvent(
                dataset_id(DataId(INSTRUMENT, exposure, det)),
                "raw",
                "run",
                INSTRUMENT,
                exposure,
                det,
                DAY,
                f"file:///x/{exposure}/{det}",
                1,
                "crc32c:00000000",
                "direct",
                readout,
                published,
                published,
            )
            arrivals += [event, event] if det == 0 else [event]  # a duplicate too
    return manifests, arrivals


def _pull_all(pubsub: PubSubService, subscription: str, want: int, wait: float) -> list[bytes]:
    subscriber = pubsub.subscriber()
    got: list[bytes] = []
    deadline = time.monotonic() + wait
    while len(got) < want and time.monotonic() < deadline:
        resp = subscriber.pull(request={"subscription": subscription, "max_messages": 50}, timeout=10)
        if resp.received_messages:
            subscriber.acknowledge(
                request={"subscription": subscription, "ack_ids": [m.ack_id for m in resp.received_messages]}
            )
            got += [m.message.data for m in resp.received_messages]
        else:
            time.sleep(0.2)
    return got


def test_streaming_job_on_pubsub_emulator(
    pubsub: PubSubService, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    arrivals_topic = pubsub.new_topic("ccd-arrivals")
    manifests_topic = pubsub.new_topic("exposures")
    summaries_topic = pubsub.new_topic("exposure-summaries")
    alerts_topic = pubsub.new_topic("budget-alerts")
    arrivals_sub = pubsub.new_subscription(arrivals_topic, "beam-arrivals")
    manifests_sub = pubsub.new_subscription(manifests_topic, "beam-exposures")
    summaries_sub = pubsub.new_subscription(summaries_topic, "summaries")
    alerts_sub = pubsub.new_subscription(alerts_topic, "alerts")
    dlq_topic = pubsub.new_topic("exposure-events-dlq")
    dlq_sub = pubsub.new_subscription(dlq_topic, "dlq")

    settings = StreamingSettings(
        arrivals_subscription=arrivals_sub,
        manifests_subscription=manifests_sub,
        summaries_topic=summaries_topic,
        alerts_topic=alerts_topic,
        dead_letter_topic=dlq_topic,
        output=str(tmp_path / "summaries.jsonl"),
        budget=5.0,
        grace=1.0,
        run_for=30.0,
    )
    tried: list[str] = []  # the DirectRunner would try (and download) Prism first, then fall back

    def refuse(self: object, *args: object) -> None:
        tried.append("prism")
        raise RuntimeError("Prism tried")

    monkeypatch.setattr(prism_runner.PrismRunner, "run_pipeline", refuse)
    job = threading.Thread(target=run_streaming, args=(settings,), daemon=True)
    job.start()
    time.sleep(3)  # the job is pulling by now; events are "live"
    manifests, arrivals = _events(utcnow())
    publisher = pubsub.publisher()
    futures = [publisher.publish(manifests_topic, m.encode()) for m in manifests]
    futures += [publisher.publish(arrivals_topic, a.encode()) for a in arrivals]
    futures.append(publisher.publish(arrivals_topic, b"not avro"))  # must not stop the job
    for f in futures:
        f.result(timeout=30)

    received = _pull_all(pubsub, summaries_sub, want=3, wait=25)
    alerts = _pull_all(pubsub, alerts_sub, want=1, wait=5)
    dead = (
        pubsub.subscriber()
        .pull(request={"subscription": dlq_sub, "max_messages": 10}, timeout=10)
        .received_messages
    )
    job.join(timeout=60)
    assert not job.is_alive() and tried == []
    assert [m.message.data for m in dead] == [b"not avro"]
    assert "ArrivalEvent" in dead[0].message.attributes["dlq_reason"]

    summaries = {s.exposure % 100_000: s for s in map(ExposureSummary.decode, received)}
    assert sorted(summaries) == [1, 2, 3]
    assert (summaries[1].status, summaries[1].trigger, summaries[1].arrived) == (
        SummaryStatus.OK,
        "all-arrived",
        3,
    )
    assert (summaries[2].status, summaries[2].trigger, summaries[2].missing_detectors) == (
        SummaryStatus.INCOMPLETE,
        "deadline",
        [2],
    )
    assert (summaries[3].status, summaries[3].expected) == (SummaryStatus.NO_MANIFEST, None)
    assert [ExposureSummary.decode(a).exposure % 100_000 for a in alerts] == [2]
    assert len((tmp_path / "summaries.jsonl").read_text().splitlines()) == 3
