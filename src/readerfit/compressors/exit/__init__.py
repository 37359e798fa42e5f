"""EXIT: context-aware extractive compression (Hwang et al.), one module per job.

``config`` (prompt, settings), ``windows`` (over-long passages), ``lm_classifier`` (the paper's, with
prefix caching), ``encoder_classifier`` (a cross-encoder, beyond the paper), ``classifiers``
(trained directories), ``compressor`` (the ``exit`` compressor).
"""

from readerfit.compressors.exit.classifiers import build_classifier, read_classifier_manifest
from readerfit.compressors.exit.compressor import ExitCompressor
from readerfit.compressors.exit.config import EXIT_PROMPT, NEGATIVE, POSITIVE, ExitConfig, default_classifier_dir
from readerfit.compressors.exit.encoder_classifier import EncoderSentenceClassifier, encoder_text_a
from readerfit.compressors.exit.lm_classifier import LMSentenceClassifier, PromptPieces
from readerfit.compressors.exit.windows import GroupScores, SentenceClassifier, plan_passage, window_around

__all__ = ["EXIT_PROMPT", "NEGATIVE", "POSITIVE", "EncoderSentenceClassifier", "ExitCompressor", "ExitConfig",
           "GroupScores", "LMSentenceClassifier", "PromptPieces", "SentenceClassifier", "build_classifier",
           "default_classifier_dir", "encoder_text_a", "plan_passage", "read_classifier_manifest", "window_around"]
