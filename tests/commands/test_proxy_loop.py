"""``mcp-tap proxy --loop``: uvloop by default when it is installed, asyncio's own loop on
request, and a missing uvloop asked for by name is one log line, not a failure."""

from __future__ import annotations

import asyncio
import sys

import pytest

from mcp_tap.commands.proxy import event_loop


def test_auto_and_uvloop_run_uvloop_and_asyncio_runs_asyncio() -> None:
    uvloop = pytest.importorskip("uvloop")
    assert event_loop("auto") is uvloop.new_event_loop
    assert event_loop("uvloop") is uvloop.new_event_loop
    assert event_loop("asyncio") is None  # asyncio.Runner's default: the selector loop
    loop = event_loop("auto")
    assert loop is not None
    made = loop()
    try:
        assert isinstance(made, uvloop.Loop)
        assert made.run_until_complete(asyncio.sleep(0, "ran")) == "ran"
    finally:
        made.close()


def _out(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    return captured.out + captured.err


def test_a_missing_uvloop_falls_back_to_asyncio(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # (import raises ImportError)
    assert event_loop("auto") is None
    assert "uvloop_missing" not in _out(capsys)
    assert event_loop("uvloop") is None
    assert "proxy.uvloop_missing" in _out(capsys)
