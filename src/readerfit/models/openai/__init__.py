"""The OpenAI-compatible server backend (vLLM, llama.cpp's server, any endpoint speaking that wire format).

>>> parse_model_name("openai:meta-llama/Llama-3.1-8B-Instruct")
'meta-llama/Llama-3.1-8B-Instruct'
"""

from readerfit.models.openai.config import (
    PREFIX,
    OpenAIConfig,
    ServerFeatureError,
    ServerRejectedError,
    ServerResponseError,
    ServerUnavailableError,
    parse_model_name,
)
from readerfit.models.openai.model import OpenAILanguageModel

__all__ = [
    "PREFIX",
    "OpenAIConfig",
    "OpenAILanguageModel",
    "ServerFeatureError",
    "ServerRejectedError",
    "ServerResponseError",
    "ServerUnavailableError",
    "parse_model_name",
]
