"""Third-party MCP peers for the tests: the TypeScript SDK (v2 and 1.x) and ``fastmcp``.

Not a conftest: import what you need. Also a script, which ``scripts/test.sh`` calls before
pytest (after ``tests/support/conformance.py install``, whose Node 22 it reuses)::

    python tests/support/thirdparty.py install     # idempotent; prints where things are

What gets installed, into ``.cache/peers`` (never committed):

* ``ts/``: :data:`TS_PACKAGES` from the npm registry with the cached Node 22's npm
  (``--ignore-scripts``). ``tests/support/peers_ts/node_modules`` is a symlink to
  ``ts/node_modules`` (git-ignored), so the ``.mjs`` peer programs resolve the SDK as an
  application would.
* ``fastmcp`` comes from PyPI through the test extra (``pyproject.toml``): 4.x runs on the
  same ``mcp==2.3.0`` as the rest of the suite, so it needs no venv of its own. It runs in a
  subprocess (``tests/support/fastmcp_peer.py``), never inside the pytest process.

The peer programs (each prints ``listening PORT`` once bound when it is a server, one JSON
line with what it got when it is a client):

* ``tests/support/peers_ts/server_v2.mjs`` / ``client_v2.mjs``: ``@modelcontextprotocol/server`` +
  ``node`` / ``client`` 2.x (2026-07-28, with the 2025-era stateless fallback).
* ``tests/support/peers_ts/server_v1.mjs`` / ``client_v1.mjs``: ``@modelcontextprotocol/sdk`` 1.x
  (2025-11-25, sessions, resumable streams).
* ``tests/support/fastmcp_peer.py``: ``fastmcp`` 4.x server or client.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from conformance import InstallError, _child_env, ensure_installed, npm_install
from conformance import cache_dir as conformance_dir
from peers import stop_process
from ports import free_port, wait_listening

__all__ = [
    "SKIP_ENV",
    "TS_PACKAGES",
    "InstallError",
    "ensure_peers",
    "node_binary",
    "run_fastmcp_client",
    "run_node_client",
    "run_peer_server",
]

TS_PACKAGES = (
    "@modelcontextprotocol/server@2.4.0",
    "@modelcontextprotocol/client@2.4.0",
    "@modelcontextprotocol/node@2.1.2",
    "@modelcontextprotocol/sdk@1.32.2",
    "zod@4.6.7",
)
"""The TypeScript peers, pinned: SDK v2 (2026-07-28), SDK 1.x (2025-11-25), and zod 4."""

SKIP_ENV = "MCP_TAP_SKIP_PEERS"
"""``1``: skip (instead of fail) the third-party peer tests when the peers cannot be installed."""

_TESTS = Path(__file__).resolve().parent
_REPO_ROOT = _TESTS.parents[1]
PEERS_TS = _TESTS / "peers_ts"
FASTMCP_PEER = _TESTS / "fastmcp_peer.py"
_MARKER = "installed.json"
_PEER_TIMEOUT_S = 60.0


def cache_dir() -> Path:
    """``<repo>/.cache/peers`` (next to the conformance suite's cache)."""
    return _REPO_ROOT / ".cache" / "peers"


def _installed(root: Path) -> bool:
    try:
        marker = json.loads((root / _MARKER).read_text())
    except (OSError, ValueError):
        return False
    modules = root / "ts" / "node_modules" / "@modelcontextprotocol"
    return (
        isinstance(marker, dict)
        and marker.get("ts") == list(TS_PACKAGES)
        and all((modules / name / "package.json").is_file()
                for name in ("server", "client", "node", "sdk"))
    )


def _link_node_modules(root: Path) -> None:
    link = PEERS_TS / "node_modules"
    target = root / "ts" / "node_modules"
    if link.is_symlink() and link.resolve() == target.resolve():
        return
    if link.is_symlink():
        link.unlink()
    link.symlink_to(target, target_is_directory=True)


def ensure_peers(*, log: bool = False) -> Path:
    """Install the TypeScript peers (and Node 22 via the conformance cache) unless there.

    Returns the Node binary. Raises :class:`InstallError`; a no-op once installed.
    """
    node = ensure_installed(log=log).node
    root = cache_dir()
    if not _installed(root):
        if log:
            print(f"peers: installing {' '.join(TS_PACKAGES)} (npm) into {root / 'ts'}", flush=True)
        (root / "ts").mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            (root / _MARKER).unlink()
        npm_install(node, root / "ts", TS_PACKAGES,
                    "installing the TypeScript SDK peers from the npm registry",
                    conformance_dir())
        (root / _MARKER).write_text(json.dumps({"ts": list(TS_PACKAGES)}) + "\n")
        if not _installed(root):
            raise InstallError(f"npm installed {TS_PACKAGES}, but {root / 'ts'} is incomplete")
    _link_node_modules(root)
    # Found, not imported: fastmcp only ever runs in a subprocess.
    if importlib.util.find_spec("fastmcp") is None:
        raise InstallError("fastmcp is missing (pip install -e '.[test]')")
    return node


def node_binary() -> Path:
    """The cached Node 22 binary (after :func:`ensure_peers`)."""
    return ensure_installed().node


def _command(program: str) -> list[str]:
    if program.endswith(".mjs"):
        return [str(node_binary()), str(PEERS_TS / program)]
    if program == "fastmcp":
        return [sys.executable, str(FASTMCP_PEER)]
    raise ValueError(f"unknown peer program {program!r}")


def _env() -> dict[str, str]:
    env = _child_env(node_binary().parent)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env["FASTMCP_SHOW_SERVER_BANNER"] = "false"
    return env


@contextlib.contextmanager
def run_peer_server(program: str, *args: str, startup_timeout: float = 30.0) -> Iterator[str]:
    """Run a peer server (``server_v2.mjs``, ``server_v1.mjs`` or ``fastmcp``) on a free
    loopback port; yield its base URL ``http://127.0.0.1:PORT`` (the endpoint is ``/mcp``).

    Raises ``RuntimeError`` with the child's output if it exits or never listens; on exit
    sends SIGTERM, waits up to 10 s, then kills.
    """
    port = free_port()
    cmd = [*_command(program), *(["server"] if program == "fastmcp" else []), str(port), *args]
    proc = subprocess.Popen(cmd, cwd=_REPO_ROOT, env=_env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        if not wait_listening(port, proc, startup_timeout):
            proc.kill()
            output = proc.communicate(timeout=10)[0].decode(errors="replace")
            raise RuntimeError(f"{' '.join(cmd)} did not listen on {port}: {output[-3000:]}")
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(proc)


def _run_client(cmd: Sequence[str]) -> dict[str, Any]:
    done = subprocess.run(list(cmd), cwd=_REPO_ROOT, env=_env(), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=_PEER_TIMEOUT_S, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}:\n"
                           f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def run_node_client(program: str, url: str, *args: str) -> dict[str, Any]:
    """Run a TypeScript peer client (``client_v2.mjs`` / ``client_v1.mjs``) to completion
    against ``url``; return the JSON it printed."""
    return _run_client([*_command(program), url, *args])


def run_fastmcp_client(url: str, mode: str) -> dict[str, Any]:
    """Run the fastmcp peer client against ``url`` in ``mode``; return what it printed."""
    return _run_client([*_command("fastmcp"), "client", url, "--mode", mode])


def main(argv: list[str] | None = None) -> int:
    """``python tests/support/thirdparty.py install``: install the peers (idempotent)."""
    args = sys.argv[1:] if argv is None else argv
    if args != ["install"]:
        print("usage: python tests/support/thirdparty.py install", file=sys.stderr)
        return 2
    try:
        ensure_peers(log=True)
    except InstallError as exc:
        print(f"peers: {exc}", file=sys.stderr)
        return 1
    print(f"peers: TypeScript SDK peers in {cache_dir() / 'ts'}; fastmcp from the test extra")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
