"""Loopback ports for test processes: pick a free one, wait until a child listens on it.

Standard library only: ``tests/support/tapped_client.py`` runs as a script once per conformance
scenario and must start fast, so this is not in ``peers`` (which loads the SDK client).
"""

from __future__ import annotations

import socket
import subprocess
import time


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read, close)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def accepts(port: int) -> bool:
    """Whether 127.0.0.1:``port`` accepts a TCP connection now."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Poll until ``proc`` listens on 127.0.0.1:``port``: True; False once it has exited or
    ``timeout`` seconds have passed (the caller tells which by ``proc.poll()``)."""
    deadline = time.monotonic() + timeout
    while not accepts(port):
        if proc.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
