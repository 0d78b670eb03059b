"""SQLite engine: a file it cannot use is a clear store error, never a raw sqlite3 one."""

from __future__ import annotations

from pathlib import Path

import pytest

from tallybook.errors import StoreUnavailable
from tallybook.store.port import Put
from tallybook.store.sqlite import SqliteStore


def test_a_file_that_is_not_a_database_is_store_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "corrupt.db"
    path.write_bytes(b"not an SQLite file at all " * 200)
    with pytest.raises(StoreUnavailable, match=r"cannot use SQLite file .*not a database"):
        SqliteStore(path)


def test_a_refused_write_is_store_unavailable_and_leaves_the_store_usable(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "t.db")
    try:
        conn = store._conn()
        conn.execute("PRAGMA query_only = ON")  # writes now fail as on a read-only file
        with pytest.raises(StoreUnavailable, match=r"SQLite write failed: .*readonly"):
            store.transact_write([Put({"pk": "p", "sk": "a", "n": 1})])
        conn.execute("PRAGMA query_only = OFF")
        assert not conn.in_transaction  # rolled back, not left open
        store.transact_write([Put({"pk": "p", "sk": "b", "n": 2})])
        assert store.query("p").items == [{"pk": "p", "sk": "b", "n": 2}]
    finally:
        store.close()
