"""``readerfit.CompressCall`` is public: exported, documented with an example that runs as written, and the one
model every surface parses a compression call into (the façade, ``readerfit compress`` and ``POST /v1/compress``)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

import readerfit
from readerfit.call_args import CompressCall
from readerfit.errors import BudgetError, InputError, UnknownNameError
from toy_compressors import KeywordSentences

DOCS = Path(__file__).resolve().parents[1] / "docs"
Q, P = "Who wrote it?", ["Anna wrote it.", {"title": "Book", "text": "It sold well."}]


def test_the_call_and_its_errors_are_exported() -> None:
    assert readerfit.CompressCall is CompressCall and readerfit.compress_calls is readerfit.api.compress_calls
    for name in ("CompressCall", "compress_calls", "BudgetError", "UnknownNameError", "PresetError", "OptionError"):
        assert name in readerfit.__all__ and getattr(readerfit, name) is not None
    assert issubclass(readerfit.PresetError, InputError) and issubclass(readerfit.OptionError, InputError)


def test_the_api_pages_example_runs_as_written() -> None:
    page = (DOCS / "api" / "index.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", page, flags=re.S) if "CompressCall" in b]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(block, "api/index.md", "exec"), {})
    assert printed.getvalue().splitlines() == ["Weather None", "Marta Velez founded the club in 1887.", "rate"]
    assert "::: readerfit.call_args.CompressCall" in page and 'heading: "readerfit.CompressCall"' in page


def test_built_directly_a_call_raises_readerfit_errors_not_pydantic() -> None:
    with pytest.raises(BudgetError) as budget:
        CompressCall(question=Q, passages=P, compressor="sentence-sim", options={"rate": 0})
    assert budget.value.field == "options"
    with pytest.raises(UnknownNameError) as unknown:
        CompressCall(question=Q, passages=P, compressor="zip")
    assert unknown.value.kind == "compressor" and "sentence-sim" in unknown.value.registered
    with pytest.raises(InputError, match="passages must be a list"):
        CompressCall(question=Q, passages="Anna wrote it.")
    with pytest.raises(InputError, match="^method: Extra inputs are not permitted$"):
        CompressCall(question=Q, passages=P, method="none")  # the façade's alias is CompressCall.of's, not a field


def spy_on_calls(module: object, monkeypatch: pytest.MonkeyPatch, name: str = "compress_calls") -> list[CompressCall]:
    """The calls ``module.<name>`` is given from now on (it still compresses them)."""
    seen: list[CompressCall] = []
    real = getattr(module, name)

    def spy(calls, **kwargs):
        seen.extend(calls)
        return real(calls, **kwargs)

    monkeypatch.setattr(module, name, spy)
    return seen


def test_the_facade_parses_through_the_call(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = spy_on_calls(readerfit.api, monkeypatch)
    readerfit.compress(Q, P, method="none", reader=None)
    readerfit.compress_batch([Q, Q], [P, P], "none", reader=None)
    assert [c.compressor for c in seen] == ["none"] * 3 and all(isinstance(c, CompressCall) for c in seen)
    with pytest.raises(UnknownNameError):
        readerfit.compress(Q, P, compressor="zip", reader=None)  # refused by the call, before any model loads


def test_the_command_line_parses_through_the_call(tiny_lm_dir, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from readerfit.cli import compress as cli_compress
    from readerfit.cli.main import main

    seen = spy_on_calls(cli_compress.api, monkeypatch)
    monkeypatch.setattr("sys.stdin", io.StringIO('{"question": "Who wrote it?", "passages": ["Anna wrote it."]}'))
    assert main(["compress", "--compressor", "none", "--reader", str(tiny_lm_dir)]) == 0
    assert capsys.readouterr().out == "Anna wrote it.\n"
    assert len(seen) == 1 and seen[0].question == "Who wrote it?" and seen[0].passages[0].text == "Anna wrote it."


def test_an_http_body_is_parsed_into_the_call(tiny_lm_dir, monkeypatch: pytest.MonkeyPatch) -> None:
    """The request body is the call's JSON form (its fields are the call's, the budget as rate / target_tokens)
    and the service makes each body one CompressCall, which what compresses takes."""
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("fastapi", reason="pip install 'readerfit[serve]'")
    import asyncio

    from readerfit.serve import ServeConfig
    from readerfit.serve.app import create_app
    from readerfit.serve.schemas import CompressBody

    assert set(CompressBody.model_fields) | {"compressor"} == \
        set(CompressCall.model_fields) - {"budget"} | {"rate", "target_tokens"}
    seen = spy_on_calls(readerfit.api, monkeypatch)
    app = create_app(ServeConfig(compressors=("none",), reader=str(tiny_lm_dir), scorers=("ppl",)))

    async def post(body: object) -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app",
                                     timeout=60) as client:
            return await client.post("/v1/compress", json=body)

    answer = asyncio.run(post({"question": Q, "passages": P, "id": 7}))  # (the server's warm-up makes a call too)
    assert answer.status_code == 200, answer.text
    call = seen[-1]
    assert answer.json()["id"] == 7 and isinstance(call, CompressCall)
    assert call.question == Q and call.passages[1].title == "Book" and call.id == 7


def test_an_adapter_makes_each_of_its_calls_a_compress_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """The framework adapters hold typed settings (checked at construction) and make each run one CompressCall,
    by name or with a built compressor, with the run's budget over the one set at construction."""
    from readerfit.compressors.budget import Budget
    from readerfit.compressors.none import RawPassages
    from readerfit.integrations import documents
    from readerfit.integrations.documents import DocumentCompression, SourceDocument

    seen = spy_on_calls(documents, monkeypatch, "compressed")
    docs = [SourceDocument(text="Anna wrote it.", title="Book"), SourceDocument(text="  ")]
    words = lambda text: len(text.split())
    by_name = DocumentCompression("none", count_tokens=words)
    built = RawPassages()
    by_instance = DocumentCompression(built, count_tokens=words)
    assert [p.text for p in by_name.run(Q, docs)] == [p.text for p in by_instance.run(Q, docs)] == ["Book\nAnna wrote it."]
    assert [c.compressor for c in seen] == ["none", built] and all(isinstance(c, CompressCall) for c in seen)
    assert [p.text for p in seen[0].passages] == ["Anna wrote it."]  # the blank document left out, as before
    with pytest.raises(UnknownNameError):
        DocumentCompression("zip")  # the settings' own error, before any model loads
    with pytest.raises(BudgetError, match="takes no budget"):
        DocumentCompression("none", rate=0.3)
    with pytest.raises(BudgetError, match="takes no budget"):
        DocumentCompression(built, rate=0.3)
    with pytest.raises(BudgetError, match="needs a compressor given by name, or one that re-selects"):
        DocumentCompression(KeywordSentences(), rate=0.3)  # one not registered: the call's own rule
    budgeted = DocumentCompression("sentence-sim", rate=0.5, count_tokens=words)
    call = budgeted.call(Q, [readerfit.Passage("Anna wrote it.")])
    assert call.budget == Budget(rate=0.5) and budgeted.call(Q, [], target_tokens=9).budget == Budget(target_tokens=9)
    with pytest.raises(BudgetError):
        budgeted.call(Q, [], rate=2.0)


def test_the_facade_takes_no_built_compressor() -> None:
    from readerfit.compressors.none import RawPassages

    call = CompressCall(question=Q, passages=P, compressor=RawPassages())
    with pytest.raises(InputError, match=r"calls\[0\].compressor: expected a registered name"):
        readerfit.compress_calls([call], reader=None)
