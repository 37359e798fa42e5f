"""The harness: an EvalConfig, the RAG pipeline, the local and Ray runners, the budget sweep, and the eval's report
section."""

from readerfit.eval.config import EvalConfig
from readerfit.eval.harness import EvalSetup, build_eval, build_pipelines, run_eval
from readerfit.eval.pipeline import PipelineConfig, RAGPipeline, Retrieval
from readerfit.eval.sweep import BudgetSweep

__all__ = ["BudgetSweep", "EvalConfig", "EvalSetup", "PipelineConfig", "RAGPipeline", "Retrieval", "build_eval",
           "build_pipelines", "run_eval"]
