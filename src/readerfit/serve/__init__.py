"""``readerfit serve``: the three jobs over HTTP (FastAPI + uvicorn, ``pip install 'readerfit[serve]'``).

:class:`ServeConfig` says what a server loads and allows; :func:`readerfit.serve.app.create_app` loads it and
returns the app (that module needs FastAPI; this one does not). The JSON objects are the command line's.

>>> ServeConfig(compressors=("none",), scorers=("ppl",)).default_compressor
'none'
"""

from __future__ import annotations

from readerfit.serve.config import ServeConfig

__all__ = ["ServeConfig"]
