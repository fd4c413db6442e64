"""``python -m jkofast``: the command line (:func:`jkofast.cli.main`)."""

from jkofast.cli import main

__all__: list[str] = []

raise SystemExit(main())
