"""The API function behind each of the front doors Mangum serves: API Gateway REST
(payload 1.0), HTTP API (2.0) and an ALB target group. A REST API passes a body
marked ``isBase64Encoded`` to the client undecoded unless it lists the content
type in its ``binaryMediaTypes``, so the function must return text as text:
JSON, problem+json, HTML, CSV."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pytest

from tallybook import lambda_handler
from tallybook.ledger import Ledger

HOST = "abc123.execute-api.eu-west-1.amazonaws.com"
Event = Callable[..., dict[str, Any]]


def _multi(query: list[tuple[str, str]] | None) -> dict[str, list[str]]:
    """Query pairs as the multi-value map REST and ALB events carry."""
    multi: dict[str, list[str]] = {}
    for name, value in query or []:
        multi.setdefault(name, []).append(value)
    return multi


def rest_event(
    method: str,
    path: str,
    headers: dict[str, str],
    body: str | None = None,
    query: list[tuple[str, str]] | None = None,
) -> dict[str, Any]:
    """API Gateway REST API, Lambda proxy integration (payload format 1.0)."""
    multi = _multi(query)
    return {
        "resource": "/{proxy+}",
        "path": path,
        "httpMethod": method,
        "headers": {"Host": HOST, **headers},
        "multiValueHeaders": {"Host": [HOST], **{k: [v] for k, v in headers.items()}},
        "queryStringParameters": {k: v[-1] for k, v in multi.items()} or None,
        "multiValueQueryStringParameters": multi or None,
        "pathParameters": {"proxy": path.lstrip("/")},
        "stageVariables": None,
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "abc123",
            "httpMethod": method,
            "identity": {"sourceIp": "203.0.113.7", "userAgent": "pytest"},
            "path": f"/prod{path}",
            "protocol": "HTTP/1.1",
            "requestId": "c6af9ac6-7b61-11e6-9a41-93e8deadbeef",
            "resourcePath": "/{proxy+}",
            "stage": "prod",
        },
        "body": body,
        "isBase64Encoded": False,
    }


def http_api_event(
    method: str,
    path: str,
    headers: dict[str, str],
    body: str | None = None,
    query: list[tuple[str, str]] | None = None,
) -> dict[str, Any]:
    """API Gateway HTTP API (payload format 2.0)."""
    pairs = query or []
    return {
        "version": "2.0",
        "routeKey": "ANY /{proxy+}",
        "rawPath": path,
        "rawQueryString": "&".join(f"{k}={v}" for k, v in pairs),
        "headers": {"host": HOST, **{k.lower(): v for k, v in headers.items()}},
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "abc123",
            "domainName": HOST,
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "203.0.113.7",
                "userAgent": "pytest",
            },
            "requestId": "JKJaXmPLvHcESHA=",
            "routeKey": "ANY /{proxy+}",
            "stage": "$default",
            "time": "23/Nov/2026:12:00:00 +0000",
            "timeEpoch": 1795435200000,
        },
        "pathParameters": {"proxy": path.lstrip("/")},
        "body": body,
        "isBase64Encoded": False,
    }


def alb_event(
    method: str,
    path: str,
    headers: dict[str, str],
    body: str | None = None,
    query: list[tuple[str, str]] | None = None,
) -> dict[str, Any]:
    """An ALB target group with multi-value headers on."""
    multi = _multi(query)
    arn = "arn:aws:elasticloadbalancing:eu-west-1:123456789012:targetgroup/tallybook/6d0ecf83"
    return {
        "requestContext": {"elb": {"targetGroupArn": arn}},
        "httpMethod": method,
        "path": path,
        "multiValueQueryStringParameters": multi,
        "multiValueHeaders": {
            "host": ["tallybook.example.com"],
            **{k.lower(): [v] for k, v in headers.items()},
        },
        "body": body or "",
        "isBase64Encoded": False,
    }


EVENTS = {"rest": rest_event, "http-api": http_api_event, "alb": alb_event}


def header(response: dict[str, Any], name: str) -> str:
    for key, value in (response.get("headers") or {}).items():
        if key.lower() == name:
            return str(value)
    for key, values in (response.get("multiValueHeaders") or {}).items():
        if key.lower() == name:
            return str(values[0])
    return ""


@pytest.mark.parametrize("engine", ["sqlite"])
@pytest.mark.parametrize("kind", EVENTS)
def test_problem_json_errors_come_back_as_text(api: str, kind: str) -> None:
    event = EVENTS[kind]
    auth = {"Authorization": f"Bearer {api}", "Content-Type": "application/json"}
    cases = [
        (event("GET", "/v1/nowhere", auth), 404, "not-found"),
        (event("GET", "/v1/program", {}), 401, "unauthorized"),
        (
            event("POST", "/v1/transactions", {**auth, "Idempotency-Key": "m-1"}, '{"type": "cr'),
            400,
            "malformed-json",
        ),
        (
            event(
                "GET", "/v1/accounts/ann/entries", auth, query=[("fund", "points"), ("limit", "0")]
            ),
            422,
            "validation",
        ),
    ]
    for request, status, code in cases:
        response = lambda_handler.handler(request, None)
        assert response["statusCode"] == status, response
        assert header(response, "content-type") == "application/problem+json"
        assert not response.get("isBase64Encoded"), response
        problem = json.loads(response["body"])
        assert problem["status"] == status
        assert problem["type"].endswith(f"/{code}")


@pytest.mark.parametrize("engine", ["sqlite"])
@pytest.mark.parametrize("kind", EVENTS)
def test_credit_with_a_base64_body_then_read_with_repeated_query_params(
    api: str, kind: str
) -> None:
    event = EVENTS[kind]
    auth = {"Authorization": f"Bearer {api}", "Content-Type": "application/json"}
    opened = lambda_handler.handler(
        event("POST", "/v1/accounts", {**auth, "Idempotency-Key": "o-1"}, '{"account": "ann"}'),
        None,
    )
    assert opened["statusCode"] == 201, opened
    credit = json.dumps({"type": "credit", "account": "ann", "fund": "points", "amount": 250})
    request = event("POST", "/v1/transactions", {**auth, "Idempotency-Key": "c-1"})
    request["body"] = base64.b64encode(credit.encode()).decode()
    request["isBase64Encoded"] = True
    posted = lambda_handler.handler(request, None)
    assert posted["statusCode"] == 201, posted
    assert not posted.get("isBase64Encoded")
    assert json.loads(posted["body"])["id"] == "c-1"
    replay = lambda_handler.handler(request, None)
    assert replay["statusCode"] == 201
    assert header(replay, "idempotent-replayed") == "true"
    # a repeated parameter is refused, as in the ASGI app (which value counts
    # would be a guess; the last one used to)
    page = lambda_handler.handler(
        event(
            "GET",
            "/v1/accounts/ann/entries",
            auth,
            query=[("fund", "cash"), ("fund", "points"), ("limit", "5")],
        ),
        None,
    )
    assert page["statusCode"] == 422, page
    assert json.loads(page["body"])["errors"][0]["loc"] == ["query", "fund"]
    page = lambda_handler.handler(
        event("GET", "/v1/accounts/ann/entries", auth, query=[("fund", "points"), ("limit", "5")]),
        None,
    )
    assert page["statusCode"] == 200, page
    assert [e["amount"] for e in json.loads(page["body"])["entries"]] == [250]


@pytest.mark.parametrize("engine", ["sqlite"])
@pytest.mark.parametrize("kind", EVENTS)
def test_a_repeated_authorization_header_is_a_401(ledger: Ledger, api: str, kind: str) -> None:
    """Two Authorization headers (REST and ALB keep both; an HTTP API joins them
    with a comma) are refused as from ``tallybook serve``, never run as the first."""
    _, reader = ledger.keys.create("shop", "read", None)
    request = EVENTS[kind]("GET", "/v1/program", {"Authorization": f"Bearer {api}"})
    if kind == "http-api":
        request["headers"]["authorization"] = f"Bearer {api},Bearer {reader}"
    else:
        name = "Authorization" if kind == "rest" else "authorization"
        request["multiValueHeaders"][name] = [f"Bearer {api}", f"Bearer {reader}"]
    response = lambda_handler.handler(request, None)
    assert response["statusCode"] == 401, response
    assert "more than once" in json.loads(response["body"])["detail"]


@pytest.mark.parametrize("engine", ["sqlite"])
@pytest.mark.parametrize("kind", EVENTS)
def test_a_body_giving_a_key_twice_is_a_422_and_nothing_is_posted(api: str, kind: str) -> None:
    event = EVENTS[kind]
    auth = {"Authorization": f"Bearer {api}", "Content-Type": "application/json"}
    opened = lambda_handler.handler(
        event("POST", "/v1/accounts", {**auth, "Idempotency-Key": "o-1"}, '{"account": "ann"}'),
        None,
    )
    assert opened["statusCode"] == 201, opened
    body = '{"type": "credit", "account": "ann", "fund": "points", "amount": 1, "amount": 900}'
    posted = lambda_handler.handler(
        event("POST", "/v1/transactions", {**auth, "Idempotency-Key": "c-1"}, body), None
    )
    assert posted["statusCode"] == 422, posted
    assert header(posted, "content-type") == "application/problem+json"
    assert json.loads(posted["body"])["errors"][0]["loc"] == ["body", "amount"]
    read = lambda_handler.handler(event("GET", "/v1/transactions/c-1", auth), None)
    assert read["statusCode"] == 404, read


@pytest.mark.parametrize("engine", ["sqlite"])
@pytest.mark.parametrize("kind", EVENTS)
def test_a_body_marked_base64_that_is_not_is_a_400_and_nothing_runs(api: str, kind: str) -> None:
    event = EVENTS[kind]
    auth = {"Authorization": f"Bearer {api}", "Content-Type": "application/json"}
    for body in ("!!!not base64***", base64.b64encode(b'{"account": "ann"}').decode() + "x"):
        request = event("POST", "/v1/accounts", {**auth, "Idempotency-Key": "o-1"}, body)
        request["isBase64Encoded"] = True
        response = lambda_handler.handler(request, None)
        assert response["statusCode"] == 400, response
        assert header(response, "content-type") == "application/problem+json"
        assert not response.get("isBase64Encoded")
        problem = json.loads(response["body"])
        assert problem["type"].endswith("/bad-request")
        assert "base64" in problem["detail"]
        assert problem["request_id"] == header(response, "x-request-id")
    read = lambda_handler.handler(event("GET", "/v1/accounts/ann", auth), None)
    assert read["statusCode"] == 404, read


def _without_request_context(kind: str) -> dict[str, Any]:
    request = EVENTS[kind]("GET", "/v1/program", {})
    del request["requestContext"]
    return request


def _http_api_without_method() -> dict[str, Any]:
    request = http_api_event("GET", "/v1/program", {})
    del request["requestContext"]["http"]
    return request


def _with(kind: str, **fields: Any) -> dict[str, Any]:
    return {**EVENTS[kind]("GET", "/v1/program", {}), **fields}


@pytest.mark.parametrize("engine", ["sqlite"])
@pytest.mark.parametrize(
    "request_event",
    [
        pytest.param({}, id="empty"),
        pytest.param({"hello": "world"}, id="not-http"),
        pytest.param(["GET", "/v1/program"], id="a-list"),
        pytest.param(_without_request_context("rest"), id="rest-no-context"),
        pytest.param(_without_request_context("http-api"), id="http-api-no-context"),
        pytest.param(_http_api_without_method(), id="http-api-no-method"),
        pytest.param(_with("http-api", headers=None), id="http-api-headers-null"),
        pytest.param(_with("rest", body=5), id="rest-body-a-number"),
        pytest.param(_with("alb", httpMethod=None), id="alb-no-method"),
        # only characters outside base64's alphabet: a lenient decoder reads no body
        pytest.param(_with("rest", body="!!!", isBase64Encoded=True), id="rest-body-not-base64"),
    ],
)
def test_an_event_that_is_not_a_readable_request_is_a_400(
    api: str, request_event: dict[str, Any]
) -> None:
    response = lambda_handler.handler(request_event, None)
    assert response["statusCode"] == 400, response
    assert header(response, "content-type") == "application/problem+json"
    problem = json.loads(response["body"])
    assert problem["status"] == 400
    assert problem["type"].endswith("/bad-request")


@pytest.mark.parametrize("engine", ["sqlite"])
def test_an_alb_refusal_keeps_to_multi_value_headers(api: str) -> None:
    request = alb_event("POST", "/v1/accounts", {"Content-Type": "application/json"}, "abcde")
    request["isBase64Encoded"] = True
    response = lambda_handler.handler(request, None)
    assert response["statusCode"] == 400
    assert "headers" not in response
    assert response["multiValueHeaders"]["content-type"] == ["application/problem+json"]


@pytest.mark.parametrize("engine", ["sqlite"])
@pytest.mark.parametrize("kind", EVENTS)
def test_an_answer_without_a_body_has_no_content_type(ledger: Ledger, api: str, kind: str) -> None:
    event = EVENTS[kind]
    _, admin = ledger.keys.create("shop", "admin", None)
    auth = {"Authorization": f"Bearer {admin}", "Content-Type": "application/json"}
    hook = json.dumps({"url": "https://example.com/hooks"})
    created = lambda_handler.handler(
        event("POST", "/v1/webhooks", {**auth, "Idempotency-Key": "w-1"}, hook), None
    )
    assert created["statusCode"] == 201, created
    sub_id = json.loads(created["body"])["id"]
    deleted = lambda_handler.handler(event("DELETE", f"/v1/webhooks/{sub_id}", auth), None)
    assert deleted["statusCode"] == 204, deleted
    assert deleted["body"] == ""
    assert header(deleted, "content-type") == ""
    home = lambda_handler.handler(event("GET", "/admin", {}), None)
    assert home["statusCode"] == 303, home
    assert header(home, "content-type") == ""
    # a HEAD answers without a body, with the GET's type
    head = lambda_handler.handler(event("HEAD", "/healthz", {}), None)
    assert head["statusCode"] == 200, head
    assert not head["body"]
    assert header(head, "content-type") == "application/json"


@pytest.mark.parametrize("engine", ["sqlite"])
@pytest.mark.parametrize("kind", EVENTS)
def test_a_base64_body_is_decoded_once(
    api: str, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The handler decoded a body marked ``isBase64Encoded`` three times (twice to
    check it, once more in Mangum): it now checks it without decoding."""
    event = EVENTS[kind]
    auth = {"Authorization": f"Bearer {api}", "Content-Type": "application/json"}
    decoded: list[object] = []
    decode = base64.b64decode

    def counting(s: Any, *args: Any, **kwargs: Any) -> bytes:
        decoded.append(s)
        return decode(s, *args, **kwargs)

    monkeypatch.setattr(base64, "b64decode", counting)
    request = event("POST", "/v1/accounts", {**auth, "Idempotency-Key": "o-1"})
    request["body"] = base64.b64encode(b'{"account": "ann"}').decode()
    request["isBase64Encoded"] = True
    response = lambda_handler.handler(request, None)
    assert response["statusCode"] == 201, response
    assert decoded == [request["body"]]


@pytest.mark.parametrize(
    "body",
    [
        "",
        "YQ==",
        "YWI=",
        "YWJj",
        "YWJjZA==",
        "YQ",
        "YQ=",
        "Y===",
        "YQ==YQ==",
        "YW Jj",
        "!!!!",
        "YWJj\n",
        "-_-_",
        "YWJjZA=="[:-1],
        "=" * 4,
    ],
)
@pytest.mark.parametrize("engine", ["sqlite"])
def test_a_body_marked_base64_is_refused_exactly_when_strict_decoding_fails(
    api: str, body: str
) -> None:
    """The check that replaced decoding agrees with ``b64decode(validate=True)``."""
    request = rest_event("POST", "/v1/accounts", {"Content-Type": "application/json"}, body)
    request["isBase64Encoded"] = True
    try:
        base64.b64decode(body, validate=True)
        valid = True
    except ValueError:
        valid = False
    refused = lambda_handler._unreadable(lambda_handler._get_adapter(), request, None)
    assert (refused is None) == valid, (body, refused)


@pytest.mark.parametrize("engine", ["sqlite"])
def test_a_text_body_that_is_not_text_is_a_400_saying_so(api: str) -> None:
    """A lone surrogate in a body not marked base64 was called "marked
    isBase64Encoded but is not valid base64"."""
    auth = {"Authorization": f"Bearer {api}", "Content-Type": "application/json"}
    request = rest_event("POST", "/v1/accounts", {**auth, "Idempotency-Key": "o-1"}, '"\ud800"')
    response = lambda_handler.handler(request, None)
    assert response["statusCode"] == 400, response
    assert json.loads(response["body"])["detail"] == "the event's body is not valid text"
