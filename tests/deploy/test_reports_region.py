"""The reports sink talks to S3 in the function's own region (Lambda sets
``AWS_DEFAULT_REGION``), not always in us-east-1: a bucket of a stack in
eu-west-1 was written through the us-east-1 endpoint, which only works while
S3 redirects, and not at all from a VPC whose only way out is a gateway
endpoint of its own region."""

from __future__ import annotations

from pathlib import Path

import pytest

from tallybook.services.billing.sinks import S3Sink, open_sink


@pytest.fixture
def no_aws_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.usefixtures("no_aws_config")
def test_the_sink_uses_the_environment_s_region(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    sink = open_sink("s3://tallybook-reports/reports")
    assert isinstance(sink, S3Sink)
    assert sink.client.meta.region_name == "eu-west-1"


@pytest.mark.usefixtures("no_aws_config")
def test_the_sink_falls_back_to_us_east_1_without_a_region() -> None:
    sink = open_sink("s3://tallybook-reports/reports")
    assert isinstance(sink, S3Sink)
    assert sink.client.meta.region_name == "us-east-1"
    assert S3Sink("b", region="ap-south-1").client.meta.region_name == "ap-south-1"
