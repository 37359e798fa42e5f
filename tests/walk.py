"""A parameter walk: where one value given at an entry point travels through readerfit, as the architecture
reviews count it (issue 55: "the walk of ``readerfit compress --rate``: stays / rooms / climbs").

The walk runs the entry point under a profiler and records each call of a readerfit function whose arguments
carry the value: the number itself, or an object, mapping or list holding it (a ``Budget``, a ``CompressCall``,
an options dict, the parsed flags), looked into two levels deep. The value's own methods (only ``self`` carries
it: ``Budget.limit``), dunder methods and generated code are not steps of the walk.

- a **stay** is one such call (repeats of the same function in a row count once);
- a **room** is the top-level module or package it is in (``readerfit.cli``, ``readerfit.call_args``, ...);
- a **climb** is a stay on a higher layer than the stay before it (layers as ``pyproject.toml``'s import-linter
  contract lists them, top first): the value came back up, by a return, a callback or a dispatch;
- a **call up** is a stay called from a lower layer than its own (a callback or a dispatch; returns are not);
- a **budget made** is one ``Budget`` built holding the value (each conversion of the flag into the typed budget).

Run against any checkout (``PYTHONPATH=CHECKOUT/src python tests/walk.py --reader TINY_LM_DIR``) to compare
revisions; ``tests/test_code_shape.py`` holds today's walk to a bound.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import sys
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

RATE = 0.37  # a number nothing else in a call holds, so that each carrier found is the flag's
PASSAGES = {"question": "Who founded the Halvik Glassworks?",
            "passages": ["Halvik is a town on the coast. The Halvik Glassworks was founded by Marta Velez in 1887.",
                         "Rain fell all week in the valley. The river rose over its banks."]}


@dataclasses.dataclass
class Walk:
    trail: list[tuple[str, str]]  # (room, module:function) per stay
    rooms: int
    climbs: int
    calls_up: int
    budgets_made: int

    @property
    def stays(self) -> int:
        return len(self.trail)


def layers(root: Path) -> dict[str, int]:
    """Each room's floor (0: the top layer) from the import-linter contract in ``root``'s pyproject.toml."""
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")
    floors = {}
    for floor, layer in enumerate(contract["layers"]):
        for room in layer.replace("|", ":").split(":"):
            floors[room.strip()] = floor
    return floors


def carries(value: object, depth: int = 2) -> bool:
    """Whether ``value`` is or holds the walked number (two levels into objects, mappings and sequences)."""
    if isinstance(value, float):
        return value == RATE
    if isinstance(value, str | bytes | int | bool) or value is None or depth < 0:
        return False
    if isinstance(value, Mapping):
        return any(carries(v, depth - 1) for v in list(value.values())[:50])
    if isinstance(value, list | tuple | set | frozenset):
        return any(carries(v, depth - 1) for v in list(value)[:50])
    fields = getattr(value, "__dict__", None)
    if fields is None and dataclasses.is_dataclass(value):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    return isinstance(fields, dict) and any(carries(v, depth - 1) for v in list(fields.values())[:50])


def walk(entry: Callable[[], object], *, package: Path, floors: dict[str, int]) -> Walk:
    """The stays of the walked number through the code under ``package`` while ``entry()`` runs."""
    trail: list[tuple[str, str]] = []
    prefix, top = str(package.parent), max(floors.values()) + 1
    made = [0]
    up = [0]

    def room_of(frame: Any) -> str | None:
        if not frame.f_code.co_filename.startswith(prefix):
            return None
        parts = frame.f_globals.get("__name__", "").split(".")
        return ".".join(parts[:2]) if parts[0] == "readerfit" else "readerfit.integrations"

    def profile(frame: Any, event: str, arg: object) -> None:
        code = frame.f_code
        if event != "call" or not code.co_filename.startswith(prefix):
            return
        names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
        if code.co_qualname == "Budget.__post_init__" and carries(frame.f_locals.get("self")):
            made[0] += 1
        passed = [name for name in names if name not in ("self", "cls")]
        if code.co_name.startswith(("__", "<")) or not any(carries(frame.f_locals.get(name)) for name in passed):
            return
        room, step = room_of(frame), f"{frame.f_globals.get('__name__', '')}:{code.co_qualname}"
        assert room is not None
        if not trail or trail[-1][1] != step:
            trail.append((room, step))
            caller = room_of(frame.f_back) if frame.f_back is not None else None
            up[0] += caller is not None and floors.get(room, top) < floors.get(caller, top)

    sys.setprofile(profile)
    try:
        entry()
    finally:
        sys.setprofile(None)
    climbs = sum(floors.get(b[0], top) < floors.get(a[0], top) for a, b in zip(trail, trail[1:]))
    return Walk(trail=trail, rooms=len({room for room, _ in trail}), climbs=climbs, calls_up=up[0],
                budgets_made=made[0])


def compress_walk(reader: str, *, compressor: str = "sentence-sim") -> Walk:
    """The walk of ``readerfit compress --compressor COMPRESSOR --rate 0.37`` on one small question."""
    import readerfit
    from readerfit.cli.main import main

    package = Path(readerfit.__file__).resolve().parent
    argv = ["compress", "--compressor", compressor, "--rate", str(RATE), "--reader", reader]
    stdin, stdout = sys.stdin, sys.stdout
    sys.stdin, sys.stdout = io.StringIO(json.dumps(PASSAGES)), io.StringIO()
    try:
        done = walk(lambda: main(argv), package=package, floors=layers(package.parents[1]))
    finally:
        sys.stdin, sys.stdout = stdin, stdout
    return done


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reader", required=True, help="the reader (a model folder or name) the budget counts in")
    parser.add_argument("--compressor", default="sentence-sim")
    args = parser.parse_args()
    done = compress_walk(args.reader, compressor=args.compressor)
    for room, step in done.trail:
        print(f"{room:32s} {step}")
    print(json.dumps({"stays": done.stays, "rooms": done.rooms, "climbs": done.climbs, "calls_up": done.calls_up,
                      "budgets_made": done.budgets_made}))
