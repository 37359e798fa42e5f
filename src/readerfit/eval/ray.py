"""Evaluation sharded over a Ray cluster: ``readerfit eval ... --ray [ADDRESS]``.

Examples are handed out one at a time to Ray actors; each actor builds the
pipelines (and so loads every model) once, runs the example through
:func:`readerfit.eval.harness.eval_example` — the same code the local harness runs —
and returns the records. The driver appends them to ``OUT/records.jsonl`` through
the same :class:`~readerfit.io.RecordLog` as they arrive, so a crashed or killed
run resumes exactly like a local one (locally or on Ray), and ``summary.json`` is
recomputed from the records.

Models load on the workers, never on the driver. On a multi-node cluster every
node needs readerfit and the model files (same paths) installed.

Joining a running cluster (``--ray HOST:PORT``) is checked step by step before Ray is
handed the address, so each way it can fail is named: a malformed address, nothing
listening there, a port that is not a Ray head's, token authentication (Ray 2.52+:
``RAY_AUTH_MODE=token`` and the cluster's token) missing or rejected.

>>> from readerfit.eval.ray import RayConfig
>>> RayConfig(workers=2).address is None      # no address: a local Ray with ``num_cpus`` CPUs
True
"""

from __future__ import annotations

import collections
import os
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from readerfit.errors import InputError, ReaderfitError, require
from readerfit.eval.harness import (
    EvalSetup,
    Points,
    eval_example,
    method_points,
    missing,
    open_eval_run,
    write_summary,
)
from readerfit.eval.pipeline import Budgets
from readerfit.runs import RunFolder, progress_bar
from readerfit.types import QAExample, Record

# build() -> the worker's EvalSetup; pickled to every worker (a module-level function or a partial of one)
SetupBuilder = Callable[[], EvalSetup]


@dataclass
class RayConfig:
    """Where and how wide to run.

    ``address`` None starts a local Ray with ``num_cpus`` CPUs (and stops it at the
    end); ``"HOST:PORT"`` (the head's GCS address), ``"ray://HOST:10001"`` or ``"auto"``
    joins a running cluster (see :func:`join_cluster`). ``workers`` defaults to the
    cluster's CPUs divided by ``cpus_per_worker``.
    """

    address: str | None = None
    num_cpus: int = 2
    workers: int | None = None
    cpus_per_worker: float = 1.0
    gpus_per_worker: float = 0.0
    # a second example queued on each worker hides the driver round trip between examples
    queued_per_worker: int = 2

    def __post_init__(self) -> None:
        if self.num_cpus < 1:
            raise InputError(f"num_cpus must be >= 1, got {self.num_cpus}")
        if self.workers is not None and self.workers < 1:
            raise InputError(f"workers must be >= 1, got {self.workers}")
        if self.cpus_per_worker <= 0 or self.gpus_per_worker < 0:
            raise InputError("cpus_per_worker must be > 0 and gpus_per_worker >= 0")
        if self.queued_per_worker < 1:
            raise InputError(f"queued_per_worker must be >= 1, got {self.queued_per_worker}")
        if self.address is not None:
            parse_address(self.address)  # a malformed address is refused before any run folder or model


def import_ray() -> Any:
    """The ``ray`` module, or a clear error naming what to install."""
    return require("ray", extra="ray", purpose="--ray")


ADDRESS_FORMS = ("HOST:PORT (the head's GCS address: the --address that `ray start --head` prints, port 6379 unless "
                 "--port says otherwise), ray://HOST:PORT (Ray Client, port 10001) or auto (the one cluster started "
                 "on this machine)")
TOKEN_SOURCES = ("RAY_AUTH_TOKEN (the token itself), RAY_AUTH_TOKEN_PATH (a file holding it) or ~/.ray/auth_token; "
                 "`ray get-auth-token` on the head prints it")
# seconds the GCS probe waits for an answer from a port that accepted the connection
PROBE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class RayAddress:
    """A parsed ``--ray`` address: ``kind`` is ``gcs`` (HOST:PORT), ``client`` (ray://HOST:PORT) or ``auto``."""

    kind: str
    host: str = ""
    port: int = 0

    @property
    def hostport(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_address(address: str) -> RayAddress:
    """``HOST:PORT``, ``ray://HOST:PORT`` or ``auto``; anything else is an :class:`InputError` naming the forms.

    >>> parse_address("127.0.0.1:6379")
    RayAddress(kind='gcs', host='127.0.0.1', port=6379)
    >>> parse_address("ray://head:10001").kind
    'client'
    """
    text = address.strip()
    if text == "auto":
        return RayAddress("auto")
    kind, rest = ("client", text[len("ray://"):]) if text.startswith("ray://") else ("gcs", text)
    host, sep, port = rest.rpartition(":")
    host = host.strip("[]")
    if "://" in rest or not sep or not host or "/" in host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(f"--ray {address!r} is not a Ray address; expected {ADDRESS_FORMS}")
    return RayAddress(kind, host, int(port))


def check_reachable(address: str, *, timeout: float = 10.0) -> None:
    """Fail fast on a ``host:port`` (or ``ray://host:port``) nobody listens on.

    ``ray.init`` keeps retrying an unreachable cluster for many minutes before it gives up.
    """
    where = parse_address(address)
    if where.kind == "auto":
        return  # Ray finds the local cluster itself
    try:
        socket.create_connection((where.host, where.port), timeout=timeout).close()
    except OSError as err:
        start = (f"`ray start --head --port {where.port}`" if where.kind == "gcs" else
                 f"`ray start --head`, whose Ray Client server listens on port 10001 unless --ray-client-server-port "
                 f"{where.port} says otherwise")
        raise InputError(
            f"could not join Ray at {address}: nothing answers there ({err}). Is the cluster's head running "
            f"({start}) and is this its address? Expected {ADDRESS_FORMS}"
        ) from err


@dataclass(frozen=True)
class ClientAuth:
    """This process's Ray token-authentication settings, read (never set) from its environment.

    ``token_source`` says where Ray will read the token from (never the token); ``problem`` is a
    token source Ray would abort on (``RAY_AUTH_TOKEN_PATH`` naming a missing or empty file).
    """

    mode: str | None
    token_source: str | None
    problem: str | None = None

    @property
    def sends_token(self) -> bool:
        # Ray sends a token to an explicit address only in token mode (an explicit address never turns it on)
        return (self.mode or "").lower() == "token" and self.token_source is not None


def client_auth(environ: Mapping[str, str] | None = None, *, home: Path | None = None) -> ClientAuth:
    """Where Ray would take this process's token from, in Ray's order: RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH,
    ``~/.ray/auth_token``."""
    env = os.environ if environ is None else environ
    mode = env.get("RAY_AUTH_MODE") or None
    if env.get("RAY_AUTH_TOKEN", "").strip():
        return ClientAuth(mode, "RAY_AUTH_TOKEN")
    if env.get("RAY_AUTH_TOKEN_PATH"):
        path = Path(env["RAY_AUTH_TOKEN_PATH"]).expanduser()
        try:
            ok = bool(path.read_text(encoding="utf-8").strip())
        except (OSError, UnicodeDecodeError):
            ok = False
        source = f"RAY_AUTH_TOKEN_PATH={path}"
        return ClientAuth(mode, source, None if ok else f"{source} names a file that is missing, unreadable or empty")
    default = (home or Path.home()) / ".ray" / "auth_token"
    try:
        present = default.is_file() and bool(default.read_text(encoding="utf-8").strip())
    except (OSError, UnicodeDecodeError):
        present = False
    return ClientAuth(mode, str(default) if present else None)


def auth_problem(auth: ClientAuth, *, rejected: bool, auto: bool = False) -> str:
    """What is missing for ``auth`` to join a cluster, or "" when nothing is known to be.

    ``rejected``: the cluster refused this process; ``auto``: Ray picks the token up without RAY_AUTH_MODE.
    """
    token_mode = (auth.mode or "").lower() == "token"
    if auth.problem and (token_mode or rejected or auto):
        return f"{auth.problem}; the token comes from {TOKEN_SOURCES}"
    if token_mode and auth.token_source is None:
        return f"RAY_AUTH_MODE=token but this machine has no Ray token; give the cluster's token in {TOKEN_SOURCES}"
    if not rejected:
        return ""
    if not auth.sends_token:
        has = (f"a token is in {auth.token_source}, but Ray sends it to an explicit address only with "
               "RAY_AUTH_MODE=token" if auth.token_source else f"and give the cluster's token in {TOKEN_SOURCES}")
        return f"the cluster requires token authentication and this process sends no token: set RAY_AUTH_MODE=token ({has})"
    return f"the cluster rejected the token from {auth.token_source}; it must be the head's token ({TOKEN_SOURCES})"


def probe_gcs(ray: Any, hostport: str, *, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """Ask ``hostport`` for its cluster id the way ``ray.init`` will: ``"ok"``, ``"auth"`` (refused this
    process's token, or its lack of one), ``"silent"`` (no Ray GCS answered) or None (probe unavailable).

    ``ray.init`` retries both failures for a long time (a port that is not a GCS: minutes) and then
    says only "Failed to connect"; the probe uses Ray's own GCS client (an internal API, hence the
    None fallback on Ray versions without it), so it sends exactly the token ``ray.init`` would.
    """
    try:
        standalone = ray._raylet.InnerGcsClient.standalone
        auth_error, rpc_error = ray.exceptions.AuthenticationError, ray.exceptions.RpcError
    except AttributeError:
        return None
    try:
        standalone(hostport, None, int(timeout * 1000))
    except auth_error:
        return "auth"
    except rpc_error:
        return "silent"
    except Exception:  # an internal API: anything unexpected leaves the diagnosis to ray.init
        return None
    return "ok"


def join_cluster(ray: Any, address: str) -> None:
    """``ray.init`` on a running cluster, each way it can fail named as an :class:`InputError`."""
    where = parse_address(address)
    check_reachable(address)
    auth = client_auth()
    auto = where.kind == "auto"
    local = auth_problem(auth, rejected=False, auto=auto)
    if local:
        raise InputError(f"could not join Ray at {address}: {local}")
    answer = probe_gcs(ray, where.hostport) if where.kind == "gcs" else None
    if answer == "auth":
        raise InputError(f"could not join Ray at {address}: {auth_problem(auth, rejected=True)}")
    if answer == "silent":
        raise InputError(
            f"could not join Ray at {address}: it accepts connections but no Ray head (GCS) answered within "
            f"{PROBE_TIMEOUT_S:.0f} s; wrong address or port? Expected {ADDRESS_FORMS}; the dashboard's port "
            "(8265) is not one to join"
        )
    try:
        # log_to_driver off: worker output (load bars) would land after the --json line on stdout
        ray.init(address=address, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError, ray.exceptions.RayError) as err:
        hint = "" if answer == "ok" else auth_problem(auth, rejected=True, auto=auto)
        raise InputError(f"could not join Ray at {address}: {err}"
                         + (f" (if the cluster uses token authentication: {hint})" if hint else "")) from err


class EvalWorker:
    """One Ray actor: builds the pipelines once, then evaluates the examples it is sent."""

    def __init__(self, build: SetupBuilder) -> None:
        self.error: str | None = None
        try:
            self.setup = build()
        except ReaderfitError as err:  # reported by ready() as a clean message, not a remote traceback
            self.error = f"{type(err).__name__}: {err}"

    def ready(self) -> str | None:
        return self.error

    def run(self, example: QAExample, methods: Sequence[str]) -> list[dict[str, Any]]:
        return [r.to_dict() for r in eval_example(example, setup=self.setup, methods=methods)]


def run_eval_ray(
    *,
    examples: Sequence[QAExample],
    methods: Sequence[str],
    build: SetupBuilder,
    out: str | Path | None,
    run_config: dict[str, Any] | None = None,
    config: RayConfig | None = None,
    progress: bool = True,
    on_record: Callable[[Record], None] | None = None,
    data_label: str = "data",
    budgets: Budgets | None = None,
) -> dict[str, Any]:
    """:func:`readerfit.eval.harness.run_eval` with the examples sharded over Ray actors (``budgets``: the budget
    axis, which ``build`` must give its :class:`EvalSetup` too).

    ``build`` (picklable: a module-level function or a ``functools.partial`` of one) returns the
    :class:`~readerfit.eval.harness.EvalSetup` and runs once in every worker; ``methods`` are its
    pipelines' names. Writes the same records (in arrival order) and the same summary as the local
    harness, and resumes the same folders.
    """
    config = config or RayConfig()
    methods = list(methods)
    points = method_points(methods, budgets)
    with open_eval_run(examples=examples, methods=methods, out=out, settings=run_config or {},
                       data_label=data_label, budgets=budgets) as run:
        todo = collections.deque(pending(run, examples, points))
        total = len(examples) * sum(map(len, points.values()))
        if todo:
            ray = import_ray()
            started = not ray.is_initialized()
            if started and config.address is not None:
                join_cluster(ray, config.address)
            elif started:
                try:
                    ray.init(num_cpus=config.num_cpus, include_dashboard=False, log_to_driver=False)
                except (ConnectionError, RuntimeError, ValueError) as err:
                    raise ReaderfitError(f"could not start a local Ray instance: {err}") from err
            try:
                left = sum(len(points[m]) for _, ms in todo for m in ms)
                bar = progress_bar(total=total, done=total - left, desc="eval", unit="run",
                                   enabled=progress)
                _dispatch(ray, todo, build=build, config=config, log=run.log, on_record=on_record, bar=bar,
                          out=run.path)
                bar.close()
            finally:
                if started:
                    ray.shutdown()
        return write_summary(run, examples=examples, methods=methods, budgets=budgets)


def _dispatch(ray: Any, todo: collections.deque, *, build: SetupBuilder, config: RayConfig, log: Any,
              on_record: Callable[[Record], None] | None, bar: Any, out: Path) -> None:
    if config.workers is not None:
        n_workers = config.workers
    else:
        n_workers = max(1, int(ray.cluster_resources().get("CPU", 1) // config.cpus_per_worker))
    n_workers = min(n_workers, len(todo))
    actor_cls = ray.remote(num_cpus=config.cpus_per_worker, num_gpus=config.gpus_per_worker)(EvalWorker)
    actors = [actor_cls.remote(build) for _ in range(n_workers)]
    try:
        for error in ray.get([a.ready.remote() for a in actors]):
            if error:
                raise ReaderfitError(f"a Ray worker could not build the pipelines: {error}")
        in_flight: dict[Any, Any] = {}

        def submit(actor: Any) -> None:
            if todo:
                example, pending = todo.popleft()
                in_flight[actor.run.remote(example, pending)] = actor

        for actor in actors:
            for _ in range(config.queued_per_worker):
                submit(actor)
        while in_flight:
            (ref,), _ = ray.wait(list(in_flight), num_returns=1)
            actor = in_flight.pop(ref)
            try:
                records = ray.get(ref)
            except ray.exceptions.RayActorError as err:
                raise ReaderfitError(
                    f"a Ray worker died ({type(err).__name__}); records so far are in {out}: "
                    "rerun the same command to resume"
                ) from err
            for record in records:
                if log.done(tuple(record.get(k) for k in log.key)):
                    continue  # a point written before (the method's others were not)
                log.append(record)
                if on_record:
                    on_record(Record.from_dict(record))
                bar.update(1)
            submit(actor)
    finally:
        for actor in actors:
            ray.kill(actor)


def pending(run: RunFolder, examples: Sequence[QAExample], points: Points) -> list[tuple[QAExample, list[str]]]:
    """The (example, methods with a point not yet recorded) pairs still to run."""
    return [(e, left) for e in examples if (left := missing(run, e, points))]
