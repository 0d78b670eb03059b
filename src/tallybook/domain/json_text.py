"""JSON text read strictly: an object that gives one key twice is refused.

``json.loads`` keeps the last of a repeated key without a word. For a request
body or an inbound event, which one the sender meant would be a guess
(``{"amount": 1, "amount": 900}``), so the HTTP layer and the event ingestor
both read JSON through :func:`loads_unique` and refuse such text.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["RepeatedKey", "loads_unique"]


class RepeatedKey(Exception):
    """An object of the text gives ``key`` more than once."""

    def __init__(self, key: str) -> None:
        super().__init__(f"{key!r} is given more than once")
        self.key = key


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise RepeatedKey(key)
            seen.add(key)
    return obj


#: one decoder for every call: ``json.loads(raw, object_pairs_hook=...)`` builds a
#: decoder and its scanner each time, which cost more than parsing a small body
_DECODER = json.JSONDecoder(object_pairs_hook=_unique)


def loads_unique(raw: str | bytes) -> Any:
    """``json.loads(raw)``, raising :class:`RepeatedKey` for a key given twice in
    one object (and whatever ``json.loads`` raises for text that is not JSON)."""
    if isinstance(raw, str):
        if raw.startswith("\ufeff"):  # as json.loads refuses it
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", raw, 0)
        return _DECODER.decode(raw)
    if not isinstance(raw, (bytes, bytearray)):
        raise TypeError(f"the JSON object must be str or bytes, not {type(raw).__name__}")
    return _DECODER.decode(raw.decode(json.detect_encoding(raw), "surrogatepass"))
