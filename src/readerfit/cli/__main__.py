"""``python -m readerfit.cli``: the ``readerfit`` command."""

import sys

from readerfit.cli.main import main

sys.exit(main())
