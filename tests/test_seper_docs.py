"""How SePer writes retrieved passages into its context: per preset (FlashRAG's template, the raw text, or readerfit's).

``paper``: FlashRAG's ``format_reference`` (the paper's App. D.5 prompts are FlashRAG's), checked against the
released function's output in ``tests/fixtures/seper_docs/flashrag.json``; ``official``: the released seper code is
given a raw context string (``example.ipynb``: plain sentences, no titles, joined by a space).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from readerfit.errors import InputError
from readerfit.registry import make_config
from readerfit.retrieval_utility.config import DOC_FORMATS, SePerConfig, render_documents
from readerfit.retrieval_utility.judge import LexicalJudge
from readerfit.retrieval_utility.seper import SePer
from readerfit.types import Generation, Passage

FIXTURE = Path(__file__).parent / "fixtures" / "seper_docs" / "flashrag.json"
TWO = [Passage("Hamlet is a tragedy by William Shakespeare.", title="Hamlet"),
       Passage("Stratford-upon-Avon is a market town.", title="Stratford")]


def preset(name, **options):
    return make_config(SePerConfig, options, what="SePer", preset=name)


def test_default_keeps_title_line_and_blank_lines_between_passages():
    assert DOC_FORMATS == ("title-text", "flashrag", "text")
    assert SePerConfig().doc_format == "title-text"
    assert render_documents(TWO, doc_format="title-text") == (
        "Hamlet\nHamlet is a tragedy by William Shakespeare.\n\nStratford\nStratford-upon-Avon is a market town.")
    assert render_documents(TWO, doc_format="title-text") == "\n\n".join(p.render() for p in TWO)


def test_paper_preset_renders_flashrag_reference_blocks():
    cfg = preset("paper")
    assert cfg.doc_format == "flashrag"
    assert render_documents(TWO, doc_format=cfg.doc_format) == (
        "Doc 1(Title: Hamlet) Hamlet is a tragedy by William Shakespeare.\n"
        "Doc 2(Title: Stratford) Stratford-upon-Avon is a market town.\n")


def test_official_preset_renders_the_raw_text_the_released_code_is_given():
    cfg = preset("official")
    assert cfg.doc_format == "text"
    assert render_documents(TWO, doc_format=cfg.doc_format) == (
        "Hamlet is a tragedy by William Shakespeare. Stratford-upon-Avon is a market town.")


def test_an_option_overrides_the_preset_and_a_bad_format_is_named():
    assert preset("paper", doc_format="text").doc_format == "text"
    with pytest.raises(InputError, match=r"option 'doc_format' expects one of 'title-text', 'flashrag', 'text', got 'html'"):
        SePerConfig(doc_format="html")
    with pytest.raises(InputError, match="doc_format"):
        render_documents(TWO, doc_format="html")


def test_bad_passages_are_named():
    with pytest.raises(InputError, match="passage 1"):
        render_documents([TWO[0], "plain string"], doc_format="flashrag")
    with pytest.raises(InputError, match="a list of Passages"):
        render_documents("Hamlet", doc_format="text")


def test_empty_passages_are_left_out_and_none_left_is_no_context():
    blank = Passage("   ", title="Nothing")
    assert render_documents([blank, TWO[1]], doc_format="flashrag") == (
        "Doc 1(Title: Stratford) Stratford-upon-Avon is a market town.\n")
    assert render_documents([blank], doc_format="flashrag") == ""


@pytest.mark.parametrize("case", json.loads(FIXTURE.read_text())["cases"] if FIXTURE.exists() else [],
                         ids=lambda c: c["name"])
def test_paper_format_equals_flashrag_format_reference(case):
    passages = [Passage(d["text"], title=d["title"]) for d in case["documents"]]
    assert render_documents(passages, doc_format="flashrag") == case["format_reference"]


def test_flashrag_fixture_is_present():
    assert FIXTURE.exists() and len(json.loads(FIXTURE.read_text())["cases"]) >= 2


class RecordingLM:
    name = "rec"

    def __init__(self):
        self.turns = []

    def chat(self, user, system=None):
        self.turns.append((system, user))
        return user

    def generate(self, prompts, **kwargs):
        return [[Generation(text="Shakespeare", token_ids=[1], token_logprobs=[-0.1])] * kwargs.get("n", 1)
                for _ in prompts]


@pytest.mark.parametrize("name, expected", [
    ("paper", "Doc 1(Title: Hamlet) Hamlet is a tragedy by William Shakespeare.\n"
              "Doc 2(Title: Stratford) Stratford-upon-Avon is a market town."),
    ("official", "Context: Hamlet is a tragedy by William Shakespeare. Stratford-upon-Avon is a market town.\n"),
])
def test_seper_context_of_passages_follows_the_preset(name, expected):
    lm = RecordingLM()
    s = SePer(lm, LexicalJudge(), preset(name, judge="lexical"))
    prompt = s.prompt_for("Who wrote Hamlet?", s.context(TWO))
    text = str(prompt) if not lm.turns else lm.turns[-1][0]
    assert expected in text


class UnsureLM:
    """Never names the reference (so no question is dropped); keeps every prompt it is given."""

    name = "unsure"

    def __init__(self):
        self.prompts = []

    def chat(self, user, system=None):
        return f"{system}|{user}"

    def generate(self, prompts, **kwargs):
        self.prompts.extend(str(p) for p in prompts)
        return [[Generation(text="Marlowe", token_ids=[1], token_logprobs=[-0.1])] * kwargs.get("n", 1)
                for _ in prompts]


@pytest.mark.parametrize("name, gold_text", [
    ("paper", "Doc 1(Title: Hamlet) Hamlet is a tragedy by William Shakespeare."),
    ("official", "Context: Hamlet is a tragedy by William Shakespeare.\n"),
    (None, "Hamlet\nHamlet is a tragedy by William Shakespeare."),
])
def test_seper_utility_writes_its_passages_as_the_preset_says(name, gold_text):
    from readerfit.experiments import seper_utility
    from readerfit.types import QAExample

    lm = UnsureLM()
    cfg = make_config(SePerConfig, {"judge": "lexical", "n": 2}, what="SePer", preset=name)
    example = QAExample(id="q1", question="Who wrote Hamlet?", answers=["Shakespeare"], passages=list(TWO))
    record = seper_utility.run_question(SePer(lm, LexicalJudge(), cfg), example, TWO[0], ("annotated", "q1", TWO[1]))
    assert not record["dropped"]
    assert any(gold_text in p for p in lm.prompts), lm.prompts


def test_seper_utility_records_the_doc_format():
    from readerfit.experiments import seper_utility

    assert seper_utility.Config(data="d", preset="paper", judge="lexical").settings()["doc_format"] == "flashrag"
    assert seper_utility.Config(data="d", preset="official", doc_format="title-text").seper_config().doc_format == \
        "title-text"
    assert "doc_format" not in seper_utility.Config(data="d").settings()  # older folders resume
