"""Helpers shared by CLI sub-commands."""

from __future__ import annotations

import json
import sys
import time


class Progress:
    """Minimal progress/throughput line on stderr (silent when ``enabled`` is False)."""

    def __init__(self, total: int, label: str, enabled: bool = True, every_s: float = 0.5):
        self.total, self.label, self.enabled, self.every_s = total, label, enabled, every_s
        self.done = 0
        self.t0 = time.perf_counter()
        self._last = 0.0

    def update(self, n: int = 1) -> None:
        self.done += n
        now = time.perf_counter()
        if self.enabled and (now - self._last >= self.every_s or self.done >= self.total):
            self._last = now
            rate = self.done / max(now - self.t0, 1e-9)
            print(f"\r{self.label}: {self.done}/{self.total} ({rate:,.0f}/s)", end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.enabled:
            print(file=sys.stderr, flush=True)


def emit(obj, as_json: bool, text: str | None = None) -> None:
    """Print ``obj`` as JSON (``--json``) or the given human text."""
    if as_json:
        print(json.dumps(obj, indent=2, default=float))
    else:
        print(text if text is not None else obj)
