"""LLMLingua's ``PromptCompressor`` set up without network access: the part of its ``__init__`` both of readerfit's
LLMLingua compressors (``longllmlingua``, ``llmlingua2``) share, here so that neither imports the other."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from readerfit.models.progress import quiet_loading

if TYPE_CHECKING:
    import torch


def init_offline(engine: Any, *, model_name: str, model_dir: str, device: str, dtype: torch.dtype | None,
                 llmlingua2: bool) -> None:
    """llmlingua 0.2's ``PromptCompressor.__init__`` minus ``tiktoken.encoding_for_model`` (a download): its
    attributes, and the model loaded from ``model_dir`` (shared by ``longllmlingua`` and ``llmlingua2``)."""
    engine.model_name = model_name
    engine.use_llmlingua2 = llmlingua2
    engine.retrieval_model = None
    engine.retrieval_model_name = None
    engine.open_api_config = {}
    engine.cache_bos_num = 10
    engine.prefix_bos_num = 100
    config: dict[str, Any] = {"trust_remote_code": False}
    if dtype is not None:
        config["torch_dtype"] = dtype
    with quiet_loading():  # llmlingua loads through transformers itself: its bars off, as the pool's loads
        engine.load_model(model_dir, device, config)
