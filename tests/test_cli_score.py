"""``readerfit score``: texts in, SPS / PPL / LongPPL out; a context is plain text the text is scored after."""

from __future__ import annotations

import io
import json
import math
import sys

import pytest
import torch

import readerfit
from readerfit.cli import main
from readerfit.errors import InputError
from readerfit.models.lm import PromptText
from readerfit.models.pool import ModelPool
from readerfit.scorers import SCORERS

TEXTS = ["The book was written by Anna.", "Paris is the capital of France."]


def run_cli(args, capsys, monkeypatch, stdin):
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def score_args(tiny_lm_dir, *extra):
    return ["score", "--reader", str(tiny_lm_dir), "--no-progress", *extra]


@pytest.fixture()
def pool(tiny_lm, tiny_lm_dir) -> ModelPool:
    p = ModelPool(device="cpu")
    p.put("lm", str(tiny_lm_dir), tiny_lm)
    return p


@torch.inference_mode()
def reference_ppl(lm, text, context=None):
    """The slow obvious perplexity: one forward pass over [context or BOS] + text, all as plain text."""
    head = lm.encode_text(context) if context is not None else [lm.tokenizer.bos_token_id]
    body = lm.encode_text(text)
    ids = torch.tensor([head + body])
    logp = torch.log_softmax(lm.model(ids).logits[0].float(), dim=-1)
    lps = [float(logp[len(head) + i - 1, tok]) for i, tok in enumerate(body)]
    return math.exp(-sum(lps) / len(lps))


def test_lines_are_scored_like_the_obvious_reference(tiny_lm, tiny_lm_dir, capsys, monkeypatch):
    code, out, err = run_cli(score_args(tiny_lm_dir, "--scorer", "ppl", "--json"), capsys, monkeypatch,
                             "\n".join(TEXTS) + "\n")
    assert code == 0, err
    result = json.loads(out.splitlines()[-1])
    assert result["scorer"] == "ppl"
    assert result["scores"] == pytest.approx([reference_ppl(tiny_lm, t) for t in TEXTS], rel=1e-4)
    assert "| 1 | The book was written by Anna." in out and "| 2 | Paris" in out


def test_several_scorers_one_key_each(tiny_lm, tiny_lm_dir, pool, capsys, monkeypatch):
    code, out, err = run_cli(score_args(tiny_lm_dir, "--scorer", "sps", "ppl", "--scorer", "longppl", "--json"),
                             capsys, monkeypatch, "\n".join(TEXTS))
    assert code == 0, err
    result = json.loads(out.splitlines()[-1])
    assert result["scorer"] == ["sps", "ppl", "longppl"] and list(result["scores"]) == ["sps", "ppl", "longppl"]
    for name in result["scorer"]:
        direct = SCORERS.build(name, {}, reader_lm=tiny_lm, pool=pool).score(TEXTS)
        assert result["scores"][name] == pytest.approx(direct, rel=1e-5)


def test_a_context_is_plain_text_before_the_text(tiny_lm, tiny_lm_dir, capsys, monkeypatch):
    rows = [{"text": TEXTS[0], "context": "Who wrote it? <|im_end|><|im_start|>assistant\n"}, {"text": TEXTS[1]}]
    code, out, err = run_cli(score_args(tiny_lm_dir, "--scorer", "ppl", "--json"), capsys, monkeypatch,
                             "\n".join(json.dumps(r) for r in rows) + "\n")
    assert code == 0, err
    scores = json.loads(out.splitlines()[-1])["scores"]
    # the control-token strings of the context are text: the reference encodes them as text
    assert scores[0] == pytest.approx(reference_ppl(tiny_lm, TEXTS[0], rows[0]["context"]), rel=1e-4)
    assert scores[0] != pytest.approx(reference_ppl(tiny_lm, TEXTS[0]), rel=1e-3)
    assert scores[1] == pytest.approx(reference_ppl(tiny_lm, TEXTS[1]), rel=1e-4)


def test_sps_refuses_a_context_and_longppl_reads_control_token_strings_as_text(tiny_lm, tiny_lm_dir, pool, capsys,
                                                                              monkeypatch):
    row = json.dumps({"text": TEXTS[0], "context": "Who wrote it?"})
    code, _, err = run_cli(score_args(tiny_lm_dir, "--scorer", "sps"), capsys, monkeypatch, row)
    assert code == 2 and "sps scores a text alone" in err
    dirty = "Anna <|im_start|>user wrote it.<|im_end|>"
    code, out, err = run_cli(score_args(tiny_lm_dir, "--scorer", "longppl", "--json"), capsys, monkeypatch,
                             f"{TEXTS[0]}\n{dirty}\n")
    assert code == 0, err
    scorer = SCORERS.build("longppl", {}, reader_lm=tiny_lm, pool=pool)
    controls = set(tiny_lm.tokenizer.all_special_ids) | set(tiny_lm.tokenizer.added_tokens_decoder)
    for bos in (True, False):
        scorer.config.bos = bos
        seq, start = scorer._sequence(tiny_lm, dirty, None, scored=False)
        assert seq[start:] == tiny_lm.encode_text(dirty) and not controls & set(seq[start:])
    scorer.config.bos = True
    assert json.loads(out.splitlines()[-1])["scores"][1] == pytest.approx(scorer.score([dirty])[0], rel=1e-5)
    # a context's control-token strings are text too; the template's own markers stay control tokens
    code, out, err = run_cli(score_args(tiny_lm_dir, "--scorer", "longppl", "--json"), capsys, monkeypatch,
                             json.dumps({"text": TEXTS[0], "context": "<|im_end|>"}))
    assert code == 0, err
    seq, start = scorer._sequence(tiny_lm, TEXTS[0], PromptText.content("<|im_end|>"), scored=True)
    assert seq[:start] == tiny_lm.encode_text("<|im_end|>")


def test_options_bare_and_named_and_the_preset(tiny_lm, tiny_lm_dir, pool, capsys, monkeypatch):
    def scores(*extra, scorers=("sps",)):
        code, out, err = run_cli(score_args(tiny_lm_dir, "--scorer", *scorers, "--json", *extra), capsys, monkeypatch,
                                 "\n".join(TEXTS))
        assert code == 0, err
        return json.loads(out.splitlines()[-1])["scores"]

    default = scores()
    bare, named = scores("--option", "variance_ratio=0.5"), scores("--option", "sps.variance_ratio=0.5")
    assert bare == named and bare != pytest.approx(default, rel=1e-3)
    official = scores("--preset", "official")
    assert official == pytest.approx(readerfit.score(TEXTS, scorer="sps", reader=str(tiny_lm_dir), pool=pool,
                                                     preset="official"), rel=1e-5)
    assert official != pytest.approx(default, rel=1e-3)  # the released code's W: a centred PCA of a q_proj
    code, _, err = run_cli(score_args(tiny_lm_dir, "--scorer", "sps", "ppl", "--option", "variance_ratio=0.5"),
                           capsys, monkeypatch, TEXTS[0])
    assert code == 2 and "NAME.KEY=VALUE" in err


@pytest.mark.parametrize(("args", "stdin", "expected"), [
    ([], "", "stdin is empty"),
    ([], "one text\n\nanother\n", "stdin line 2 is blank"),
    ([], '{"text": "a"}\n{"txt": "b"}\n', "stdin line 2: field 'text' is missing"),
    ([], '{"text": "a"}\nnot json\n', "stdin line 2: not JSON"),
    (["--scorer", "ppl"], '{"text": "a", "context": " "}\n', "stdin line 1: field 'context' is blank"),
    (["--scorer", "ppl"], '{"text": 5}\n', "field 'text' must be a string"),
    (["--scorer", "zip"], "a\n", "invalid choice: 'zip'"),
])
def test_bad_input_is_one_line_naming_the_line(args, stdin, expected, capsys, monkeypatch):
    class NoModels(ModelPool):
        def lm(self, *a, **k):
            raise AssertionError("a model loaded before the input was checked")

    monkeypatch.setattr("readerfit.cli.score.ModelPool", NoModels)
    try:
        code, out, err = run_cli(["score", *args], capsys, monkeypatch, stdin)
    except SystemExit as exit_:  # argparse's own errors
        code, err = exit_.code, capsys.readouterr().err
    assert code == 2 and expected in err and err.count("\n") == 1 and "Traceback" not in err, err


def test_format_text_reads_json_looking_lines_as_text(tiny_lm, tiny_lm_dir, capsys, monkeypatch):
    line = '{"text": "a"}'
    code, out, err = run_cli(score_args(tiny_lm_dir, "--scorer", "ppl", "--format", "text", "--json"), capsys,
                             monkeypatch, line)
    assert code == 0, err
    assert json.loads(out.splitlines()[-1])["scores"] == pytest.approx([reference_ppl(tiny_lm, line)], rel=1e-4)


def test_the_facade_builds_each_scorer_once_and_checks_contexts(tiny_lm, tiny_lm_dir, pool, monkeypatch):
    built = []
    real = SCORERS.build
    monkeypatch.setattr(SCORERS, "build", lambda *a, **k: built.append(a) or real(*a, **k))
    for _ in range(3):
        readerfit.score(TEXTS, scorer="ppl", reader=str(tiny_lm_dir), pool=pool)
    assert len(built) == 1
    with pytest.raises(InputError, match="one context"):
        readerfit.score(TEXTS, scorer="ppl", reader=str(tiny_lm_dir), pool=pool, contexts=["only one"])
    with pytest.raises(InputError, match="not both"):
        readerfit.score(TEXTS, scorer="ppl", reader=str(tiny_lm_dir), pool=pool, contexts=[None, None],
                        prompts=["a", "b"])
    mixed = readerfit.score(TEXTS, scorer="ppl", reader=str(tiny_lm_dir), pool=pool, contexts=[None, "Q: "])
    assert mixed == pytest.approx([reference_ppl(tiny_lm, TEXTS[0]), reference_ppl(tiny_lm, TEXTS[1], "Q: ")],
                                  rel=1e-4)


def test_an_option_over_the_preset_wins_and_the_presets_value_is_reported(tiny_lm, tiny_lm_dir, pool, capsys,
                                                                          monkeypatch):
    """longppl's official preset scores without BOS; --option bos=true given over it wins, and both the stderr
    note and the table say what the preset had."""
    code, out, err = run_cli(score_args(tiny_lm_dir, "--scorer", "longppl", "--preset", "official", "--option",
                                        "bos=true", "--json"), capsys, monkeypatch, "\n".join(TEXTS))
    assert code == 0, err
    got = json.loads(out.splitlines()[-1])["scores"]
    with_bos = readerfit.score(TEXTS, scorer="longppl", reader=str(tiny_lm_dir), pool=pool, preset="official",
                               bos=True)
    without = readerfit.score(TEXTS, scorer="longppl", reader=str(tiny_lm_dir), pool=pool, preset="official")
    assert got == pytest.approx(with_bos, rel=1e-6) and got != pytest.approx(without, rel=1e-6)
    note = "longppl.bos=True given over the official preset's False"
    assert note in err and note in out
