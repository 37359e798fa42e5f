"""The ``readerfit`` command line: one module per command (see :data:`readerfit.cli.main.COMMANDS`)."""

from readerfit.cli.main import entry, main

__all__ = ["entry", "main"]
