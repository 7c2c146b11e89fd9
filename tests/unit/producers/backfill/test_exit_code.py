"""The backfill's exit code: 75 with one line when every failure is an exhausted resource (a
rerun resumes), 1 for anything else, 0 for none (issue 21)."""

from __future__ import annotations

import pytest

from producers.backfill.main import EXIT_EXHAUSTED, _exit_code

pytestmark = pytest.mark.unit


def test_every_failure_a_full_destination_is_75_with_one_line(capsys) -> None:
    failed = {
        "a.fits": "destination-full: destination /data/store: no space left (OSError: ...)",
        "b.fits": "rate-limited: destination gs://b: rate limited (...)",
    }
    assert _exit_code(failed) == EXIT_EXHAUSTED == 75
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "2 file(s) not sent" in err[0] and "/data/store" in err[0]


def test_any_other_failure_is_1_and_none_is_0() -> None:
    assert _exit_code({"a": "destination-full: x", "b": "corrupt-file: y"}) == 1
    assert _exit_code({}) == 0
