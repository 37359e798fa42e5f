"""SePer's ``paper`` and ``official`` presets judge with the paper's NLI model (deberta-v2-xlarge-mnli).

The hub cannot be reached in tests: the preset's model is a tiny random DeBERTa-v2 classifier put in a temporary
Hugging Face cache under the published name (offline mode), or the cache is empty and the run must stop, before any
generator loads, with an error that names the model and says how to pass another judge.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from readerfit.cli import main
from readerfit.errors import MissingPackageError, UnknownModelError
from readerfit.eval.config import EvalConfig
from readerfit.experiments import evouna, seper_utility
from readerfit.registry import make_config
from readerfit.retrieval_utility.config import PAPER_JUDGE, SePerConfig, judge_warning, seper_judge
from readerfit.retrieval_utility.hook import eval_record_hook
from readerfit.retrieval_utility.seper import SePer
from readerfit.types import Generation

HUB_ID = PAPER_JUDGE.removeprefix("nli:")
LABELS = {0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}  # as in the published config.json
WORDS = "who wrote the book anna paris france capital is of a it was by lyon berlin smith".split()


def build_tiny_deberta_nli(folder: Path, *, spm_only: bool = False) -> Path:
    """A random-weight DeBERTa-v2 MNLI classifier: the published config's labels; its tokenizer as tokenizer.json,
    or (``spm_only``) as the hub repository holds it: ``spm.model`` + ``tokenizer_config.json`` only."""
    import torch
    from transformers import DebertaV2Config, DebertaV2ForSequenceClassification, DebertaV2Tokenizer

    folder.mkdir(parents=True, exist_ok=True)
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    pieces = [(t, 0.0) for t in specials] + [("▁" + w, -1.0) for w in WORDS] + [(c, -5.0) for c in "abcdefghijklmnopqrstuvwxyz?.,▁"]
    if spm_only:
        from transformers.convert_slow_tokenizer import import_protobuf

        proto = import_protobuf().ModelProto()
        for piece, score in pieces:
            p = proto.pieces.add()
            p.piece, p.score, p.type = piece, score, (2 if piece == "[UNK]" else 3 if piece in specials else 1)
        proto.trainer_spec.model_type, proto.trainer_spec.unk_id = 1, 1
        (folder / "spm.model").write_bytes(proto.SerializeToString())
        (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False, "vocab_type": "spm"}))
    else:
        DebertaV2Tokenizer(vocab=pieces, do_lower_case=True).save_pretrained(folder)
    config = DebertaV2Config(vocab_size=len(pieces), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                             intermediate_size=64, max_position_embeddings=64, id2label=LABELS,
                             label2id={v: k for k, v in LABELS.items()}, initializer_range=0.5)
    torch.manual_seed(0)  # test helper only: a fixed random model
    DebertaV2ForSequenceClassification(config).eval().save_pretrained(folder)
    return folder


def offline_hub(monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    """The hub is offline and its cache is ``cache`` (no retries, no network)."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))


def cache_with_paper_judge(root: Path, **kwargs) -> Path:
    """A hub cache holding the tiny model as ``microsoft/deberta-v2-xlarge-mnli`` (the cache's own layout)."""
    repo = root / ("models--" + HUB_ID.replace("/", "--"))
    commit = "0" * 40
    build_tiny_deberta_nli(repo / "snapshots" / commit, **kwargs)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    return root


class Pool:
    """Loads nothing: a generator load fails the test (the judge must be checked first)."""

    device = "cpu"

    def __init__(self, lm=None):
        self._lm = lm

    def lm(self, name):
        if self._lm is None:
            pytest.fail(f"the generator {name!r} was loaded before the judge was checked")
        return self._lm


# ----- which judge ---------------------------------------------------------------------------------------------
def test_presets_choose_the_papers_judge_and_an_explicit_judge_wins():
    assert PAPER_JUDGE == "nli:microsoft/deberta-v2-xlarge-mnli"
    for name in ("paper", "official"):
        assert make_config(SePerConfig, {}, what="SePer", preset=name).judge == PAPER_JUDGE
        assert make_config(SePerConfig, {"judge": "lexical"}, what="SePer", preset=name).judge == "lexical"
        assert seper_judge(None, preset=name) == PAPER_JUDGE and seper_judge("lm:x", preset=name) == "lm:x"
    assert SePerConfig().judge == "lexical" and seper_judge(None, preset=None) == "lexical"


def test_warning_only_for_another_judge_under_a_preset():
    assert judge_warning("lexical", preset=None) is None
    assert judge_warning(PAPER_JUDGE, preset="paper") is None
    assert judge_warning("nli:/models/deberta-v2-xlarge-mnli", preset="official") is None  # a local copy of the paper's
    text = judge_warning("lexical", preset="paper")
    assert text is not None and "'lexical'" in text and HUB_ID in text and "paper" in text
    assert judge_warning("nli:/models/roberta-large-mnli", preset="official") is not None


# ----- the paper's judge loads and scores -------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["paper", "official"])
def test_the_presets_judge_loads_from_its_published_name_and_scores(name, tmp_path, monkeypatch):
    offline_hub(monkeypatch, cache_with_paper_judge(tmp_path / "hub"))
    seper = SePer.from_pool(Pool(), preset=name, load_generator=False)
    assert seper.judge.name == PAPER_JUDGE
    scores = seper.judge.entails(["it was anna", "paris"], ["anna", "lyon"], question="who wrote the book?")
    assert len(scores) == 2 and all(0.0 <= s <= 1.0 for s in scores) and scores[0] != scores[1]
    rel = seper.judge.relations(["it was anna"], ["anna"], question="who wrote the book?")[0]
    assert rel[0] == pytest.approx(scores[0]) and sum(rel) == pytest.approx(1.0)
    gens = [Generation(text=t, token_ids=[1], token_logprobs=[lp]) for t, lp in
            (("anna", -0.1), ("it was anna", -0.5), ("paris", -1.0))]
    result = seper.score_responses("who wrote the book?", ["anna"], gens)
    assert 0.0 <= result.soft <= 1.0 and 0.0 <= result.hard <= 1.0


def test_published_spm_only_tokenizer_needs_sentencepiece(tmp_path, monkeypatch):
    offline_hub(monkeypatch, cache_with_paper_judge(tmp_path / "hub", spm_only=True))
    if importlib.util.find_spec("sentencepiece") is None:
        with pytest.raises(MissingPackageError, match=r"pip install sentencepiece") as info:
            SePer.from_pool(Pool(), preset="paper", load_generator=False)
        assert HUB_ID in str(info.value)
    else:
        assert SePer.from_pool(Pool(), preset="paper", load_generator=False).judge.name == PAPER_JUDGE


# ----- offline: a clear error before any work -------------------------------------------------------------------
def check_offline_message(message: str) -> None:
    assert HUB_ID in message and "--judge lexical" in message and "nli:<local directory>" in message


@pytest.mark.parametrize("name", ["paper", "official"])
def test_offline_the_presets_judge_fails_before_the_generator_loads(name, tmp_path, monkeypatch):
    offline_hub(monkeypatch, tmp_path / "empty")
    with pytest.raises(UnknownModelError) as info:
        SePer.from_pool(Pool(), preset=name)
    check_offline_message(str(info.value))
    with pytest.raises(UnknownModelError):
        eval_record_hook(pool=Pool(), preset=name)


def test_offline_commands_stop_with_the_judges_name(tmp_path, monkeypatch, capsys):
    offline_hub(monkeypatch, tmp_path / "empty")
    missing = str(tmp_path / "no-generator")  # loading it would fail with another message
    assert main(["seper", "--question", "who?", "--answers", "anna", "--generator", missing, "--preset", "paper"]) == 2
    check_offline_message(capsys.readouterr().err)
    data = tmp_path / "TQ.json"
    data.write_text(json.dumps([{"question": "q?", "golden_answer": "a", "improper": False,
                                 **{f"answer_{x}": "a" for x in evouna.SYSTEMS},
                                 **{f"judge_{x}": True for x in evouna.SYSTEMS}}]))
    assert main(["exp", "evouna", "--data", str(data), "--preset", "official", "--out", str(tmp_path / "ev"),
                 "--no-progress"]) == 2
    check_offline_message(capsys.readouterr().err)
    nq = tmp_path / "nq.jsonl"
    nq.write_text(json.dumps({"question": "who?", "answers": ["anna"],
                              "ctxs": [{"id": "1", "title": "T", "text": "anna wrote it", "isgold": True}]}) + "\n")
    assert main(["exp", "seper-utility", "--data", str(nq), "--format", "nq-ctxs", "--generator", missing,
                 "--preset", "paper", "--out", str(tmp_path / "su"), "--no-progress"]) == 2
    check_offline_message(capsys.readouterr().err)


# ----- another judge under a preset: said in the output and the run settings ----------------------------------
def test_seper_cli_warns_on_stderr_and_in_the_json(tmp_path, capsys):
    responses = tmp_path / "r.jsonl"
    responses.write_text("".join(json.dumps({"text": t, "token_logprobs": [-0.2]}) + "\n" for t in ("anna", "paris")))
    args = ["seper", "--question", "who wrote the book?", "--answers", "anna", "--responses", str(responses),
            "--judge", "lexical", "--json"]
    assert main(args + ["--preset", "paper"]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out.strip().splitlines()[-1])
    assert "warning" in captured.err and "not the paper's" in captured.err and HUB_ID in captured.err
    assert "not the paper's" in result["judge_warning"]
    assert main(args) == 0  # no preset: readerfit's default judge, nothing to warn about
    captured = capsys.readouterr()
    assert "warning" not in captured.err and "judge_warning" not in json.loads(captured.out.strip().splitlines()[-1])


def test_experiments_record_the_warning_in_their_settings(tmp_path, capsys):
    assert "judge_warning" in seper_utility.Config(data="d", judge="lexical", preset="paper").settings()
    assert seper_utility.Config(data="d", preset="official").settings()["judge"] == PAPER_JUDGE
    assert "judge_warning" not in seper_utility.Config(data="d").settings()
    assert evouna.Config(data="d", preset="paper").settings()["judge"] == PAPER_JUDGE
    assert evouna.Config(data="d").settings()["judge"] == "lexical"
    data = tmp_path / "TQ.json"
    data.write_text(json.dumps([{"question": "q?", "golden_answer": "a", "improper": False,
                                 **{f"answer_{x}": "a" for x in evouna.SYSTEMS},
                                 **{f"judge_{x}": True for x in evouna.SYSTEMS}}]))
    out = tmp_path / "ev"
    assert main(["exp", "evouna", "--data", str(data), "--judge", "lexical", "--preset", "paper", "--out", str(out),
                 "--no-progress", "--json"]) == 0
    captured = capsys.readouterr()
    assert "warning" in captured.err and "not the paper's" in captured.err
    assert "not the paper's" in json.loads(captured.out.strip().splitlines()[-1])["judge_warning"]
    assert "not the paper's" in json.loads((out / "run.json").read_text())["settings"]["judge_warning"]


def test_eval_records_the_warning_in_its_settings(tmp_path):
    cfg = EvalConfig(data="d.jsonl", seper=True, judge="lexical", preset="paper")
    assert "not the paper's" in cfg.settings()["seper"]["judge_warning"]
    assert EvalConfig(data="d.jsonl", seper=True, preset="official").settings()["seper"]["judge"] == PAPER_JUDGE
    assert EvalConfig(data="d.jsonl", seper=True).settings()["seper"] == {"judge": "lexical", "n": 10}  # as 0.1 wrote


def test_eval_cli_warns_and_writes_the_warning_to_run_json(tmp_path, capsys, tiny_lm_dir):
    row = {"id": "d1", "question": "Who founded the club?", "answers": ["Marta"],
           "passages": [{"title": "Club", "text": "Marta founded the club."}]}
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps(row) + "\n")
    out = tmp_path / "out"
    code = main(["eval", "--data", str(data), "--reader", str(tiny_lm_dir), "--out", str(out), "--max-new-tokens", "2",
                 "--no-progress", "--json", "--seper", "--seper-n", "2", "--device", "cpu", "--judge", "lexical",
                 "--preset", "official"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "warning" in captured.err and "not the paper's" in captured.err
    assert "not the paper's" in json.loads(captured.out.strip().splitlines()[-1])["judge_warning"]
    assert "not the paper's" in json.loads((out / "run.json").read_text())["settings"]["seper"]["judge_warning"]
