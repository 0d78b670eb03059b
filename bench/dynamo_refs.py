"""Baselines (a) and (b): the two reference designs, on the boto3 low-level client.

(a) "active flag": every entry is an item; the latest carries ``active``. An
    earn is a strongly consistent query (limit 1) for the latest entry, then a
    transaction that puts the new active entry and removes the flag from the
    previous one.
(b) "history inside one item": one item per account holds the balance and a
    list of entries. An earn gets the item, then updates it, appending to the
    list, on condition ``lastUpdated`` is unchanged.

Both count requests, and capacity units priced by AWS's rules as the
product's are (:mod:`tallybook.store.capacity`): reads, puts and transactions
from the items read and written (DynamoDB Local misreports transactions);
a single ``UpdateItem`` as DynamoDB Local reports it, which is exact for a
single-item write (``tests/store/test_meter.py``) and needs no evaluation of
its update expression here.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import boto3

from tallybook.store.capacity import (
    TRANSACTION_FACTOR,
    item_size,
    query_units,
    read_units,
    write_units,
)
from tallybook.store.dynamodb.values import to_item
from tallybook.store.port import Item


def _key(item: Item) -> tuple[str, str]:
    return str(item["pk"]), str(item["sk"])


@dataclass
class Counter:
    requests: int = 0
    read_units: float = 0.0
    write_units: float = 0.0

    def reset(self) -> None:
        self.requests, self.read_units, self.write_units = 0, 0.0, 0.0


class RefClient:
    """A boto3 client on a table of its own, counting what every call consumes."""

    def __init__(self, endpoint: str) -> None:
        self.client: Any = boto3.client(
            "dynamodb",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="local",
            aws_secret_access_key="local",  # DynamoDB Local takes any credentials
        )
        self.table = f"bench-ref-{uuid.uuid4().hex[:10]}"
        self.counter = Counter()
        #: item images seen, to price writes on the larger of before and after
        self.images: dict[tuple[str, str], Item] = {}
        self.client.create_table(
            TableName=self.table,
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        self.client.get_waiter("table_exists").wait(TableName=self.table)

    def call(self, operation: str, **kwargs: Any) -> Any:
        if operation != "transact_write_items":
            kwargs.setdefault("TableName", self.table)
        response = getattr(self.client, operation)(ReturnConsumedCapacity="TOTAL", **kwargs)
        self.counter.requests += 1
        consistent = bool(kwargs.get("ConsistentRead"))
        if operation == "get_item":
            item = to_item(response["Item"]) if "Item" in response else None
            self._seen(item)
            self.counter.read_units += read_units(item_size(item), consistent=consistent)
        elif operation == "query":
            items = [to_item(raw) for raw in response.get("Items", [])]
            for item in items:
                self._seen(item)
            self.counter.read_units += query_units(items, consistent=consistent)
        elif operation == "put_item":
            self.counter.write_units += self._write(to_item(kwargs["Item"]), factor=1)
        elif operation == "transact_write_items":
            for action in kwargs["TransactItems"]:
                if "Put" in action:
                    after = to_item(action["Put"]["Item"])
                    self.counter.write_units += self._write(after, factor=TRANSACTION_FACTOR)
                else:
                    (body,) = action.values()
                    before = self.images.get(_key(to_item(body["Key"])))
                    units = write_units(item_size(before)) * TRANSACTION_FACTOR
                    self.counter.write_units += units
        else:
            consumed = response.get("ConsumedCapacity") or {}
            self.counter.write_units += float(consumed.get("CapacityUnits") or 0.0)
        return response

    def _seen(self, item: Item | None) -> None:
        if item is not None:
            self.images[_key(item)] = item

    def _write(self, after: Item, factor: int) -> float:
        before = self.images.get(_key(after))
        self.images[_key(after)] = after
        return float(write_units(max(item_size(before), item_size(after))) * factor)

    def drop(self) -> None:
        self.client.delete_table(TableName=self.table)
        self.client.close()


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _entry(txn_id: str, kind: str, amount: int, balance: int, held: int) -> dict[str, Any]:
    """The attributes of one history entry, as the product's entry carries them."""
    return {
        "txn_id": {"S": txn_id},
        "type": {"S": kind},
        "amount": {"N": str(amount)},
        "balance": {"N": str(balance)},
        "held": {"N": str(held)},
        "created_at": {"S": _now()},
    }


class ActiveFlag:
    """Reference design (a)."""

    def __init__(self, ref: RefClient) -> None:
        self.ref = ref

    def _latest(self, account: str) -> dict[str, Any] | None:
        page = self.ref.call(
            "query",
            KeyConditionExpression="pk = :p AND begins_with(sk, :e)",
            ExpressionAttributeValues={":p": {"S": f"A#{account}"}, ":e": {"S": "E#"}},
            ScanIndexForward=False,
            Limit=1,
            ConsistentRead=True,
        )
        items: list[dict[str, Any]] = page["Items"]
        return items[0] if items else None

    def _post(
        self, account: str, txn_id: str, kind: str, amount: int, held: int, extra: list[Any]
    ) -> None:
        prev = self._latest(account)
        seq = int(prev["seq"]["N"]) if prev else 0
        balance = int(prev["balance"]["N"]) if prev else 0
        prev_held = int(prev["held"]["N"]) if prev else 0
        if balance + amount - prev_held - held < 0:
            raise ValueError("insufficient funds")
        item = {
            "pk": {"S": f"A#{account}"},
            "sk": {"S": f"E#{seq + 1:012d}"},
            "seq": {"N": str(seq + 1)},
            "active": {"BOOL": True},
            **_entry(txn_id, kind, amount, balance + amount, prev_held + held),
        }
        put = {"TableName": self.ref.table, "Item": item}
        actions: list[Any] = [{"Put": {**put, "ConditionExpression": "attribute_not_exists(pk)"}}]
        if prev is not None:
            key = {"pk": prev["pk"], "sk": prev["sk"]}
            actions.append(
                {
                    "Update": {
                        "TableName": self.ref.table,
                        "Key": key,
                        "UpdateExpression": "REMOVE active",
                        "ConditionExpression": "attribute_exists(active)",
                    }
                }
            )
        self.ref.call("transact_write_items", TransactItems=actions + extra)

    def earn(self, account: str, points: int, txn_id: str) -> None:
        self._post(account, txn_id, "earn", points, 0, [])

    def redeem(self, account: str, points: int, txn_id: str) -> None:
        self._post(account, txn_id, "redeem", -points, 0, [])

    def balance(self, account: str) -> int:
        latest = self._latest(account)
        return int(latest["balance"]["N"]) if latest else 0

    def authorize(self, account: str, amount: int, hold_id: str) -> None:
        hold = {
            "pk": {"S": f"A#{account}"},
            "sk": {"S": f"H#{hold_id}"},
            "amount": {"N": str(amount)},
            "status": {"S": "active"},
        }
        put = {"Put": {"TableName": self.ref.table, "Item": hold}}
        self._post(account, hold_id, "authorize", 0, amount, [put])

    def capture(self, account: str, hold_id: str) -> None:
        key = {"pk": {"S": f"A#{account}"}, "sk": {"S": f"H#{hold_id}"}}
        hold = self.ref.call("get_item", Key=key, ConsistentRead=True)["Item"]
        amount = int(hold["amount"]["N"])
        settle = {
            "Update": {
                "TableName": self.ref.table,
                "Key": key,
                "UpdateExpression": "SET #s = :c",
                "ConditionExpression": "#s = :a",
                "ExpressionAttributeNames": {"#s": "status"},
                "ExpressionAttributeValues": {":c": {"S": "captured"}, ":a": {"S": "active"}},
            }
        }
        self._post(account, f"{hold_id}-capture", "capture", -amount, -amount, [settle])


class HistoryInItem:
    """Reference design (b)."""

    def __init__(self, ref: RefClient) -> None:
        self.ref = ref

    def _key(self, account: str) -> dict[str, Any]:
        return {"pk": {"S": f"A#{account}"}, "sk": {"S": "STATE"}}

    def _get(self, account: str) -> dict[str, Any] | None:
        item: dict[str, Any] | None = self.ref.call(
            "get_item", Key=self._key(account), ConsistentRead=True
        ).get("Item")
        return item

    def fill(self, account: str, entries: int) -> None:
        """An account whose item already holds ``entries`` entries (one PutItem)."""
        history = [{"M": _entry(f"seed-{i}", "earn", 1, i + 1, 0)} for i in range(entries)]
        item = {
            **self._key(account),
            "balance": {"N": str(entries)},
            "held": {"N": "0"},
            "holds": {"M": {}},
            "lastUpdated": {"S": _now()},
            "history": {"L": history},
        }
        self.ref.call("put_item", Item=item)

    def _append(
        self,
        account: str,
        txn_id: str,
        kind: str,
        amount: int,
        held: int,
        hold: str | None,
        item: dict[str, Any] | None = None,
    ) -> None:
        item = item or self._get(account)
        if item is None:
            self.fill(account, 0)
            item = self._get(account)
            assert item is not None
        balance = int(item["balance"]["N"]) + amount
        new_held = int(item["held"]["N"]) + held
        if balance - new_held < 0:
            raise ValueError("insufficient funds")
        sets = "balance = :b, held = :h, lastUpdated = :now, history = list_append(history, :e)"
        values: dict[str, Any] = {
            ":b": {"N": str(balance)},
            ":h": {"N": str(new_held)},
            ":now": {"S": _now()},
            ":prev": item["lastUpdated"],
            ":e": {"L": [{"M": _entry(txn_id, kind, amount, balance, new_held)}]},
        }
        names: dict[str, str] = {}
        if hold is not None:
            sets += ", holds.#hold = :hs"
            names["#hold"] = hold
            values[":hs"] = {"N": str(held)} if held > 0 else {"N": "0"}
        self.ref.call(
            "update_item",
            Key=self._key(account),
            UpdateExpression=f"SET {sets}",
            ConditionExpression="lastUpdated = :prev",
            ExpressionAttributeValues=values,
            **({"ExpressionAttributeNames": names} if names else {}),
        )

    def earn(self, account: str, points: int, txn_id: str) -> None:
        self._append(account, txn_id, "earn", points, 0, None)

    def redeem(self, account: str, points: int, txn_id: str) -> None:
        self._append(account, txn_id, "redeem", -points, 0, None)

    def balance(self, account: str) -> int:
        item = self._get(account)
        return int(item["balance"]["N"]) if item else 0

    def authorize(self, account: str, amount: int, hold_id: str) -> None:
        self._append(account, hold_id, "authorize", 0, amount, hold_id)

    def capture(self, account: str, hold_id: str) -> None:
        item = self._get(account)
        assert item is not None
        amount = int(item["holds"]["M"][hold_id]["N"])
        self._append(account, f"{hold_id}-capture", "capture", -amount, -amount, hold_id, item)
