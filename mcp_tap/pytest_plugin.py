"""The mcp-tap pytest plugin: tap the traffic of a test, and fail it on a blocking finding.

Installed with mcp-tap (entry point ``pytest11``), it offers:

* the ``mcp_tap`` fixture. ``url = mcp_tap.tap("http://127.0.0.1:9000")`` starts an
  in-process tap in front of the server under test and returns the URL to point the
  client at (``/mcp`` unless ``path=`` says otherwise); ``url = mcp_tap.serve(EVIDENCE)``
  serves a capture as a mock MCP server (:mod:`mcp_tap.mock`). Both run on a loop of their
  own in a background thread, so sync and async tests use them alike. ``mcp_tap.findings()``
  stops the taps and returns what the judge found, and ``mcp_tap.bundles`` are the
  evidence bundles (under the test's ``tmp_path``, or ``--mcp-tap-evidence DIR``);
* the ``mcp_tap_conformant`` marker, and the ``--mcp-tap-strict`` option (ini
  ``mcp_tap_strict``) for every test: when the test body returns, its taps are stopped
  and the test fails if their traffic has a blocking finding, with one line per finding
  (rule, JSON-RPC code, where, message, method, exchange id) in the failure message.
  Blocking is the gate's ``[conformance]`` ``block``/``allow`` (every rule by default;
  ``--mcp-tap-policy FILE`` reads a gate policy).

A tap here allows the legacy era by default (``legacy_allowed=True``): a test that starts a
tap names the server it tests, so the client-side audit of era fallback
(``client.fallback-unproven``) is opt-in (``mcp_tap.tap(url, legacy_allowed=False)``).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import threading
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from mcp_tap.errors import TapError
from mcp_tap.evidence import find_bundles, iter_records
from mcp_tap.gate.policy import ConformancePolicy, load_policy
from mcp_tap.outputs.printable import printable

if TYPE_CHECKING:
    from mcp_tap.mock import MockServer
    from mcp_tap.proxy.server import TapServer

MARKER = "mcp_tap_conformant"
_T = TypeVar("_T")
_STARTUP_S = 30.0


@dataclass(frozen=True, slots=True)
class TappedFinding:
    """One finding in a test's tapped traffic."""

    rule: str
    code: int | None
    where: str
    message: str
    method: str | None
    exchange_id: str

    def line(self) -> str:
        """The finding as one line of a failure message, control characters escaped (the
        method and the message may carry what a client or server sent)."""
        code = "" if self.code is None else f" ({self.code})"
        where = f" at {self.where}" if self.where else ""
        return printable(f"{self.rule}{code}{where}: {self.message} "
                         f"[{self.method or 'no method'}, exchange {self.exchange_id or '?'}]")


class _Loop:
    """An asyncio loop running in a daemon thread; coroutines are run on it and waited for."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="mcp-tap-pytest",
                                       daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, _T], timeout: float = _STARTUP_S) -> _T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        if not self.thread.is_alive():
            self.loop.close()


class McpTap:
    """What the ``mcp_tap`` fixture gives a test: start taps and mocks, read the findings."""

    def __init__(self, evidence_root: Path) -> None:
        """Keep evidence under ``evidence_root``; nothing starts before :meth:`tap`."""
        self.evidence_root = evidence_root
        self.bundles: list[Path] = []
        self._taps: list[TapServer] = []
        self._mocks: list[MockServer] = []
        self._loop: _Loop | None = None
        self._stopped = False

    def _runner(self) -> _Loop:
        if self._loop is None:
            self._loop = _Loop()
        return self._loop

    def tap(self, upstream: str, *, path: str = "/mcp", hop: str = "tap",
            legacy_allowed: bool = True) -> str:
        """Start a tap in front of ``upstream`` (a base URL); return the URL of ``path``."""
        # Imported here: every pytest run of a project with mcp-tap installed loads this
        # module, and only the tests that tap need the proxy.
        from mcp_tap.proxy.options import AdminOptions, RecordingOptions, load_options
        from mcp_tap.proxy.server import TapServer

        if self._stopped:
            raise RuntimeError("the taps of this test are already stopped")
        options = load_options(None, env={}, listen="127.0.0.1:0",
                               upstream=upstream.rstrip("/"), hop=hop,
                               evidence_dir=str(self.evidence_root))
        options = replace(options, admin=AdminOptions(""),
                          recording=RecordingOptions(mode="inline"),
                          eras=replace(options.eras, legacy_allowed=legacy_allowed))
        server = TapServer(options)
        self._runner().run(server.start())
        self._taps.append(server)
        self.bundles.append(server.bundle_dir)
        host, port = server.addresses[hop]
        return f"http://{host}:{port}{path}"

    def serve(self, evidence: str | Path, *, pacing: str = "none") -> str:
        """Serve a capture as a mock MCP server; return its endpoint URL."""
        from mcp_tap.mock import AnswerBook, MockServer

        records = (r for found in find_bundles(evidence) for r in iter_records(found))
        server = MockServer(AnswerBook.from_records(records), pacing=pacing)
        self._runner().run(server.start())
        self._mocks.append(server)
        return server.url()

    def stop(self) -> None:
        """Stop every tap (draining in-flight exchanges, flushing evidence) and mock."""
        if self._loop is None or self._stopped:
            self._stopped = True
            return
        self._stopped = True
        for server in self._taps:
            self._loop.run(server.stop())
        for mock in self._mocks:
            self._loop.run(mock.stop())

    def findings(self) -> list[TappedFinding]:
        """Stop the taps and return every finding in their evidence, in order."""
        self.stop()
        found: list[TappedFinding] = []
        for bundle in self.bundles:
            if not (bundle / "bundle.json").exists():
                continue  # a tap that saw no traffic leaves no bundle
            for record in iter_records(bundle, lenient=True):
                if record.get("kind") not in ("exchange", "hop-comparison"):
                    continue
                for item in record.get("findings") or []:
                    if isinstance(item, dict) and isinstance(item.get("rule"), str):
                        found.append(TappedFinding(
                            item["rule"], item.get("code"), str(item.get("where") or ""),
                            str(item.get("message") or ""), record.get("method"),
                            str(record.get("exchangeId") or "")))
        return found

    def close(self) -> None:
        """Stop everything and the background loop."""
        try:
            self.stop()
        finally:
            if self._loop is not None:
                self._loop.close()


_KEY = pytest.StashKey[McpTap]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--mcp-tap-strict``, ``--mcp-tap-policy`` and ``--mcp-tap-evidence``."""
    group = parser.getgroup("mcp-tap")
    group.addoption("--mcp-tap-strict", action="store_true", default=False,
                    help="fail any test whose mcp_tap traffic has a blocking finding")
    group.addoption("--mcp-tap-policy", metavar="FILE", default=None,
                    help="gate policy whose [conformance] block/allow decides what blocks")
    group.addoption("--mcp-tap-evidence", metavar="DIR", default=None,
                    help="keep the evidence bundles under DIR (default: each test's tmp_path)")
    parser.addini("mcp_tap_strict", type="bool", default=False,
                  help="like --mcp-tap-strict, for every run")


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker."""
    config.addinivalue_line(
        "markers", f"{MARKER}: fail the test on any blocking finding in its mcp_tap traffic")


def _policy(config: pytest.Config) -> ConformancePolicy:
    path = config.getoption("--mcp-tap-policy")
    if not path:
        return ConformancePolicy()
    try:
        return load_policy(Path(path)).conformance
    except TapError as exc:
        raise pytest.UsageError(f"--mcp-tap-policy: {exc}") from None


_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9_.\-\[\]=+,]")
_MAX_NAME = 100


def evidence_dir_name(nodeid: str) -> str:
    """One safe directory name for a test's evidence under ``--mcp-tap-evidence``.

    A test id holds what its parameters hold (``/``, ``..``, control characters, any
    length), so it is never joined as a path: the test's name with every other character
    replaced by ``_``, no leading dot, cut short, and a digest of the whole id so two tests
    never share a directory.
    """
    name = nodeid.rpartition("::")[2] or "test"
    safe = _UNSAFE_NAME.sub("_", name).lstrip(".")[:_MAX_NAME] or "test"
    return f"{safe}-{hashlib.sha256(nodeid.encode('utf-8', 'surrogatepass')).hexdigest()[:12]}"


@pytest.fixture
def mcp_tap(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[McpTap]:
    """Start taps in front of servers under test (and mocks from captures) for this test."""
    root = request.config.getoption("--mcp-tap-evidence")
    evidence = (Path(root) / evidence_dir_name(request.node.nodeid) if root
                else tmp_path / "mcp-tap-evidence")
    handle = McpTap(evidence)
    request.node.stash[_KEY] = handle
    try:
        yield handle
    finally:
        handle.close()


def _strict(item: pytest.Item) -> bool:
    config = item.config
    return bool(item.get_closest_marker(MARKER) or config.getoption("--mcp-tap-strict")
                or config.getini("mcp_tap_strict"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """After a passing test body, fail it on blocking findings in its tapped traffic."""
    result = yield
    handle = item.stash.get(_KEY, None)
    if handle is None or not _strict(item):
        return result
    policy = _policy(item.config)
    blocking = [f for f in handle.findings() if policy.blocks(f.rule)]
    if blocking:
        lines = "\n".join(f"  {f.line()}" for f in blocking)
        pytest.fail(f"mcp-tap: {len(blocking)} blocking finding(s) in this test's traffic:\n"
                    f"{lines}", pytrace=False)
    return result
