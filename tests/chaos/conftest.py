"""The reduced chaos suite's session: the seed (``OBSINGEST_CHAOS_SEED`` replays one; printed in
the session header) and one run of every selected scenario, in lanes side by side
(``tests.chaos.suite``), whose rows the tests then judge one by one; the table is printed at the
end of the session."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pytest

_ROWS: list[dict[str, Any]] = []


def _seed(config: pytest.Config) -> int:
    if not hasattr(config, "_chaos_seed"):
        given = os.environ.get("OBSINGEST_CHAOS_SEED", "")
        config._chaos_seed = int(given) if given else random.SystemRandom().randrange(10**6)  # type: ignore[attr-defined]
    return int(config._chaos_seed)  # type: ignore[attr-defined]


def pytest_report_header(config: pytest.Config) -> str:
    seed = _seed(config)
    return f"chaos seed: {seed} (replay: OBSINGEST_CHAOS_SEED={seed} pytest tests/chaos)"


@pytest.fixture(scope="session")
def chaos_seed(pytestconfig: pytest.Config) -> int:
    return _seed(pytestconfig)


@pytest.fixture(scope="session")
def chaos_rows(
    request: pytest.FixtureRequest, chaos_seed: int, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, Any]]:
    """Every reduced scenario selected in this session, played once, by name."""
    from tests.chaos.scenarios import reduced
    from tests.chaos.suite import lanes_for, run_lanes

    selected = {
        item.callspec.params["scenario"].name
        for item in request.session.items
        if item.get_closest_marker("chaos") and hasattr(item, "callspec")
    }
    scenarios = [s for s in reduced() if s.name in selected]
    workdir: Path = tmp_path_factory.mktemp("chaos")
    rows = run_lanes(lanes_for(scenarios), chaos_seed, workdir, reduced=True)
    _ROWS.extend(rows)
    return {row["scenario"]: row for row in rows}


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _ROWS:
        return
    from tests.chaos.reliability_doc import table

    terminalreporter.write_sep("-", f"chaos (seed {_ROWS[0]['seed']})")
    terminalreporter.write_line(table(_ROWS))
