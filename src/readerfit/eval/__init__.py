"""The harness: an EvalConfig, the RAG pipeline, the local and Ray runners, and the eval's report
section."""

from readerfit.eval.config import EvalConfig
from readerfit.eval.harness import EvalSetup, build_eval, build_pipelines, run_eval
from readerfit.eval.pipeline import PipelineConfig, RAGPipeline, Retrieval

__all__ = ["EvalConfig", "EvalSetup", "PipelineConfig", "RAGPipeline", "Retrieval", "build_eval",
           "build_pipelines", "run_eval"]
