"""What the port accepts, checked before anything is written.

Values are integers, strings, booleans, null, lists and maps (never floats,
numbers of at most 38 digits, map keys never empty, as DynamoDB); keys and
index keys are non-empty strings; an item stays within DynamoDB's 400 KB, counted the way DynamoDB
counts it; a transaction holds at most 100 actions whose items add up to at
most 4 MB (AWS's limits). Both engines run these checks, so both refuse the
same input with the same error.

A transaction's size is what its request carries, as DynamoDB counts it
(DynamoDB Local 3.3.1 measured the same): a put's whole item, the key of
every other action, and the names and values an update sets or adds. An
update that adds a byte to a large stored item counts as that byte, not as
the item. The sizes come from bounds computed while the values are checked;
the exact count runs only when the bound passes 4 MB.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tallybook.errors import ItemTooLarge, StoreValidationError
from tallybook.store.port import (
    INDEX_ATTRS,
    KEY_ATTRS,
    MAX_ITEM_BYTES,
    MAX_KEY_BYTES,
    MAX_NUMBER_DIGITS,
    MAX_TRANSACTION_ACTIONS,
    MAX_TRANSACTION_BYTES,
    TTL_ATTR,
    Action,
    Add,
    And,
    Compare,
    Condition,
    Exists,
    Item,
    Key,
    NotExists,
    Or,
    Put,
    Set,
    Update,
    UpdateOp,
    Value,
    key_of,
)


def check_value(value: Value, path: str = "value") -> None:
    """Refuse floats, numbers beyond 38 digits and empty map keys, as DynamoDB does."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, int):
        if not _NUMBER_LOW < value < _NUMBER_LIMIT:  # never str(): it fails past 4300 digits
            raise StoreValidationError(f"{path}: a number has at most 38 digits")
        return
    if isinstance(value, list):
        for i, v in enumerate(value):
            check_value(v, f"{path}[{i}]")
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str) or not k:  # DynamoDB: "Empty attribute name"
                raise StoreValidationError(f"{path}: map keys must be non-empty strings")
            check_value(v, f"{path}.{k}")
        return
    raise StoreValidationError(
        f"{path}: unsupported type {type(value).__name__} (integers, strings, "
        "booleans, null, lists and maps only; never floats)"
    )


def value_size(value: Value) -> int:
    """Approximate DynamoDB's item-size accounting for one value."""
    if value is None or isinstance(value, bool):
        return 1
    if isinstance(value, str):
        return _utf8_len(value)
    if isinstance(value, int):
        return 1 + (_digits(value) + 1) // 2
    if isinstance(value, list):
        return 3 + sum(1 + value_size(v) for v in value)
    return 3 + sum(_utf8_len(k) + 1 + value_size(v) for k, v in value.items())


def _digits(value: int) -> int:
    """How many decimal digits ``value`` has; one beyond 38 digits (which no
    check lets through) is estimated from its bits, as ``str()`` of an integer
    of more than 4300 digits raises ``ValueError``."""
    n = abs(value)
    return len(str(n)) if n < _NUMBER_LIMIT else n.bit_length() * 3 // 10 + 1


def item_size(item: Mapping[str, Value]) -> int:
    return sum(_utf8_len(k) + value_size(v) for k, v in item.items())


_NUMBER_LIMIT = 10**MAX_NUMBER_DIGITS
#: the negative bound, computed once: ``-_NUMBER_LIMIT`` in a check would build
#: a new 128-bit integer for every number checked
_NUMBER_LOW = -_NUMBER_LIMIT
#: value_size of the largest number allowed (38 digits): an upper bound for any number
_NUMBER_SIZE_BOUND = 1 + (MAX_NUMBER_DIGITS + 1) // 2


def _utf8_len(s: str) -> int:
    return len(s) if s.isascii() else _encoded_len(s)


def _encoded_len(s: str) -> int:
    """The UTF-8 length of a non-ASCII string; one holding a lone surrogate
    (``"\\ud800"`` from JSON), which has no UTF-8 form, is refused."""
    try:
        return len(s.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise StoreValidationError(
            f"{s[:40]!r} is not valid Unicode (a lone surrogate) and cannot be stored"
        ) from exc


def _plain_bound(value: Value) -> int:
    """An upper bound of :func:`value_size` for a value of plain types only.

    One pass instead of :func:`check_value` plus :func:`value_size`; returns -1
    when the value holds anything else (subclasses, floats, numbers beyond 38
    digits, non-string or empty map keys, non-ASCII map keys): the caller then
    runs the exact checks. A map's names are measured joined in one string, and
    the strings and numbers inside maps and lists, most of what a posting
    writes, in the loop without a call of their own (a call costs more than
    sizing a value: maps and lists share the one loop for that reason).
    """
    t = type(value)
    if t is str:
        return len(value) if value.isascii() else _encoded_len(value)  # type: ignore[union-attr, arg-type]
    if t is int:
        return _NUMBER_SIZE_BOUND if _NUMBER_LOW < value < _NUMBER_LIMIT else -1
    if t is bool or value is None:
        return 1
    values: Iterable[Value]
    if t is dict:
        if not value:
            return 3
        try:
            names = "".join(value)  # type: ignore[arg-type]
        except TypeError:  # a name that is not a string
            return -1
        if "" in value or not names.isascii():  # type: ignore[operator]
            return -1
        total = 3 + len(names) + len(value)  # type: ignore[arg-type]
        values = value.values()  # type: ignore[union-attr]
    elif t is list:
        total = 3 + len(value)  # type: ignore[arg-type]
        values = value  # type: ignore[assignment]
    else:
        return -1
    for v in values:
        tv = type(v)
        if tv is int:
            if not _NUMBER_LOW < v < _NUMBER_LIMIT:
                return -1
            total += _NUMBER_SIZE_BOUND
        elif tv is str:
            total += len(v) if v.isascii() else _encoded_len(v)  # type: ignore[union-attr, arg-type]
        else:
            b = _plain_bound(v)
            if b < 0:
                return -1
            total += b
    return total


def check_item(item: Mapping[str, Value]) -> int:
    """Refuse an item the port does not take; return an upper bound of its size
    (exact when it came near 400 KB)."""
    return _check_item(item, key_of(item))


def _check_item(item: Mapping[str, Value], key: Key) -> int:
    """:func:`check_item` of an item whose key was read already.

    An item of plain values with ASCII names, every item a posting writes, is
    sized in one pass (:func:`_plain_bound`); any other is checked attribute by
    attribute, which finds the first fault."""
    check_key(key)
    # an item's size is a map's, without the map's 3 bytes and 1 per attribute
    bound = _plain_bound(item)  # type: ignore[arg-type]
    bound = _check_values(item) if bound < 0 else bound - 3 - len(item)
    for name in INDEX_ATTRS & item.keys():
        check_attribute(name, item[name])
    if TTL_ATTR in item:
        check_attribute(TTL_ATTR, item[TTL_ATTR])
    if not 0 <= bound <= MAX_ITEM_BYTES:
        bound = check_size(item)
    return bound


def _check_values(item: Mapping[str, Value]) -> int:
    """Check an item's names and values one by one; return a bound of its size,
    or -1 when a value took the exact checks (it is then sized exactly)."""
    bound = 0
    for name, value in item.items():
        if type(name) is not str or not name:
            check_name(name)
        if isinstance(value, str):
            b = len(value) if value.isascii() else _encoded_len(value)
        elif isinstance(value, int) and _NUMBER_LOW < value < _NUMBER_LIMIT:
            b = _NUMBER_SIZE_BOUND
        else:
            b = _plain_bound(value)
        if b < 0:
            check_value(value, name)
            bound = -1
        elif bound >= 0:
            bound += (len(name) if name.isascii() else _encoded_len(name)) + b
    return bound


def check_size(item: Mapping[str, Value]) -> int:
    """The 400 KB item size rule, exact (call after the values were checked);
    returns the size."""
    size = item_size(item)
    if size > MAX_ITEM_BYTES:
        key = key_of(item)
        raise ItemTooLarge(f"item {key.pk}/{key.sk} exceeds the 400 KB item size limit")
    return size


def json_size_bound(body: str) -> int:
    """An upper bound of :func:`item_size` for an item stored as compact JSON ``body``.

    Every value's size is at most twice its JSON text (a one-digit number: 2
    bytes against 1 character; strings, lists and maps add quotes, brackets and
    separators to their contents), so twice the UTF-8 length bounds the item.
    """
    return 2 * _utf8_len(body)


def check_updated(
    item: Mapping[str, Value],
    updates: Sequence[UpdateOp],
    stored_bound: int | None,
    sets_bound: int,
) -> None:
    """:func:`check_item` for ``item``, the result of ``updates`` applied to a
    stored (valid) item whose size is at most ``stored_bound`` (``None``: there
    was none). The updates were checked by :func:`check_actions`, which gave
    ``sets_bound``, a bound of what their ``Set`` operations write, so their
    values are not walked again. Only what applying them can break is checked:
    the size, through that bound first and exactly near the limit, and numbers
    that ``Add`` pushed beyond 38 digits (the full checks then run, for their
    exact error)."""
    if stored_bound is None:
        key = key_of(item)
        bound = 4 + _utf8_len(key.pk) + _utf8_len(key.sk)
    else:
        bound = stored_bound
    bound += sets_bound
    for op in updates:
        if isinstance(op, Add):
            result = item.get(op.attr)
            if type(result) is not int or not _NUMBER_LOW < result < _NUMBER_LIMIT:
                check_item(item)
                return
            bound += _utf8_len(op.attr) + _NUMBER_SIZE_BOUND
    if bound > MAX_ITEM_BYTES:
        check_size(item)


def check_attribute(name: str, value: Value) -> None:
    """Index key attributes are non-empty strings; ``ttl`` is an integer (or null)."""
    if name in INDEX_ATTRS and not (isinstance(value, str) and value):
        raise StoreValidationError(f"index key {name} must be a non-empty string")
    if (
        name == TTL_ATTR
        and value is not None
        and (not isinstance(value, int) or isinstance(value, bool))
    ):
        raise StoreValidationError("ttl must be an integer (epoch seconds)")


#: a key part of at most this many characters is within 1024 bytes whatever
#: they are (UTF-8 takes at most 4 bytes a character)
_SHORT_KEY = MAX_KEY_BYTES // 4


def check_key(key: Key) -> None:
    pk, sk = key.pk, key.sk
    strings = type(pk) is str and type(sk) is str
    if strings and 0 < len(pk) <= _SHORT_KEY and 0 < len(sk) <= _SHORT_KEY:
        return  # every key a posting writes: no part to measure in bytes
    for name, part in (("pk", pk), ("sk", sk)):
        if not isinstance(part, str) or not part:
            raise StoreValidationError(f"key attribute {name} must be a non-empty string")
        if _utf8_len(part) > MAX_KEY_BYTES:
            raise StoreValidationError(f"key attribute {name} exceeds 1024 bytes")


def check_name(name: str) -> None:
    if not isinstance(name, str) or not name:
        raise StoreValidationError("attribute names must be non-empty strings")


def check_condition(condition: Condition) -> None:
    """Refuse malformed conditions: empty names, floats, numbers beyond 38 digits.

    Tested by type rather than with ``match``'s class patterns: a third fewer
    instructions on the conditions every posting sends."""
    if isinstance(condition, (Exists, NotExists)):
        check_name(condition.attr)
    elif isinstance(condition, Compare):
        check_name(condition.attr)
        if condition.op not in ("=", "<>", "<", "<=", ">", ">="):
            raise StoreValidationError(f"unknown comparison operator {condition.op!r}")
        check_value(condition.value, condition.attr)
    elif isinstance(condition, (And, Or)):
        for c in condition.conditions:
            check_condition(c)
    else:
        raise StoreValidationError(f"unknown condition {condition!r}")


def check_update(op: UpdateOp) -> int:
    """Refuse a malformed update; return an upper bound of the bytes it carries."""
    check_name(op.attr)
    if op.attr in KEY_ATTRS:
        raise StoreValidationError(f"cannot update key attribute {op.attr}")
    if isinstance(op, Set):
        bound = _plain_bound(op.value)
        if bound < 0:
            check_value(op.value, op.attr)
            bound = value_size(op.value)
        check_attribute(op.attr, op.value)
        return _utf8_len(op.attr) + bound
    if isinstance(op, Add):
        if not isinstance(op.amount, int) or isinstance(op.amount, bool):
            raise StoreValidationError("Add takes an integer")
        return _utf8_len(op.attr) + value_size(op.amount)
    return 0


def _key_size(key: Key) -> int:
    return 4 + _utf8_len(key.pk) + _utf8_len(key.sk)  # "pk" and "sk" and their values


def transaction_size(actions: Sequence[Action]) -> int:
    """The bytes a transaction carries, exactly (module docstring); call after
    the actions were checked."""
    total = 0
    for action in actions:
        if isinstance(action, Put):
            total += item_size(action.item)
            continue
        total += _key_size(action.key)
        if isinstance(action, Update):
            for op in action.updates:
                if isinstance(op, Set):
                    total += _utf8_len(op.attr) + value_size(op.value)
                elif isinstance(op, Add):
                    total += _utf8_len(op.attr) + value_size(op.amount)
    return total


@dataclass(frozen=True, slots=True)
class Checked:
    """What :func:`check_actions` learnt of a valid transaction, for the engine
    that applies it (so it does not work it out again)."""

    #: each action's key, in order
    keys: list[Key]
    #: each action's bound of the bytes its ``Set`` operations write (0 for a
    #: put or a delete): what :func:`check_updated` adds to the stored item's size
    sets_bounds: list[int]


def check_actions(actions: Sequence[Action]) -> Checked:
    """Refuse a transaction AWS would refuse: no action, more than 100, an item
    twice, a malformed action, an item beyond 400 KB or more than 4 MB in all."""
    if not actions:
        raise StoreValidationError("a transaction needs at least one action")
    if len(actions) > MAX_TRANSACTION_ACTIONS:
        raise StoreValidationError(
            f"a transaction holds at most {MAX_TRANSACTION_ACTIONS} actions, got {len(actions)}"
        )
    #: (pk, sk) pairs rather than keys: a tuple hashes in C, a dataclass in Python
    seen: set[tuple[str, str]] = set()
    keys: list[Key] = []
    sets_bounds: list[int] = []
    bound = 0
    for action in actions:
        sets = 0
        if isinstance(action, Put):
            k = key_of(action.item)
            bound += _check_item(action.item, k)
        else:
            k = action.key
            check_key(k)
            bound += _key_size(k)
        if isinstance(action, Update):
            for op in action.updates:
                b = check_update(op)
                bound += b
                if isinstance(op, Set):
                    sets += b
        if action.condition is not None:
            check_condition(action.condition)
        pair = (k.pk, k.sk)
        if pair in seen:
            raise StoreValidationError(
                f"a transaction cannot touch the same item twice ({k.pk}/{k.sk})"
            )
        seen.add(pair)
        keys.append(k)
        sets_bounds.append(sets)
    if bound > MAX_TRANSACTION_BYTES:
        size = transaction_size(actions)
        if size > MAX_TRANSACTION_BYTES:
            raise StoreValidationError(
                f"a transaction's items add up to at most 4 MB ({MAX_TRANSACTION_BYTES} "
                f"bytes), got {size}"
            )
    return Checked(keys, sets_bounds)


def check_batch_write(puts: Sequence[Item], deletes: Sequence[Key]) -> None:
    """What ``batch_write`` takes: valid whole items and valid keys."""
    for item in puts:
        check_item(item)
    for key in deletes:
        check_key(key)
