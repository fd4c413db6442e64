"""The one progress line (jkofast._progress.ProgressLine): what a terminal and a file receive."""

import sys

import pytest

from jkofast import _progress
from jkofast._progress import ProgressLine, _clock


def _final(err: str) -> str:
    return err.rpartition("\r")[2]


@pytest.mark.parametrize("tty", [False, True])
def test_progress_line_ends_once_with_a_newline(capsys, monkeypatch, tty):
    """A terminal gets the line redrawn in place (``\\r``) and ended by the final count; a file gets only the
    final line: never the end printed twice."""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: tty, raising=False)
    p = ProgressLine("rerank", unit="queries", every_s=0.0)
    p.update(1000)
    p(500)  # the object is its own progress(n) callback
    p.close()
    err = capsys.readouterr().err
    final = _final(err)
    assert final.startswith("rerank: 1,500 queries (") and final.endswith("/s)\n") and err.count("\n") == 1
    assert err.startswith("\rrerank: 1,000 queries (") if tty else err == final
    p = ProgressLine("parity", 4)
    p.update(4)
    p.close()
    err = capsys.readouterr().err
    final = _final(err)
    assert final.startswith("parity: 4/4 (") and final.endswith("/s)\n") and err.count("\n") == 1
    assert err.startswith("\rparity: 4/4 (") if tty else err == final


@pytest.mark.parametrize("tty", [False, True])
def test_estimated_total_and_eta(capsys, monkeypatch, tty):
    """A total known late (a background count) shows the fraction and ETA; close makes the total what was done."""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: tty, raising=False)
    d = ProgressLine("rerank", unit="queries", every_s=0.0, eta=True)
    d.update(3)
    d.set_total(12)  # an estimate
    d.update(3)
    assert d.line().startswith("rerank: 6/12 queries (") and ", 50 %, ETA " in d.line()
    d.close()
    err = capsys.readouterr().err
    final = _final(err)
    assert final.startswith("rerank: 6/6 queries (") and final.endswith(", 100 %, ETA 0:00)\n")
    assert err.count("\n") == 1
    assert err.startswith("\rrerank: 3 queries (") and ", ETA ?)" in err if tty else err == final
    d = ProgressLine("rerank", unit="queries", eta=True)  # the background count never ended
    d.update(7)
    d.close()
    assert _final(capsys.readouterr().err).startswith("rerank: 7/7 queries (")


def test_fraction_given_apart_and_silence(capsys, monkeypatch):
    """The fraction of the work (bytes read of a corpus of unknown length) drives the ETA; disabled draws nothing."""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    b = ProgressLine("tokens", unit="passages", every_s=0.0, eta=True)
    b.update(2_000, 0.25)
    assert b.line().startswith("tokens: 2,000 passages (") and ", 25 %, ETA " in b.line()
    b.close()
    assert _final(capsys.readouterr().err).endswith(", 100 %, ETA 0:00)\n")
    q = ProgressLine("encode", 5, enabled=False, eta=True)
    q.update(5)
    q.close()
    assert capsys.readouterr().err == "" and q.done == 5


def test_first_update_draws_soon_after_the_clock_origin(capsys, monkeypatch):
    """The first update draws even when the clock reads less than ``every_s`` (Linux: soon after boot)."""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(_progress.time, "perf_counter", lambda: 2.0)
    p = ProgressLine("score", 100, every_s=3600.0)
    p.update()
    err = capsys.readouterr().err
    assert err.count("\r") == 1 and err.startswith("\rscore: 1/100 (")


def test_redraws_at_most_every_every_s(capsys, monkeypatch):
    """On a terminal the line is redrawn at most every ``every_s`` seconds, and always at the total."""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    p = ProgressLine("score", 100, every_s=3600.0)
    for _ in range(99):
        p.update()
    assert capsys.readouterr().err.count("\r") == 1  # the first draw only
    p.update()
    assert _final(capsys.readouterr().err).startswith("score: 100/100 (")


def test_clock_oracle():
    """m:ss under an hour, h:mm:ss from an hour on, ? for an unknown time."""
    for s in (0.0, 59.9, 61, 3599, 3600, 3661, 86_400 + 7):
        t = int(s)
        want = f"{t // 3600}:{t // 60 % 60:02d}:{t % 60:02d}" if t >= 3600 else f"{t // 60}:{t % 60:02d}"
        assert _clock(s) == want
    assert _clock(float("nan")) == "?" and _clock(float("inf")) == "?" and _clock(-3.0) == "0:00"
