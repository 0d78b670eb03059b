"""What the headless-Chromium tests share: Debian's Chromium (driven by Playwright),
where their screenshots go, and the marks that skip them, with the reason, when
either is missing (``.ci/run`` installs both)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
SHOTS = Path(__file__).resolve().parents[1] / "test-output" / "screenshots"

#: a browser test's ``pytestmark``
BROWSER_TEST = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium"
    ),
    pytest.mark.skipif(
        importlib.util.find_spec("playwright") is None,
        reason="needs playwright (pip install playwright; no 'playwright install' needed)",
    ),
]
