"""Training: data for and training of the EXIT classifier, registered for ``readerfit train NAME``.

Each module holds its ``Config`` (flags) and ``run(config, *, progress, device) -> Outcome``.

>>> TRAINERS.names()
['exit', 'exit-data', 'exit-follow-data', 'exit-ranker']
"""

from __future__ import annotations

from types import ModuleType

from readerfit.registry import Registry

TRAINERS: Registry[ModuleType] = Registry("trainer")
TRAINERS.register("exit-data", "readerfit.train.exit_data",
                  help="EXIT training data: HotpotQA supporting facts (2:1:1; --preset official: the released 4:1:1), "
                       "or every sentence labelled (--all-sentences) from HotpotQA, 2Wiki, MuSiQue, NQ and SQuAD (--source)")
TRAINERS.register("exit-follow-data", "readerfit.train.exit_follow_data",
                  help="samples for the classifier of EXIT's hop pass (exit.follow): labelled questions ranked by EXIT, "
                       "the passages their best passages name asked again")
TRAINERS.register("exit-ranker", "readerfit.train.exit_ranker",
                  help="fit EXIT's budgeted ranking (boosted trees over the sentence signals) on labelled questions")
TRAINERS.register("exit", "readerfit.train.exit_train",
                  help="train the EXIT classifier (LoRA on an LM, or an encoder cross-encoder)")
