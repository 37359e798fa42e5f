"""Haystack adapter: :class:`ReaderfitCompressor`, defined in Haystack's integration namespace
(``haystack_integrations.components.compressors.readerfit``, shipped in this wheel) so that saved pipelines load on
Haystack 3 without ``allowed_modules``; importable from here too.

>>> from readerfit.integrations.haystack import ReaderfitCompressor
>>> ReaderfitCompressor.__module__
'haystack_integrations.components.compressors.readerfit.compressor'
"""

from __future__ import annotations

from readerfit.errors import require

require("haystack", extra="haystack", package="haystack-ai", purpose="readerfit.integrations.haystack")
from haystack_integrations.components.compressors.readerfit import ReaderfitCompressor  # noqa: E402

__all__ = ["ReaderfitCompressor"]
