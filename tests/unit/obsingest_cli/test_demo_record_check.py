"""The demo's check of what it reports against the registry of record (issue 20)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest

from obsingest_cli.demo.record_check import discrepancy

pytestmark = pytest.mark.unit

A, B, C = (uuid.UUID(int=i) for i in (1, 2, 3))


@dataclass
class _Arrival:
    dataset_id: uuid.UUID


class ButlerRegistry:  # named as the real one: the message says "the Butler"
    def __init__(self, held: dict[int, list[uuid.UUID]]) -> None:
        self.held = held

    def datasets(self, instrument, exposure):
        return [{"id": str(i)} for i in self.held.get(exposure, [])]


def test_what_was_announced_is_what_the_butler_holds():
    registry = ButlerRegistry({1: [A, B], 2: [C]})
    announced = [_Arrival(A), _Arrival(B), _Arrival(C), _Arrival(A)]  # a re-announcement
    assert discrepancy(registry, [("LSSTCam", 1), ("LSSTCam", 2)], announced) == ""


def test_announced_but_not_in_the_butler_and_held_but_never_announced_are_both_named():
    registry = ButlerRegistry({1: [A, C]})
    why = discrepancy(registry, [("LSSTCam", 1)], [_Arrival(A), _Arrival(B)])
    assert why == (
        "the Butler holds 2 CCD(s), 2 were announced: 1 announced CCD(s) that the Butler does not "
        "hold; 1 CCD(s) the Butler holds that were never announced"
    )


def test_other_exposures_in_the_butler_are_not_the_demos_business():
    registry = ButlerRegistry({1: [A], 7: [B, C]})
    assert discrepancy(registry, [("LSSTCam", 1)], [_Arrival(A)]) == ""
