"""schemathesis against the app's own /openapi.json: generated requests (valid and not) never get a 5xx, and
every response matches the schema (status codes, content type, body)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="pip install 'readerfit[serve]'")
schemathesis = pytest.importorskip("schemathesis", reason="pip install schemathesis (in readerfit[dev])")
from hypothesis import HealthCheck, settings  # noqa: E402

from conftest import build_tiny_lm  # noqa: E402
from readerfit.serve import ServeConfig  # noqa: E402
from readerfit.serve.app import create_app  # noqa: E402


def _app():
    # schemathesis collects the operations at import: the app is built then, on a tiny model of its own
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="readerfit-schema-")) / "tiny-lm"
    tiny = str(build_tiny_lm(folder))
    return create_app(ServeConfig(compressors=("none", "exit"), reader=tiny, scorers=("ppl", "sps", "longppl"),
                                  options={"exit": {"classifier": tiny, "splitter": "regex"}}))


# A request the schema allows may still be refused with 400 where JSON Schema cannot say what the method needs
# (each compressor's own options, passages that are all blank): schema-valid data must get 200 or that 400 —
# never a 422 (the schema and the validation disagreeing) nor a 5xx.
CONFIG = schemathesis.config.SchemathesisConfig.from_dict(
    {"checks": {"positive_data_acceptance": {"expected-statuses": [200, 400]}}})
schema = schemathesis.openapi.from_asgi("/openapi.json", _app(), config=CONFIG)


@schema.parametrize()
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_operation_conforms_to_its_schema(case):
    case.call_and_validate()
