"""readerfit's Haystack component, in Haystack's integration namespace (a saved pipeline loads without
``allowed_modules``): ``from haystack_integrations.components.compressors.readerfit import ReaderfitCompressor``."""

from haystack_integrations.components.compressors.readerfit.compressor import ReaderfitCompressor

__all__ = ["ReaderfitCompressor"]
