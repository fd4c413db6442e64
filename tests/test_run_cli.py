"""``jkofast run``: arguments are checked before the job starts (QA review)."""

import pytest

from jkofast.cli import main


@pytest.mark.parametrize("extra, match", [
    (["--config", "nope"], "unknown operating point 'nope'"),  # --quick ran the job with 'fast'
    (["--threads", "0"], "n_threads must be >= 1"),
])
def test_bad_arguments_fail_up_front(capsys, extra, match):
    assert main(["run", "--dataset", "scifact", "--quick", "--quiet", *extra]) == 2
    err = capsys.readouterr().err
    assert match in err
    assert "[pools]" not in err  # no stage ran
