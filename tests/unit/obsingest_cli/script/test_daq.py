"""``obsingest daq night --publish-manifests``'s publisher: transient failures retried, a manifest
that still cannot be published reported loudly and remembered, never raised into the night."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from obsingest.bus.pubsub import PublishFailed
from obsingest.messages import ExposureManifest
from obsingest.retry import RetryPolicy
from obsingest_cli.script.daq import ManifestPublisher
from producers.daq.night import NightPlan, play_night

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)


def _manifest(exposure: int = 2026112200001) -> ExposureManifest:
    return ExposureManifest("LSSTComCam", exposure, 20261122, [0, 1], NOW, 15.0, "r", NOW)


class FlakyBus:
    def __init__(self, failures: int, error: Exception | None = None) -> None:
        self.failures = failures
        self.error = error or PublishFailed("no confirmation in 5 s")
        self.sent: list[tuple[str, bytes, str | None, dict[str, str] | None]] = []

    def publish(self, topic, data, *, key=None, attributes=None) -> str:  # type: ignore[no-untyped-def]
        if self.failures:
            self.failures -= 1
            raise self.error
        self.sent.append((topic, data, key, attributes))
        return str(len(self.sent))


def _publisher(bus: FlakyBus) -> ManifestPublisher:
    policy = RetryPolicy(max_attempts=3, base_delay=0.0, max_delay=0.0, deadline=60.0)
    return ManifestPublisher(bus, "exposures", policy, sleep=lambda _s: None)


def test_a_transient_failure_is_retried_and_the_manifest_published_once() -> None:
    bus = FlakyBus(failures=2)
    publish = _publisher(bus)
    publish(_manifest())
    assert publish.published == [2026112200001] and publish.failed == []
    [(topic, data, key, attributes)] = bus.sent
    assert topic == "exposures" and key == "LSSTComCam/2026112200001"
    assert attributes == {"instrument": "LSSTComCam", "exposure": "2026112200001"}
    assert ExposureManifest.decode(data) == _manifest()


def test_an_unpublishable_manifest_is_reported_and_the_night_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bus = FlakyBus(failures=1000)
    publish = _publisher(bus)
    played = play_night(
        NightPlan(tmp_path, "LSSTComCam", exposures=2, detectors=2, interval=0.0, day_obs=20261122),
        on_manifest=publish,
    )
    assert [len(p.files) for p in played] == [2, 2]  # every file written regardless
    assert publish.failed == [p.exposure for p in played] and publish.published == []
    err = capsys.readouterr().err
    assert f"manifest LSSTComCam/{played[0].exposure} NOT published on exposures" in err
    assert "gave up after 3 attempt(s)" in err


def test_a_permanent_refusal_is_not_retried() -> None:
    bus = FlakyBus(failures=1, error=ValueError("message too large"))
    publish = _publisher(bus)
    publish(_manifest())
    assert publish.failed == [2026112200001] and bus.failures == 0 and bus.sent == []
