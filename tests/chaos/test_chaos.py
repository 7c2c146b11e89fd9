"""The reduced chaos suite, inside ``make test``: the scenarios that have a reduced night, each on
the real pipeline (processes, emulators, PostgreSQL, Kafka) with its faults at seeded random
moments, several side by side (``tests.chaos.suite``). Each must end with nothing lost, nothing
doubled, every bad input quarantined with its reason, no manual step, and its own checks
(``tests/chaos/checks.py``). ``make chaos`` plays every scenario at full size and writes
docs/reliability.md.

A failure names its seed: ``OBSINGEST_CHAOS_SEED=<seed> pytest tests/chaos -k <scenario>`` or
``python -m tests.chaos --reduced --serial --seed <seed> --only <scenario>`` replays it.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.chaos.scenarios import Scenario, reduced

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(1800)]


@pytest.mark.parametrize("scenario", reduced(), ids=lambda s: s.name)
def test_scenario(scenario: Scenario, chaos_rows: dict[str, dict[str, Any]]) -> None:
    row = chaos_rows[scenario.name]
    assert row["passed"], "\n".join(
        [
            f"{scenario.name}, seed {row['seed']} (replay: OBSINGEST_CHAOS_SEED={row['seed']} "
            f"pytest tests/chaos -k {scenario.name})",
            f"sent {row['sent']} (+{row['bad_sent']} bad), "
            f"registered once {row['registered_once']},"
            f" lost {row['lost']}, doubled {row['doubled']}, recovered {row['recovered']}",
            *row["failures"],
            "timeline:",
            *row.get("events", []),
            f"logs: {row.get('logs')}",
        ]
    )
    assert row["sent"] == scenario.night_for(True).ccds
    assert (row["lost"], row["doubled"], row["unaccounted"]) == (0, 0, 0)
