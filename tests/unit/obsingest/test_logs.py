"""JSON-lines logging and the per-CCD logging context."""

from __future__ import annotations

import io
import json
import logging
import threading

import pytest

from obsingest.logs import configure, get_logger, log_event, logging_context

pytestmark = pytest.mark.unit


@pytest.fixture
def stream():
    out = io.StringIO()
    configure("DEBUG", stream=out)
    yield out
    logging.getLogger().handlers.clear()


def lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_every_line_inside_a_context_carries_its_fields_and_none_outside(stream) -> None:
    log = get_logger("t")
    with logging_context(data_id="LSSTCam/2026112200001/004", object="raw/x"):
        log_event(log, "ccd.registered", latency_s=0.5)
        with logging_context(attempt=2):
            log_event(log, "retry")
    log_event(log, "after")
    first, nested, after = lines(stream)
    assert first["event"] == "ccd.registered" and first["data_id"] == "LSSTCam/2026112200001/004"
    assert first["object"] == "raw/x" and first["latency_s"] == 0.5
    assert nested["attempt"] == 2 and nested["data_id"] == "LSSTCam/2026112200001/004"
    assert "data_id" not in after and "attempt" not in after


def test_fields_of_the_call_win_and_none_values_are_left_out(stream) -> None:
    with logging_context(data_id="a", exposure=None):
        log_event(get_logger("t"), "e", data_id="b")
    [line] = lines(stream)
    assert line["data_id"] == "b" and "exposure" not in line


def test_concurrent_threads_never_see_each_others_context(stream) -> None:
    barrier = threading.Barrier(2)

    def work(data_id: str) -> None:
        with logging_context(data_id=data_id):
            barrier.wait(timeout=10)
            log_event(get_logger("t"), "done", me=data_id)

    threads = [threading.Thread(target=work, args=(f"d{i}",)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(line["data_id"] == line["me"] for line in lines(stream))
