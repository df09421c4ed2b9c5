"""Test helpers: run mcp-tap's proxy in-process on loopback and read its evidence back."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from mcp_tap.core.hashing import DigestKey
from mcp_tap.evidence import read_bundle
from mcp_tap.proxy.options import (
    AdminOptions,
    HopOptions,
    RecordingOptions,
    TapOptions,
    load_options,
)
from mcp_tap.proxy.server import TapServer

# An operator digest key, for tests that compare body digests with bytes they saw.
TEST_DIGEST_KEY = DigestKey(b"mcp-tap tests: an operator digest key", "operator")


def tap_options(
    evidence_dir: Path,
    hops: Sequence[tuple[str, str]] = (),
    *,
    upstream: str | None = None,
    admin: bool = False,
    **sections: Any,
) -> TapOptions:
    """Options for a test tap: ``hops`` as ``(name, upstream)`` on free loopback ports.

    ``sections`` replace whole option sections, e.g. ``capture=CaptureOptions(...)``.
    """
    if upstream is not None:
        hops = [("tap", upstream)]
    opts = load_options(None, env={}, listen="127.0.0.1:0", upstream=hops[0][1],
                        hop=hops[0][0], evidence_dir=str(evidence_dir))
    opts = replace(
        opts,
        hops=tuple(HopOptions(name, "127.0.0.1:0", up.rstrip("/")) for name, up in hops),
        admin=AdminOptions("127.0.0.1:0" if admin else ""),
        # Inline, so a test can reach the recorder and writer in this process; tests of the
        # recording process pass ``recording=RecordingOptions(mode="process")``.
        recording=RecordingOptions(mode="inline"),
    )
    return replace(opts, **sections) if sections else opts


@contextlib.asynccontextmanager
async def running_tap(options: TapOptions) -> AsyncIterator[TapServer]:
    """Start a :class:`TapServer`, yield it, then stop it (draining and flushing evidence)."""
    server = TapServer(options)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def hop_url(server: TapServer, hop: str | None = None, path: str = "/mcp") -> str:
    """The loopback URL of one hop of a running tap (the first hop by default)."""
    name = hop or next(iter(server.addresses))
    host, port = server.addresses[name]
    return f"http://{host}:{port}{path}"


def records(server: TapServer) -> list[dict[str, Any]]:
    """Every record of the tap's bundle (call after the tap stopped, or after a flush)."""
    if server.writer is not None:  # inline recording; the recording process flushes on stop
        server.flush_inline()  # this loop iteration's batch (a test calls this on the loop)
        server.writer.flush(timeout=10)
    return read_bundle(server.bundle_dir, lenient=True).records


def exchanges(server: TapServer) -> list[dict[str, Any]]:
    """The exchange records of the tap's bundle."""
    return [r for r in records(server) if r.get("kind") == "exchange"]


class Lines:
    """Collects a pipe's lines on a thread (so a child process never blocks on a full pipe)."""

    def __init__(self, stream: Any) -> None:
        self.lines: list[str] = []
        self.changed = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: Any) -> None:
        for raw in stream:
            with self.changed:
                self.lines.append(raw.decode(errors="replace"))
                self.changed.notify_all()

    def wait_for(self, text: str, timeout: float) -> str:
        """The first line holding ``text``, waiting up to ``timeout`` seconds for it."""
        with self.changed:
            self.changed.wait_for(lambda: any(text in line for line in self.lines), timeout)
            found = [line for line in self.lines if text in line]
        assert found, f"{text!r} not seen in: {''.join(self.lines)}"
        return found[0]

    def join(self) -> str:
        """Everything read, once the pipe is closed."""
        self._thread.join(timeout=10)
        return "".join(self.lines)
