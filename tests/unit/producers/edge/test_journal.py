"""The journal: states survive reopening (a new process), duplicates are not new work, a full
disk is SpoolFull."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from producers.edge.errors import SpoolFull
from producers.edge.journal import Entry, Journal

pytestmark = pytest.mark.unit


def test_states_survive_reopening_and_pending_is_newest_first(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    for exposure in (1, 3, 2):
        assert j.add(Entry(key=f"LSSTCam/{exposure}/000", source=f"/x/{exposure}", priority=exposure)) is None
    j.mark("LSSTCam/1/000", "compressed", size=10, checksum="crc32c:00000001")
    j.mark("LSSTCam/2/000", "acked", durable=True, status="stored", object="raw/x")
    j.close()
    again = Journal(tmp_path)
    assert [e.key for e in again.pending()] == ["LSSTCam/3/000", "LSSTCam/1/000"]
    one = again.get("LSSTCam/1/000")
    assert one is not None and (one.state, one.size, one.checksum) == ("compressed", 10, "crc32c:00000001")
    assert again.counts() == {"seen": 1, "compressed": 1, "sent": 0, "acked": 1, "quarantined": 0}


def test_a_journal_made_now_still_takes_the_previous_edges_rows(tmp_path: Path) -> None:
    """Rolling the edge back keeps its journal: the previous edge inserts every column it knew,
    ``target`` (unused now) among them."""
    j = Journal(tmp_path)
    j.add(Entry(key="new", source="/new"))
    path = j.path
    j.close()
    with sqlite3.connect(path) as db:
        db.execute(
            "INSERT INTO items (key, source, target, priority, state, seen_at, updated_at) "
            "VALUES ('old', '/old', '', 0, 'seen', 1.0, 1.0)"
        )
    db.close()
    again = Journal(tmp_path)
    assert sorted(e.key for e in again.pending()) == ["new", "old"]


def test_a_second_hand_off_returns_the_existing_row(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    assert j.add(Entry(key="k", source="/a")) is None
    j.mark("k", "acked")
    existing = j.add(Entry(key="k", source="/b"))
    assert existing is not None and existing.state == "acked" and existing.source == "/a"


def test_add_many_counts_only_new_rows(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    assert j.add_many([Entry(key=str(i), source=str(i)) for i in range(5)]) == 5
    assert j.add_many([Entry(key=str(i), source=str(i)) for i in range(3, 8)]) == 3


def test_unknown_state_and_column_are_refused(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    j.add(Entry(key="k", source="/a"))
    with pytest.raises(ValueError, match="state"):
        j.mark("k", "lost")  # type: ignore[arg-type]  # what the runtime check is for
    with pytest.raises(ValueError, match="columns"):
        j.mark("k", None, nonsense=1)


def test_a_full_disk_is_spool_full(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    j._db.execute("PRAGMA max_page_count = 1")  # the file may not grow: as on a full disk
    with pytest.raises(SpoolFull, match="no space"):
        j.add_many([Entry(key=f"k{i}", source="x" * 500) for i in range(200)])


def test_old_acked_rows_are_purged_pending_ones_never(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    for key in ("old", "new", "waiting"):
        j.add(Entry(key=key, source=key))
    j.mark("old", "acked", acked_at=100.0)
    j.mark("new", "acked", acked_at=10_000.0)
    j.record_exposure("LSSTCam", 1, "{}")
    assert j.purge(older_than=5_000.0) == 1
    assert [e.key for e in j.items()] == ["new", "waiting"]
    assert j.exposure_manifest("LSSTCam", 1) == "{}"  # recorded now: kept
    assert j.purge(older_than=time.time() + 1) == 1
    assert j.exposure_manifest("LSSTCam", 1) is None


def test_counts_stay_exact_between_full_counts_of_the_acked(tmp_path: Path) -> None:
    """Acked items are counted in full every few minutes; between, those acked since are added."""
    j = Journal(tmp_path)
    j.add_many([Entry(key=f"k{i}", source="x") for i in range(4)])
    j.mark("k0", "acked", acked_at=time.time() - 10)
    assert j.counts() == {"seen": 3, "compressed": 0, "sent": 0, "acked": 1, "quarantined": 0}
    j.mark("k1", "acked", acked_at=time.time())
    j.mark("k2", "quarantined", reason="corrupt-file")
    j.mark("k3", "sent")
    assert j.counts() == {"seen": 0, "compressed": 0, "sent": 1, "acked": 2, "quarantined": 1}
    assert j.purge(older_than=time.time() - 5) == 1
    assert j.counts()["acked"] == 1
    # the purge (hourly) moved the cut up: what counts adds is the last hour's, not the uptime's
    assert j._acked_before is not None and j._acked_before[0] >= time.time() - 61
    j.mark("k3", "acked")
    assert j.counts()["acked"] == 2 and j.purge(older_than=0.0) == 0 and j.counts()["acked"] == 2


def test_what_runs_every_few_seconds_or_hourly_seeks_an_index(tmp_path: Path) -> None:
    """A month of acked rows is millions: the gauges, /health, the purge and a restart's resume
    must not scan them (only the first ``counts`` does, once)."""
    j = Journal(tmp_path)
    j.counts()
    statements: list[str] = []
    j._db.set_trace_callback(statements.append)
    j.counts()
    j.oldest_unacknowledged_readout()
    j.pending()
    j.purge(older_than=time.time())
    j._db.set_trace_callback(None)
    queries = [q for q in statements if q.lstrip().startswith(("SELECT", "DELETE")) and "FROM items" in q]
    assert len(queries) == 7  # the exposures' delete scans a month of exposures, thousands
    for sql in queries:
        plan = " ".join(str(tuple(r)) for r in j._rows("EXPLAIN QUERY PLAN " + sql))
        assert "SEARCH items USING" in plan and "SCAN" not in plan, (sql, plan)
        assert "items_state (state=?)" not in plan or "'acked'" not in sql, (sql, plan)
