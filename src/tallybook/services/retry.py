"""Bounded retries with exponential backoff and full jitter."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Backoff:
    attempts: int = 12
    base_seconds: float = 0.002
    cap_seconds: float = 0.25

    def delays(self) -> Iterator[int]:
        """Yields attempt numbers, sleeping a jittered, growing delay between them."""
        for attempt in range(self.attempts):
            if attempt:
                ceiling = min(self.cap_seconds, self.base_seconds * 2**attempt)
                time.sleep(random.uniform(0, ceiling))
            yield attempt
