"""EXIT: context-aware extractive compression (Hwang et al.), one module per job.

``config`` (prompts, settings, presets), ``sentence_classifier`` (the classifiers' contract), ``labels`` (r
from next-token logits: the one definition inference and training share), ``windows`` (which context each
sentence gets), ``lm_classifier`` (the paper's, with prefix caching), ``encoder_classifier`` (a cross-encoder,
beyond the paper), ``onepass`` (one pass per passage), ``classifiers`` (trained directories, building the one
``model`` names), ``compressor`` (the ``exit`` compressor).
"""

from readerfit.compressors.exit.classifiers import build_classifier, read_classifier_manifest
from readerfit.compressors.exit.compressor import ExitCompressor
from readerfit.compressors.exit.config import (
    EXIT_PROMPT,
    NEGATIVE,
    OFFICIAL_PROMPT,
    POSITIVE,
    PROMPTS,
    RELEASED_ADAPTER,
    ExitConfig,
    default_classifier_dir,
)
from readerfit.compressors.exit.encoder_classifier import EncoderSentenceClassifier, encoder_features
from readerfit.compressors.exit.labels import label_log_probs, label_loss, label_token_ids, relevance
from readerfit.compressors.exit.lm_classifier import LMSentenceClassifier, PromptPieces
from readerfit.compressors.exit.sentence_classifier import GroupScores, SentenceClassifier
from readerfit.compressors.exit.windows import all_documents, plan_passage, plan_question, window_around

__all__ = ["EXIT_PROMPT", "NEGATIVE", "OFFICIAL_PROMPT", "POSITIVE", "PROMPTS", "RELEASED_ADAPTER", "EncoderSentenceClassifier",
           "ExitCompressor", "ExitConfig", "GroupScores", "LMSentenceClassifier", "PromptPieces", "SentenceClassifier",
           "all_documents", "build_classifier", "default_classifier_dir", "encoder_features", "label_log_probs",
           "label_loss", "label_token_ids", "plan_passage", "plan_question", "read_classifier_manifest", "relevance",
           "window_around"]
