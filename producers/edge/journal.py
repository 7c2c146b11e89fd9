"""The edge's durable journal: every item's state (a CCD's, or a backfill's file's), in SQLite
(WAL mode) inside the spool directory; the states and which commits fsync: producers/edge/README.md,
"The journal and recovery". A full spool raises ``SpoolFull``.
"""

from __future__ import annotations

import contextlib
import errno
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal, get_args

from obsingest.fileio import flocked
from producers.edge.errors import SpoolFull, SpoolUnavailable

JOURNAL_NAME = "journal.sqlite3"
State = Literal["seen", "compressed", "sent", "acked", "quarantined"]
STATES: tuple[State, ...] = get_args(State)
TERMINAL: tuple[State, ...] = ("acked", "quarantined")
#: the unfinished states, and all but acked, as SQL (``state IN`` seeks the index where ``NOT IN``
#: would scan a month of acked rows)
_OPEN, _OTHER = (
    "state IN ({})".format(", ".join(f"'{state}'" for state in states))
    for states in ([s for s in STATES if s not in TERMINAL], [s for s in STATES if s != "acked"])
)
#: the planner would walk every acked row through items_state
_BY_ACK = "INDEXED BY items_acked"
#: how often ``counts`` counts every acked item again (a clock stepped back can hide some)
RECOUNT_SECONDS = 86400.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS items (
    key TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    target TEXT NOT NULL DEFAULT '',  -- unused; kept so an edge rolled back can write this journal
    priority INTEGER NOT NULL DEFAULT 0,
    state TEXT NOT NULL,
    readout REAL,
    sidecar TEXT,
    spooled TEXT,
    size INTEGER,
    checksum TEXT,
    compressed_at REAL,
    attempts INTEGER NOT NULL DEFAULT 0,
    reason TEXT,
    error TEXT,
    status TEXT,
    object TEXT,
    seen_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    acked_at REAL,
    over_budget INTEGER NOT NULL DEFAULT 0,
    source_mtime REAL,
    source_size INTEGER
);
CREATE INDEX IF NOT EXISTS items_state ON items (state, priority DESC);
CREATE INDEX IF NOT EXISTS items_acked ON items (acked_at) WHERE state = 'acked';
CREATE TABLE IF NOT EXISTS exposures (
    instrument TEXT NOT NULL,
    exposure INTEGER NOT NULL,
    manifest TEXT NOT NULL,
    seen_at REAL NOT NULL,
    PRIMARY KEY (instrument, exposure)
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


@dataclass
class Entry:
    """One journalled item (a row of ``items``)."""

    key: str
    source: str
    state: State = "seen"
    priority: int = 0
    readout: float | None = None
    sidecar: str | None = None
    spooled: str | None = None
    size: int | None = None
    checksum: str | None = None
    compressed_at: float | None = None
    attempts: int = 0
    reason: str | None = None
    error: str | None = None
    status: str | None = None
    object: str | None = None
    seen_at: float = 0.0
    updated_at: float = 0.0
    acked_at: float | None = None
    over_budget: int = 0
    #: the hand-off file's mtime and size when it was taken (``handed_off``)
    source_mtime: float | None = None
    source_size: int | None = None

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL


_COLUMNS = tuple(f.name for f in fields(Entry))
_UPDATABLE = frozenset(_COLUMNS) - {"key", "seen_at"}
#: a known key is skipped (not new work); any other constraint (NOT NULL) still raises
_INSERT = (
    f"INSERT INTO items ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})"
    " ON CONFLICT(key) DO NOTHING"
)


def _new_rows(entries: Iterable[Entry]) -> list[tuple[Any, ...]]:
    """The rows of new items, stamped seen (and an acked one acked, unless they say when) and
    updated now."""
    now = time.time()
    rows = []
    for entry in entries:
        entry.seen_at = entry.seen_at or now
        if entry.state == "acked" and entry.acked_at is None:
            entry.acked_at = now
        entry.updated_at = now
        rows.append(tuple(getattr(entry, c) for c in _COLUMNS))
    return rows


def _spool_error(exc: sqlite3.Error, path: Path) -> Exception:
    text = str(exc).lower()
    if "full" in text or getattr(exc, "sqlite_errorcode", None) == 13:  # SQLITE_FULL
        return SpoolFull(f"spool {path.parent}: no space left for the journal ({exc})")
    return SpoolUnavailable(f"journal {path}: {exc}")


class Journal:
    """The journal of one spool directory. Thread-safe; open one per process."""

    def __init__(self, spool: Path, name: str = JOURNAL_NAME, timeout: float = 30.0) -> None:
        self.path = Path(spool) / name
        self._lock = threading.RLock()
        # Writers in several processes queue on the lock file in the kernel and are woken the
        # moment it is free; SQLite's own busy handler would sleep 1..100 ms between polls.
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._write_lock = open(self.path.with_suffix(".lock"), "a+")  # noqa: SIM115 - close()
        except OSError as exc:
            unusable = SpoolFull if exc.errno == errno.ENOSPC else SpoolUnavailable
            raise unusable(f"spool {spool}: {exc}") from exc
        try:
            self._db = sqlite3.connect(
                self.path, timeout=timeout, isolation_level=None, check_same_thread=False
            )
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
            _add_missing_columns(self._db)
        except sqlite3.Error as exc:
            raise _spool_error(exc, self.path) from exc
        #: for ``counts``: (a time, how many items were acked before it, when they were counted in full)
        self._acked_before: tuple[float, int, float] | None = None

    # transactions ----------------------------------------------------------------------------
    @contextmanager
    def _tx(self, durable: bool = False) -> Iterator[sqlite3.Connection]:
        with self._lock, flocked(self._write_lock):
            db = self._db
            try:
                if durable:
                    db.execute("PRAGMA synchronous=FULL")
                db.execute("BEGIN IMMEDIATE")
                try:
                    yield db
                    db.execute("COMMIT")
                except BaseException:
                    if db.in_transaction:
                        with contextlib.suppress(sqlite3.Error):
                            db.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise _spool_error(exc, self.path) from exc
            finally:
                if durable:
                    db.execute("PRAGMA synchronous=NORMAL")

    def close(self) -> None:
        with self._lock:
            self._db.close()
            self._write_lock.close()

    # items -----------------------------------------------------------------------------------
    def add(self, entry: Entry) -> Entry | None:
        """Journal a new item: None if it is new, else the row already there (unchanged)."""
        return self.add_batch([entry])[0]

    def add_batch(self, entries: list[Entry]) -> list[Entry | None]:
        """``add`` for several items in one transaction (one commit for a whole readout)."""
        out: list[Entry | None] = []
        with self._tx() as db:
            for entry, row in zip(entries, _new_rows(entries), strict=True):
                if db.execute(_INSERT, row).rowcount:
                    out.append(None)
                else:
                    out.append(
                        _entry(db.execute("SELECT * FROM items WHERE key = ?", (entry.key,)).fetchone())
                    )
        return out

    def add_many(self, entries: Iterable[Entry]) -> int:
        """``add_batch`` for a whole listing, saying only how many items were new."""
        rows = _new_rows(entries)
        with self._tx() as db:
            before = db.total_changes
            db.executemany(_INSERT, rows)
            return db.total_changes - before

    def mark(self, key: str, state: State | None = None, *, durable: bool = False, **values: Any) -> None:
        """Set ``state`` (and any other columns) of one item."""
        self.mark_many([(key, state, values)], durable=durable)

    def mark_many(
        self, updates: Iterable[tuple[str, State | None, dict[str, Any]]], *, durable: bool = False
    ) -> None:
        """Several ``mark`` calls in one transaction (one commit for a batch of results)."""
        now = time.time()
        with self._tx(durable=durable) as db:
            for key, state, values in updates:
                cols = dict(values)
                if state is not None:
                    if state not in STATES:
                        raise ValueError(f"unknown journal state {state!r}")
                    cols["state"] = state
                    if state == "acked" and cols.get("acked_at") is None:
                        cols["acked_at"] = now  # ``counts`` and ``purge`` go by it
                bad = set(cols) - _UPDATABLE
                if bad:
                    raise ValueError(f"not journal columns: {sorted(bad)}")
                cols["updated_at"] = now
                assignments = ", ".join(f"{c} = ?" for c in cols)
                db.execute(f"UPDATE items SET {assignments} WHERE key = ?", (*cols.values(), key))

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def get(self, key: str) -> Entry | None:
        rows = self._rows("SELECT * FROM items WHERE key = ?", (key,))
        return _entry(rows[0]) if rows else None

    def pending(self) -> list[Entry]:
        """Every item not yet acked or quarantined, newest (highest priority) first."""
        return [
            _entry(r) for r in self._rows(f"SELECT * FROM items WHERE {_OPEN} ORDER BY priority DESC, key")
        ]

    def items(self) -> list[Entry]:
        return [_entry(r) for r in self._rows("SELECT * FROM items ORDER BY key")]

    def quarantined(self) -> list[Entry]:
        """Every quarantined item (few; a restart finishes the file moves a crash interrupted)."""
        return [_entry(r) for r in self._rows("SELECT * FROM items WHERE state = 'quarantined'")]

    def handed_off(self, acked: bool = True) -> dict[str, tuple[float, int]]:
        """Source path -> (mtime, size) of every finished item whose hand-off file was recorded:
        what a restarted edge need not offer, read or journal again (``acked=False``: the
        quarantined only)."""
        states = "('acked', 'quarantined')" if acked else "('quarantined')"
        rows = self._rows(
            "SELECT source, source_mtime, source_size FROM items "
            f"WHERE state IN {states} AND source_mtime IS NOT NULL"
        )
        return {r[0]: (float(r[1]), int(r[2]) if r[2] is not None else -1) for r in rows}

    def counts(self) -> dict[str, int]:
        """Items by state (every state present, zeros included). The acked, a month of them, are
        counted in full once a day (~0.1 s per million rows, holding the journal); between, those
        acked since the last count (``purge`` moves it up every hour) are added, seeking an index."""
        with self._lock:
            if self._acked_before is None or time.monotonic() - self._acked_before[2] >= RECOUNT_SECONDS:
                now, sql = time.time(), "SELECT COUNT(*) FROM items WHERE state = 'acked' AND acked_at < ?"
                self._acked_before = (now, self._rows(sql, (now,))[0][0], time.monotonic())
            until, before, _ = self._acked_before
            since = self._rows(
                f"SELECT COUNT(*) FROM items {_BY_ACK} WHERE state = 'acked' AND acked_at >= ?", (until,)
            )
            rows = self._rows(f"SELECT state, COUNT(*) FROM items WHERE {_OTHER} GROUP BY state")
        return dict.fromkeys(STATES, 0) | {r[0]: r[1] for r in rows} | {"acked": before + since[0][0]}

    def oldest_unacknowledged_readout(self) -> float | None:
        """Readout time (epoch seconds) of the oldest CCD neither acked nor quarantined."""
        rows = self._rows(f"SELECT MIN(readout) FROM items WHERE {_OPEN}")
        return None if not rows or rows[0][0] is None else float(rows[0][0])

    def purge(self, older_than: float) -> int:
        """Forget items acked, and exposure manifests recorded, before ``older_than`` (epoch
        seconds); how many items. Kept until then so that a late second hand-off of the same CCD
        is recognised as already sent. Moves ``counts``' cut up to now (less a minute for acks
        being committed), so that what it adds stays an hour's acks, not the uptime's."""
        span = f"FROM items {_BY_ACK} WHERE state = 'acked' AND acked_at >= ? AND acked_at < ?"
        with self._lock, self._tx() as db:
            db.execute("DELETE FROM exposures WHERE seen_at < ?", (older_than,))
            if self._acked_before is None:
                return int(db.execute(f"DELETE {span}", (0.0, older_than)).rowcount)
            until, before, counted_at = self._acked_before
            counted = db.execute(f"DELETE {span}", (0.0, min(until, older_than))).rowcount  # in ``before``
            purged = counted + db.execute(f"DELETE {span}", (until, older_than)).rowcount
            later = max(until, time.time() - 60.0)
            added = db.execute(f"SELECT COUNT(*) {span}", (until, later)).fetchone()[0]
            self._acked_before = (later, before - counted + added, counted_at)
        return int(purged)

    # exposures and meta ----------------------------------------------------------------------
    def record_exposure(self, instrument: str, exposure: int, manifest_json: str) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO exposures (instrument, exposure, manifest, seen_at) "
                "VALUES (?, ?, ?, ?)",
                (instrument, exposure, manifest_json, time.time()),
            )

    def exposure_manifest(self, instrument: str, exposure: int) -> str | None:
        sql = "SELECT manifest FROM exposures WHERE instrument = ? AND exposure = ?"
        rows = self._rows(sql, (instrument, exposure))
        return rows[0][0] if rows else None

    def touch(self) -> None:
        """A small write: proves the spool takes writes again (after it was full)."""
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('alive', ?)", (str(time.time()),))


def _add_missing_columns(db: sqlite3.Connection) -> None:
    """A journal written by an older edge lacks the newer columns: add them (NULL)."""
    have = {row[1] for row in db.execute("PRAGMA table_info(items)")}
    for column, kind in (("source_mtime", "REAL"), ("source_size", "INTEGER")):
        if column not in have:
            db.execute(f"ALTER TABLE items ADD COLUMN {column} {kind}")


def _entry(row: sqlite3.Row) -> Entry:
    return Entry(**{c: row[c] for c in _COLUMNS})
