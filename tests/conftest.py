"""Every test carries the marker of the folder it lives in (unit, integration, e2e, tools,
chaos), so ``pytest -m unit`` selects exactly tests/unit even where a module forgot its
``pytestmark``."""

from __future__ import annotations

from pathlib import Path

import pytest

_TIERS = ("unit", "integration", "e2e", "tools", "chaos")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    root = Path(__file__).parent
    for item in items:
        try:
            tier = Path(item.path).relative_to(root).parts[0]
        except ValueError:
            continue
        if tier in _TIERS and item.get_closest_marker(tier) is None:
            item.add_marker(getattr(pytest.mark, tier))
