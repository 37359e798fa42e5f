"""readerfit's errors, and the one guard for optional packages.

Every error a user can cause is a :class:`ReaderfitError`; the command line prints its message on
stderr and exits with status 2 (never a traceback).

>>> require("json", extra="none").__name__
'json'
"""

from __future__ import annotations

import importlib
from types import ModuleType


class ReaderfitError(Exception):
    """Base class of readerfit's user-facing errors (bad input, missing package...)."""


class InputError(ReaderfitError, ValueError):
    """Bad input: the message says what was expected and what came."""


class BudgetError(InputError):
    """A budget refused (out of its bounds, given twice, or for a compressor that takes none); ``field`` names where
    the call gave it: ``rate``, ``target_tokens`` or ``options``."""

    def __init__(self, message: str, *, field: str = "options") -> None:
        super().__init__(message)
        self.field = field


class UnknownNameError(InputError):
    """A name that is not registered: its ``kind`` (compressor, scorer, ...) and the ``registered`` names."""

    def __init__(self, message: str, *, kind: str, registered: list[str]) -> None:
        super().__init__(message)
        self.kind = kind
        self.registered = registered


class ContextLengthError(InputError):
    """A text does not fit the model's context window (we never truncate silently)."""


class BackendUnavailableError(ReaderfitError):
    """A model backend cannot serve this run: a server is down, rejects the key or model, or lacks a feature.

    Not the example's fault, so harnesses stop on it instead of recording an error
    for every remaining example; rerunning the same command resumes.
    """


class LocalModelRequired(BackendUnavailableError, NotImplementedError):
    """A method needs model internals (hidden states, logits over a cached prefix...) and got a served model.

    A configuration error, not an example's: harnesses stop on it rather than record it per example.
    """


class MissingPackageError(ReaderfitError, ImportError):
    """An optional package is not installed; the message says what to install."""


class UnknownModelError(ReaderfitError, ValueError):
    """A model name that is neither registered, a local directory, nor a hub id."""


def cause(err: BaseException, *, limit: int = 200) -> str:
    """``Type: first line`` of a library's error, for a one-line message (its other lines are its traceback's).

    >>> cause(OSError("no file\\nat line 3"))
    'OSError: no file'
    >>> cause(ValueError())
    'ValueError'
    """
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0][:limit]}" if lines else type(err).__name__


def install_hint(package: str, extra: str | None = None) -> str:
    """The command that installs ``package`` (through readerfit's extra when there is one)."""
    hint = f"pip install {package}"
    return f"{hint} (or pip install 'readerfit[{extra}]')" if extra else hint


def require(module: str, *, extra: str | None = None, package: str | None = None, purpose: str = "") -> ModuleType:
    """Import an optional package, or raise :class:`MissingPackageError` with the install command.

    ``package`` is the PyPI name when it differs from the import name; ``purpose`` says who needs it.
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        who = f"{purpose} needs" if purpose else "readerfit needs"
        missing = err.name if err.name and err.name != module and not module.startswith(err.name + ".") else None
        state = f"which cannot be imported (its dependency {missing!r} is missing)" if missing else "which is not installed"
        raise MissingPackageError(
            f"{who} the package {package or module!r}, {state}; run: {install_hint(package or module, extra)}"
        ) from err
