"""SQLite engine: one file, WAL, one table of items with index and TTL columns.

A transaction is one ``BEGIN IMMEDIATE``: conditions are evaluated against the
rows read inside it, so concurrent writers (threads or processes) serialise on
the database lock and no update is lost. Item bodies are JSON; Python's json
round-trips integers of any size exactly.

Durability is chosen by ``synchronous`` (see :data:`SYNCHRONOUS`): ``full``,
the default, fsyncs the WAL at every commit, so an acknowledged write survives
an operating-system crash or a power cut; ``normal`` survives a process crash
only (the last commits before a power cut may roll back).

Writers queue on an advisory lock file (``PATH-writer.lock``, ``flock``)
before ``BEGIN IMMEDIATE``. SQLite's own busy handler sleeps between polls (up
to 100 ms), so several writer processes on one file would spend most of their
time asleep while the lock is free; ``flock`` wakes the next writer as soon as
the lock is released. The busy handler stays as the fallback for writers that
do not take the lock file (another program on the same database).

The WAL is copied back into the database by a checkpointer thread of the
store's own (:class:`_Checkpointer`), not by whichever writer happens to
commit the page that crosses SQLite's threshold: a commit then never waits
for that disk work. SQLite's automatic checkpoint stays on, further out, as a
backstop.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import sqlite3
import threading
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from tallybook.errors import (
    ConfigError,
    StoreClosed,
    StoreUnavailable,
    StoreValidationError,
    TallybookError,
    Throttled,
)
from tallybook.retry import RetryPolicy, retrying
from tallybook.store.checks import (
    Checked,
    check_actions,
    check_batch_write,
    check_key,
    check_updated,
    json_size_bound,
)
from tallybook.store.evaluate import apply_updates, cancelled, evaluate
from tallybook.store.port import (
    KEY_ATTRS,
    TTL_ATTR,
    Action,
    Condition,
    Delete,
    Exists,
    Item,
    ItemStore,
    Key,
    NotExists,
    Page,
    Put,
    Query,
    StoreMetrics,
    Update,
)
from tallybook.store.queries import shape

_SCHEMA = """
CREATE TABLE IF NOT EXISTS items (
    pk TEXT NOT NULL,
    sk TEXT NOT NULL,
    gsi1pk TEXT, gsi1sk TEXT,
    gsi2pk TEXT, gsi2sk TEXT,
    ttl INTEGER,
    body TEXT NOT NULL,
    PRIMARY KEY (pk, sk)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS items_gsi1 ON items (gsi1pk, gsi1sk, pk, sk)
    WHERE gsi1pk IS NOT NULL AND gsi1sk IS NOT NULL;
CREATE INDEX IF NOT EXISTS items_gsi2 ON items (gsi2pk, gsi2sk, pk, sk)
    WHERE gsi2pk IS NOT NULL AND gsi2sk IS NOT NULL;
"""

_SORT_SQL = {"=": "=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
T = TypeVar("T")

#: retries of a statement that found the database locked (after SQLite's own busy
#: wait); within a service operation they draw from its budget (:mod:`tallybook.retry`)
LOCK_RETRY = RetryPolicy(attempts=50, seconds=120.0, base_seconds=0.002, cap_seconds=0.1)

#: commits between two background checkpoints, and SQLite's own threshold (pages)
#: kept as a backstop should the checkpointer fall behind
_CHECKPOINT_EVERY = 200
_AUTOCHECKPOINT_BACKSTOP = 20_000

#: ``synchronous`` settings accepted, and what an acknowledged commit survives
SYNCHRONOUS: dict[str, str] = {
    "full": "process crash, operating-system crash and power cut (fsync at every commit)",
    "normal": "process crash only; an OS crash or power cut may roll back the last commits",
}
DEFAULT_SYNCHRONOUS = "full"


#: without the encoder's cycle check: the port's checks walk every value before
#: anything is encoded, so a cyclic value never gets here
_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, check_circular=False).encode
_decode_json = json.JSONDecoder().decode


def _decode(body: str) -> Item:
    item: Item = _decode_json(body)
    return item


def _prefix_upper(prefix: str) -> str:
    """The smallest string greater than every string starting with ``prefix``."""
    return prefix + "\U0010ffff"


def _refuse_to_create(path: str) -> None:
    """For a caller that only reads (``create=False``): the file must hold a store
    already. Opening makes the file and its table: from a mistyped path that is an
    empty store read as an empty ledger, in another application's database a table
    added to it (and its journal switched to WAL)."""
    if not Path(path).exists():
        raise StoreUnavailable(
            f"SQLite file {path} does not exist; opened to read only, it is not "
            "created: check the store URL (--store or $TALLYBOOK_STORE)"
        )
    try:
        with contextlib.closing(sqlite3.connect(path)) as conn:
            found = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'items'"
            ).fetchone()
    except sqlite3.Error as exc:  # not a database, corrupt, unreadable
        raise StoreUnavailable(f"cannot use SQLite file {path}: {exc}") from exc
    if found is None:
        raise StoreUnavailable(
            f"SQLite file {path} holds no tallybook store; opened to read only, none is "
            "made in it: check the store URL (--store or $TALLYBOOK_STORE)"
        )


#: the stores open in this process, and (in a forked child) the files of those the
#: parent had open when it forked
_open_stores: weakref.WeakSet[SqliteStore] = weakref.WeakSet()
_inherited_files: set[str] = set()
#: connections a forked child inherited: never closed there (a connection another
#: thread of the parent was using holds a mutex the child cannot take), never freed
_abandoned: list[sqlite3.Connection] = []


def _after_fork_in_child() -> None:
    """SQLite's locks do not survive ``fork()``: the child holds none of the
    parent's, yet its copy of SQLite believes it does, so its writes are not locked
    out of a checkpoint, and a parent that closes its store deletes the WAL under
    them (acknowledged writes lost). Every store the parent had open, and any new
    one on the same file, refuses to work in the child."""
    for store in list(_open_stores):
        store._inherited = True
        _inherited_files.add(store._file)


os.register_at_fork(after_in_child=_after_fork_in_child)


def _refuse_inherited(path: str) -> None:
    raise ConfigError(
        f"SQLite store {path} was open when this process was forked, and SQLite cannot "
        "be used across fork(): writes here could be lost. Start the process with "
        "'spawn' (multiprocessing.get_context('spawn')), or close the store before forking"
    )


class SqliteStore(ItemStore):
    """Embedded engine; ``path`` is a file (``:memory:`` is refused: use a temp file),
    made with its table on first use unless ``create=False`` (a caller that only reads)."""

    def __init__(
        self,
        path: str | Path,
        *,
        synchronous: str = DEFAULT_SYNCHRONOUS,
        busy_timeout_ms: int = 30_000,
        create: bool = True,
    ) -> None:
        self.path = str(path)
        if self.path in ("", ":memory:"):
            raise StoreValidationError("the SQLite engine needs a file path")
        parent = Path(self.path).parent
        if not parent.exists():
            raise StoreValidationError(f"directory {parent} does not exist")
        if not create:
            _refuse_to_create(self.path)
        if synchronous not in SYNCHRONOUS:
            raise StoreValidationError(
                f"unknown synchronous setting {synchronous!r}; accepted: {', '.join(SYNCHRONOUS)}"
            )
        self.synchronous = synchronous
        self.busy_timeout_ms = busy_timeout_ms
        self._file = os.path.realpath(self.path)
        self._inherited = False
        self._closed = False
        if self._file in _inherited_files:
            _refuse_inherited(self.path)
        #: a change hook: given the new image of every item a transaction puts or
        #: updates, the extra items to insert in that same transaction (an existing
        #: item at their key is kept). The outbound event log is written this way.
        self.capture: Callable[[Sequence[Item]], list[Item]] | None = None
        self.metrics = StoreMetrics()
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._all_lock = threading.Lock()
        self._writer = _WriterLock(self.path + "-writer.lock")
        self._checkpointer = _Checkpointer(self.path)
        try:
            self._conn().executescript(_SCHEMA)
        except sqlite3.Error as exc:  # e.g. a read-only file without the schema yet
            raise StoreUnavailable(f"cannot use SQLite file {self.path}: {exc}") from exc

    # -- connections --------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        if self._closed:  # every call starts here: reads, writes and the schema
            raise StoreClosed(self.describe())
        if self._inherited:
            _refuse_inherited(self.path)
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = sqlite3.connect(
                    self.path, isolation_level=None, check_same_thread=False, timeout=60
                )
            except sqlite3.Error as exc:
                raise StoreUnavailable(f"cannot open SQLite file {self.path}: {exc}") from exc
            try:
                conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute(f"PRAGMA synchronous = {self.synchronous.upper()}")
                conn.execute(f"PRAGMA wal_autocheckpoint = {_AUTOCHECKPOINT_BACKSTOP}")
            except sqlite3.Error as exc:  # not a database, corrupt, unreadable
                conn.close()
                raise StoreUnavailable(f"cannot use SQLite file {self.path}: {exc}") from exc
            self._local.conn = conn
            with self._all_lock:
                self._all.append(conn)
            _open_stores.add(self)  # open from its first connection
        return conn

    def close(self) -> None:
        """Close every connection; the store refuses any later call (:class:`StoreClosed`)."""
        self._closed = True
        _open_stores.discard(self)
        with self._all_lock:
            if self._inherited:
                _abandoned.extend(self._all)
            else:
                for conn in self._all:
                    with contextlib.suppress(sqlite3.Error):
                        conn.close()
            self._all.clear()
        self._local = threading.local()
        self._writer.close()
        self._checkpointer.close()

    def describe(self) -> str:
        url = f"sqlite:///{self.path}"
        if self.synchronous == DEFAULT_SYNCHRONOUS:
            return url
        return f"{url}?synchronous={self.synchronous}"

    def durability(self) -> str:
        """One line: the ``synchronous`` setting and what a commit survives."""
        return f"synchronous={self.synchronous}: survives {SYNCHRONOUS[self.synchronous]}"

    # -- reads --------------------------------------------------------------

    def get(self, key: Key, *, consistent: bool = True) -> Item | None:
        check_key(key)
        self.metrics.record("get")
        row = self._read(
            "SELECT body FROM items WHERE pk = ? AND sk = ? AND (ttl IS NULL OR ttl > ?)",
            (key.pk, key.sk, self.ttl_now()),
        )
        return _decode(row[0][0]) if row else None

    def batch_get(self, keys: Sequence[Key], *, consistent: bool = True) -> list[Item]:
        out: list[Item] = []
        for start in range(0, len(keys), 100):
            chunk = keys[start : start + 100]
            for k in chunk:
                check_key(k)
            self.metrics.record("batch_get")
            clause = " OR ".join("(pk = ? AND sk = ?)" for _ in chunk)
            params: list[Any] = [p for k in chunk for p in (k.pk, k.sk)]
            rows = self._read(
                f"SELECT body FROM items WHERE ({clause}) AND (ttl IS NULL OR ttl > ?)",
                (*params, self.ttl_now()),
            )
            out.extend(_decode(r[0]) for r in rows)
        return out

    def run_query(self, q: Query) -> Page:
        shaped = shape(q)
        pk_col, sk_col, index, sort = shaped.pk_attr, shaped.sk_attr, q.index, q.sort
        self.metrics.record("query")
        where = [f"{pk_col} = ?", "(ttl IS NULL OR ttl > ?)"]
        params: list[Any] = [q.partition, self.ttl_now()]
        if index is not None:
            where.append(f"{sk_col} IS NOT NULL")
        if sort is not None:
            if sort.op in _SORT_SQL:
                where.append(f"{sk_col} {_SORT_SQL[sort.op]} ?")
                params.append(sort.value)
            elif sort.op == "begins_with":
                where.append(f"{sk_col} >= ? AND {sk_col} < ?")
                params += [sort.value, _prefix_upper(sort.value)]
            elif sort.op == "between":
                where.append(f"{sk_col} >= ? AND {sk_col} <= ?")
                params += [sort.value, sort.upper]
        order = "ASC" if q.forward else "DESC"
        cmp = ">" if q.forward else "<"
        if (last := shaped.after) is not None:
            if index is None:
                where.append(f"sk {cmp} ?")
                params.append(last["sk"])
            else:
                where.append(f"({sk_col}, pk, sk) {cmp} (?, ?, ?)")
                params += [last[sk_col], last["pk"], last["sk"]]
        order_by = f"sk {order}" if index is None else f"{sk_col} {order}, pk {order}, sk {order}"
        sql = f"SELECT body FROM items WHERE {' AND '.join(where)} ORDER BY {order_by}"
        if q.limit is not None:
            sql += " LIMIT ?"
            params.append(q.limit + 1)
        rows = self._read(sql, tuple(params))
        return shaped.page([_decode(r[0]) for r in rows])

    def _read(self, sql: str, params: Sequence[Any]) -> list[Any]:
        conn = self._conn()
        rows: list[Any] = _unless_locked(lambda: conn.execute(sql, params).fetchall(), "read")
        return rows

    # -- writes -------------------------------------------------------------

    def transact_write(self, actions: Sequence[Action], *, token: str | None = None) -> None:
        checked = check_actions(actions)
        self.metrics.record("transact_write")
        conn = self._conn()
        # encoded before taking the writer lock: other processes wait less
        encoded = [_row(a.item) if isinstance(a, Put) else None for a in actions]
        try:
            with self._writer:
                _write_transaction(conn, lambda: self._apply(conn, actions, encoded, checked))
            self._checkpointer.committed()
        except TallybookError:
            self.metrics.stat("transact_write").failed += 1
            raise

    def _apply(
        self,
        conn: sqlite3.Connection,
        actions: Sequence[Action],
        encoded: Sequence[tuple[Any, ...] | None],
        checked: Checked,
    ) -> None:
        keys = checked.keys
        bodies = self._read_bodies(conn, keys, self.ttl_now())
        current: list[Item | None] = []
        bounds: list[int | None] = []
        reasons: list[str | None] = []
        for action, key in zip(actions, keys, strict=True):
            body = bodies.get((key.pk, key.sk))
            condition = action.condition
            if body is None:
                item = None
            elif isinstance(action, Update) or _needs_body(condition):
                item = _decode(body)
            else:
                # only existence matters: the condition is on the key attribute
                item = _EXISTING
            current.append(item)
            bounds.append(None if body is None else json_size_bound(body))
            ok = condition is None or evaluate(condition, item)
            reasons.append(None if ok else "ConditionalCheckFailed")
        if any(reasons):
            raise cancelled(reasons)
        written: list[Item] = []
        rows: list[tuple[Any, ...]] = []
        deletes: list[tuple[str, str]] = []
        for action, item, bound, row, sets_bound in zip(
            actions, current, bounds, encoded, checked.sets_bounds, strict=True
        ):
            if isinstance(action, Put):
                written.append(action.item)
                rows.append(row if row is not None else _row(action.item))
            elif isinstance(action, Update):
                new = apply_updates(item, action.key, action.updates)
                check_updated(new, action.updates, bound, sets_bound)
                written.append(new)
                rows.append(_row(new))
            elif isinstance(action, Delete):
                deletes.append((action.key.pk, action.key.sk))
        if deletes:
            conn.executemany(_DELETE_SQL, deletes)
        if rows:
            conn.executemany(_UPSERT_SQL, rows)
        if self.capture is not None and written:
            extra = self.capture(written)
            if extra:
                conn.executemany(_INSERT_NEW_SQL, [_row(item) for item in extra])

    @staticmethod
    def _read_bodies(
        conn: sqlite3.Connection, keys: Sequence[Key], now: int
    ) -> dict[tuple[str, str], str]:
        """The bodies at ``keys`` unexpired at ``now``, read in one statement."""
        params: list[Any] = [p for k in keys for p in (k.pk, k.sk)]
        params.append(now)
        rows = conn.execute(_select_keys_sql(len(keys)), params).fetchall()
        return {(pk, sk): body for pk, sk, body in rows}

    @staticmethod
    def _write(conn: sqlite3.Connection, item: Item) -> None:
        conn.execute(_UPSERT_SQL, _row(item))

    def batch_write(self, puts: Sequence[Item] = (), deletes: Sequence[Key] = ()) -> None:
        check_batch_write(puts, deletes)
        conn = self._conn()
        ops: list[tuple[str, Item | Key]] = [("put", i) for i in puts] + [
            ("delete", k) for k in deletes
        ]
        for start in range(0, len(ops), 25):
            chunk = ops[start : start + 25]
            self.metrics.record("batch_write")
            with self._writer:
                _write_transaction(conn, functools.partial(self._write_chunk, conn, chunk))
            self._checkpointer.committed()

    def _write_chunk(
        self, conn: sqlite3.Connection, chunk: Sequence[tuple[str, Item | Key]]
    ) -> None:
        for kind, obj in chunk:
            if kind == "put":
                assert isinstance(obj, dict)
                self._write(conn, obj)
            else:
                assert isinstance(obj, Key)
                conn.execute(_DELETE_SQL, (obj.pk, obj.sk))


_UPSERT_SQL = (
    "INSERT OR REPLACE INTO items (pk, sk, gsi1pk, gsi1sk, gsi2pk, gsi2sk, ttl, body) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_NEW_SQL = (
    "INSERT OR IGNORE INTO items (pk, sk, gsi1pk, gsi1sk, gsi2pk, gsi2sk, ttl, body) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_DELETE_SQL = "DELETE FROM items WHERE pk = ? AND sk = ?"


@functools.cache
def _select_keys_sql(count: int) -> str:
    clause = " OR ".join(["(pk = ? AND sk = ?)"] * count)
    return f"SELECT pk, sk, body FROM items WHERE ({clause}) AND (ttl IS NULL OR ttl > ?)"


#: stands for an existing item whose body a key-only condition does not need
_EXISTING: Item = {"pk": "", "sk": ""}


def _needs_body(condition: Condition | None) -> bool:
    """Whether evaluating ``condition`` needs more than the item's existence."""
    if condition is None:
        return False
    if isinstance(condition, Exists | NotExists):
        return condition.attr not in KEY_ATTRS
    return True


def _column(item: Item, name: str) -> Any:
    v = item.get(name)
    if v is None:  # most items have no index keys nor ttl
        return None
    return v if isinstance(v, _COLUMN_TYPES) and not isinstance(v, bool) else None


#: what an index key or ttl column holds (a tuple: ``str | int`` would build a
#: union object on every call)
_COLUMN_TYPES = (str, int)


def _row(item: Item) -> tuple[Any, ...]:
    return (
        item["pk"],
        item["sk"],
        _column(item, "gsi1pk"),
        _column(item, "gsi1sk"),
        _column(item, "gsi2pk"),
        _column(item, "gsi2sk"),
        _column(item, TTL_ATTR),
        _encode(item),
    )


def _write_transaction(conn: sqlite3.Connection, work: Callable[[], None]) -> None:
    """Run ``work`` between ``BEGIN IMMEDIATE`` and ``COMMIT`` (``ROLLBACK`` if it
    raises), retrying a ``BEGIN`` that finds the database locked, with backoff."""
    _unless_locked(lambda: conn.execute("BEGIN IMMEDIATE"), "write")
    try:
        work()
        conn.execute("COMMIT")
    except BaseException as exc:
        with contextlib.suppress(sqlite3.Error):  # SQLite may have rolled back already
            conn.execute("ROLLBACK")
        if isinstance(exc, sqlite3.Error):  # read-only file, disk full, corruption
            raise StoreUnavailable(f"SQLite write failed: {exc}") from exc
        raise


class _Checkpointer:
    """Runs ``PRAGMA wal_checkpoint(PASSIVE)`` from a daemon thread with its own
    connection, every ``_CHECKPOINT_EVERY`` commits (started on first need, again
    in a forked child). A passive checkpoint never blocks writers or readers;
    what it cannot copy yet, the next one does."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._commits = 0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def committed(self) -> None:
        self._commits += 1
        if self._commits % _CHECKPOINT_EVERY == 0:
            self._ensure_running()
            self._wake.set()

    def _ensure_running(self) -> None:
        with self._lock:
            alive = self._thread is not None and self._thread.is_alive()
            if (alive and self._pid == os.getpid()) or self._stop.is_set():
                return
            self._pid = os.getpid()
            self._thread = threading.Thread(
                target=self._run, name="tallybook-sqlite-checkpoint", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error:
            return  # SQLite's own automatic checkpoint still runs
        try:
            conn.execute("PRAGMA busy_timeout = 1000")
            while not self._stop.is_set():
                self._wake.wait(1.0)
                self._wake.clear()
                if self._stop.is_set():
                    break
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        finally:
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread.is_alive() and self._pid == os.getpid():
            thread.join(timeout=5)


class _WriterLock:
    """Serialises this file's writers: a thread lock in the process, then an
    exclusive ``flock`` on a side file across processes (released on exit or
    crash by the kernel, so a killed writer never leaves it held)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._threads = threading.Lock()
        self._fd: int | None = None
        self._pid = os.getpid()

    def _file(self) -> int | None:
        if self._pid != os.getpid():  # a forked child must not share the parent's lock
            self._fd, self._pid = None, os.getpid()
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError:  # read-only directory: rely on SQLite's busy handler
                return None
        return self._fd

    def __enter__(self) -> None:
        self._threads.acquire()
        fd = self._file()
        if fd is not None:
            with contextlib.suppress(OSError):  # no lock: SQLite's busy handler decides
                fcntl.flock(fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        try:
            if self._fd is not None:
                with contextlib.suppress(OSError):
                    fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self._threads.release()

    def close(self) -> None:
        with self._threads:
            if self._fd is not None:
                with contextlib.suppress(OSError):
                    os.close(self._fd)
                self._fd = None


def _unless_locked(statement: Callable[[], T], what: str) -> T:
    """Run ``statement``; while the database is locked, again under the retry budget
    (the loop is entered only after a first try failed, off the hot path)."""
    try:
        return statement()
    except sqlite3.Error as exc:
        _raise_unless_locked(exc, what)
    with retrying(LOCK_RETRY) as tries:
        for attempt in tries:
            if attempt == 0:
                continue  # the first try, made above
            try:
                return statement()
            except sqlite3.Error as exc:
                _raise_unless_locked(exc, what)
    raise Throttled(f"SQLite database stayed locked ({what}); try again")


def _raise_unless_locked(exc: sqlite3.Error, what: str) -> None:
    """Return if the database was locked (worth another try); else raise the port's error."""
    text = str(exc)
    if not isinstance(exc, sqlite3.OperationalError) or (
        "locked" not in text and "busy" not in text
    ):
        raise StoreUnavailable(f"SQLite {what} failed: {exc}") from exc
