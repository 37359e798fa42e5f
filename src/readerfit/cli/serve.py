"""``readerfit serve``: compress, score and SePer over HTTP (``pip install 'readerfit[serve]'``).

    readerfit serve [--host 127.0.0.1] [--port 8080] [--compressor exit none ...] [--reader R] \
        [--option exit.threshold=0.3] [--preset paper|official] [--max-concurrency 1] [--max-body-bytes N]

The models load once, before the server listens; then ``POST /v1/compress``, ``/v1/score``, ``/v1/seper``
answer with the JSON objects of ``compress --json``, ``score --json`` and ``seper --json`` (the schema is at
``/openapi.json``). The host defaults to loopback. ``--api-key KEY`` (or ``$READERFIT_API_KEY``) makes every route but
``/health`` need ``Authorization: Bearer KEY``; a non-loopback ``--host`` without a key is refused unless
``--insecure`` is given.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import errno
import os
import socket
import sys
from collections.abc import Sequence

from readerfit.cli.options import add_dataclass_args, add_threads_arg, set_threads
from readerfit.errors import InputError, require
from readerfit.registry import parse_options
from readerfit.serve.config import ServeConfig


def port_number(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0..65535 (0: any free port), got {value}")
    return value


def add_args(p: argparse.ArgumentParser, argv: Sequence[str] = ()) -> None:
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default: loopback; another needs --api-key or --insecure)")
    p.add_argument("--port", type=port_number, default=8080, help="(default: 8080)")
    add_dataclass_args(p, ServeConfig, exclude=("options",))
    p.add_argument("--option", action="append", default=[], metavar="NAME.KEY=VALUE",
                   help="a served compressor's or scorer's option at start, e.g. exit.threshold=0.3 (repeatable)")
    add_threads_arg(p)
    p.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"],
                   help="uvicorn's log level (info logs every request)")


LOOPBACK = ("127.0.0.1", "::1", "localhost")


def config_from(args: argparse.Namespace) -> ServeConfig:
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(ServeConfig) if hasattr(args, f.name)}
    values["api_key"] = values.get("api_key") or os.environ.get("READERFIT_API_KEY") or None
    if args.host not in LOOPBACK and values["api_key"] is None and not values.get("insecure"):
        raise InputError(f"--host {args.host} listens beyond this machine, and the server has no key: give "
                         "--api-key KEY (or $READERFIT_API_KEY) so clients must send 'Authorization: Bearer KEY', "
                         "or --insecure to serve anyone who can reach the port")
    try:
        return ServeConfig(**values, options=parse_options(args.option))
    except TypeError as err:
        raise InputError(str(err)) from err


def check_port(host: str, port: int) -> None:
    """An InputError when ``host:port`` cannot be listened on, found before the models load (which takes a while)
    rather than after. The socket is bound as uvicorn binds its own (SO_REUSEADDR) and closed at once."""
    if port == 0:
        return
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as err:
            hint = ("is another server there? give a free --port, or --port 0 for any" if err.errno == errno.EADDRINUSE
                    else "is --host an address of this machine?")
            raise InputError(f"cannot listen on {host}:{port}: {err.strerror or err} ({hint})") from None


def run(args: argparse.Namespace) -> int:
    config = config_from(args)
    require("fastapi", extra="serve", purpose="readerfit serve")
    uvicorn = require("uvicorn", extra="serve", purpose="readerfit serve")
    check_port(args.host, args.port)
    from readerfit.serve.app import create_app  # imports FastAPI: only when serving

    if args.host not in LOOPBACK and config.api_key is None:
        print(f"readerfit serve: warning: --insecure: anyone who can reach {args.host}:{args.port} may use this "
              "server (no key)", file=sys.stderr, flush=True)
    set_threads(args.threads)
    print(f"readerfit serve: loading {', '.join(config.compressors)} and the reader {config.reader} ...",
          file=sys.stderr, flush=True)
    app = create_app(config)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, log_config=log_config(args.log_level))
    return 0


def log_config(level: str) -> dict:
    """uvicorn's logging, with readerfit's server lines (a client gone: 499; an internal error) beside its own."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["loggers"]["readerfit"] = {"handlers": ["default"], "level": level.upper(), "propagate": False}
    return config
