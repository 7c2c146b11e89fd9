"""Fixtures shared by the kernel's unit tests."""

from collections.abc import Iterator

import pytest

from obsingest.registry import Registry
from obsingest.settings import RegistrySettings


@pytest.fixture
def registry(tmp_path) -> Iterator[Registry]:
    """A fresh embedded (SQLite) registry of the test's own."""
    reg = Registry.open(RegistrySettings(url=f"sqlite:///{tmp_path / 'r.sqlite3'}"))
    yield reg
    reg.close()
