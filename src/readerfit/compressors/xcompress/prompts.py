"""xCompress's prompts and how a generation is split into the summary and its evaluation.

Three summary prompts (``{question}`` and ``{document_input}``; the CompAct follow-up prompt also
``{prev_summary}`` and ``{prev_eval}``):

* :data:`PAPER_PROMPT`: the compressor prompt of the SPS paper (Appendix A, Listing 1): summarise, then
  evaluate the summary.
* :data:`COMPACT_PROMPT` / :data:`COMPACT_NEXT_PROMPT`: the prompts the authors' released code sends
  (CompAct's, ``CompAct/utils.py:create_prompt``): the same two instructions with the ``[COMPLETE]`` /
  ``[INCOMPLETE]`` verdict spelled out, blank lines between the parts; the follow-up prompt carries the
  previous iteration's summary and evaluation.
* :data:`TABLE1_PROMPT`: the "professional writer … [DONE]" prompt of the paper's Table 1 protocol
  (Appendix A, Listing 3; the released code's ``create_prompt_simple_summary`` layout).

The compressor prompts ask for a summary followed by an evaluation of it. Only the summary is the
context: :func:`split_evaluation` cuts the generation at its evaluation (``"\\n\\nEvaluation:"`` in the
released code; readerfit also accepts the label on its own line with a number or bold marks, which small
models write), and :func:`parse_compact` is the released code's parse of summary and evaluation.
"""

from __future__ import annotations

import re

from readerfit.errors import InputError
from readerfit.reader import SPS_READER_PROMPT  # noqa: F401  (re-exported: xcompress and sps-correlation use it)

# The SPS paper, Appendix A, Listing 1 (numbered instructions, question, documents and cue on their own lines).
PAPER_PROMPT = (
    "1. Generate a summary of source documents to answer the question. Ensure the summary is under 200 words "
    "and does not include any pronouns. DO NOT make assumptions or attempt to answer the question; your job is "
    "to summarise only.\n"
    "2. Evaluate the summary based solely on the information of it, without any additional background context.\n"
    "Question: {question}\n"
    "Source documents: {document_input}\n"
    "Summary:"
)

_COMPACT_EVAL = (
    "2. Evaluate the summary based solely on the information of it, without any additional background context: "
    "if it lacks sufficient details to answer the question, print '[INCOMPLETE]'. If it provides all necessary "
    "details, print '[COMPLETE]'. You should provide the reason of evalution."
)
# The released code's first-iteration prompt (HU-xiaobai/xCompress CompAct/utils.py create_prompt, iter_idx == 0).
COMPACT_PROMPT = (
    "1. Generate a summary of source documents to answer the question. Ensure the summary is under 200 words "
    "and does not include any pronouns. DO NOT make assumptions or attempt to answer the question; your job is "
    "to summarize only.\n\n" + _COMPACT_EVAL
    + "\n\nQuestion: {question}\n\nSource documents: {document_input}\n\nSummary:"
)
# ... and its prompt for every later segment, with the previous summary and evaluation.
COMPACT_NEXT_PROMPT = (
    "1. Generate a summary of the previous summary and the source documents to answer the question based on the "
    "evaluation of the previous summary. The evaluation indicates the missing information needed to answer the "
    "question. Ensure the summary is under 200 words and does not include any pronouns. DO NOT make assumptions "
    "or attempt to answer the question; your job is to summarize only.\n\n" + _COMPACT_EVAL
    + "\n\nQuestion: {question}\n\nPrevious summary: {prev_summary}\n\nEvaluation of previous summary: {prev_eval}"
    "\n\nSource documents: {document_input}\n\nSummary:"
)

# The Table 1 protocol's summary prompt (paper Appendix A, Listing 3).
TABLE1_PROMPT = (
    "\n\nYour job is to act as a professional writer. You will write a good-quality passage that can support the "
    "given prediction about the question only based on the information in the provided supporting passages."
    "\n\nNow, let's start. After you write, please write [DONE] to indicate you are done. Do not write a prefix "
    "(e.g., \"Response:\") while writing a passage."
    "\n\nQuestion: {question}\n\nSource documents: {document_input}\n\nSummary:"
)


PROMPTS = {"paper": PAPER_PROMPT, "compact": COMPACT_PROMPT, "table1": TABLE1_PROMPT}

OFFICIAL_MARKER = "\n\nEvaluation:"
# A line that starts the evaluation: "Evaluation:", "2. Evaluation:", "**Evaluation:**", "### Evaluation" ...
_EVAL_LINE = re.compile(r"(?:^|\n)[ \t]*(?:#+[ \t]*)?(?:\d+[.)][ \t]*)?[*_]*Evaluation[*_]*[ \t]*(?::|\n)[*_]*",
                        re.IGNORECASE)
_SUMMARY_LABEL = re.compile(r"^[ \t]*(?:#+[ \t]*)?(?:\d+[.)][ \t]*)?[*_]*Summary[*_]*[ \t]*:[*_]*[ \t]*", re.IGNORECASE)


def split_evaluation(text: str, *, official: bool = False) -> tuple[str, str]:
    """(summary, evaluation) of a generation; evaluation "" when there is none.

    ``official``: the released code's split, at the first ``"\\n\\nEvaluation:"`` (the summary is left as
    it is). Otherwise the evaluation starts at the first line labelled "Evaluation" (numbered, bold or a
    heading allowed) and a leading "Summary:" label is removed; both parts are stripped.

    >>> split_evaluation("Anna wrote it.\\n\\nEvaluation: [COMPLETE] it names the author.")
    ('Anna wrote it.', '[COMPLETE] it names the author.')
    >>> split_evaluation("1. Summary: Anna wrote it.\\n2. **Evaluation:** fine")
    ('Anna wrote it.', 'fine')
    >>> split_evaluation("Anna wrote it.\\nEvaluation: fine", official=True)
    ('Anna wrote it.\\nEvaluation: fine', '')
    """
    if official:
        summary, sep, evaluation = text.partition(OFFICIAL_MARKER)
        return summary, evaluation.strip() if sep else ""
    match = _EVAL_LINE.search(text)
    summary, evaluation = (text[: match.start()], text[match.end():]) if match else (text, "")
    return _SUMMARY_LABEL.sub("", summary.strip(), count=1).strip(), evaluation.strip()


def parse_compact(text: str) -> tuple[str, str | None]:
    """The released code's parse (``parse_output_without_sentence``): (summary, evaluation or None).

    The summary follows a "Summary:" label if there is one (else the text's start) up to "Evaluation:";
    the evaluation runs from "Evaluation:" to a next "Summary:" or the end; both stripped, blank lines
    removed. None when there is no "Evaluation:" (the released code then keeps the split summary and
    counts the evaluation as "[INCOMPLETE]").

    >>> parse_compact("Summary: Anna wrote it.\\n\\nEvaluation: [COMPLETE]")
    ('Anna wrote it.', '[COMPLETE]')
    """
    labelled = re.search(r"(Summary:)(.*?)(?=Evaluation:|$)", text, re.DOTALL)
    plain = re.search(r"(^.*?)(?=Evaluation:|$)", text, re.DOTALL)
    summary = labelled.group(2) if labelled else plain.group(1) if plain else ""
    evaluation = re.search(r"(Evaluation:)(.*?)(?=Summary:|$)", text, re.DOTALL)
    return (summary.strip().replace("\n\n", ""),
            evaluation.group(2).strip().replace("\n\n", "") if evaluation else None)


def strip_done(text: str) -> str:
    """The passage before the "[DONE]" mark the Table 1 prompt asks for (the whole text when there is none).

    >>> strip_done("Anna wrote the book. [DONE] extra")
    'Anna wrote the book.'
    """
    return text.split("[DONE]", 1)[0].strip()


def check_prompt(prompt: str, *, fields: tuple[str, ...] = ("question", "document_input"), what: str = "prompt") -> str:
    """A summary prompt template must name its fields (the error says which are missing)."""
    missing = [f for f in fields if "{" + f + "}" not in prompt]
    if missing:
        raise InputError(f"{what} must contain {', '.join('{' + f + '}' for f in missing)}")
    return prompt
