"""``eval --ray``: a local 2-CPU Ray cluster gives the records of a local run, and resumes the same folders;
``eval --ray HOST:PORT`` joins a running, token-authenticated cluster, and each way joining fails is named."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from readerfit.cli import main
from readerfit.data import demo_corpus_path, demo_path
from readerfit.errors import InputError, MissingPackageError
from readerfit.eval.ray import ClientAuth, RayConfig, auth_problem, client_auth, join_cluster, parse_address

# Timings (and their sum) differ between any two runs; everything else must match.
TIMING_KEYS = {"compress_s", "read_s", "retrieve_s", "total_s"}


def comparable(out: Path) -> dict[tuple[str, str], dict]:
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    keyed = {(r["id"], r["method"]): {k: v for k, v in r.items() if k not in TIMING_KEYS} for r in records}
    assert len(keyed) == len(records), "a (id, method) pair was recorded twice"
    return keyed


def summary_without_timings(out: Path) -> dict:
    summary = json.loads((out / "summary.json").read_text())
    summary.pop("out")
    for method in summary["methods"].values():
        for key in TIMING_KEYS:
            method.pop(key, None)
    return summary


def demo_args(reader: Path, out: Path, *extra: str) -> list[str]:
    return ["eval", "--data", str(demo_path()), "--retriever", "bm25", "--corpus", str(demo_corpus_path()),
            "--top-k", "1", "--reader", str(reader), "--max-new-tokens", "8", "--compressor", "none",
            "--no-progress", "--out", str(out), *extra]


def test_ray_missing_gives_install_hint(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tiny_lm_dir: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    from readerfit.eval.ray import import_ray

    monkeypatch.setitem(sys.modules, "ray", None)  # makes `import ray` raise ImportError
    with pytest.raises(MissingPackageError, match=r"pip install ray \(or pip install 'readerfit\[ray\]'\)"):
        import_ray()
    code = main(demo_args(tiny_lm_dir, tmp_path / "o", "--limit", "1", "--ray"))
    assert code == 2 and "readerfit[ray]" in capsys.readouterr().err


@pytest.mark.slow
def test_ray_matches_local_run_and_resumes(tmp_path: Path, tiny_lm_dir: Path) -> None:
    pytest.importorskip("ray", reason="ray is not installed (pip install 'readerfit[ray]')")
    pytest.importorskip("bm25s", reason="bm25s is not installed (pip install 'readerfit[retrieve]')")
    local, distributed = tmp_path / "local", tmp_path / "ray"
    assert main(demo_args(tiny_lm_dir, local)) == 0
    assert main(demo_args(tiny_lm_dir, distributed, "--ray", "--ray-workers", "2")) == 0
    expected = comparable(local)
    assert comparable(distributed) == expected
    assert len(expected) == len(demo_path().read_text().splitlines())
    assert sum(bool(r["prediction"]) for r in expected.values()) > len(expected) // 2  # something to compare
    assert summary_without_timings(distributed) == summary_without_timings(local)

    # a run killed mid-way: keep the first 3 records and half of the 4th line; --ray finishes the rest
    lines = (distributed / "records.jsonl").read_text().splitlines(keepends=True)
    (distributed / "records.jsonl").write_text("".join(lines[:3]) + lines[3][: len(lines[3]) // 2])
    assert main(demo_args(tiny_lm_dir, distributed, "--ray")) == 0
    assert comparable(distributed) == expected
    assert summary_without_timings(distributed) == summary_without_timings(local)


@pytest.mark.slow
def test_ray_worker_errors_are_clear(tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="ray is not installed (pip install 'readerfit[ray]')")
    import functools

    from readerfit.data import load_dataset
    from readerfit.errors import ReaderfitError
    from readerfit.eval.config import EvalConfig
    from readerfit.eval.harness import build_eval
    from readerfit.eval.ray import RayConfig, run_eval_ray

    examples = load_dataset(str(demo_path()), limit=2)
    # the build function must be importable on the workers: the harness's, with a reader that does not exist
    build = functools.partial(build_eval, EvalConfig(data="x", reader="/nowhere/model"))
    with pytest.raises(ReaderfitError, match=r"Ray worker could not build the pipelines: UnknownModelError: .*nowhere"):
        run_eval_ray(examples=examples, methods=["none"], build=build, out=tmp_path, config=RayConfig(workers=1),
                     progress=False)
    assert not (tmp_path / "records.jsonl").exists()  # nothing recorded, so a fixed rerun starts clean
    with pytest.raises(InputError, match="could not join Ray at 127.0.0.1:1: nothing answers there"):
        run_eval_ray(examples=examples, methods=["none"], build=build, out=tmp_path / "b",
                     config=RayConfig(address="127.0.0.1:1"), progress=False)


def test_an_unreachable_ray_client_address_names_the_client_servers_port():
    from readerfit.eval.ray import check_reachable

    # was: "ray start --head --port 1", the GCS port, for a Ray Client address
    with pytest.raises(InputError, match=r"could not join Ray at ray://127.0.0.1:1: nothing answers there .*"
                                         r"Ray Client server listens on port 10001 unless --ray-client-server-port 1"):
        check_reachable("ray://127.0.0.1:1")
    with pytest.raises(InputError, match=r"\(`ray start --head --port 1`\)"):
        check_reachable("127.0.0.1:1")


# ----- joining a running cluster -------------------------------------------------------------------

@pytest.mark.parametrize("address", ["127.0.0.1", "head:", ":6379", "head:port", "head:0", "head:70000",
                                     "http://127.0.0.1:8265", "ray://head", "127.0.0.1:6379/x"])
def test_malformed_addresses_are_refused_naming_the_forms(address: str) -> None:
    with pytest.raises(InputError, match=r"is not a Ray address; expected HOST:PORT .*ray://HOST:PORT.* or auto"):
        RayConfig(address=address)


def test_addresses_parse() -> None:
    assert parse_address("127.0.0.1:6379") == parse_address(" 127.0.0.1:6379 ")
    assert (parse_address("ray://head.example:10001").kind, parse_address("ray://head.example:10001").port) == \
        ("client", 10001)
    assert parse_address("[::1]:6379").hostport == "[::1]:6379"
    assert parse_address("auto").kind == "auto"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_cluster_is_named_on_the_command_line(tmp_path: Path, tiny_lm_dir: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("ray", reason="ray is not installed (pip install 'readerfit[ray]')")
    port = free_port()  # nobody listens there once the probe socket is closed
    code = main(demo_args(tiny_lm_dir, tmp_path / "o", "--limit", "1", "--ray", f"127.0.0.1:{port}"))
    err = capsys.readouterr().err
    assert code == 2 and f"could not join Ray at 127.0.0.1:{port}: nothing answers there" in err
    assert f"ray start --head --port {port}" in err and "Traceback" not in err
    code = main(demo_args(tiny_lm_dir, tmp_path / "p", "--limit", "1", "--ray", "127.0.0.1"))
    err = capsys.readouterr().err
    assert code == 2 and "'127.0.0.1' is not a Ray address" in err and not (tmp_path / "p").exists()


def test_client_auth_follows_rays_token_order(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    token_file = tmp_path / "token"
    token_file.write_text("secret-file\n")
    assert client_auth({}, home=home) == ClientAuth(None, None)
    (home / ".ray" / "auth_token").write_text("secret-home")
    assert client_auth({"RAY_AUTH_MODE": "token"}, home=home) == ClientAuth("token", str(home / ".ray" / "auth_token"))
    env = {"RAY_AUTH_TOKEN_PATH": str(token_file)}
    assert client_auth(env, home=home).token_source == f"RAY_AUTH_TOKEN_PATH={token_file}"
    assert client_auth({**env, "RAY_AUTH_TOKEN": "x"}, home=home).token_source == "RAY_AUTH_TOKEN"
    missing = client_auth({"RAY_AUTH_TOKEN_PATH": str(tmp_path / "nope")}, home=home)
    assert missing.problem and "missing, unreadable or empty" in missing.problem
    assert "secret" not in repr(client_auth({**env, "RAY_AUTH_TOKEN": "secret-env"}, home=home))


def test_auth_problems_name_what_is_missing(tmp_path: Path) -> None:
    nothing, in_home = ClientAuth(None, None), ClientAuth(None, "/h/.ray/auth_token")
    assert auth_problem(nothing, rejected=False) == ""  # the cluster may not need a token: try it
    assert auth_problem(ClientAuth("token", None), rejected=False).startswith("RAY_AUTH_MODE=token but this machine "
                                                                              "has no Ray token")
    assert "sends no token: set RAY_AUTH_MODE=token (and give the cluster's token in RAY_AUTH_TOKEN" in \
        auth_problem(nothing, rejected=True)
    assert "a token is in /h/.ray/auth_token, but Ray sends it to an explicit address only with RAY_AUTH_MODE=token" \
        in auth_problem(in_home, rejected=True)
    assert "rejected the token from RAY_AUTH_TOKEN" in auth_problem(ClientAuth("token", "RAY_AUTH_TOKEN"), rejected=True)
    broken = ClientAuth(None, "RAY_AUTH_TOKEN_PATH=/x", problem="RAY_AUTH_TOKEN_PATH=/x names a file that is missing")
    assert auth_problem(broken, rejected=False) == ""  # not read by Ray for an explicit address without token mode
    assert auth_problem(broken, rejected=False, auto=True).startswith("RAY_AUTH_TOKEN_PATH=/x names a file")


@contextlib.contextmanager
def ray_head(token_file: Path, *, timeout: float = 240.0) -> Iterator[int]:
    """``ray start --head --block`` on loopback with token authentication; stopped (its process group only) on exit.

    Not ``ray stop``: that stops every Ray process on the machine, other users' included. The temp dir is
    short and unique (Ray's socket paths must fit AF_UNIX's 107 bytes, which a pytest tmp_path may not leave).
    """
    ray_bin = Path(sys.executable).with_name("ray")
    temp = Path(tempfile.mkdtemp(prefix="rfray-"))
    port = free_port()
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token_file), "OMP_NUM_THREADS": "1"}
    for name in ("RAY_AUTH_TOKEN", "RAY_ADDRESS"):
        env.pop(name, None)
    log = temp / "head.log"
    cmd = [str(ray_bin), "start", "--head", "--block", "--node-ip-address", "127.0.0.1", "--port", str(port),
           "--num-cpus", "2", "--disable-usage-stats", "--include-dashboard", "false", "--temp-dir", str(temp / "r"),
           "--dashboard-port", str(free_port()), "--dashboard-agent-listen-port", str(free_port())]
    with open(log, "w") as fh:
        head = subprocess.Popen(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        while "Ray runtime started" not in log.read_text():
            assert head.poll() is None, f"ray start failed:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"ray start did not finish in {timeout} s:\n{log.read_text()[-3000:]}"
            time.sleep(1)
        yield port
    finally:
        stop_process_group(head)
        shutil.rmtree(temp, ignore_errors=True)


def stop_process_group(proc: subprocess.Popen, *, grace: float = 90.0) -> None:
    """SIGTERM to the group ``proc`` leads (Ray drains for up to 30 s), SIGKILL to whatever is left of it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)  # anyone left in our group?
        except ProcessLookupError:
            return
        time.sleep(1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def readerfit_eval(args: list[str], *, env: dict[str, str], timeout: float = 900.0) -> subprocess.CompletedProcess:
    """``readerfit eval`` in its own process: Ray keeps its token settings per process, read once from the env."""
    return subprocess.run([sys.executable, "-m", "readerfit.cli", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.slow
def test_eval_joins_a_running_authenticated_cluster(tmp_path: Path, tiny_lm_dir: Path) -> None:
    pytest.importorskip("ray", reason="ray is not installed (pip install 'readerfit[ray]')")
    pytest.importorskip("bm25s", reason="bm25s is not installed (pip install 'readerfit[retrieve]')")
    local = tmp_path / "local"
    assert main(demo_args(tiny_lm_dir, local)) == 0
    token = tmp_path / "token"
    token.write_text("rf-test-" + os.urandom(16).hex())
    empty_home = tmp_path / "home"
    empty_home.mkdir()
    base = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH") and k != "RAY_ADDRESS"}
    base["OMP_NUM_THREADS"] = "1"

    with ray_head(token) as port:
        address = f"127.0.0.1:{port}"

        def refused(name: str, env: dict[str, str]) -> str:
            proc = readerfit_eval(demo_args(tiny_lm_dir, tmp_path / name, "--ray", address), env=env, timeout=300)
            assert proc.returncode == 2, (name, proc.returncode, proc.stderr[-3000:])
            assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
            assert not (tmp_path / name / "records.jsonl").exists() or not (tmp_path / name / "records.jsonl").read_text()
            return proc.stderr.strip().splitlines()[-1]

        # no token anywhere, token mode off: what to set, and where the token comes from
        line = refused("no-token", {**base, "HOME": str(empty_home)})
        assert f"could not join Ray at {address}: the cluster requires token authentication and this process sends " \
               "no token: set RAY_AUTH_MODE=token (and give the cluster's token in RAY_AUTH_TOKEN" in line, line
        # the right token, but token mode off: Ray would not send it to an explicit address
        line = refused("mode-off", {**base, "RAY_AUTH_TOKEN_PATH": str(token)})
        assert f"a token is in RAY_AUTH_TOKEN_PATH={token}, but Ray sends it to an explicit address only with " \
               "RAY_AUTH_MODE=token" in line, line
        # token mode on, no token: refused before any connection
        line = refused("mode-on-no-token", {**base, "HOME": str(empty_home), "RAY_AUTH_MODE": "token"})
        assert "RAY_AUTH_MODE=token but this machine has no Ray token" in line, line
        # a wrong token: rejected, and the token itself is never printed
        line = refused("wrong-token", {**base, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "not-the-token"})
        assert "the cluster rejected the token from RAY_AUTH_TOKEN; it must be the head's token" in line, line
        assert "not-the-token" not in line

        joined = tmp_path / "joined"
        proc = readerfit_eval(demo_args(tiny_lm_dir, joined, "--ray", address, "--ray-workers", "2"),
                              env={**base, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)})
        assert proc.returncode == 0, proc.stderr[-5000:]
        assert token.read_text() not in proc.stdout + proc.stderr
    expected = comparable(local)
    assert comparable(joined) == expected
    assert len(expected) == len(demo_path().read_text().splitlines())
    assert summary_without_timings(joined) == summary_without_timings(local)


@pytest.mark.slow
def test_a_port_that_is_not_a_ray_head_is_named(tmp_path: Path) -> None:
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'readerfit[ray]')")
    with socket.socket() as listener:  # accepts connections, never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        with pytest.raises(InputError, match=rf"could not join Ray at {address}: it accepts connections but no Ray "
                                             r"head \(GCS\) answered within 10 s; wrong address or port\?"):
            join_cluster(ray, address)
    assert not ray.is_initialized()
