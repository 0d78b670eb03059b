"""Response bodies of the system routes: liveness and readiness."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class Readiness(BaseModel):
    status: Literal["ready"]


class Health(BaseModel):
    status: Literal["ok"]
    version: str = Field(description="the tallybook version serving", examples=["0.1.0"])
