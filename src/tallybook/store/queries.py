"""What both engines share to answer a query: which attributes key the table
or an index, and the cursors that continue a page.

A cursor is the key of the last item returned (base-table key plus, on an
index, the index key), as compact JSON in URL-safe base64: opaque to callers,
the same on both engines. A service hands its callers its cursors bound to the
listing they page (:func:`bind_cursor`): the account, fund, filters and order
a caller gave, so that a cursor is never read by another listing (:func:`unbind_cursor`).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

from tallybook.errors import StoreValidationError
from tallybook.store.port import INDEXES, KEY_ATTRS, Item, Page, Query


def key_attrs(index: str | None) -> tuple[str, str]:
    """The partition and sort attributes of the table (``None``) or an index."""
    if index is None:
        return KEY_ATTRS
    if index in INDEXES:
        return INDEXES[index]
    raise StoreValidationError(f"unknown index {index!r}; indexes: gsi1, gsi2")


def query_attrs(partition: str, index: str | None, limit: int | None) -> tuple[str, str]:
    """:func:`key_attrs` of a query, refusing what every engine refuses: an
    unknown index, no partition value, a limit below 1."""
    attrs = key_attrs(index)
    if not partition or not isinstance(partition, str):
        raise StoreValidationError("a query needs a partition value")
    if limit is not None and limit < 1:
        raise StoreValidationError("limit must be at least 1")
    return attrs


def encode_cursor(last_key: Mapping[str, object]) -> str:
    raw = json.dumps(dict(last_key), sort_keys=True, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> dict[str, str]:
    data = _position(cursor)
    if not all(isinstance(v, str) for v in data.values()):
        raise StoreValidationError("malformed cursor")
    return cast(dict[str, str], data)


#: the attribute of a bound cursor that names its listing
_LISTING = "for"


def _listing_tag(listing: tuple[object, ...]) -> str:
    text = json.dumps(listing, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _position(cursor: str) -> dict[str, object]:
    """The JSON object a cursor encodes (:func:`encode_cursor`), its values as they are."""
    if not isinstance(cursor, str):
        raise StoreValidationError("malformed cursor: a cursor is the string a page returned")
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, UnicodeDecodeError) as exc:
        raise StoreValidationError("malformed cursor") from exc
    if not isinstance(data, dict):
        raise StoreValidationError("malformed cursor")
    return data


def bind_cursor(cursor: str | None, *listing: object) -> str | None:
    """``cursor``, the next page's, tagged with the ``listing`` it pages: its
    name and everything a caller chose that shapes it (account, fund, filters,
    order; never the page size)."""
    if cursor is None:
        return None
    position = _position(cursor)
    position[_LISTING] = _listing_tag(listing)
    return encode_cursor(position)


def unbind_cursor(cursor: str | None, *listing: object) -> str | None:
    """The cursor :func:`bind_cursor` tagged for ``listing``, as it was; a cursor of
    another listing (a newest-first page continued oldest first, another
    account's, fund's or filter's) is refused, never read as a page of this one."""
    if cursor is None:
        return None
    position = _position(cursor)
    if position.pop(_LISTING, None) != _listing_tag(listing):
        raise StoreValidationError("cursor does not belong to this query")
    return encode_cursor(position)


def cursor_number(cursor: str, name: str, below: int | None = None) -> tuple[int, dict[str, str]]:
    """The non-negative integer ``name`` of a compound cursor (and the whole
    cursor); a cursor without it, or with it out of range, is another query's."""
    position = decode_cursor(cursor)
    value = position.get(name, "")
    if not (value.isascii() and value.isdigit()) or (below is not None and int(value) >= below):
        raise StoreValidationError("cursor does not belong to this query")
    return int(value), position


def cursor_start(cursor: str, partition: str, pk_attr: str, sk_attr: str) -> dict[str, str]:
    """The key a page continues after: table key plus index key, of this partition."""
    last = decode_cursor(cursor)
    needed = dict.fromkeys((*KEY_ATTRS, pk_attr, sk_attr))
    if not needed.keys() <= last.keys() or last[pk_attr] != partition:
        raise StoreValidationError("cursor does not belong to this query")
    return {name: last[name] for name in needed}


def next_cursor(last_item: Item, pk_attr: str, sk_attr: str) -> str:
    """The cursor of a page that ends with ``last_item``."""
    attrs = dict.fromkeys((*KEY_ATTRS, pk_attr, sk_attr))
    return encode_cursor({a: last_item[a] for a in attrs})


@dataclass(frozen=True, slots=True)
class QueryShape:
    """What every engine works out before answering a :class:`Query`."""

    #: the partition and sort attributes of the table or the index queried
    pk_attr: str
    sk_attr: str
    #: the key the page continues after (table key plus index key), if any
    after: dict[str, str] | None
    limit: int | None

    def page(self, items: list[Item]) -> Page:
        """The page answering the query from up to ``limit + 1`` items read in
        its order: the extra one only says that another page exists."""
        if self.limit is not None and len(items) > self.limit:
            items = items[: self.limit]
            return Page(items, next_cursor(items[-1], self.pk_attr, self.sk_attr))
        return Page(items)


def shape(q: Query) -> QueryShape:
    """Check ``q`` as every engine does (:func:`query_attrs`, the cursor's
    partition and sort key) and say which attributes it reads and where it starts.

    A cursor whose sort key lies outside the query's sort condition (a page of
    one fund's history continued on another fund's) is refused, as DynamoDB
    refuses such an ``ExclusiveStartKey``, rather than answering an empty page."""
    pk_attr, sk_attr = query_attrs(q.partition, q.index, q.limit)
    after = None if q.cursor is None else cursor_start(q.cursor, q.partition, pk_attr, sk_attr)
    if after is not None and q.sort is not None and not q.sort.matches(after[sk_attr]):
        raise StoreValidationError("cursor does not belong to this query")
    return QueryShape(pk_attr, sk_attr, after, q.limit)
