"""The OpenAPI document and the docs pages, made for generated clients.

- ``operationId`` is ``<tag>_<function name>`` (:func:`operation_id`): stable
  across releases as long as the route keeps its name, unique because a
  tag's routes live in one module, and a readable method name in a client.
- Component names are the model class names. Where two capabilities'
  schema modules define a model of the same name (``CreditIn`` of the ledger
  and of the wallet), the name is prefixed with the capability
  (``WalletCreditIn``) instead of pydantic's
  ``tallybook__http__schemas__wallet__CreditIn``.
- Every route guarded by :func:`tallybook.http.deps.require` states the
  ``ApiKey`` bearer scheme (so ``/docs`` has an Authorize button) and the
  scope it needs. This is documentation only: the dependency itself reads
  the header, at no extra cost per request.
- ``Idempotency-Key`` is ``required`` on the routes that refuse a request
  without it (they take :data:`tallybook.http.deps.IdempotencyKey`) and
  optional on the other POSTs, where the idempotency middleware honours it.
- Every JSON request body has an ``example`` (:data:`REQUEST_EXAMPLES`), valid
  against its schema and accepted by the server in that order (a test posts
  each), so "Try it out" in ``/docs`` starts from a request that works.
- Every 2xx JSON answer has an ``example`` too (:data:`RESPONSE_EXAMPLES`),
  valid against the response schema and shaped like the server's answer to
  the request examples (a test compares them).
- ``/docs`` (Swagger UI) and ``/redoc`` load their scripts and styles from
  the app itself (``/docs-assets``, the files of the ``fastapi-offline``
  package), so they work without a network.
"""

from __future__ import annotations

import inspect
import json
import re
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from starlette.routing import Route

from tallybook.http.problems import PROBLEM_MEDIA_TYPE
from tallybook.http.schemas.common import ID_PATTERN

SECURITY_SCHEME = "ApiKey"
DOCS_ASSETS = "/docs-assets"
#: marks a dependency made by :func:`tallybook.http.deps.require` with its scope
SCOPE_ATTRIBUTE = "__tallybook_scope__"

IDEMPOTENCY_PARAMETER: dict[str, Any] = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "Unique per logical request (1-128 of A-Z a-z 0-9 . _ : -): a replay "
    "returns the original status and body, another body with the same key is a 409",
    "schema": {"type": "string", "minLength": 1, "maxLength": 128, "pattern": ID_PATTERN},
}

_SNS_ENVELOPE = {
    "Type": "Notification",
    "MessageId": "m-1",
    "Message": '{"account": "alice", "type": "TopUp", "payload": {"amount": 500}}',
}

#: operationId -> (media type ->) the example of its request body
REQUEST_EXAMPLES: dict[str, dict[str, Any]] = {
    "ledger_put_low_balance_threshold": {"threshold": 500},
    "ledger_open_account": {"account": "alice", "attributes": {"segment": "retail"}},
    "ledger_post_transaction": {
        "type": "credit",
        "account": "alice",
        "fund": "points",
        "amount": 250,
        "order_id": "order-1001",
    },
    "ledger_post_transfer": {
        "source": "alice",
        "destination": "bob",
        "fund": "points",
        "amount": 50,
    },
    "wallet_post_credit": {"fund": "cash", "amount": 2500},
    "wallet_post_grant": {"amount": 500, "expires_in_days": 30},
    "wallet_post_hold": {"amount": 400, "expires_in": 3600},
    "wallet_capture_hold": {"amount": 250},
    "wallet_post_held_credit": {
        "fund": "cash",
        "amount": 9000,
        "release_at": "2030-01-01T00:00:00Z",
    },
    "wallet_post_debit": {"amount": 300, "on_shortfall": "reject", "order_id": "order-77"},
    "loyalty_put_config": {
        "earn": {"points_per_unit": 1, "unit_size": 100, "rounding": "down"},
        "tiers": [
            {"name": "member", "threshold": 0, "multiplier": 1},
            {"name": "gold", "threshold": 5000, "multiplier": "1.5"},
        ],
        "expiry": {"months": 24, "warn_days": 30},
    },
    "loyalty_earn": {"order_id": "order-1002", "amount": 4599, "currency": "USD"},
    "loyalty_redeem": {"points": 20, "reward_id": "mug"},
    "notifications_put_rules": {
        "retention_days": 90,
        "types": {"TopUp": {"listed": False, "dismisses": ["LowBalance"]}},
    },
    "notifications_add_notification": {"type": "TierChanged", "payload": {"tier": "gold"}},
    "notifications_ingest_sns": {
        "application/json": _SNS_ENVELOPE,
        "text/plain": json.dumps(_SNS_ENVELOPE),  # as SNS sends it
    },
    "billing_ingest_record": {
        "id": "r1",
        "partner": "acme",
        "order_id": "o1",
        "amount": 1999,
        "currency": "USD",
        "rate": "0.05",
        "time": "2026-01-01T12:00:00Z",
    },
    "billing_run_reports": {"interval": "1h", "kinds": ["billing"]},
    "webhooks_create_subscription": {
        "url": "https://example.com/hooks",
        "types": ["transaction.posted", "hold.expired"],
        "description": "order service",
    },
}

#: answers shared by several examples below (a read answers what its write did)
_CREDIT_TRANSACTION: dict[str, Any] = {
    "id": "txn-1001",
    "program": "shop",
    "type": "credit",
    "legs": [
        {
            "account": "alice",
            "fund": "points",
            "unit": "points",
            "amount": 250,
            "balance": 250,
            "seq": 1,
        },
        {
            "account": "@external",
            "fund": "points",
            "unit": "points",
            "amount": -250,
            "balance": None,
            "seq": None,
        },
    ],
    "created_at": "2026-01-31T12:00:03.000000Z",
    "order_id": "order-1001",
    "description": None,
    "metadata": {},
    "details": {},
}
_DEBIT_RECORD: dict[str, Any] = {
    "id": "debit-77",
    "type": "debit",
    "account": "alice",
    "funds": {"cash": -300},
    "held": {},
    "availability": {"bonus": 0, "store_credit": 0, "cash": 1950, "total": 1950},
    "grants": [],
    "hold_id": None,
    "charge": None,
    "order_id": "order-77",
    "description": None,
    "created_at": "2026-01-31T12:00:10.000000Z",
    "replay": False,
}
_CAPTURED_HOLD: dict[str, Any] = {
    "hold_id": "h-1",
    "account": "alice",
    "kind": "debit",
    "status": "captured",
    "amount": 400,
    "amounts": {"cash": 400},
    "captured": 250,
    "captured_funds": {"cash": 250},
    "deadline": "2026-01-31T13:00:06.000000Z",
    "created_at": "2026-01-31T12:00:06.000000Z",
    "finished_at": "2026-01-31T12:00:07.000000Z",
}
#: h-2, authorised with the default expiry (7 days) and voided a second later
_VOIDED_HOLD: dict[str, Any] = {
    "hold_id": "h-2",
    "account": "alice",
    "kind": "debit",
    "status": "voided",
    "amount": 100,
    "amounts": {"cash": 100},
    "captured": 0,
    "captured_funds": {},
    "deadline": "2026-02-07T12:00:08.000000Z",
    "created_at": "2026-01-31T12:00:08.000000Z",
    "finished_at": "2026-01-31T12:00:09.000000Z",
}
_EARN_TRANSACTION: dict[str, Any] = {
    "id": "order:order-1002",
    "program": "shop",
    "type": "earn",
    "legs": [
        {
            "account": "alice",
            "fund": "points",
            "unit": "points",
            "amount": 45,
            "balance": 245,
            "seq": 3,
        },
        {
            "account": "@issuance",
            "fund": "points",
            "unit": "points",
            "amount": -45,
            "balance": None,
            "seq": None,
        },
    ],
    "created_at": "2026-01-31T12:00:11.000000Z",
    "order_id": "order-1002",
    "description": None,
    "metadata": {},
    "details": {
        "tier_changed": True,
        "account": "alice",
        "points": 45,
        "amount": 4599,
        "currency": "USD",
        "multiplier": "1",
        "bonus": 0,
        "campaigns": [],
        "lot_expires": "2028-01-31T12:00:11.000000Z",
        "tier": "member",
        "previous_tier": None,
    },
}

#: r1, the request example of a billing record, as every answer shows it
_BILLING_RECORD: dict[str, Any] = {
    "id": "r1",
    "partner": "acme",
    "order_id": "o1",
    "amount": 1999,
    "currency": "USD",
    "rate": "0.05",
    "commission": 100,
    "time": "2026-01-01T12:00:00.000000Z",
    "bucket": "2026-01-31T12:00:00.000000Z",
    "ingested_at": "2026-01-31T12:00:25.000000Z",
    "late": True,
}
#: the request example's subscription (its secret is shown once, when created)
_SUBSCRIPTION: dict[str, Any] = {
    "id": "sub_29e34a4a3667ac2d",
    "program": "shop",
    "url": "https://example.com/hooks",
    "types": ["transaction.posted", "hold.expired"],
    "status": "active",
    "created_at": "2026-01-31T12:00:26.000000Z",
    "secret_hint": "…FPE=",
    "description": "order service",
    "disabled_reason": None,
}
#: the billing report of r1's window, run two hours after the writes above
_BILLING_REPORT: dict[str, Any] = {
    "kind": "billing",
    "window": "20260131T120000Z_20260131T130000Z",
    "start": "2026-01-31T12:00:00.000000Z",
    "end": "2026-01-31T13:00:00.000000Z",
    "rows": 1,
    "sha256": {
        "billing_totals.csv": "29c4e353249177e3b389af24650007d1f3b1aa242fcbcb718f0ade33ce0e47d0",
        "billing_line_items.csv": (
            "c0d98e47b6284d5f043f1110aaa47dcf2bdbe3cda1615a129a7878288b4615ae"
        ),
        "billing.json": "0c50983a7e8b4c33ae8f74ba5dfbd88f8fa5d2aba574e37e038814861ec5e29e",
    },
    "files": ["billing.json", "billing_line_items.csv", "billing_totals.csv"],
    "repeated": False,
}

_REDEEM_TRANSACTION: dict[str, Any] = {
    "id": "redeem-1",
    "program": "shop",
    "type": "redeem",
    "legs": [
        {
            "account": "alice",
            "fund": "points",
            "unit": "points",
            "amount": -20,
            "balance": 225,
            "seq": 4,
        },
        {
            "account": "@redemption",
            "fund": "points",
            "unit": "points",
            "amount": 20,
            "balance": None,
            "seq": None,
        },
    ],
    "created_at": "2026-01-31T12:00:12.000000Z",
    "order_id": None,
    "description": None,
    "metadata": {"reward_id": "mug"},
    "details": {
        "tier_changed": False,
        "account": "alice",
        "reward_id": "mug",
        "points": 20,
        "balance": 225,
        "tier": "member",
        "previous_tier": "member",
    },
}

_NOTIFICATION: dict[str, Any] = {
    "id": "n-1769860813000000-de6f5199d3",
    "account": "alice",
    "type": "TierChanged",
    "payload": {"tier": "gold"},
    "created_at": "2026-01-31T12:00:13.000000Z",
    "status": "active",
    "listed": True,
    "expires_at": None,
    "dismissed_at": None,
    "dismissed_by": None,
    "dismiss_reason": None,
    "delivery": "delivered",
    "delivered_at": "2026-01-31T12:00:13.000000Z",
    "delivery_error": None,
    "source": "n-1",
}

_LOYALTY_CONFIG: dict[str, Any] = {
    "fund": "points",
    "earn": {"points_per_unit": "1", "unit_size": 100, "rounding": "down"},
    "tiers": [
        {"name": "member", "threshold": 0, "multiplier": "1"},
        {"name": "gold", "threshold": 5000, "multiplier": "1.5"},
    ],
    "qualification": {"window": "lifetime", "months": 12, "basis": "earned"},
    "downgrade": {"rule": "after_hold", "hold_months": 12, "max_steps": 0},
    "campaigns": [],
    "expiry": {"warn_days": 30, "months": 24},
}

_NOTIFICATION_RULES: dict[str, Any] = {
    "retention_days": 90,
    "types": {
        "HoldExpired": {
            "listed": True,
            "dismisses": [],
            "deliver": True,
            "expires_after_days": None,
        },
        "LowBalance": {
            "listed": True,
            "dismisses": [],
            "deliver": True,
            "expires_after_days": None,
        },
        "PointsExpiring": {
            "listed": True,
            "dismisses": [],
            "deliver": True,
            "expires_after_days": None,
        },
        "TierChanged": {
            "listed": True,
            "dismisses": [],
            "deliver": True,
            "expires_after_days": None,
        },
        "TopUp": {
            "listed": False,
            "dismisses": ["LowBalance"],
            "deliver": False,
            "expires_after_days": None,
        },
    },
    "default": {"listed": True, "dismisses": [], "deliver": False, "expires_after_days": None},
}

_GRANT_RECORD: dict[str, Any] = {
    "id": "grant-1",
    "type": "grant",
    "account": "alice",
    "funds": {"bonus": 500},
    "held": {},
    "availability": {"bonus": 500, "store_credit": 0, "cash": 1950, "total": 2450},
    "grants": [{"grant_id": "grant-1", "expires_at": "2026-03-02T12:00:19.000000Z", "amount": 500}],
    "hold_id": None,
    "charge": None,
    "order_id": None,
    "description": None,
    "created_at": "2026-01-31T12:00:19.000000Z",
    "replay": False,
}

_HELD_CREDIT_TRANSACTION: dict[str, Any] = {
    "id": "held-1",
    "type": "credit",
    "account": "alice",
    "funds": {"cash": 9000},
    "held": {"cash": 9000},
    "availability": {"bonus": 500, "store_credit": 0, "cash": 1950, "total": 2450},
    "grants": [],
    "hold_id": "held-1",
    "charge": None,
    "order_id": None,
    "description": None,
    "created_at": "2026-01-31T12:00:20.000000Z",
    "replay": False,
}

#: operationId -> the example of its 2xx JSON answer: real answers to the request
#: examples above (posted in that order on a fresh program, one second apart, from
#: 2026-01-31T12:00:00Z); a test compares each with the server's answer
RESPONSE_EXAMPLES: dict[str, Any] = {
    "ledger_post_transaction": _CREDIT_TRANSACTION,
    "ledger_post_transfer": {
        "id": "tr-1",
        "program": "shop",
        "type": "transfer",
        "legs": [
            {
                "account": "alice",
                "fund": "points",
                "unit": "points",
                "amount": -50,
                "balance": 200,
                "seq": 2,
            },
            {
                "account": "bob",
                "fund": "points",
                "unit": "points",
                "amount": 50,
                "balance": 50,
                "seq": 1,
            },
        ],
        "created_at": "2026-01-31T12:00:04.000000Z",
        "order_id": None,
        "description": None,
        "metadata": {},
        "details": {},
    },
    "ledger_get_account": {
        "account": "alice",
        "program": "shop",
        "created_at": "2026-01-31T12:00:01.000000Z",
        "balances": [
            {"fund": "points", "unit": "points", "balance": 225, "held": 0, "available": 225},
            {"fund": "cash", "unit": "USD", "balance": 1950, "held": 0, "available": 1950},
            {"fund": "store_credit", "unit": "USD", "balance": 0, "held": 0, "available": 0},
            {"fund": "bonus", "unit": "USD", "balance": 0, "held": 0, "available": 0},
        ],
        "attributes": {"segment": "retail"},
    },
    "ledger_get_entries": {
        "entries": [
            {
                "account": "alice",
                "fund": "points",
                "unit": "points",
                "seq": 4,
                "amount": -20,
                "balance": 225,
                "txn_id": "redeem-1",
                "type": "redeem",
                "created_at": "2026-01-31T12:00:12.000000Z",
                "order_id": None,
                "description": None,
                "metadata": {"reward_id": "mug"},
            },
            {
                "account": "alice",
                "fund": "points",
                "unit": "points",
                "seq": 3,
                "amount": 45,
                "balance": 245,
                "txn_id": "order:order-1002",
                "type": "earn",
                "created_at": "2026-01-31T12:00:11.000000Z",
                "order_id": "order-1002",
                "description": None,
                "metadata": {},
            },
        ],
        "cursor": (
            "eyJmb3IiOiI3OTk5ZWM1ZmIwOTVlMmJmIiwicGsiOiJBQ0NUI3Nob3AjYWxpY2Ui"
            "LCJzayI6IkUjcG9pbnRzIzE3Njk4NjA4MTEwMDAwMDAjMDAwMDAwMDAwMDAzIn0"
        ),
    },
    "wallet_post_credit": {
        "id": "topup-1",
        "type": "credit",
        "account": "alice",
        "funds": {"cash": 2500},
        "held": {},
        "availability": {"bonus": 0, "store_credit": 0, "cash": 2500, "total": 2500},
        "grants": [],
        "hold_id": None,
        "charge": None,
        "order_id": None,
        "description": None,
        "created_at": "2026-01-31T12:00:05.000000Z",
        "replay": False,
    },
    "wallet_post_debit": _DEBIT_RECORD,
    "wallet_get_balance": {
        "account": "alice",
        "funds": [
            {"fund": "bonus", "unit": "USD", "total": 0, "withheld": 0, "available": 0},
            {"fund": "store_credit", "unit": "USD", "total": 0, "withheld": 0, "available": 0},
            {"fund": "cash", "unit": "USD", "total": 1950, "withheld": 0, "available": 1950},
        ],
        "total_available": 1950,
        "as_of": "2026-01-31T12:00:14.000000Z",
    },
    "wallet_post_hold": {
        "hold": {
            "hold_id": "h-1",
            "account": "alice",
            "kind": "debit",
            "status": "active",
            "amount": 400,
            "amounts": {"cash": 400},
            "captured": 0,
            "captured_funds": {},
            "deadline": "2026-01-31T13:00:06.000000Z",
            "created_at": "2026-01-31T12:00:06.000000Z",
            "finished_at": None,
        },
        "transaction": {
            "id": "h-1",
            "type": "authorize",
            "account": "alice",
            "funds": {},
            "held": {"cash": 400},
            "availability": {"bonus": 0, "store_credit": 0, "cash": 2100, "total": 2100},
            "grants": [],
            "hold_id": "h-1",
            "charge": None,
            "order_id": None,
            "description": None,
            "created_at": "2026-01-31T12:00:06.000000Z",
            "replay": False,
        },
    },
    "wallet_capture_hold": {
        "hold": _CAPTURED_HOLD,
        "transaction": {
            "id": "h-1:capture",
            "type": "capture",
            "account": "alice",
            "funds": {"cash": -250},
            "held": {"cash": -400},
            "availability": {"bonus": 0, "store_credit": 0, "cash": 2250, "total": 2250},
            "grants": [],
            "hold_id": "h-1",
            "charge": None,
            "order_id": None,
            "description": None,
            "created_at": "2026-01-31T12:00:07.000000Z",
            "replay": False,
        },
    },
    "wallet_void_hold": {
        "hold": _VOIDED_HOLD,
        "transaction": {
            "id": "h-2:void",
            "type": "void",
            "account": "alice",
            "funds": {},
            "held": {"cash": -100},
            "availability": {"bonus": 0, "store_credit": 0, "cash": 2250, "total": 2250},
            "grants": [],
            "hold_id": "h-2",
            "charge": None,
            "order_id": None,
            "description": None,
            "created_at": "2026-01-31T12:00:09.000000Z",
            "replay": False,
        },
    },
    "loyalty_earn": {
        "order_id": "order-1002",
        "account": "alice",
        "points": 45,
        "tier": "member",
        "previous_tier": None,
        "lot_expires": "2028-01-31T12:00:11.000000Z",
        "campaigns": [],
        "transaction": _EARN_TRANSACTION,
    },
    "loyalty_redeem": {
        "account": "alice",
        "reward_id": "mug",
        "points": 20,
        "balance": 225,
        "tier": "member",
        "previous_tier": "member",
        "transaction": _REDEEM_TRANSACTION,
    },
    "notifications_list_notifications": {"notifications": [_NOTIFICATION]},
    "ledger_get_balances": {
        "account": "alice",
        "balances": [
            {"fund": "points", "unit": "points", "balance": 225, "held": 0, "available": 225},
            {"fund": "cash", "unit": "USD", "balance": 1950, "held": 0, "available": 1950},
            {"fund": "store_credit", "unit": "USD", "balance": 0, "held": 0, "available": 0},
            {"fund": "bonus", "unit": "USD", "balance": 0, "held": 0, "available": 0},
        ],
    },
    "ledger_get_transaction": _CREDIT_TRANSACTION,
    "wallet_get_transaction": _DEBIT_RECORD,
    "wallet_get_hold": _CAPTURED_HOLD,
    "loyalty_get_order": {
        "order_id": "order-1002",
        "account": "alice",
        "points": 45,
        "transaction": _EARN_TRANSACTION,
    },
    "loyalty_get_tier": {
        "account": "alice",
        "tier": "member",
        "qualifying_points": 45,
        "balance": 225,
        "available": 225,
        "lifetime_points": 45,
        "qualified_at": "2026-01-31T12:00:12.000000Z",
        "next_tier": "gold",
        "points_to_next_tier": 4955,
    },
    "ledger_get_program": {
        "id": "shop",
        "name": "shop",
        "currency": "USD",
        "funds": [
            {
                "name": "points",
                "unit": "points",
                "allow_overdraft": False,
                "low_balance_threshold": None,
            },
            {
                "name": "cash",
                "unit": "USD",
                "allow_overdraft": False,
                "low_balance_threshold": None,
            },
            {
                "name": "store_credit",
                "unit": "USD",
                "allow_overdraft": False,
                "low_balance_threshold": None,
            },
            {
                "name": "bonus",
                "unit": "USD",
                "allow_overdraft": False,
                "low_balance_threshold": None,
            },
        ],
        "created_at": "2026-01-31T12:00:00.000000Z",
    },
    "loyalty_get_config": _LOYALTY_CONFIG,
    "wallet_list_holds": [_VOIDED_HOLD, _CAPTURED_HOLD],  # newest first
    "ledger_get_order_transactions": {"transactions": [_EARN_TRANSACTION]},
    "loyalty_put_config": _LOYALTY_CONFIG,
    "ledger_open_account": {
        "account": "alice",
        "program": "shop",
        "created_at": "2026-01-31T12:00:01.000000Z",
        "balances": [
            {"fund": "points", "unit": "points", "balance": 0, "held": 0, "available": 0},
            {"fund": "cash", "unit": "USD", "balance": 0, "held": 0, "available": 0},
            {"fund": "store_credit", "unit": "USD", "balance": 0, "held": 0, "available": 0},
            {"fund": "bonus", "unit": "USD", "balance": 0, "held": 0, "available": 0},
        ],
        "attributes": {"segment": "retail"},
    },
    "notifications_add_notification": _NOTIFICATION,
    "system_healthz": {"status": "ok", "version": "0.1.0"},
    "system_readyz": {"status": "ready"},
    "ledger_get_account_transactions": {
        "transactions": [
            _REDEEM_TRANSACTION,
            _EARN_TRANSACTION,
        ],
        "cursor": (
            "eyJhdCI6IjE3Njk4NjA4MTEwMDAwMDAjIiwiZTpjYXNoIjoiRSNjYXNoIzE3Njk4"
            "NjA4MTAwMDAwMDAjMDAwMDAwMDAwMDAzIiwiZTpwb2ludHMiOiJFI3BvaW50cyMx"
            "NzY5ODYwODA0MDAwMDAwIzAwMDAwMDAwMDAwMiIsImZvciI6IjQ2ZGJhZDE3ZTM2"
            "NzQ1MTEiLCJvd25lciI6IjIwMjYtMDEtMzFUMTI6MDA6MDkuMDAwMDAwWiNoLTI6"
            "dm9pZCJ9"
        ),
    },
    "ledger_get_system_balance": {"account": "@issuance", "balances": {"points": -45}},
    "loyalty_get_tier_history": {
        "changes": [
            {
                "at": "2026-01-31T12:00:11.000000Z",
                "previous": None,
                "tier": "member",
                "reason": "earn",
                "txn_id": "order:order-1002",
            }
        ],
        "cursor": None,
    },
    "loyalty_get_expiring": {
        "account": "alice",
        "points": 25,
        "lots": [
            {
                "expires": "2028-01-31T12:00:11.000000Z",
                "points": 25,
                "order_id": "order-1002",
                "earned_at": "2026-01-31T12:00:11.000000Z",
            }
        ],
        "cursor": None,
    },
    "loyalty_get_members": {
        "tier": "member",
        "members": [{"account": "alice", "points": 225, "qualifying_points": 45}],
        "accounts": ["alice"],
        "cursor": None,
    },
    "notifications_get_notification": _NOTIFICATION,
    "notifications_notification_history": {
        "notifications": [_NOTIFICATION],
        "cursor": None,
    },
    "notifications_dismiss_notification": {
        "id": "n-1769860813000000-de6f5199d3",
        "account": "alice",
        "type": "TierChanged",
        "payload": {"tier": "gold"},
        "created_at": "2026-01-31T12:00:13.000000Z",
        "status": "dismissed",
        "listed": True,
        "expires_at": None,
        "dismissed_at": "2026-01-31T12:00:14.000000Z",
        "dismissed_by": "user",
        "dismiss_reason": "user",
        "delivery": "delivered",
        "delivered_at": "2026-01-31T12:00:13.000000Z",
        "delivery_error": None,
        "source": "n-1",
    },
    "notifications_dismiss_type": {
        "dismissed": {
            "id": "n-1769860815000000-50339d963f",
            "account": "alice",
            "type": "TierChanged",
            "payload": {"tier": "member"},
            "created_at": "2026-01-31T12:00:15.000000Z",
            "status": "dismissed",
            "listed": True,
            "expires_at": None,
            "dismissed_at": "2026-01-31T12:00:16.000000Z",
            "dismissed_by": "user",
            "dismiss_reason": "user",
            "delivery": "delivered",
            "delivered_at": "2026-01-31T12:00:15.000000Z",
            "delivery_error": None,
            "source": "n-2",
        }
    },
    "ledger_put_low_balance_threshold": {
        "name": "cash",
        "unit": "USD",
        "allow_overdraft": False,
        "low_balance_threshold": 500,
    },
    "notifications_put_rules": _NOTIFICATION_RULES,
    "notifications_get_rules": _NOTIFICATION_RULES,
    "wallet_post_grant": _GRANT_RECORD,
    "wallet_post_held_credit": {
        "hold": {
            "hold_id": "held-1",
            "account": "alice",
            "kind": "credit",
            "status": "active",
            "amount": 9000,
            "amounts": {"cash": 9000},
            "captured": 0,
            "captured_funds": {},
            "deadline": "2030-01-01T00:00:00.000000Z",
            "created_at": "2026-01-31T12:00:20.000000Z",
            "finished_at": None,
        },
        "transaction": _HELD_CREDIT_TRANSACTION,
    },
    "wallet_list_grants": [
        {
            "grant_id": "grant-1",
            "awarded": 500,
            "available": 500,
            "expires_at": "2026-03-02T12:00:19.000000Z",
            "granted_at": "2026-01-31T12:00:19.000000Z",
        }
    ],
    "wallet_list_transactions": {
        "transactions": [
            _HELD_CREDIT_TRANSACTION,
            _GRANT_RECORD,
        ],
        "cursor": (
            "eyJhdCI6IjE3Njk4NjA4MTkwMDAwMDAjIiwiZTpib251cyI6IkUjYm9udXMjMTc2"
            "OTg2MDgxOTAwMDAwMCMwMDAwMDAwMDAwMDEiLCJlOmNhc2giOiJFI2Nhc2gjMTc2"
            "OTg2MDgxMDAwMDAwMCMwMDAwMDAwMDAwMDMiLCJlOnBvaW50cyI6IkUjcG9pbnRz"
            "IzE3Njk4NjA4MTIwMDAwMDAjMDAwMDAwMDAwMDA0IiwiZm9yIjoiNDZkYmFkMTdl"
            "MzY3NDUxMSIsIm93bmVyIjoiMjAyNi0wMS0zMVQxMjowMDowOS4wMDAwMDBaI2gt"
            "Mjp2b2lkIn0"
        ),
    },
    "wallet_post_reconcile": {"actions": [], "refunds_failed": 0},
    "loyalty_run_expire": {
        "days": 1,
        "accounts": 0,
        "lots": 0,
        "points": 0,
        "transactions": 0,
        "warned": 0,
        "warnings_failed": 0,
    },
    "loyalty_run_downgrade": {"members": 0, "downgraded": 0},
    "notifications_ingest_sns": {
        "status": "added",
        "message_id": "m-1",
        "notification": {
            "id": "n-1769860824000000-6f0bdff5a6",
            "account": "alice",
            "type": "TopUp",
            "payload": {"amount": 500},
            "created_at": "2026-01-31T12:00:24.000000Z",
            "status": "unlisted",
            "listed": False,
            "expires_at": None,
            "dismissed_at": None,
            "dismissed_by": None,
            "dismiss_reason": None,
            "delivery": None,
            "delivered_at": None,
            "delivery_error": None,
            "source": "m-1",
        },
        "detail": None,
    },
    "notifications_ingest_stats": {
        "received": 1,
        "added": 1,
        "replayed": 0,
        "confirmed": 0,
        "pending_confirmation": 0,
        "ignored": 0,
        "rejected": 0,
        "reasons": {},
    },
    "billing_ingest_record": _BILLING_RECORD,
    "billing_list_records": {"records": [_BILLING_RECORD], "cursor": None},
    "billing_get_record": _BILLING_RECORD,
    "webhooks_create_subscription": {
        **_SUBSCRIPTION,
        "secret": "whsec_jhrSQsqpC2Cc1UKA3Pn5tE/Y+EvnXD3XjmkOBqFuFPE=",
    },
    "webhooks_disable_subscription": {
        "id": "sub_29e34a4a3667ac2d",
        "program": "shop",
        "url": "https://example.com/hooks",
        "types": ["transaction.posted", "hold.expired"],
        "status": "disabled",
        "created_at": "2026-01-31T12:00:26.000000Z",
        "secret_hint": "…FPE=",
        "description": "order service",
        "disabled_reason": "disabled by an operator",
    },
    "webhooks_enable_subscription": _SUBSCRIPTION,
    "webhooks_list_subscriptions": {"subscriptions": [_SUBSCRIPTION]},
    "webhooks_get_subscription": _SUBSCRIPTION,
    "webhooks_list_deliveries": {
        "deliveries": [
            {
                "subscription": "sub_29e34a4a3667ac2d",
                "position": "0000000000000000000001795840966282737497.000",
                "event_id": "evt_b0af251bd9d4ef14ec210d6daacc1dce",
                "type": "transaction.posted",
                "accounts": ["alice"],
                "status": "delivered",
                "attempts": 1,
                "at": "2026-01-31T12:00:29.000000Z",
                "last_code": 200,
                "last_error": None,
                "last_latency_ms": 12,
                "log": [{"at_us": 1795840966325176, "code": 200, "latency_ms": 12, "error": None}],
            },
            {
                "subscription": "sub_29e34a4a3667ac2d",
                "position": "0000000000000000000001795840966143038446.000",
                "event_id": "evt_babec4a278301347050e9d3e99709073",
                "type": "transaction.posted",
                "accounts": ["alice"],
                "status": "delivered",
                "attempts": 1,
                "at": "2026-01-31T12:00:20.000000Z",
                "last_code": 200,
                "last_error": None,
                "last_latency_ms": 12,
                "log": [{"at_us": 1795840966325156, "code": 200, "latency_ms": 12, "error": None}],
            },
        ],
        "cursor": (
            "eyJmb3IiOiJkMWU0YzU2ODEyM2MxMzhkIiwicGsiOiJXSERMViNzaG9wI3N1Yl8y"
            "OWUzNGE0YTM2NjdhYzJkIiwic2siOiIwMDAwMDAwMDAwMDAwMDAwMDAwMDAxNzk1"
            "ODQwOTY2MTQzMDM4NDQ2LjAwMCJ9"
        ),
    },
    "webhooks_resend_delivery": {
        "subscription": "sub_29e34a4a3667ac2d",
        "position": "0000000000000000000001795840966282737497.000",
        "event_id": "evt_b0af251bd9d4ef14ec210d6daacc1dce",
        "type": "transaction.posted",
        "accounts": ["alice"],
        "status": "pending",
        "attempts": 1,
        "at": "2026-01-31T12:00:29.000000Z",
        "last_code": 200,
        "last_error": None,
        "last_latency_ms": 12,
        "log": [{"at_us": 1795840966325176, "code": 200, "latency_ms": 12, "error": None}],
    },
    "billing_run_reports": {"reports": [_BILLING_REPORT]},
    "billing_list_reports": {"reports": [_BILLING_REPORT], "cursor": None},
    "billing_download_report": {
        "kind": "billing",
        "line_items": [
            {
                "amount": 1999,
                "commission": 100,
                "currency": "USD",
                "late": True,
                "order_id": "o1",
                "partner": "acme",
                "rate": "0.05",
                "record_id": "r1",
                "time": "2026-01-01T12:00:00.000000Z",
            }
        ],
        "program": "shop",
        "records": 1,
        "totals": [
            {"amount": 1999, "commission": 100, "currency": "USD", "partner": "acme", "records": 1}
        ],
        "window": {
            "end": "2026-01-31T13:00:00.000000Z",
            "name": "20260131T120000Z_20260131T130000Z",
            "start": "2026-01-31T12:00:00.000000Z",
        },
    },
}

_MANGLED = re.compile(r"^(?:[A-Za-z0-9_]+__)+(?P<module>[A-Za-z0-9_]+)__(?P<name>[A-Za-z0-9_]+)$")


#: operationId -> the scope its route requires (recorded by :func:`operation_id`)
_SCOPES: dict[str, str] = {}


def operation_id(route: APIRoute) -> str:
    """``<first tag>_<function name>``, e.g. ``ledger_post_transaction``.

    FastAPI calls this once per route while building it, which is where the
    scope the route requires is noted for the document's ``security``.
    """
    tag = str(route.tags[0]) if route.tags else "api"
    name = f"{tag}_{route.name}"
    scope = _route_scope(route)
    if scope is not None:
        _SCOPES[name] = scope
    return name


def _assets_dir() -> Path | None:
    try:
        import fastapi_offline
    except ImportError:  # pragma: no cover - a server install always has it
        return None
    return Path(fastapi_offline.__file__).parent / "static"


def root_path_of(scope: Mapping[str, Any]) -> str:
    """The path the app is served under (``""`` at the root): an API Gateway
    stage's ``/prod`` (``app_root_path``, set by the Lambda handler, which routes
    the path after it) or an ASGI server's ``--root-path``. What the app links to
    (the docs pages' document and assets, the document's server) starts with it."""
    return str(scope.get("app_root_path", scope.get("root_path", ""))).rstrip("/")


def install_docs(app: FastAPI) -> None:
    """``/docs`` and ``/redoc`` served with assets from this app (no CDN), each
    link under the request's root path (:func:`root_path_of`)."""
    assets = _assets_dir()
    if assets is None or app.openapi_url is None:
        return
    app.mount(DOCS_ASSETS, StaticFiles(directory=assets), name="docs-assets")
    openapi_url = app.openapi_url
    title = app.title

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = root_path_of(request.scope)
        return get_swagger_ui_html(
            openapi_url=root + openapi_url,
            title=f"{title} - API docs",
            swagger_js_url=f"{root}{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{root}{DOCS_ASSETS}/favicon.png",
            swagger_ui_parameters={"persistAuthorization": True, "displayRequestDuration": True},
        )

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = root_path_of(request.scope)
        return get_redoc_html(
            openapi_url=root + openapi_url,
            title=f"{title} - API reference",
            redoc_js_url=f"{root}{DOCS_ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{DOCS_ASSETS}/favicon.png",
            with_google_fonts=False,
        )


def _serve_document(app: FastAPI) -> None:
    """FastAPI's route of the document, naming the request's root path as the
    server (FastAPI reads ``root_path`` only, not the stage of an API Gateway
    event), so "Try it out" calls ``/prod/v1/...``; at the root it names none."""
    url = app.openapi_url

    async def document(request: Request) -> JSONResponse:
        schema = app.openapi()
        root = root_path_of(request.scope)
        return JSONResponse({**schema, "servers": [{"url": root}]} if root else schema)

    routes = app.router.routes
    for n, route in enumerate(routes):
        if isinstance(route, Route) and route.path == url:
            routes[n] = Route(url, document, include_in_schema=False)


def install_openapi(app: FastAPI, order: Sequence[tuple[str, str]] = ()) -> None:
    """Replace ``app.openapi`` with the post-processed document (built once);
    ``order`` lists (method, path) pairs in the order the document gives them,
    whatever the order the app matches its routes in."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = FastAPI.openapi(app)
            _order_paths(schema, order)
            _document_security(schema)
            _document_idempotency(schema)
            _document_examples(schema)
            _document_problem_media(schema)
            app.openapi_schema = _clean_schema_names(schema)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    _serve_document(app)


def _order_paths(schema: dict[str, Any], order: Sequence[tuple[str, str]]) -> None:
    """Paths in the order of their first operation in ``order``; any other
    after them, as they came (a path's operations keep the order the app
    matches them in)."""
    rank = {pair: n for n, pair in enumerate(order)}
    last = len(rank)

    def first(item: tuple[str, dict[str, Any]]) -> int:
        path, operations = item
        return min((rank.get((m.upper(), path), last) for m in operations), default=last)

    schema["paths"] = dict(sorted(schema.get("paths", {}).items(), key=first))


def _route_scope(route: APIRoute) -> str | None:
    """The scope of the ``require(...)`` dependency among the route's parameters."""
    try:
        hints = typing.get_type_hints(route.endpoint, include_extras=True)
    except (NameError, TypeError):
        hints = {}
    markers: list[Any] = [m for h in hints.values() for m in getattr(h, "__metadata__", ())]
    markers += [p.default for p in inspect.signature(route.endpoint).parameters.values()]
    markers += list(getattr(route, "dependencies", None) or ())
    for marker in markers:
        scope = getattr(getattr(marker, "dependency", None), SCOPE_ATTRIBUTE, None)
        if isinstance(scope, str):
            return scope
    return None


def _document_security(schema: dict[str, Any]) -> None:
    components = schema.setdefault("components", {})
    components.setdefault("securitySchemes", {})[SECURITY_SCHEME] = {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "tb_<key id>_<secret>",
        "description": "An API key of one program "
        "(`tallybook keys create --program P --scopes read,write`). "
        "Scopes: `read` (GET), `write` (POST and changes), `admin` (everything).",
    }
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            scope = _SCOPES.get(str(operation.get("operationId")))
            if scope is None:
                continue
            operation["security"] = [{SECURITY_SCHEME: []}]
            note = f"Needs an API key with the `{scope}` scope" + (
                "." if scope == "admin" else " (or `admin`)."
            )
            existing = operation.get("description")
            operation["description"] = f"{existing}\n\n{note}" if existing else note


def _document_idempotency(schema: dict[str, Any]) -> None:
    """State the optional ``Idempotency-Key`` on every POST under ``/v1`` that
    does not declare it, since the idempotency middleware honours it there."""
    for path, operations in schema.get("paths", {}).items():
        post = operations.get("post")
        if not path.startswith("/v1/") or post is None:
            continue
        params = post.setdefault("parameters", [])
        if not any(
            p.get("in") == "header" and str(p.get("name", "")).lower() == "idempotency-key"
            for p in params
        ):
            params.append(dict(IDEMPOTENCY_PARAMETER))


def _document_examples(schema: dict[str, Any]) -> None:
    """Put each request body's example (:data:`REQUEST_EXAMPLES`) on its media type,
    and each answer's (:data:`RESPONSE_EXAMPLES`) on its 2xx JSON response."""
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            answer = RESPONSE_EXAMPLES.get(str(operation.get("operationId")))
            for code, response in operation.get("responses", {}).items():
                media = response.get("content", {}).get("application/json")
                if answer is not None and code.startswith("2") and media is not None:
                    media["example"] = answer
            example = REQUEST_EXAMPLES.get(str(operation.get("operationId")))
            content = operation.get("requestBody", {}).get("content", {})
            if example is None:
                continue
            if "application/json" in example:  # one example per media type
                for media_type, value in example.items():
                    content[media_type]["example"] = value
            else:
                content["application/json"]["example"] = example


def _document_problem_media(schema: dict[str, Any]) -> None:
    """Keep only ``application/problem+json`` on each 4xx/5xx answer: the
    ``model=Problem`` of :func:`problem_responses` also lists ``application/json``,
    which the server never sends for an error."""
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            for code, response in operation.get("responses", {}).items():
                content = response.get("content", {})
                if code[:1] in "45" and PROBLEM_MEDIA_TYPE in content:
                    response["content"] = {PROBLEM_MEDIA_TYPE: content[PROBLEM_MEDIA_TYPE]}


def _clean_name(mangled: str) -> str:
    match = _MANGLED.match(mangled)
    if match is None:
        return mangled
    area = match.group("module")
    return "".join(part.capitalize() for part in area.split("_")) + match.group("name")


def _clean_schema_names(schema: dict[str, Any]) -> dict[str, Any]:
    """Rename pydantic's module-qualified component names (see the module doc)."""
    components = schema.get("components", {}).get("schemas", {})
    taken = set(components)
    renames: dict[str, str] = {}
    for name in sorted(components):
        clean = _clean_name(name)
        if clean != name and clean not in taken:
            renames[name] = clean
            taken.add(clean)
    if not renames:
        return schema
    for old, new in renames.items():  # generators name their classes after the title
        components[old]["title"] = new
    schema["components"]["schemas"] = {renames.get(k, k): v for k, v in components.items()}
    prefix = "#/components/schemas/"
    refs = {prefix + old: prefix + new for old, new in renames.items()}
    result: dict[str, Any] = _rewrite_refs(schema, refs)
    return result


def _rewrite_refs(node: Any, refs: dict[str, str]) -> Any:
    if isinstance(node, dict):
        # "$ref" values and discriminator mappings name components the same way
        return {k: _rewrite_refs(v, refs) for k, v in node.items()}
    if isinstance(node, list):
        return [_rewrite_refs(v, refs) for v in node]
    if isinstance(node, str):
        return refs.get(node, node)
    return node
