"""The pytest plugin, run by ``pytester`` as a user's test suite would run it.

The inner suites tap the real SDK demo origin (the real ``mcp==2.3.0`` server, driven by
the real SDK client in both eras: clean traffic, the tests pass) and a real faulty aiohttp
server (a success answered with HTTP 201, an answer labelled ``text/plain``: the marked
test fails, naming each finding's rule, code and exchange).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from aiohttp import web
from captures import record
from conftest import StartApp

pytest_plugins = ("pytester",)

_TESTS = Path(__file__).resolve().parents[1] / "support"


def _faulty_app() -> web.Application:
    """An MCP-looking server that gets the HTTP framing of its answers wrong on purpose."""

    async def handle(request: web.Request) -> web.Response:
        message = json.loads(await request.read())
        if "id" not in message:
            return web.Response(status=202)
        result = {"tools": [], "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}
        body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result})
        if request.path == "/wrong-status/mcp":
            return web.Response(status=201, text=body, content_type="application/json")
        return web.Response(status=200, text=body, content_type="text/plain")

    app = web.Application()
    app.router.add_post("/wrong-status/mcp", handle)
    app.router.add_post("/wrong-type/mcp", handle)
    return app


_RAW_CALL = '''
import httpx
from peers import raw_modern_request


def list_tools(url):
    headers, body = raw_modern_request("tools/list", request_id=1)
    return httpx.post(url, json=body, headers=headers, timeout=30)
'''


def _suite(pytester: pytest.Pytester, body: str) -> None:
    """An inner suite that imports the SDK helpers of ``tests/support/peers.py``."""
    pytester.makeconftest(f"import sys\nsys.path.insert(0, {str(_TESTS)!r})\n")
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_inner=_RAW_CALL + body)


async def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """Run the inner suite in a subprocess, off the event loop (the origins live on it)."""
    return await asyncio.to_thread(pytester.runpytest_subprocess, "-p", "no:cacheprovider",
                                   *args)


class TestRealServer:
    """Clean traffic of the real SDK server passes a marked test."""

    def test_sdk_client_both_eras(self, pytester: pytest.Pytester, origin_base: str) -> None:
        """The tapped SDK calls pass under the marker and under --mcp-tap-strict."""
        _suite(pytester, f'''
import asyncio
import pytest
from peers import sdk_call_tool

@pytest.mark.mcp_tap_conformant
@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_add(mcp_tap, era):
    url = mcp_tap.tap("{origin_base}")
    result = asyncio.run(sdk_call_tool(url, era, "add", {{"a": 2, "b": 3}}))
    assert result["structuredContent"] == {{"result": 5}}
    assert len(mcp_tap.bundles) == 1
''')
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--mcp-tap-strict")
        result.assert_outcomes(passed=2)

    def test_findings_are_readable(self, pytester: pytest.Pytester, origin_base: str) -> None:
        """A test can read the findings itself: none for the SDK server's answers."""
        _suite(pytester, f'''
def test_list(mcp_tap):
    assert list_tools(mcp_tap.tap("{origin_base}")).status_code == 200
    assert mcp_tap.findings() == []
''')
        pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)


class TestEvidenceDirectory:
    """--mcp-tap-evidence DIR: each test's bundles in one directory under DIR, whatever
    its id holds."""

    def test_hostile_test_ids_stay_inside(self, pytester: pytest.Pytester,
                                          origin_base: str) -> None:
        """Ids with ``..``, ``/``, a control character: every bundle lands inside DIR, in a
        directory of its own per test."""
        _suite(pytester, f'''
import pytest

@pytest.mark.parametrize("where", ["../../escaped", "/tmp/absolute", "a/../../b", "\\x1b[2J", ".."])
def test_list(mcp_tap, where):
    assert list_tools(mcp_tap.tap("{origin_base}")).status_code == 200
''')
        root = pytester.path / "kept"
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider",
                                               f"--mcp-tap-evidence={root}")
        result.assert_outcomes(passed=5)
        bundles = sorted(p.parent for p in pytester.path.rglob("bundle.json"))
        assert len(bundles) == 5
        for bundle in bundles:
            assert bundle.resolve().parent.parent == root.resolve(), bundle
        assert len({b.parent.name for b in bundles}) == 5  # one directory per test
        assert not (pytester.path.parent / "escaped").exists()


class TestFaultyServer:
    """A real faulty server fails a marked test, with its findings in the message."""

    async def _suite(self, pytester: pytest.Pytester, serve_app: StartApp, path: str,
                     marked: bool = True) -> str:
        base = await serve_app(_faulty_app())
        marker = "@pytest.mark.mcp_tap_conformant\n" if marked else ""
        _suite(pytester, f'''
import pytest

{marker}def test_list(mcp_tap):
    answer = list_tools(mcp_tap.tap("{base}", path="{path}"))
    assert answer.json()["result"]["tools"] == []
''')
        return base

    async def test_wrong_status(self, pytester: pytest.Pytester,
                                serve_app: StartApp) -> None:
        """A success answered with 201 is response.http-status (-32600), named in the failure."""
        await self._suite(pytester, serve_app, "/wrong-status/mcp")
        result = await _run(pytester)
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines([
            "*mcp-tap: 1 blocking finding(s) in this test's traffic:*",
            "*response.http-status (-32600) at origin: a success result must be HTTP 200, "
            "got 201 [[]tools/list, exchange *]*",
        ])

    async def test_wrong_content_type(self, pytester: pytest.Pytester,
                                      serve_app: StartApp) -> None:
        """An answer labelled text/plain is response.content-type."""
        await self._suite(pytester, serve_app, "/wrong-type/mcp")
        result = await _run(pytester)
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines(["*response.content-type (-32600) at origin:*"])

    async def test_unmarked_passes_unless_strict(self, pytester: pytest.Pytester,
                                                 serve_app: StartApp) -> None:
        """Without the marker the test passes; --mcp-tap-strict fails it."""
        await self._suite(pytester, serve_app, "/wrong-status/mcp", marked=False)
        plain = await _run(pytester)
        plain.assert_outcomes(passed=1)
        strict = await _run(pytester, "--mcp-tap-strict")
        strict.assert_outcomes(failed=1)

    async def test_policy_allows_a_rule(self, pytester: pytest.Pytester,
                                        serve_app: StartApp) -> None:
        """A gate policy that allows the rule lets the marked test pass."""
        await self._suite(pytester, serve_app, "/wrong-status/mcp")
        policy = pytester.path / "policy.toml"
        policy.write_text('[conformance]\nallow = ["response.http-status"]\n')
        result = await _run(pytester, f"--mcp-tap-policy={policy}")
        result.assert_outcomes(passed=1)


    def test_failure_shows_control_characters_escaped(self, pytester: pytest.Pytester) -> None:
        """A method and an error message carrying ESC, OSC 8, CR/LF and a bidi override (the
        real hostile server of tests/support): the failure names them, escaped, and no raw
        control character reaches the terminal."""
        _suite(pytester, '''
import pytest
from hostile_server import HOSTILE, run_hostile

@pytest.mark.mcp_tap_conformant
def test_list(mcp_tap):
    with run_hostile() as url:
        tapped = mcp_tap.tap(url.removesuffix("/mcp"))
        headers, body = raw_modern_request("tools/list", request_id=2)
        httpx.post(tapped, json={**body, "method": HOSTILE}, headers=headers, timeout=30)
''')
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
        result.assert_outcomes(failed=1)
        out = "\n".join(result.outlines + result.errlines)
        raw = [ch for ch in out if ch != "\n" and not ch.isprintable()]
        assert raw == [], raw[:5]
        assert "blocking finding(s) in this test's traffic:" in out
        assert "[evil\\x1b]8;;https://x.invalid/\\x07link" in out
        assert "\\r\\nFAKE LINE: every source passed\\u202egnp.exe" in out


class TestServeFixture:
    """The fixture serves a capture as a mock."""

    async def test_sdk_client_against_a_capture(self, pytester: pytest.Pytester,
                                                origin_base: str, tmp_path: Path) -> None:
        """A capture of the real server answers the SDK client inside a user's test."""
        recorded = await record(tmp_path / "ev", origin_base, [("add", {"a": 1, "b": 2})],
                                eras=("modern",))
        _suite(pytester, f'''
import asyncio
import pytest
from peers import sdk_call_tool

@pytest.mark.mcp_tap_conformant
def test_add(mcp_tap):
    url = mcp_tap.tap(mcp_tap.serve("{recorded.bundle}").removesuffix("/mcp"))
    result = asyncio.run(sdk_call_tool(url, "modern", "add", {{"a": 1, "b": 2}}))
    assert result["structuredContent"] == {{"result": 3}}
''')
        result = await _run(pytester)
        result.assert_outcomes(passed=1)


def test_readme_example_fails_as_shown(pytester: pytest.Pytester) -> None:
    """examples/pytest/test_tools.py (the README's example, its server included) fails
    on the tap's finding, with the line the README shows."""
    example = Path(__file__).resolve().parents[2] / "examples" / "pytest" / "test_tools.py"
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_tools=example.read_text(encoding="utf-8"))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "mcp-tap: 1 blocking finding(s) in this test's traffic:",
        "  response.http-status (-32600) at origin: a success result must be HTTP 200, "
        "got 201 [[]tools/list, exchange *[]]"])


def test_readme_shows_the_example_as_it_is() -> None:
    """The README's code of the example (the server's handler and the test) is the file's,
    verbatim: what a reader copies is what runs."""
    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text(encoding="utf-8")
    example = (root / "examples" / "pytest" / "test_tools.py").read_text(encoding="utf-8")
    section = readme.split("### pytest plugin", 1)[1]
    shown = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert "async def answer(" in shown and "def test_lists_tools(" in shown
    for block in shown.split("\n\n\n"):
        assert block.strip() in example, block
