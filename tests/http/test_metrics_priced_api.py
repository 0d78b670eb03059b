"""/metrics carries the capacity the DynamoDB engine priced by AWS's rules."""

from __future__ import annotations

from typing import Any


def _sample(text: str, name: str, operation: str) -> float:
    prefix = f'{name}{{operation="{operation}"}} '
    (line,) = [line for line in text.splitlines() if line.startswith(prefix)]
    return float(line.removeprefix(prefix))


def test_priced_capacity_families(
    app_client: Any, engine: str, idem: Any, open_account: Any, admin_headers: Any
) -> None:
    open_account("alice")
    body = {"type": "credit", "account": "alice", "fund": "points", "amount": 5}
    assert app_client.post("/v1/transactions", json=body, headers=idem()).status_code == 201
    text = app_client.get("/metrics", headers=admin_headers).text
    for family in ("read_capacity_units", "write_capacity_units", "index_write_capacity_units",
                   "estimated_writes"):  # fmt: skip
        assert f"# TYPE tallybook_store_priced_{family}_total counter" in text
    wcu = _sample(text, "tallybook_store_priced_write_capacity_units_total", "transact_write")
    rcu = _sample(text, "tallybook_store_priced_read_capacity_units_total", "get")
    # the DynamoDB engine prices every request; the SQLite engine is not metered
    if engine == "dynamodb":
        assert wcu >= 4
        assert rcu >= 1
    else:
        assert (wcu, rcu) == (0, 0)
