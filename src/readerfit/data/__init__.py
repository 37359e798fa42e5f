"""QA datasets and passage corpora: loaders for benchmark formats and the shipped demo set.

>>> from readerfit.data import load_demo
>>> ex = load_demo(limit=1)[0]
>>> ex.answers[0] in " ".join(p.text for p in ex.passages)
True
"""

from readerfit.data.formats import FORMATS, Format
from readerfit.data.loaders import (
    demo_corpus_path,
    demo_path,
    detect_format,
    example_to_dict,
    load_corpus,
    load_dataset,
    load_demo,
    write_examples,
)

__all__ = [
    "FORMATS",
    "Format",
    "demo_corpus_path",
    "demo_path",
    "detect_format",
    "example_to_dict",
    "load_corpus",
    "load_dataset",
    "load_demo",
    "write_examples",
]
