"""``artefact_lock``: one builder per artefact at a time, across threads and processes (flock)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from infra.local.stack.base import artefact_lock

pytestmark = pytest.mark.unit


def test_a_second_taker_waits_until_the_first_lets_go(tmp_path: Path) -> None:
    taken = threading.Event()

    def second() -> None:
        with artefact_lock(tmp_path, "gcs"):
            taken.set()

    with artefact_lock(tmp_path, "gcs"):
        thread = threading.Thread(target=second)
        thread.start()
        assert not taken.wait(0.3)  # cannot be set while the first holds the lock
        with artefact_lock(tmp_path, "kafka"):  # another artefact's lock is free
            pass
    thread.join(10)
    assert taken.is_set()
