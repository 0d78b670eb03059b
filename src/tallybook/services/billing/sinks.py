"""Where report files go: a local folder or an S3 bucket (through boto3).

Both write whole files under deterministic paths, so writing a window twice
(a repeat after a crash, a rerun) replaces the files with identical bytes and
never leaves duplicates. A folder write goes through a temporary file and an
atomic rename, so a crash never leaves half a file.

S3: ``s3://bucket/prefix``. The endpoint is AWS unless ``endpoint`` is given
or ``$TALLYBOOK_S3_ENDPOINT`` (or boto3's own ``$AWS_ENDPOINT_URL_S3``) names
an S3-compatible one; with an explicit endpoint and no credentials in the
environment, dummy ones are used (local servers accept any).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urlsplit

from botocore.exceptions import BotoCoreError, ClientError

from tallybook.errors import ConfigError, StoreUnavailable

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

S3_ENDPOINT_ENV = "TALLYBOOK_S3_ENDPOINT"
_CONTENT_TYPES = {".csv": "text/csv; charset=utf-8", ".json": "application/json"}


class ReportSink(Protocol):
    def write(self, path: str, data: bytes) -> str:
        """Write ``data`` at ``path`` (``program/kind/window/file``); return its location."""

    def describe(self) -> str:
        """Where files go, for logs and the report listing (no secrets)."""


class DirectorySink:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def describe(self) -> str:
        return str(self.root)

    def write(self, path: str, data: bytes) -> str:
        target = self.root / path
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, target)
        except OSError as exc:
            raise StoreUnavailable(f"cannot write report file {target}: {exc}") from exc
        return str(target)


class S3Sink:
    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint: str | None = None,
        region: str | None = None,
        client: S3Client | None = None,
    ) -> None:
        if not bucket:
            raise ConfigError("an S3 report target needs a bucket: s3://BUCKET/PREFIX")
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.endpoint = endpoint or os.environ.get(S3_ENDPOINT_ENV) or None
        if client is None:
            import boto3  # here, not at the top: it costs the CLI's start a third

            # the configured region (Lambda sets AWS_DEFAULT_REGION to its own),
            # else us-east-1
            session_region = boto3.session.Session().region_name
            kwargs: dict[str, str] = {"region_name": region or session_region or "us-east-1"}
            if self.endpoint:
                kwargs["endpoint_url"] = self.endpoint
                if not boto3.session.Session().get_credentials():
                    kwargs["aws_access_key_id"] = "local"
                    kwargs["aws_secret_access_key"] = "local"  # noqa: S105 - local S3
            client = boto3.client("s3", **kwargs)  # type: ignore[call-overload]
        self.client: S3Client = client

    def describe(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")

    def key(self, path: str) -> str:
        return f"{self.prefix}/{path}" if self.prefix else path

    def write(self, path: str, data: bytes) -> str:
        key = self.key(path)
        content_type = _CONTENT_TYPES.get(Path(path).suffix, "application/octet-stream")
        try:
            self.client.put_object(Bucket=self.bucket, Key=key, Body=data, ContentType=content_type)
        except (ClientError, BotoCoreError) as exc:
            raise StoreUnavailable(f"cannot write s3://{self.bucket}/{key}: {exc}") from exc
        return f"s3://{self.bucket}/{key}"


def open_sink(target: str, *, endpoint: str | None = None) -> ReportSink:
    """``DIR`` or ``s3://bucket/prefix``."""
    if not target:
        raise ConfigError("name where reports go: a folder or s3://bucket/prefix")
    if target.startswith("s3://"):
        parts = urlsplit(target)
        return S3Sink(parts.netloc, parts.path, endpoint=endpoint)
    if "://" in target:
        raise ConfigError(f"unsupported report target {target!r}: a folder or s3://bucket/prefix")
    return DirectorySink(target)
