"""The process's service: built once from settings, and start-up's objects frozen out of the
collector's reach after it is built (never before, never for an injected service)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

from functions.register import wiring

pytestmark = pytest.mark.unit


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    built: list[Any] = []

    def build() -> Any:
        built.append(object())
        return built[-1]

    monkeypatch.setattr(wiring, "service_from_settings", build)
    wiring.configure(None)
    gc.unfreeze()
    yield built
    wiring.configure(None)
    gc.unfreeze()


def test_built_once_then_start_up_is_frozen(fresh: list[Any]) -> None:
    assert gc.get_freeze_count() == 0
    first = wiring.get_service()
    assert fresh == [first]
    assert gc.get_freeze_count() > 0
    assert wiring.get_service() is first
    assert len(fresh) == 1


def test_an_injected_service_freezes_nothing(fresh: list[Any]) -> None:
    injected: Any = object()
    wiring.configure(injected)
    assert wiring.get_service() is injected
    assert fresh == []
    assert gc.get_freeze_count() == 0


def test_warm_up_builds_the_service_before_any_delivery(fresh: list[Any]) -> None:
    wiring.warm_up()
    assert len(fresh) == 1
    assert wiring.get_service() is fresh[0]
    assert len(fresh) == 1


def test_a_failed_warm_up_is_logged_and_the_first_delivery_builds_again(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    attempts: list[int] = []

    def build() -> Any:
        attempts.append(1)
        if len(attempts) == 1:
            raise ConnectionRefusedError("registry not up yet")
        return object()

    monkeypatch.setattr(wiring, "service_from_settings", build)
    wiring.configure(None)
    try:
        with caplog.at_level("WARNING"):
            wiring.warm_up()  # does not raise
        [record] = [r for r in caplog.records if r.getMessage() == "register.warm_up.failed"]
        assert "registry not up yet" in record.__dict__["error"]  # a log_event field
        service = wiring.get_service()
        assert service is not None
        assert len(attempts) == 2
    finally:
        wiring.configure(None)
        gc.unfreeze()
