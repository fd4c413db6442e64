"""``python -m jkofast``: the command line (:func:`jkofast.cli.program`)."""

from jkofast.cli import program

__all__: list[str] = []

program()
