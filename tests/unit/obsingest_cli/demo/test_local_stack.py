"""The local-stack demo's environment: a variable the user set wins in os.environ, and the
stack's own endpoint stays available to fall back to (the demo needs PostgreSQL for its
registry even when the user's registry URL is SQLite)."""

from __future__ import annotations

from typing import Any

import pytest

from obsingest_cli.demo import local_stack

pytestmark = pytest.mark.unit


class _Service:
    name = "postgres"
    up = True

    def healthy(self) -> bool:
        return self.up


class _Stack:
    def __init__(self, only: list[str]) -> None:
        self.services = [_Service()]

    def env(self) -> dict[str, str]:
        return {"OBSINGEST_REGISTRY_URL": "postgresql://stack/obsingest"}


def test_user_value_wins_in_environ_and_the_stack_value_is_returned(monkeypatch: Any) -> None:
    import infra.local.stack

    monkeypatch.setattr(infra.local.stack, "Stack", _Stack)
    monkeypatch.setenv("OBSINGEST_REGISTRY_URL", "sqlite:///user.db")

    env = local_stack.use_stack_environment(("postgres",))

    assert env == {"OBSINGEST_REGISTRY_URL": "postgresql://stack/obsingest"}
    assert local_stack.os.environ["OBSINGEST_REGISTRY_URL"] == "sqlite:///user.db"


def test_unset_variables_are_exported(monkeypatch: Any) -> None:
    import infra.local.stack

    monkeypatch.setattr(infra.local.stack, "Stack", _Stack)
    monkeypatch.delenv("OBSINGEST_REGISTRY_URL", raising=False)

    local_stack.use_stack_environment(("postgres",))

    assert local_stack.os.environ["OBSINGEST_REGISTRY_URL"] == "postgresql://stack/obsingest"


def test_the_demo_on_a_stack_that_is_down_is_one_line_and_exit_1(monkeypatch: Any, tmp_path, capsys) -> None:
    """``obsingest demo --stack local`` with the stack down said what to do (`obsingest stack
    up`) at the bottom of a traceback: its error was a RuntimeError. Now one line, exit 1."""
    import infra.local.stack
    from obsingest import logs
    from obsingest_cli.main import main

    monkeypatch.setattr(infra.local.stack, "Stack", _Stack)
    monkeypatch.setattr(_Service, "up", False)
    monkeypatch.setattr(logs, "configure", lambda *args, **kwargs: None)
    assert main(["demo", "--stack", "local", "--workdir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "obsingest demo: error (service-unavailable): local stack service(s) not answering: "
        "postgres. Start the stack first: `obsingest stack up`"
    ]
