"""``python -m readerfit.cli``: the ``readerfit`` command."""

from readerfit.cli.main import entry

entry()
