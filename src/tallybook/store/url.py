"""Store URLs: ``sqlite:///path.db`` or ``dynamodb://TABLE?region=..&endpoint=..``.

``memory://NAME`` opens the in-memory engine (:mod:`tallybook.store.memory`),
for tests and experiments only: its data is lost when the process exits. The
same NAME opens the same store again within one process.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

from tallybook.errors import ConfigError
from tallybook.store.port import ItemStore

DEFAULT_STORE_URL = "sqlite:///./tallybook.db"
STORE_ENV = "TALLYBOOK_STORE"
ACCEPTED_FORMS = (
    "sqlite:///PATH.db (relative) or sqlite:////abs/PATH.db "
    "(option: ?synchronous=full|normal), "
    "or dynamodb://TABLE?region=REGION&endpoint=http://127.0.0.1:8000, "
    "or memory://NAME (tests and experiments only: the data is lost on exit)"
)


@dataclass(frozen=True, slots=True)
class StoreUrl:
    engine: str
    path: str = ""
    table: str = ""
    region: str | None = None
    endpoint: str | None = None
    synchronous: str | None = None


def resolve_store_url(url: str | None) -> str:
    """The URL given, else ``$TALLYBOOK_STORE``, else the SQLite default.

    An empty URL given is refused rather than read as absent: ``--store "$URL"``
    with the variable unset would otherwise use ``./tallybook.db``."""
    if isinstance(url, str) and not url.strip():
        raise ConfigError(
            f"bad store URL {url!r}: it is empty; give a URL, or none for "
            f"${STORE_ENV} or the default {DEFAULT_STORE_URL}"
        )
    return url or os.environ.get(STORE_ENV) or DEFAULT_STORE_URL


def parse_store_url(url: str) -> StoreUrl:
    if not isinstance(url, str):
        raise ConfigError(f"bad store URL {url!r}: not a string; accepted: {ACCEPTED_FORMS}")
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ConfigError(f"bad store URL {url!r}: {exc}; accepted: {ACCEPTED_FORMS}") from exc
    if parts.scheme == "sqlite":
        if parts.netloc or not parts.path.startswith("/") or len(parts.path) < 2:
            raise ConfigError(f"bad store URL {url!r}; accepted: {ACCEPTED_FORMS}")
        query = parse_qs(parts.query, keep_blank_values=True)
        _refuse_unknown(url, query, {"synchronous"})
        synchronous = query.get("synchronous", [None])[0]
        if synchronous is not None:
            from tallybook.store.sqlite import SYNCHRONOUS

            if synchronous.lower() not in SYNCHRONOUS:
                raise ConfigError(
                    f"bad store URL {url!r}: unknown synchronous setting {synchronous!r}; "
                    f"accepted: {', '.join(SYNCHRONOUS)}"
                )
            synchronous = synchronous.lower()
        return StoreUrl("sqlite", path=parts.path[1:], synchronous=synchronous)
    if parts.scheme == "dynamodb":
        table = parts.netloc
        if not table or parts.path not in ("", "/"):
            raise ConfigError(f"bad store URL {url!r}: name the table; accepted: {ACCEPTED_FORMS}")
        if not _TABLE.fullmatch(table):
            raise ConfigError(
                f"bad store URL {url!r}: table name {table!r} is not 3-255 characters "
                "of a-z, A-Z, 0-9, '_', '-' and '.'"
            )
        query = parse_qs(parts.query, keep_blank_values=True)
        _refuse_unknown(url, query, {"region", "endpoint"})
        region = _single(url, query, "region")
        endpoint = _single(url, query, "endpoint")
        if region is not None and not _REGION.fullmatch(region):
            raise ConfigError(
                f"bad store URL {url!r}: region {region!r} is not a region name such as eu-west-1"
            )
        if endpoint is not None:
            _check_endpoint(url, endpoint)
        return StoreUrl("dynamodb", table=table, region=region, endpoint=endpoint)
    if parts.scheme == "memory":
        if parts.path not in ("", "/") or parts.query:
            raise ConfigError(f"bad store URL {url!r}; accepted: {ACCEPTED_FORMS}")
        return StoreUrl("memory", table=parts.netloc)
    raise ConfigError(f"bad store URL {url!r}; accepted: {ACCEPTED_FORMS}")


#: what DynamoDB accepts as a table name
_TABLE = re.compile(r"[a-zA-Z0-9_.-]{3,255}")

#: what botocore accepts as a region name
_REGION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?")


def _single(url: str, query: dict[str, list[str]], name: str) -> str | None:
    """The non-empty value of option ``name``, or None when it is absent.

    An empty value is refused rather than read as absent: ``endpoint=`` from
    an unset shell variable would otherwise send the requests to AWS."""
    values = query.get(name)  # a repeated option was refused by _refuse_unknown
    if values is None:
        return None
    if not values[0].strip():
        raise ConfigError(
            f"bad store URL {url!r}: option {name} is empty; give a value or leave it out"
        )
    return values[0]


def _check_endpoint(url: str, endpoint: str) -> None:
    """An endpoint is an http(s) URL with a host and, if any, a numeric port."""
    problem = ""
    try:
        parts = urlsplit(endpoint)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:
        problem = str(exc)
    else:
        if parts.scheme not in ("http", "https") or not parts.hostname:
            problem = "it must start with http:// or https:// and name a host"
    if problem:
        raise ConfigError(
            f"bad store URL {url!r}: endpoint {endpoint!r} is not a URL such as "
            f"http://127.0.0.1:8000 ({problem})"
        )


def _refuse_unknown(url: str, query: dict[str, list[str]], known: set[str]) -> None:
    unknown = set(query) - known
    if unknown:
        raise ConfigError(
            f"bad store URL {url!r}: unknown option(s) {', '.join(sorted(unknown))}; "
            f"accepted: {ACCEPTED_FORMS}"
        )
    # ?synchronous=normal&synchronous=full would quietly take the first
    repeated = sorted(name for name, values in query.items() if len(values) > 1)
    if repeated:
        raise ConfigError(f"bad store URL {url!r}: {', '.join(repeated)} given more than once")


def open_store(url: str | None = None, *, create: bool = True) -> ItemStore:
    """Open the engine a store URL names (default: ``./tallybook.db``).

    ``create=False`` (for a caller that only reads) refuses a SQLite file that does
    not exist or holds no store, instead of making one."""
    parsed = parse_store_url(resolve_store_url(url))
    if parsed.engine == "sqlite":
        from tallybook.store.sqlite import DEFAULT_SYNCHRONOUS, SqliteStore

        return SqliteStore(
            parsed.path, synchronous=parsed.synchronous or DEFAULT_SYNCHRONOUS, create=create
        )
    if parsed.engine == "memory":
        from tallybook.store.memory import open_memory_store

        return open_memory_store(parsed.table)
    from tallybook.store.dynamodb import DynamoStore

    return DynamoStore(parsed.table, region=parsed.region, endpoint=parsed.endpoint)
