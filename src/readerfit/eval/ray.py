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

>>> from readerfit.eval.ray import RayConfig
>>> RayConfig(workers=2).address is None      # no address: a local Ray with ``num_cpus`` CPUs
True
"""

from __future__ import annotations

import collections
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from readerfit.errors import InputError, ReaderfitError, require
from readerfit.eval.harness import EvalSetup, eval_example, open_eval_run, pending, write_summary
from readerfit.types import QAExample, Record

# build() -> the worker's EvalSetup; pickled to every worker (a module-level function or a partial of one)
SetupBuilder = Callable[[], EvalSetup]


@dataclass
class RayConfig:
    """Where and how wide to run.

    ``address`` None starts a local Ray with ``num_cpus`` CPUs (and stops it at the
    end); ``"auto"`` or ``"ray://host:10001"`` joins a running cluster. ``workers``
    defaults to the cluster's CPUs divided by ``cpus_per_worker``.
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


def import_ray() -> Any:
    """The ``ray`` module, or a clear error naming what to install."""
    return require("ray", extra="ray", purpose="--ray")


def check_reachable(address: str, *, timeout: float = 5.0) -> None:
    """Fail fast on a ``host:port`` (or ``ray://host:port``) nobody listens on.

    ``ray.init`` keeps retrying an unreachable cluster for many minutes before it gives up.
    """
    hostport = address.removeprefix("ray://")
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        return  # "auto" and the like: Ray resolves them itself
    try:
        socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=timeout).close()
    except OSError as err:
        raise ReaderfitError(f"could not start or join Ray ({address}): nothing answers there ({err})") from err


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
) -> dict[str, Any]:
    """:func:`readerfit.eval.harness.run_eval` with the examples sharded over Ray actors.

    ``build`` (picklable: a module-level function or a ``functools.partial`` of one) returns the
    :class:`~readerfit.eval.harness.EvalSetup` and runs once in every worker; ``methods`` are its
    pipelines' names. Writes the same records (in arrival order) and the same summary as the local
    harness, and resumes the same folders.
    """
    config = config or RayConfig()
    methods = list(methods)
    with open_eval_run(examples=examples, methods=methods, out=out, settings=run_config or {},
                       data_label=data_label) as run:
        todo = collections.deque(pending(run, examples, methods))
        total = len(examples) * len(methods)
        if todo:
            ray = import_ray()
            started = not ray.is_initialized()
            if started:
                # log_to_driver off: worker output (load bars) would land after the --json line on stdout
                kwargs: dict[str, Any] = {"log_to_driver": False}
                if config.address is None:
                    kwargs.update(num_cpus=config.num_cpus, include_dashboard=False)
                else:
                    check_reachable(config.address)
                try:
                    ray.init(address=config.address, **kwargs)
                except (ConnectionError, RuntimeError, ValueError) as err:  # no cluster there, or a bad address
                    where = config.address or "a new local Ray instance"
                    raise ReaderfitError(f"could not start or join Ray ({where}): {err}") from err
            try:
                bar = run.progress(total=total, done=total - sum(len(p) for _, p in todo), desc="eval", unit="run",
                                   enabled=progress)
                _dispatch(ray, todo, build=build, config=config, log=run.log, on_record=on_record, bar=bar,
                          out=run.path)
                bar.close()
            finally:
                if started:
                    ray.shutdown()
        return write_summary(run, examples=examples, methods=methods)


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
                log.append(record)
                if on_record:
                    on_record(Record.from_dict(record))
                bar.update(1)
            submit(actor)
    finally:
        for actor in actors:
            ray.kill(actor)
