"""``python -m jkofast``: the command line (:func:`jkofast.cli.main`)."""

from jkofast.cli import main

raise SystemExit(main())
