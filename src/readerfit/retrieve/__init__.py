"""Retrieval over a passage corpus: BM25, dense (MiniLM), and their RRF hybrid."""

from readerfit.retrieve.base import CorpusRetriever, Encoder, Retriever
from readerfit.retrieve.bm25 import BM25Retriever
from readerfit.retrieve.dense import DenseRetriever
from readerfit.retrieve.hybrid import HybridRetriever
from readerfit.retrieve.index import RETRIEVERS, build_retriever, load_index, save_index

__all__ = [
    "RETRIEVERS",
    "BM25Retriever",
    "CorpusRetriever",
    "DenseRetriever",
    "Encoder",
    "HybridRetriever",
    "Retriever",
    "build_retriever",
    "load_index",
    "save_index",
]
