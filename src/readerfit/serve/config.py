"""What a server runs: its models, what requests may change, and its limits (``readerfit serve``'s flags)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from readerfit.compressors import COMPRESSORS
from readerfit.errors import InputError
from readerfit.models.specs import DEFAULT_LM
from readerfit.options import REQUEST_MAX_NEW_TOKENS, check_fields
from readerfit.registry import PRESET_NAMES, param
from readerfit.scorers import SCORERS

# per-request bounds on SePer's sampling: one request must not hold the model for minutes
MAX_SEPER_SAMPLES = 64
MAX_BATCH = 64  # questions in one POST /v1/compress list
MAX_SEPER_NEW_TOKENS = REQUEST_MAX_NEW_TOKENS


class BadField(InputError):
    """Input a method refuses, and the request field it came from (``options``, ``preset``...)."""

    status = 400

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class TooLarge(BadField):
    """A request over the server's input limit (413)."""

    status = 413


@dataclass
class ServeConfig:
    """A server's models (loaded at start) and limits; ``options`` are ``{compressor: {key: value}}``."""

    compressors: tuple[str, ...] = param(("exit",), flag="--compressor",
                                         help="compressors to serve, loaded at start (the first is the default)")
    reader: str = param(DEFAULT_LM, help="reader LM (local directory, registered name or HF id): compressors "
                                         "read for it, /v1/score scores under it, /v1/seper samples from it")
    scorers: tuple[str, ...] = param(("sps", "ppl", "longppl"), flag="--scorer",
                                     help="scorers /v1/score offers, built at start (the first is the default)")
    judge: str | None = param(None, help="SePer's judge: lexical | nli:<id or path> | lm:<model> (default lexical; "
                                         "with --preset the paper's nli:microsoft/deberta-v2-xlarge-mnli)")
    preset: str | None = param(None, choices=PRESET_NAMES,
                               help="every method's preset at start (a request's preset overrides it)")
    max_concurrency: int = param(1, ge=1, help="requests doing model work at once; the rest wait their turn (above 1, "
                                         "requests share torch's CPU threads and the global RNG seeded sampling "
                                         "draws from)")
    max_body_bytes: int = param(1_048_576, ge=1, help="largest request body; a larger one gets 413")
    max_input_tokens: int = param(8192, ge=1, help="most reader tokens of text in one request (question, passages, "
                                             "texts, contexts, answers); a larger one gets 413")
    request_timeout: float = param(120.0, gt=0, help="seconds a request may take; then 504, and its model work stops "
                                               "(as it does when the client disconnects)")
    long_request_chars: int = param(8000, ge=1, help="a request with more characters of text than this runs in its own "
                                               "lane, one at a time, so it never holds up shorter requests")
    long_request_units: int = param(128, ge=1, help="a request with more passages, texts or sentences than this runs "
                                              "in that lane too (the cost grows with them: thousands of tiny passages "
                                              "are few characters and much work)")
    batch_window: float = param(0.005, ge=0, le=1, help="seconds a /v1/compress request waits for others to share its model "
                                             "work (a batch also grows while it waits for a worker); 0: no batching")
    max_batch: int = param(16, ge=1, le=MAX_BATCH, help="most questions in one such batch")
    max_built: int = param(32, ge=1, help="compressors/scorers built for requests' options kept at once (least "
                                    "recently used dropped first; the models they use stay loaded)")
    fixed_options: bool = param(False, help="refuse requests that set options or a preset: serve exactly the "
                                            "start-up configuration")
    device: str | None = param(None, help="cpu, cuda, cuda:1 ... (default: CUDA if present)")
    dtype: str = param("float32", choices=("float32", "bfloat16", "float16"), help="model dtype")
    base_url: str | None = param(None, help="OpenAI-compatible server for an openai:<model> reader")
    backend_api_key: str | None = param(None, repr=False,
                                        help="that server's API key (default: $OPENAI_API_KEY)")
    api_key: str | None = param(None, repr=False,
                                help="clients must send 'Authorization: Bearer KEY' on every route but /health "
                                     "(default: $READERFIT_API_KEY)")
    insecure: bool = param(False, help="listen on a non-loopback host without --api-key (anyone who can reach "
                                       "the port may use the server)")
    options: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_fields(self)
        if not self.compressors or not self.scorers:
            raise InputError("serve needs at least one --compressor and one --scorer")
        for what, names in (("compressor", self.compressors), ("scorer", self.scorers)):
            duplicates = sorted({n for n in names if names.count(n) > 1})
            if duplicates:
                raise InputError(f"{what} {duplicates[0]!r} is given twice")
        for registry, names in ((COMPRESSORS, self.compressors), (SCORERS, self.scorers)):
            unknown = [n for n in names if n not in registry]
            if unknown:
                raise registry.unknown(unknown[0])
        if self.api_key is not None and (len(self.api_key) < 16 or not self.api_key.isprintable()
                                         or " " in self.api_key):
            raise InputError("api_key must be at least 16 printable characters without spaces")
        served = set(self.compressors) | set(self.scorers)
        stray = sorted(set(self.options) - served)
        if stray:
            raise InputError(f"options for {stray[0]!r}, which this server does not serve "
                             f"(serving: {', '.join(sorted(served))})")

    @property
    def default_compressor(self) -> str:
        return self.compressors[0]
