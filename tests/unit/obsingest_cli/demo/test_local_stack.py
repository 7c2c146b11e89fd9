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

    def healthy(self) -> bool:
        return True


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
