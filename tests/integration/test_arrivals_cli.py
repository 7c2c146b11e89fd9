"""``obsingest arrivals tail`` on the Pub/Sub emulator: it makes its subscription, prints each CCD
once (a redelivered or republished event is not printed again), names an undecodable message on
stderr without stopping, and exits after ``--limit`` arrivals."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from obsingest.dataid import DataId, dataset_id
from obsingest.messages import ArrivalEvent
from obsingest_cli.main import main
from tests.integration.fixtures.handles import PubSubService, unique_name

pytestmark = pytest.mark.integration

INSTRUMENT, DAY = "LSSTCam", 20261127


def _arrival(exposure: int, detector: int) -> ArrivalEvent:
    readout = datetime.now(UTC) - timedelta(seconds=2)
    return ArrivalEvent(
        dataset_id(DataId(INSTRUMENT, exposure, detector)),
        "raw",
        "LSSTCam/raw/all",
        INSTRUMENT,
        exposure,
        detector,
        DAY,
        f"gs://raw/{exposure}/{detector}.fits.fz",
        1,
        "crc32c:00000000",
        "direct",
        readout,
        readout + timedelta(seconds=1.5),
        readout + timedelta(seconds=1.6),
    )


def test_tail_prints_each_ccd_once_and_survives_an_undecodable_message(
    pubsub: PubSubService, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = pubsub.new_topic("arrivals")
    subscription = unique_name("arrivals-tail", 200)
    monkeypatch.setenv("OBSINGEST_BUS_ARRIVALS_TOPIC", topic.rsplit("/", 1)[1])
    monkeypatch.setenv("OBSINGEST_BUS_PUBSUB_PROJECT", pubsub.project_id)
    path = f"projects/{pubsub.project_id}/subscriptions/{subscription}"
    pubsub.subscriptions.append(path)

    codes: list[int] = []
    tail = threading.Thread(
        target=lambda: codes.append(
            main(["arrivals", "tail", "--json", "--limit", "2", "--subscription", subscription])
        ),
        daemon=True,
    )
    tail.start()
    subscriber = pubsub.subscriber()
    deadline = time.monotonic() + 30
    while True:  # a new subscription sees only what is published after it exists
        try:
            subscriber.get_subscription(request={"subscription": path})
            break
        except Exception:
            assert time.monotonic() < deadline, "arrivals tail made no subscription"
            time.sleep(0.2)

    first, second = _arrival(2026112700007, 0), _arrival(2026112700007, 1)
    publisher = pubsub.publisher()
    for data in (first.encode(), first.encode(), b"not an arrival"):
        publisher.publish(topic, data).result(timeout=30)
    # Pub/Sub keeps no order: the second CCD only once the undecodable one was met (else the
    # tail could reach --limit 2 before it)
    out, err = "", ""
    deadline = time.monotonic() + 30
    while "undecodable" not in err and time.monotonic() < deadline:
        time.sleep(0.1)
        captured = capsys.readouterr()
        out, err = out + captured.out, err + captured.err
    publisher.publish(topic, second.encode()).result(timeout=30)
    tail.join(timeout=60)

    assert not tail.is_alive(), "arrivals tail did not stop after --limit 2"
    assert codes == [0]
    captured = capsys.readouterr()
    out, err = out + captured.out, err + captured.err
    lines = {line["dataset_id"]: line for line in map(json.loads, out.splitlines())}  # in any order
    assert len(out.splitlines()) == 2
    assert set(lines) == {str(first.dataset_id), str(second.dataset_id)}
    line = lines[str(second.dataset_id)]
    assert line["detector"] == 1 and line["uri"] == second.uri
    assert line["stages_s"]["compress"] is None
    assert line["stages_s"]["register"] == pytest.approx(1.5)
    assert line["latency_s"] == pytest.approx(1.6)
    assert "undecodable message (14 bytes)" in err
