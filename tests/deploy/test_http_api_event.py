"""The API function as the SAM stack wires it: API Gateway HTTP API events (payload
format 2.0, the ``$default`` stage) through ``tallybook.lambda_handler.handler``."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

import tallybook
from tallybook import lambda_handler
from tallybook.ledger import Ledger

from .test_lambda_events import http_api_event, rest_event


@pytest.mark.parametrize("engine", ["sqlite"])
def test_http_api_events_reach_the_app(ledger: Ledger, api: str) -> None:
    auth = {"authorization": f"Bearer {api}", "content-type": "application/json"}
    health = lambda_handler.handler(http_api_event("GET", "/healthz", {}), None)
    assert health["statusCode"] == 200
    assert json.loads(health["body"])["version"] == tallybook.__version__
    opened = lambda_handler.handler(
        http_api_event(
            "POST", "/v1/accounts", {**auth, "idempotency-key": "h-1"}, '{"account": "ann"}'
        ),
        None,
    )
    assert opened["statusCode"] == 201, opened
    balances = lambda_handler.handler(
        http_api_event("GET", "/v1/accounts/ann/balances", auth), None
    )
    assert balances["statusCode"] == 200
    assert ledger.accounts.get("shop", "ann").id == "ann"


@pytest.mark.parametrize("engine", ["sqlite"])
def test_an_http_api_on_a_named_stage_reaches_the_routes(ledger: Ledger, api: str) -> None:
    """On a stage other than ``$default`` an HTTP API passes the path with the
    stage first (``/prod/v1/...``): every request answered 404."""
    auth = {"authorization": f"Bearer {api}", "content-type": "application/json"}

    def on_prod(method: str, path: str, headers: dict[str, str], body: str | None = None) -> Any:
        event = http_api_event(method, f"/prod{path}", headers, body)
        event["requestContext"]["stage"] = "prod"
        return lambda_handler.handler(event, None)

    assert on_prod("GET", "/healthz", {})["statusCode"] == 200
    opened = on_prod(
        "POST", "/v1/accounts", {**auth, "idempotency-key": "s-1"}, '{"account": "ann"}'
    )
    assert opened["statusCode"] == 201, opened
    balances = on_prod("GET", "/v1/accounts/ann/balances", auth)
    assert balances["statusCode"] == 200, balances
    assert json.loads(balances["body"])["account"] == "ann"
    missing = on_prod("GET", "/v1/nowhere", auth)
    assert missing["statusCode"] == 404
    assert json.loads(missing["body"])["instance"] == "/v1/nowhere"
    # on $default a path that starts like a stage is the path
    assert (
        lambda_handler.handler(http_api_event("GET", "/prod/healthz", {}), None)["statusCode"]
        == 404
    )


@pytest.mark.parametrize("engine", ["sqlite"])
def test_an_http_api_with_payload_1_0_on_a_named_stage_reaches_the_routes(
    ledger: Ledger, api: str
) -> None:
    """An HTTP API's Lambda integration may send payload format 1.0 (``version``
    "1.0"), whose ``path`` also starts with a named stage: only 2.0 events lost it,
    and every request of a 1.0 integration on ``prod`` was a 404. A REST API's
    event (no ``version``) is routed as it comes."""
    auth = {"authorization": f"Bearer {api}"}

    def on_prod(path: str) -> Any:
        event = {**rest_event("GET", f"/prod{path}", auth), "version": "1.0"}
        return lambda_handler.handler(event, None)

    assert on_prod("/healthz")["statusCode"] == 200
    missing = on_prod("/v1/nowhere")
    assert json.loads(missing["body"])["instance"] == "/v1/nowhere"
    rest = lambda_handler.handler(rest_event("GET", "/prod/healthz", auth), None)
    assert rest["statusCode"] == 404  # a REST API's path is after its stage already


@pytest.mark.parametrize("engine", ["sqlite"])
def test_the_admin_page_on_a_named_stage_links_within_the_stage(ledger: Ledger) -> None:
    """The stage was cut from the path the app saw, and from every link it made:
    ``/prod/admin`` led to ``/admin/`` and the login page's form and stylesheet
    were ``/admin/...``, outside the stage, where API Gateway answers 404."""

    def on_prod(path: str) -> Any:
        event = http_api_event("GET", f"/prod{path}", {})
        event["requestContext"]["stage"] = "prod"
        return lambda_handler.handler(event, None)

    home = on_prod("/admin")
    assert (home["statusCode"], home["headers"]["location"]) == (303, "/prod/admin/")
    login = on_prod("/admin/login")["body"]
    assert 'href="/prod/admin/static/admin.css"' in login
    assert 'action="/prod/admin/login"' in login
    assert on_prod("/admin/static/admin.css")["statusCode"] == 200


def _on_prod(kind: str, path: str) -> dict[str, Any]:
    """GET ``path`` as a browser asks for ``/prod{path}`` on the API's URL: an HTTP
    API (payload 2.0) passes the stage in the path, a REST API only in
    ``requestContext.path``."""
    if kind == "rest":
        return rest_event("GET", path, {})
    event = http_api_event("GET", f"/prod{path}", {})
    event["requestContext"]["stage"] = "prod"
    return event


@pytest.mark.parametrize("kind", ["rest", "http-api"])
@pytest.mark.parametrize("engine", ["sqlite"])
def test_the_api_docs_on_a_named_stage_load_from_within_the_stage(api: str, kind: str) -> None:
    """``/prod/docs`` loaded the document from ``/openapi.json`` and its scripts
    from ``/docs-assets/``, outside the stage, where API Gateway answers 403 or
    404: the page was blank. The document named no server, so "Try it out"
    called ``/v1/...`` outside the stage too."""
    for page in ("/docs", "/redoc"):
        answer = lambda_handler.handler(_on_prod(kind, page), None)
        assert answer["statusCode"] == 200, page
        html = answer["body"]
        assert "'/prod/openapi.json'" in html or '"/prod/openapi.json"' in html, page
        sources = re.findall(r'(?:src|href)="([^"]+)"', html)
        assert sources, page
        assert all(s.startswith("/prod/docs-assets/") for s in sources), sources
        asset = lambda_handler.handler(_on_prod(kind, sources[0].removeprefix("/prod")), None)
        assert asset["statusCode"] == 200, sources[0]
    document = lambda_handler.handler(_on_prod(kind, "/openapi.json"), None)
    assert document["statusCode"] == 200
    assert json.loads(document["body"])["servers"] == [{"url": "/prod"}]
    if kind == "rest":  # the admin page, as the HTTP API's test checks it
        home = lambda_handler.handler(_on_prod(kind, "/admin"), None)
        assert (home["statusCode"], home["headers"]["location"]) == (303, "/prod/admin/")


@pytest.mark.parametrize("engine", ["sqlite"])
def test_the_api_docs_on_the_default_stage_load_from_the_root(api: str) -> None:
    page = lambda_handler.handler(http_api_event("GET", "/docs", {}), None)["body"]
    assert "'/openapi.json'" in page or '"/openapi.json"' in page
    assert '"/docs-assets/swagger-ui-bundle.js"' in page
    document = lambda_handler.handler(http_api_event("GET", "/openapi.json", {}), None)
    assert "servers" not in json.loads(document["body"])


@pytest.mark.parametrize("engine", ["sqlite"])
def test_a_problem_behind_a_named_stage_has_a_percent_encoded_instance(api: str) -> None:
    """The ``instance`` of a problem is a URI reference (RFC 9457), not the
    decoded path (``/v1/accounts/al ice/balances``)."""
    event = http_api_event("GET", "/prod/v1/accounts/al%20ice/balances", {})
    event["requestContext"]["stage"] = "prod"
    answer = lambda_handler.handler(event, None)
    assert answer["statusCode"] == 401
    assert json.loads(answer["body"])["instance"] == "/v1/accounts/al%20ice/balances"
