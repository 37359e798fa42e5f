"""Text utilities: answer normalisation and sentence splitting."""

from readerfit.text.normalize import normalize_answer
from readerfit.text.split import SPLITTERS, Splitter, get_splitter, split_sentences

__all__ = ["SPLITTERS", "Splitter", "get_splitter", "normalize_answer", "split_sentences"]
