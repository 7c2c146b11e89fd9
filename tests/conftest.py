"""Every test carries the marker of the folder it lives in (unit, integration, e2e, tools,
chaos), so ``pytest -m unit`` selects exactly tests/unit even where a module forgot its
``pytestmark``.

A SIGTERM ends a session as Ctrl-C does (KeyboardInterrupt: the session's fixtures are torn
down, so the services it started are stopped by the session that owns them), instead of
killing it at once and leaving them running for the next run in the same checkout to trip over.

A session that will run the promtool checks on a cold cache starts building promtool at once,
in the background and at a low CPU priority (a cold build is ~4-5 min of CPU): it then uses
the time the chaos suite spends waiting out its outages, instead of running alone at the end.
"""

from __future__ import annotations

import contextlib
import importlib.util
import signal
import threading
from pathlib import Path

import pytest

from tests import sigterm

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


def pytest_configure(config: pytest.Config) -> None:
    if (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    ):
        sigterm.interrupt_on_sigterm()


def pytest_unconfigure(config: pytest.Config) -> None:
    sigterm.restore()


_PROMTOOL_BUILD: list[threading.Thread] = []


def pytest_collection_finish(session: pytest.Session) -> None:
    if not any(Path(item.path).name == "test_promtool.py" for item in session.items):
        return
    path = Path(__file__).parents[1] / "infra" / "prometheus" / "promtool.py"
    spec = importlib.util.spec_from_file_location("obsingest_promtool_prebuild", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if module.promtool_path().exists():
        return

    def build() -> None:
        # a failure here is not reported: the test's own fetch builds again and reports it
        with contextlib.suppress(Exception):
            module.fetch(nice=15)

    thread = threading.Thread(target=build, name="promtool-prebuild", daemon=True)
    thread.start()
    _PROMTOOL_BUILD.append(thread)


def pytest_sessionfinish(session: pytest.Session) -> None:
    for thread in _PROMTOOL_BUILD:  # never leave a half-built binary's scratch directory behind
        thread.join()
