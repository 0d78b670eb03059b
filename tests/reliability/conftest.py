"""Reuse the HTTP fixtures of tests/http/conftest.py (``app_client``, ``mint_key``,
``auth``, ``idem``, ``write_headers``, ``open_account``, ``credit``...).

``tests/http`` is deliberately not a package (it would shadow ``http``), so its
conftest is loaded from its path and its fixtures are re-exported here.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

_path = Path(__file__).parents[1] / "http" / "conftest.py"
_spec = importlib.util.spec_from_file_location("tallybook_tests_http_fixtures", _path)
assert _spec is not None
assert _spec.loader is not None
_http = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_http)

app_client = _http.app_client
mint_key = _http.mint_key
auth = _http.auth
read_headers = _http.read_headers
write_headers = _http.write_headers
admin_headers = _http.admin_headers
idem = _http.idem
other_headers = _http.other_headers
open_account = _http.open_account
credit = _http.credit
