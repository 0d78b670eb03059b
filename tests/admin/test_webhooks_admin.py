"""Webhooks on the admin page: subscriptions, deliveries per subscription and
per account, and resend (a CSRF-checked form)."""

from __future__ import annotations

import re
from datetime import datetime

import pytest

from tallybook.ledger import Ledger

from .conftest import AdminClient
from .seeding import Seeded


def test_an_agent_sees_deliveries_and_resends_one(
    admin: AdminClient, seeded: Seeded, ledger: Ledger
) -> None:
    sub = ledger.webhooks.create("shop", "http://127.0.0.1:9/h", allow_http=True)
    sid = sub.subscription.id
    ledger.transactions.credit("shop", seeded.account, "cash", 100, txn_id="wh-admin-1")
    ledger.webhooks.worker().run_once()  # nothing listens on port 9: failed attempts
    admin.login(seeded.admin_secret)
    page = admin.client.get("/admin/webhooks").text
    assert sid in page
    assert "http://127.0.0.1:9/h" in page
    assert sub.secret not in page
    listed = admin.client.get(f"/admin/webhooks/{sid}?account={seeded.account}")
    assert listed.status_code == 200
    assert "transaction.posted" in listed.text
    assert "Connection" in listed.text  # the last attempt's error
    # the event's time reads like every other time on the pages, not as ISO text
    first = ledger.webhooks.deliveries("shop", sid, limit=1)[0][0]
    assert first.at.endswith("Z")
    assert first.at not in listed.text
    shown = datetime.fromisoformat(first.at.replace("Z", "+00:00")).strftime("%Y-%m-%d %H:%M:%S")
    assert f"{shown} UTC" in listed.text
    deliveries, _ = ledger.webhooks.deliveries("shop", sid, limit=200)
    mine = next(d for d in deliveries if seeded.account in d.accounts)
    r = admin.post(f"/admin/webhooks/{sid}/deliveries/{mine.position}/resend")
    assert r.status_code == 303
    assert r.headers["location"] == f"/admin/webhooks/{sid}"
    nobody = admin.client.get(f"/admin/webhooks/{sid}?account=nobody").text
    assert "No delivery on this page for nobody" in nobody


def test_resend_needs_the_form_token(admin: AdminClient, seeded: Seeded, ledger: Ledger) -> None:
    sub = ledger.webhooks.create("shop", "https://example.com/h")
    admin.login(seeded.admin_secret)
    r = admin.client.post(
        f"/admin/webhooks/{sub.subscription.id}/deliveries/{'0' * 40}.000/resend",
        data={"csrf": "forged"},
        follow_redirects=False,
    )
    assert r.status_code == 403
    assert admin.client.get("/admin/webhooks/nope").status_code == 404


@pytest.mark.parametrize("engine", ["sqlite"])
def test_an_unknown_subscription_or_account_is_a_titled_error_page(
    admin: AdminClient, seeded: Seeded, ledger: Ledger
) -> None:
    admin.login(seeded.admin_secret)
    for query in ("nope", "nope?account=%3Cb%3E"):
        r = admin.client.get(f"/admin/webhooks/{query}")
        assert r.status_code == 404
        assert re.search(r"<h1>Webhook deliveries</h1>", r.text), query
        assert "<title>Webhook deliveries · tallybook</title>" in r.text
    sub = ledger.webhooks.create("shop", "https://example.com/h")
    bad = admin.client.get(f"/admin/webhooks/{sub.subscription.id}?account=%3Cb%3E")
    assert bad.status_code == 422
    assert "<h1>Webhook deliveries</h1>" in bad.text
    assert "&lt;b&gt;" in bad.text
