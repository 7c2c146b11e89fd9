"""PostgreSQL for real: a fresh database per test and a plain round trip through SQLAlchemy."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

pytestmark = pytest.mark.integration


def test_round_trip(postgres: str) -> None:
    assert postgres.startswith("postgresql+psycopg://")
    engine = sa.create_engine(postgres)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("CREATE TABLE ccd (detector int PRIMARY KEY, size bigint)"))
            conn.execute(sa.text("INSERT INTO ccd VALUES (42, 15137280), (7, 15137281)"))
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT detector, size FROM ccd ORDER BY detector")).all()
        assert rows == [(7, 15137281), (42, 15137280)]
    finally:
        engine.dispose()


def test_databases_are_isolated(postgres: str) -> None:
    engine = sa.create_engine(postgres)
    try:
        with engine.connect() as conn:
            tables = conn.execute(
                sa.text("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
            ).scalar_one()
        assert tables == 0
    finally:
        engine.dispose()
