"""Baseline (d): a FastAPI app whose one POST endpoint does no work.

Served exactly as ``tallybook serve`` serves the product (``uvicorn.run`` with
``access_log=False, log_config=None``), in its own process:

    python -m bench.bare_app --port PORT [--log-level warning]
"""

from __future__ import annotations

import argparse

import uvicorn
from fastapi import FastAPI

CONSTANT = {"id": "t", "type": "credit", "replay": False}


def create_app() -> FastAPI:
    app = FastAPI(title="bare")

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/v1/transactions", status_code=201)
    async def post_transaction() -> dict[str, object]:
        return CONSTANT

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args()
    uvicorn.run(
        create_app(),
        host=args.host,
        port=args.port,
        access_log=False,
        log_config=None,
        log_level=args.log_level,
    )


if __name__ == "__main__":
    main()
