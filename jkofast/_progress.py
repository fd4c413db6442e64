"""The one progress line of the package, drawn on stderr.

Every long-running command and build draws its progress through :class:`ProgressLine`
(``jkofast rerank``, ``score``, ``embed``, ``parity``, the Dask client, ``run``'s embedding
stage and the streaming SGR build), so each of them writes the same line the same way:

``label: done[/total] [unit] (rate/s[, pct %, ETA m:ss])``

The line is redrawn in place (a carriage return) only on a terminal, at most every ``every_s`` seconds;
:meth:`ProgressLine.close` draws the final count and ends the line, so stderr sent to a file
holds that one final line.
"""

from __future__ import annotations

import math
import sys
import time

__all__ = ["ProgressLine"]


def _clock(seconds: float) -> str:
    """``m:ss`` (``h:mm:ss`` from an hour on); ``?`` when not finite."""
    if not math.isfinite(seconds):
        return "?"
    s = int(max(seconds, 0.0))
    h, m = divmod(s // 60, 60)
    return f"{h}:{m:02d}:{s % 60:02d}" if h else f"{m}:{s % 60:02d}"


class ProgressLine:
    """Progress/throughput line on stderr (silent when ``enabled`` is False).

    Parameters
    ----------
    label : str
        Text before the counts (``"rerank"``, ``"jkofast embed: scifact"``).
    total : int, optional
        Number of items expected; ``None`` for a stream of unknown length (it may be set later
        with :meth:`set_total`, e.g. once a background count ends).
    unit : str
        What is counted (``"queries"``, ``"passages"``); empty for none.
    enabled : bool
        False draws nothing (``--quiet``, ``--json``).
    every_s : float
        Seconds between two redraws on a terminal.
    eta : bool
        Show the fraction done and the time left; the fraction is ``done / total`` unless
        :meth:`update` is given one (e.g. compressed bytes read of a corpus of unknown length).

    Calling the object is :meth:`update`, so it serves as a ``progress(n)`` callback.
    """

    def __init__(
        self,
        label: str,
        total: int | None = None,
        *,
        unit: str = "",
        enabled: bool = True,
        every_s: float = 0.5,
        eta: bool = False,
    ):
        self.label, self.total, self.unit = label, total, unit
        self.enabled, self.every_s, self.eta = enabled, every_s, eta
        self.done = 0
        self.frac: float | None = None
        self.t0 = time.perf_counter()
        self._last = -math.inf  # the first update draws (time.perf_counter() counts from an arbitrary point)
        self._tty = sys.stderr.isatty()

    def start(self) -> None:
        """Restart the clock (the work begins now)."""
        self.t0 = time.perf_counter()

    def set_total(self, total: int | None) -> None:
        """Set the number of items expected in all."""
        self.total = total

    def _fraction(self) -> float | None:
        if self.frac is not None:
            return self.frac
        return self.done / self.total if self.total else None

    def line(self) -> str:
        """Return the current line (without the carriage return)."""
        elapsed = max(time.perf_counter() - self.t0, 1e-9)
        rate = self.done / elapsed
        count = f"{self.done:,}" if self.total is None else f"{self.done:,}/{self.total:,}"
        unit = f" {self.unit}" if self.unit else ""
        tail = ""
        if self.eta:
            f = self._fraction()
            left = elapsed * (1.0 - f) / f if f else float("nan")
            tail = f", {100.0 * f:.0f} %, ETA {_clock(left)}" if f is not None else ", ETA ?"
        return f"{self.label}: {count}{unit} ({rate:,.1f}/s{tail})"

    def update(self, n: int = 1, frac: float | None = None) -> None:
        """Count ``n`` more items done (``frac``: the fraction of the whole work done, when known apart)."""
        self.done += n
        if frac is not None:
            self.frac = frac
        now = time.perf_counter()
        at_end = self.total is not None and self.done >= self.total
        if self.enabled and self._tty and (now - self._last >= self.every_s or at_end):
            self._last = now
            print("\r" + self.line(), end="", file=sys.stderr, flush=True)

    __call__ = update

    def close(self) -> None:
        """Draw the final line and end it.

        The work is done: a total, known or estimated, becomes what was done (as does an unknown
        one when the ETA is counted in items), and the fraction shown is 100 %.
        """
        if self.total is not None or (self.eta and self.frac is None):
            self.total = self.done
        if self.eta:
            self.frac = 1.0
        if self.enabled:
            print(("\r" if self._tty else "") + self.line(), file=sys.stderr, flush=True)
