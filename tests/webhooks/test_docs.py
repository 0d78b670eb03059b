"""docs/webhooks.md says what the code does: its receiver example works, its
event types and retry schedule are the code's."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tallybook.webhooks import sign
from tallybook.webhooks.delivery import RetryPolicy
from tallybook.webhooks.events import EVENT_TYPES
from tallybook.webhooks.fanout import MAX_SUBSCRIPTIONS
from tallybook.webhooks.signing import new_secret

DOC = (Path(__file__).resolve().parents[2] / "docs" / "webhooks.md").read_text()


def test_the_receiver_example_accepts_signed_requests_once() -> None:
    (code,) = re.findall(r"```python\n(.*?)```", DOC, flags=re.S)
    secret = new_secret()
    scope: dict[str, Any] = {}
    exec(code.replace('"whsec_..."', repr(secret)), scope)
    body = b'{"type":"transaction.posted"}'
    headers = sign(secret, "evt_1", body)
    assert scope["handle"](headers, body) == 204
    assert scope["handle"](headers, body) == 204
    assert scope["seen"] == {"evt_1"}
    assert scope["handle"](headers, body + b" ") == 400
    assert scope["handle"](sign(new_secret(), "evt_2", body), body) == 400


def test_every_event_type_is_documented() -> None:
    documented = re.findall(r"^\| `([a-z]+\.[a-z]+)` \|", DOC, flags=re.M)
    assert documented == list(EVENT_TYPES)


def test_the_retry_schedule_is_the_policys() -> None:
    policy = RetryPolicy()
    assert "5 s \u00d7 2^(n-1)" in DOC
    assert policy.base_seconds == 5
    assert policy.cap_seconds == 6 * 3600
    assert policy.jitter == 0.2
    assert policy.max_age_seconds == 3 * 86_400
    assert policy.timeout_seconds == 10
    assert f"at most {MAX_SUBSCRIPTIONS}" in DOC
    first_after = [5 * (2**n - 1) for n in (1, 2, 3, 5, 7, 9, 11, 13)]
    assert first_after == [5, 15, 35, 155, 635, 2555, 10235, 40955]
